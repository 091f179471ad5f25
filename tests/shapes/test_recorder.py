"""kda.shapes: the call-signature recorder, its sitecustomize entry and `kda shapes ingest` (CPU, no sglang)."""
import importlib
import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
import torch

from kda import cli
from kda.core.errors import KdaError
from kda.shapes import recorder
from kda.shapes.ingest import ingest, read_captured

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
FN = "fuse_scale_shift_kernel"


@pytest.fixture
def fake_mod(tmp_path):
    """A fresh copy of fake_sglang_mod under a unique name on sys.path; sys.modules and meta_path are restored."""
    name = f"fake_sglang_{uuid.uuid4().hex[:10]}"
    (tmp_path / f"{name}.py").write_text((HERE / "fake_sglang_mod.py").read_text())
    sys.path.insert(0, str(tmp_path))
    meta = list(sys.meta_path)
    recorders = []
    yield name, recorders
    for r in recorders:
        r.uninstall()
    sys.meta_path[:] = meta
    sys.path.remove(str(tmp_path))
    sys.modules.pop(name, None)


def read(path):
    lines = [json.loads(x) for x in Path(path).read_text().splitlines()]
    for line in lines:
        assert line.pop("pid") == os.getpid()
        assert len(line.pop("time_utc")) == 20
    return lines


def t(shape, stride, offset=0, dtype="bfloat16"):
    return {"shape": list(shape), "dtype": dtype, "stride": list(stride), "storage_offset": offset}


def call_shapes(mod):
    x = torch.randn(2, 8, 16, dtype=torch.bfloat16)
    s = torch.randn(2, 1, 16, dtype=torch.bfloat16)
    mod.fuse_scale_shift_kernel(x, s, s)
    mod.fuse_scale_shift_kernel(x, s, s)  # same signature: deduplicated
    base = torch.randn(4, 40, dtype=torch.bfloat16)
    view = base[1:, 4:36].view(3, 2, 16)  # non-contiguous view with a storage offset
    mod.fuse_scale_shift_kernel(view, s[:1], s[:1], 0.5, block_l=64, mode="mul")
    mod.fuse_scale_shift_kernel(view, s[:1], s[:1], 0.5, block_l=64, mode="mul")
    return [
        {"function": f"{mod.__name__}:{FN}", "model": "wan", "scalars": {
            "scale_constant": 1.0, "block_l": 128, "mode": "add", "eps": 1e-6},
         "tensors": {"x": t((2, 8, 16), (128, 16, 1)), "scale": t((2, 1, 16), (16, 16, 1)),
                     "shift": t((2, 1, 16), (16, 16, 1)), "bias": None}},
        {"function": f"{mod.__name__}:{FN}", "model": "wan", "scalars": {
            "scale_constant": 0.5, "block_l": 64, "mode": "mul", "eps": 1e-6},
         "tensors": {"x": t((3, 2, 16), (40, 16, 1), 44), "scale": t((1, 1, 16), (16, 16, 1)),
                     "shift": t((1, 1, 16), (16, 16, 1)), "bias": None}},
    ]


def test_wraps_a_module_imported_after_install(fake_mod, tmp_path):
    name, recs = fake_mod
    log = tmp_path / "log.jsonl"
    recs.append(recorder.install(log, [f"{name}:{FN}"], "wan"))
    assert name not in sys.modules
    mod = importlib.import_module(name)
    assert mod.fuse_scale_shift_kernel.__name__ == FN and "Fake fused kernel" in mod.fuse_scale_shift_kernel.__doc__
    assert mod.fuse_scale_shift_kernel.__wrapped__ is not mod.fuse_scale_shift_kernel
    expected = call_shapes(mod)
    assert read(log) == expected
    assert len(mod.CALLS) == 4  # every call still reaches the function


def test_wraps_an_already_imported_module_and_caps(fake_mod, tmp_path):
    name, recs = fake_mod
    mod = importlib.import_module(name)
    log = tmp_path / "log.jsonl"
    recs.append(recorder.install(log, [f"{name}:{FN}"], "wan", cap_per_function=3))
    expected = call_shapes(mod)
    for n in range(1, 6):  # three more distinct shapes: only one fits under the cap of 3
        x = torch.zeros(n, 4, dtype=torch.float32)
        out = mod.fuse_scale_shift_kernel(x, x, x)
        assert torch.equal(out, x * (1.0 + x) + x)
    lines = read(log)
    assert lines[:2] == expected and len(lines) == 3
    assert lines[2]["tensors"]["x"] == t((1, 4), (4, 1), dtype="float32")
    # a restarted process with the same log keeps the dedup and the cap
    recs[0].uninstall()
    recs.append(recorder.install(log, [f"{name}:{FN}"], "wan", cap_per_function=4))
    mod.fuse_scale_shift_kernel(torch.zeros(2, 8, 16, dtype=torch.bfloat16), torch.zeros(2, 1, 16, dtype=torch.bfloat16),
                                torch.zeros(2, 1, 16, dtype=torch.bfloat16))
    mod.fuse_scale_shift_kernel(torch.zeros(9, 9), torch.zeros(9, 9), torch.zeros(9, 9))
    mod.fuse_scale_shift_kernel(torch.zeros(7, 7), torch.zeros(7, 7), torch.zeros(7, 7))
    lines = read(log)
    assert len(lines) == 4 and lines[3]["tensors"]["x"]["shape"] == [9, 9]


def test_write_failure_never_breaks_the_call(fake_mod, tmp_path, capsys):
    name, recs = fake_mod
    mod = importlib.import_module(name)
    recs.append(recorder.install(tmp_path / "missing_dir" / "log.jsonl", [f"{name}:{FN}", f"{name}:nope"], "wan"))
    for n in (1, 2):
        x = torch.ones(n, 3)
        assert torch.equal(mod.fuse_scale_shift_kernel(x, x, x), x * 2 + x)
    err = capsys.readouterr().err
    assert err.count("kda shapes recorder:") == 1 and f"{name}:nope" in err


def test_sitecustomize_records_in_a_subprocess(fake_mod, tmp_path):
    name, _ = fake_mod
    log = tmp_path / "sub.jsonl"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "kda/shapes/sitecustomize"), str(tmp_path), str(ROOT)]),
           "KDA_RECORD_SHAPES": str(log), "KDA_RECORD_TARGETS": f"{name}:{FN}", "KDA_RECORD_MODEL": "flux"}
    code = f"import torch, {name} as m; x = torch.zeros(3, 5); m.{FN}(x, x, x); m.{FN}(x, x, x)"
    p = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert p.stderr == ""
    (line,) = [json.loads(x) for x in log.read_text().splitlines()]
    assert line["function"] == f"{name}:{FN}" and line["model"] == "flux" and line["pid"] != os.getpid()
    assert line["tensors"]["x"] == t((3, 5), (5, 1), dtype="float32")


def log_line(shape, model, when, fn="m.k:f"):
    return json.dumps({"function": fn, "model": model, "tensors": {"x": t(shape, (shape[1], 1)), "b": None},
                       "scalars": {"eps": 1e-6}, "time_utc": when, "pid": 7})


def test_ingest_merges_dedups_and_is_idempotent(tmp_path, capsys):
    a, b, cat = tmp_path / "a.jsonl", tmp_path / "b.jsonl", tmp_path / "out" / "captured.toml"
    a.write_text("\n".join([log_line((4, 8), "wan", "2025-01-02T00:00:00Z"),
                            log_line((2, 8), "wan", "2025-01-01T00:00:00Z"),
                            log_line((2, 8), "wan", "2025-01-03T00:00:00Z")]) + "\n")
    b.write_text("\n".join([log_line((2, 8), "flux", "2025-02-01T00:00:00Z"),
                            log_line((1, 8), "flux", "2025-02-01T00:00:00Z", fn="m.k:g")]) + "\n")
    assert cli.main(["shapes", "ingest", str(a), "--catalog", str(cat)]) == 0
    assert "m.k:f: 2 new, 0 already known" in capsys.readouterr().out
    assert cli.main(["shapes", "ingest", str(a), str(b), "--catalog", str(cat)]) == 0
    out = capsys.readouterr().out
    assert "m.k:f: 0 new, 2 already known" in out and "m.k:g: 1 new, 0 already known" in out
    text = cat.read_text()
    rows = read_captured(cat)
    assert text.count("[[captured]]") == 3 and 'nulls = ["tensors.b"]' in text  # TOML has no null
    assert [(r["function"], r["tensors"]["x"]["shape"]) for r in rows] == [("m.k:f", [2, 8]), ("m.k:f", [4, 8]),
                                                                           ("m.k:g", [1, 8])]
    assert rows[0] == {"function": "m.k:f", "tensors": {"x": t((2, 8), (8, 1)), "b": None}, "scalars": {"eps": 1e-6},
                       "models": ["flux", "wan"], "first_seen": "2025-01-01T00:00:00Z",
                       "last_seen": "2025-02-01T00:00:00Z", "logs": ["a.jsonl", "b.jsonl"], "source_logs": 2,
                       "source": "captured: a.jsonl, b.jsonl"}
    assert rows[1]["models"] == ["wan"] and rows[1]["source"] == "captured: a.jsonl" and rows[1]["source_logs"] == 1
    summary, total = ingest([a, b], cat)  # idempotent
    assert cat.read_text() == text and not summary.changed and total == 3


def test_ingest_rejects_a_malformed_line_naming_file_line_and_key(tmp_path, capsys):
    bad, cat = tmp_path / "bad.jsonl", tmp_path / "captured.toml"
    broken = json.loads(log_line((2, 8), "wan", "2025-01-01T00:00:00Z"))
    broken["tensors"]["x"]["stride"] = "1,8"
    bad.write_text(log_line((4, 8), "wan", "2025-01-01T00:00:00Z") + "\n\n" + json.dumps(broken) + "\n")
    with pytest.raises(KdaError, match=r"bad\.jsonl:3: tensors\.x\.stride must be a list of an integer"):
        ingest([bad], cat)
    bad.write_text("{not json\n")
    with pytest.raises(KdaError, match=r"bad\.jsonl:1: not valid JSON"):
        ingest([bad], cat)
    assert not cat.exists()
    assert cli.main(["shapes", "ingest", str(bad), "--catalog", str(cat)]) == 2
    assert "bad.jsonl:1" in capsys.readouterr().err
