"""The shape catalog (diffusion/shapes/*.toml): schema, formulas, the production shapes of SOURCES.md, and
`kda shapes --check` against the committed workloads.json files."""
import json
import math
import re
import shutil
from pathlib import Path

import pytest

from kda import cli
from kda.core.errors import KdaError
from kda.core.paths import all_task_dirs, repo_root
from kda.shapes.catalog import FormulaError, evaluate, load_catalog, load_model_file, production_rows
from kda.shapes.generate import run_generator, sync
from kda.shapes.ingest import read_captured, render_captured

ROOT = repo_root()

# The production-shape facts that diffusion/shapes/SOURCES.md quotes from public sources (the KDA-Pilot capture,
# SGLang 0.5.15, model configs), written out here so a change to the catalog cannot silently drop one.
# (model, task, params the row must carry): at least one catalog row of that model and task matches.
ROW_FACTS = [
    *[("Wan2.2-T2V-A14B", task, {"S": s, p: 5120}) for s in (37800, 75600)
      for task, p in (("fuse_scale_shift", "C"), ("cutedsl_norm_scale_shift", "D"))],
    *[("Wan2.2-I2V-A14B", task, {"S": s, p: 5120}) for s in (37044, 74088)
      for task, p in (("fuse_scale_shift", "C"), ("cutedsl_norm_scale_shift", "D"))],
    ("Wan2.2-T2V-A14B", "cutedsl_norm_scale_shift", {"S": 37800, "norm": "layer", "mod": "1,1,D",
                                                     "mod_dtype": "float32", "affine": "none"}),
    ("Wan2.2-TI2V-5B", "fuse_scale_shift", {"S": 18144, "C": 3072, "variant": "chunk_fp32"}),
    ("Wan2.2-TI2V-5B", "cutedsl_norm_scale_shift", {"S": 18144, "D": 3072, "mod": "1,S,D", "mod_dtype": "float32"}),
    *[("HunyuanVideo", "fuse_scale_shift", {"S": s, "C": 3072}) for s in (27030, 27085)],
    *[("HunyuanVideo", "norm_infer", {"S": s, "D": 128}) for s in (648720, 650040)],
    ("HunyuanVideo", "rotary_embedding", {"T": 27030, "H": 24, "D": 128}),
    *[("Qwen-Image", task, {"S": s}) for s in (4096, 19, 47)
      for task in ("qknorm_rope", "fuse_scale_shift", "cutedsl_norm_scale_shift")],
    *[("Qwen-Image-Edit", task, {"S": s}) for s in (8424, 189, 195) for task in ("fuse_scale_shift", "qknorm_rope")],
    *[("FLUX.1-dev", "qknorm_rope", {"S": s, "Hq": 24, "D": 128}) for s in (512, 4096, 4608)],
    *[("FLUX.2-dev", "qknorm_rope", {"S": s, "Hq": 48, "D": 128}) for s in (512, 4096, 4608)],
    *[("Z-Image-Turbo", "qknorm_rope", {"S": s, "Hq": 30, "D": 128, "eps": 1e-5}) for s in (4096, 4128)],
    *[("Z-Image-Turbo", "cutedsl_norm_tanh_mul_add", {"S": s, "D": 3840, "norm": "rms", "bias": False, "form": f})
      for s in (4096, 4128) for f in ("plain", "norm_scale")],
    *[("Z-Image-Turbo", "norm_infer", {"S": s, "D": 128}) for s in (4096, 16384)],
    *[("LTX-2", "rotary_embedding", {"S": s, "B": b, "H": 32, "D": 128}) for s in (1536, 6144, 24576) for b in (1, 2)],
    ("LTX-2", "rotary_embedding", {"S": 126, "H": 32, "D": 64}),
    ("Helios", "norm_infer", {"M": 8640, "N": 5120, "dtype": "float32", "kind": "layer"}),
    *[("Helios", "cutedsl_norm_scale_shift", {"S": s, "D": 5120}) for s in (8640, 11040)],
    *[("MOVA-720p", "cutedsl_norm_scale_shift", {"S": s}) for s in (44100, 176400, 101)],
    ("MOVA-720p", "cutedsl_norm_scale_shift", {"D": 1536}),
    ("HunyuanVideo-VAE", "group_norm_silu", {"C": 256, "T": 17, "H": 256, "W": 256, "G": 32, "eps": 1e-6,
                                             "dtype": "float16"}),
]
# (model, dimension, value)
DIM_FACTS = [
    ("Wan2.2-T2V-A14B", "hidden", 5120), ("Wan2.2-T2V-A14B", "heads", 40), ("Wan2.2-T2V-A14B", "head_dim", 128),
    ("Wan2.2-I2V-A14B", "hidden", 5120), ("Wan2.2-TI2V-5B", "hidden", 3072), ("Wan2.2-TI2V-5B", "heads", 24),
    ("HunyuanVideo", "hidden", 3072), ("HunyuanVideo", "heads", 24), ("HunyuanVideo", "head_dim", 128),
    ("Qwen-Image", "hidden", 3072), ("Qwen-Image", "heads", 24), ("Qwen-Image", "head_dim", 128),
    ("Qwen-Image-Edit", "hidden", 3072), ("FLUX.1-dev", "heads", 24), ("FLUX.2-dev", "heads", 48),
    ("FLUX.1-dev", "head_dim", 128), ("FLUX.2-dev", "head_dim", 128),
    ("Z-Image-Turbo", "hidden", 3840), ("Z-Image-Turbo", "heads", 30), ("Z-Image-Turbo", "head_dim", 128),
    ("LTX-2", "video_heads", 32), ("LTX-2", "video_head_dim", 128), ("LTX-2", "audio_heads", 32),
    ("LTX-2", "audio_head_dim", 64), ("Helios", "hidden", 5120), ("MOVA-720p", "hidden", 5120),
    ("MOVA-720p", "audio_hidden", 1536), ("HunyuanVideo-VAE", "groups", 32), ("HunyuanVideo-VAE", "eps", 1e-6),
]
# (model, token-formula call, value): the worked token counts of SOURCES.md#token-counts and the model sections.
TOKEN_FACTS = [
    ("Wan2.2-T2V-A14B", "video(frames=81, H=720, W=1280)", 75600),
    ("HunyuanVideo", "video(frames=65, H=480, W=848)", 27030),
    ("HunyuanVideo", "joint(frames=65, H=480, W=848)", 27085),
    ("Qwen-Image", "image(H=1024, W=1024)", 4096),
    ("FLUX.1-dev", "joint(H=1024, W=1024)", 4608),
    ("Z-Image-Turbo", "unified(H=1024, W=1024)", 4128),
]


@pytest.fixture(scope="module")
def catalog():
    return {m.name: m for m in load_catalog()}


@pytest.mark.parametrize("model, task, want", ROW_FACTS, ids=lambda v: str(v) if isinstance(v, str) else "")
def test_every_anchor_row_is_in_the_catalog(catalog, model, task, want):
    assert model in catalog, f"no model file for {model}"
    rows = [r for r in catalog[model].rows if r.task == task]
    assert any(all(r.params.get(k) == v for k, v in want.items()) for r in rows), \
        f"{model}/{task}: no row with {want}; have {[r.params for r in rows]}"


def test_anchor_dims_and_token_counts(catalog):
    for model, key, value in DIM_FACTS:
        assert catalog[model].dims.get(key) == value, (model, key)
    for model, call, value in TOKEN_FACTS:
        assert catalog[model].tokens_for(call) == value, (model, call)


def test_vae_rows_cover_the_anchor_grid(catalog):
    rows = production_rows("group_norm_silu")
    shapes = {(r["C"], r["T"], r["H"], r["W"]) for r in rows}
    assert len(shapes) == 48 and {s[0] for s in shapes} == {128, 256, 512} and {s[1] for s in shapes} == {2, 3, 5, 9, 17}
    assert (12, 10) in {s[2:] for s in shapes} and max(shapes, key=math.prod) == (256, 17, 256, 256)
    assert {r["layout"] for r in rows} == {"contig", "cl3d"} and len(rows) == 96


def test_rows_carry_provenance_and_derived_rows_their_formulas(catalog):
    rows = [r for m in catalog.values() for r in m.rows]
    assert len(rows) > 100
    for r in rows:
        assert r.source.startswith(f"{r.provenance}:") and r.provenance in ("captured", "derived")
        if r.provenance == "derived":
            assert r.formulas, r.id
    assert {r.provenance for r in rows} == {"captured", "derived"}


def test_formulas_are_exact_and_closed():
    names = {"frames": 81, "H": 720, "W": 1280, "hidden": 5120}
    funcs = {"video": "(1 + (frames - 1) / 4) * (H / 16) * (W / 16)"}
    assert evaluate("video(frames=81, H=720, W=1280) / 2 + hidden", names, funcs) == 37800 + 5120
    assert evaluate("7 // 2 + 7 % 2 + 2 ** 3 - -1", {}) == 3 + 1 + 8 + 1
    with pytest.raises(FormulaError, match=r"video\(frames=81, H=720, W=1288\) = .* is not a whole number"):
        evaluate("video(frames=81, H=720, W=1288)", names, funcs)
    with pytest.raises(FormulaError, match="unknown name 'depth'"):
        evaluate("depth * 2", names)
    for bad in ("__import__('os')", "hidden.real", "[1, 2]", "hidden if 1 else 2", "video(81)"):
        with pytest.raises(FormulaError):
            evaluate(bad, names, funcs)


MODEL_OK = """
[model]
name = "Toy"
source = "a test"
[dims]
hidden = 64
[tokens]
video = "(1 + (frames - 1) / 4) * (H / 16) * (W / 16)"
[[examples]]
of = "video(frames=5, H=32, W=32)"
expect = 8
source = "arithmetic"
[[rows]]
task = "t"
id = "ok"
function = "f"
provenance = "derived"
source = "derived: S = video(...)"
seed = 1
derive = { S = "video(frames=9, H=16, W=16)", C = "hidden", N = "S * C" }
"""


def write(tmp_path, text, name="toy.toml"):
    path = tmp_path / name
    path.write_text(text)
    return path


def test_model_file_rows_evaluate_in_order(tmp_path):
    entry = load_model_file(write(tmp_path, MODEL_OK))
    (row,) = entry.rows
    assert row.params == {"S": 3, "C": 64, "N": 192} and row.model == "Toy" and row.formulas["S"].startswith("video")


@pytest.mark.parametrize("edit, message", [
    (('seed = 1', 'seed = "1"'), r"toy\.toml row 0 \('ok'\): seed must be an integer"),
    (('provenance = "derived"', 'provenance = "guessed"'), r"row 0 \('ok'\): key 'provenance': expected one of"),
    (('source = "derived: S = video(...)"', 'source = "captured: x"'), r"row 0 \('ok'\): key 'source' must start with 'derived:'"),
    (('C = "hidden"', 'C = "width"'), r"row 0 \('ok'\): key 'derive.C': unknown name 'width'"),
    (('frames=9, H=16', 'frames=10, H=16'), r"row 0 \('ok'\): key 'derive.S': video\(frames=10, H=16, W=16\) = .* not a whole"),
    (("expect = 8", "expect = 9"), r"toy\.toml: key 'examples\[0\]': video\(frames=5, H=32, W=32\) = 8, but the example expects 9"),
    (('function = "f"', 'function = "f"\ncolour = "red"'), r"row 0 \('ok'\): unknown key 'colour'"),
    (('[dims]\nhidden = 64', '[dims]\nhidden = [64]'), r"toy\.toml: dims\.hidden must be an integer or"),
    (('seed = 1\n', 'seed = 1\nvars = { hidden = 2 }\n'), r"row 0 \('ok'\): key 'vars.hidden' shadows the model dimension"),
])
def test_schema_errors_name_file_key_and_row(tmp_path, edit, message):
    old, new = edit
    assert old in MODEL_OK
    with pytest.raises(KdaError, match=message):
        load_model_file(write(tmp_path, MODEL_OK.replace(old, new, 1)))


def test_duplicate_row_ids_within_a_task_are_refused(tmp_path):
    write(tmp_path, MODEL_OK)
    write(tmp_path, MODEL_OK.replace('name = "Toy"', 'name = "Toy2"'), "toy2.toml")
    with pytest.raises(KdaError, match=r"toy2\.toml row 'ok': duplicate id in task 't'"):
        load_catalog(tmp_path)
    (tmp_path / "toy2.toml").unlink()
    assert [r.id for r in production_rows("t", tmp_path)] == ["ok"]
    with pytest.raises(KdaError, match="no catalog rows for task 'absent'"):
        production_rows("absent", tmp_path)


def catalog_tasks():
    """Tasks whose generator reads the diffusion catalog (kda.shapes.catalog.production_rows)."""
    return [p for p in all_task_dirs()
            if "from kda.shapes.catalog import" in (p / "bench" / "make_workloads.py").read_text()]


def llm_tasks():
    return [p for p in all_task_dirs() if p.parent.parent.name == "llm"]


@pytest.mark.parametrize("task_dir", llm_tasks(), ids=lambda p: p.name)
def test_llm_production_rows_cite_a_catalog_workload(task_dir):
    """Every production row of an LLM task is derived from a workload of llm/shapes/workloads.json (`kda shapes`):
    its source names the workload id and the op, and every tensor the row shares a name with that op (x for
    silu_and_mul, q and k for rope, k and v for store_cache; at least one) has the op's shape (same model, same dtype)."""
    catalog = {w["id"]: w for w in json.loads((ROOT / "llm" / "shapes" / "workloads.json").read_text())["workloads"]}
    prod = [r for r in json.loads((task_dir / "bench" / "workloads.json").read_text()) if r["production"]]
    assert prod
    for row in prod:
        m = re.match(r"derived: llm/shapes/workloads\.json (\S+) ops\.(\w+)[. ]", row["source"])
        assert m, row["source"]
        w = catalog[m.group(1)]
        op = w["ops"][m.group(2)]
        shared = [name for name in op if name in row["tensors"]]
        assert shared, (row["id"], sorted(op))
        assert row["model"] == w["model"]
        for name in shared:
            assert row["tensors"][name]["dtype"] == w["dtype"], (row["id"], name)
            assert row["tensors"][name]["shape"] == op[name], (row["id"], name)


@pytest.mark.parametrize("task_dir", catalog_tasks(), ids=lambda p: p.name)
def test_production_rows_come_from_the_catalog(task_dir):
    """Every production row of a task that reads the catalog is a catalog row (id, model, source, seed), and back."""
    committed = json.loads((task_dir / "bench" / "workloads.json").read_text())
    prod = {r["id"]: r for r in committed if r["production"]}
    cat = {r.id: r for r in production_rows(task_dir.name)}
    assert set(prod) == set(cat)
    for rid, row in prod.items():
        c = cat[rid]
        assert (row["model"], row["source"], row["seed"], row["function"]) == (c.model, c.source, c.seed, c.function)


def test_shapes_check_names_the_task_and_row_and_rewrites(tmp_path, capsys):
    src = ROOT / "diffusion" / "kernels" / "norm_infer" / "bench"
    task = tmp_path / "norm_infer"
    shutil.copytree(src, task / "bench", ignore=shutil.ignore_patterns("__pycache__", "adapter.py"))
    path = task / "bench" / "workloads.json"
    rows = json.loads(path.read_text())
    rows[0]["tensors"]["x"]["shape"][0] += 1  # a committed row the catalog no longer produces
    gone = rows.pop()
    path.write_text(json.dumps(rows, indent=1) + "\n")
    _, problems = sync([task], check=True)
    assert f"norm_infer: row {rows[0]['id']!r} differs in tensors" in problems
    assert f"norm_infer: row {gone['id']!r} is generated but missing from workloads.json" in problems
    before = path.read_text()
    messages, problems = sync([task], check=False)
    assert not problems and "wrote" in messages[0] and path.read_text() != before
    assert path.read_text() == run_generator(task).text == (src / "workloads.json").read_text()
    assert sync([task], check=True)[1] == []


def test_kda_shapes_check_passes_on_the_repository(capsys):
    assert cli.main(["shapes", "--check"]) == 0
    out = capsys.readouterr().out
    assert "shape catalog:" in out and "group_norm_silu:" in out and "up to date" in out


def test_captured_file_round_trips_nulls_and_names_bad_entries(tmp_path):
    entry = {"function": "m.k:f", "tensors": {"x": {"shape": [2], "dtype": "float32", "stride": [1],
                                                   "storage_offset": 0}, "bias": None},
             "scalars": {"eps": 1e-06, "mode": None, "flag": True}, "models": ["wan"], "first_seen": "a",
             "last_seen": "b", "logs": ["l.jsonl"], "source_logs": 1, "source": "captured: l.jsonl"}
    path = tmp_path / "captured.toml"
    path.write_text(render_captured([entry]))
    assert read_captured(path) == [entry]
    path.write_text(path.read_text().replace('"source_logs" = 1', '"source_logs" = "one"').replace(
        "source_logs = 1", 'source_logs = "one"'))
    with pytest.raises(KdaError, match=r"captured\.toml captured\[0\]: source_logs must be an integer"):
        read_captured(path)
