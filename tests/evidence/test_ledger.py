"""kda/evidence/ledger.py: schema on read and on append (errors name file:line and key), append-only ids, entries from runs,
and the views (rich table, docs/ledger.md, `kda ledger`)."""
import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from kda import cli

from kda.evidence import ledger
from kda.harness import results_file
from kda.core.errors import KdaError

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "diffusion" / "kernels" / "fuse_scale_shift" / "results" / "h200.jsonl.gz"


@pytest.fixture
def task_dir(tmp_path):
    d = tmp_path / "fake_task"
    (d / "solution").mkdir(parents=True)
    (d / "solution" / "__init__.py").write_text("from .k import kernel\n")
    (d / "solution" / "k.py").write_text("def kernel(x, *, out=None):\n    return out\n")
    (d / "config.toml").write_text("# only resolve_task looks at it here\n")
    return d


def decision(**kw):
    return {"kind": "decision", "decision": "NO-GO", "hypothesis": "wider blocks cut launches (predicted +5%)",
            "change": "BLOCK_C 128 -> 256", "reason": "0.97x on h200", "author": "tester", **kw}


def test_append_assigns_ids_time_hash_and_only_appends(task_dir):
    a = ledger.append(task_dir, decision())
    path = ledger.ledger_path(task_dir)
    first = path.read_bytes()
    b = ledger.append(task_dir, decision(decision="IMPROVEMENT", parent=a["id"], round=2))
    assert (a["id"], b["id"]) == ("L0001", "L0002")
    assert path.read_bytes().startswith(first)  # earlier lines untouched
    assert len(path.read_text().splitlines()) == 2
    assert a["source_hash"] == ledger.solution_hash(task_dir) and len(a["source_hash"]) == 64
    assert a["time_utc"].endswith("Z") and b["parent"] == "L0001" and b["round"] == 2
    assert [e["id"] for e in ledger.read(task_dir)] == ["L0001", "L0002"]


def test_source_hash_changes_with_the_solution(task_dir):
    h1 = ledger.solution_hash(task_dir)
    (task_dir / "solution" / "k.py").write_text("# changed\n")
    assert ledger.solution_hash(task_dir) != h1


def test_read_missing_ledger_is_empty(task_dir):
    assert ledger.read(task_dir) == []


def good_line(**kw) -> dict:
    e = {"id": "L0001", "parent": None, "round": 0, "time_utc": "2026-11-22T03:00:00Z", "kind": "measurement",
         "hypothesis": "", "change": "bench", "source_hash": "a" * 64, "results_ref": None, "metrics": {},
         "decision": None, "reason": "", "author": "kda bench"}
    e.update(kw)
    return e


@pytest.mark.parametrize("mutate, key, text", [
    (lambda e: e.pop("round"), "round", "missing key 'round'"),
    (lambda e: e.update(decision="MAYBE", kind="decision", hypothesis="h", reason="r"), "decision", "expected one of"),
    (lambda e: e.update(kind="guess"), "kind", "expected one of"),
    (lambda e: e.update(id="7"), "id", "L0001"),
    (lambda e: e.update(source_hash="xyz"), "source_hash", "64 lowercase hex"),
    (lambda e: e.update(time_utc="yesterday"), "time_utc", "UTC time"),
    (lambda e: e.update(metrics={"device_us_geomen": 1.2}), "metrics.device_us_geomen", "unknown key"),
    (lambda e: e.update(metrics={"rows_passed": "all"}), "metrics.rows_passed", "an integer"),
    (lambda e: e.update(results_ref={"path": "results/h200.jsonl"}), "results_ref.lines", "missing key"),
    (lambda e: e.update(results_ref={"path": "results/h200.jsonl.gz", "lines": 3, "commit": "77bd6b7"}),
     "results_ref.commit", "40 lowercase hex"),
    (lambda e: e.update(parent="L0099"), "parent", "not the id of an earlier line"),
    (lambda e: e.update(kind="decision", decision=None), "decision", "needs one of"),
    (lambda e: e.update(kind="decision", decision="NO-GO", reason="r"), "hypothesis", "hypothesis"),
    (lambda e: e.update(decision="NO-GO"), "decision", "measurement entry has decision null"),
    (lambda e: e.update(author=" "), "author", "non-empty"),
])
def test_bad_line_names_file_line_and_key(task_dir, mutate, key, text):
    path = ledger.ledger_path(task_dir)
    path.parent.mkdir(parents=True)
    bad = good_line(id="L0002")
    mutate(bad)
    path.write_text(json.dumps(good_line()) + "\n" + json.dumps(bad) + "\n")
    with pytest.raises(KdaError) as e:
        ledger.read(task_dir)
    msg = str(e.value)
    assert f"{path}:2:" in msg and key in msg and text in msg, msg


def test_not_json_and_duplicate_ids(task_dir):
    path = ledger.ledger_path(task_dir)
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(good_line()) + "\n{not json\n")
    with pytest.raises(KdaError, match=rf"{path}:2: not valid JSON"):
        ledger.read(task_dir)
    path.write_text(json.dumps(good_line()) + "\n" + json.dumps(good_line()) + "\n")
    with pytest.raises(KdaError, match=rf"{path}:2: key 'id': 'L0001' is already used"):
        ledger.read(task_dir)
    path.write_text(json.dumps(good_line()))  # no final newline: a cut-short write
    with pytest.raises(KdaError, match="no newline"):
        ledger.read(task_dir)


def test_append_validates_before_writing(task_dir):
    ledger.append(task_dir, decision())
    before = ledger.ledger_path(task_dir).read_bytes()
    for bad, key in ((decision(hypothesis=""), "hypothesis"), (decision(decision="MAYBE"), "decision"),
                     (decision(parent="L0042"), "parent"), (decision(reason=""), "reason")):
        with pytest.raises(KdaError) as e:
            ledger.append(task_dir, bad)
        assert f"{ledger.ledger_path(task_dir)}:2 (new entry)" in str(e.value) and key in str(e.value)
    with pytest.raises(KdaError, match="unknown key 'verdict'"):
        ledger.append(task_dir, decision(verdict="x"))
    assert ledger.ledger_path(task_dir).read_bytes() == before


def test_append_refuses_on_a_corrupt_ledger(task_dir):
    ledger.append(task_dir, decision())
    with open(ledger.ledger_path(task_dir), "a") as f:
        f.write('{"id": "L0002"}\n')
    with pytest.raises(KdaError, match=r"ledger.jsonl:2: missing key"):
        ledger.append(task_dir, decision())


def run_output(path: Path) -> dict:
    recs = results_file.read_records(path)
    return {"provenance": recs[0], "rows": recs[1:-1], "summary": recs[-1], "path": str(path)}


def test_append_bench_from_a_real_results_file(task_dir):
    out = run_output(RESULTS)
    copy = task_dir / "results" / "h200.jsonl.gz"
    copy.parent.mkdir()
    copy.write_bytes(RESULTS.read_bytes())
    e = ledger.append_bench(task_dir, copy, out)
    s = out["summary"]["metrics"]["device_us"]["vs_baseline"]
    assert e["kind"] == "measurement" and e["decision"] is None
    assert e["metrics"]["device_us_geomean"] == pytest.approx(s["geomean"])
    assert e["metrics"]["device_us_ci"] == pytest.approx(s["ci"])
    assert e["metrics"]["min_row"] == pytest.approx(s["min"]["median"]) and e["metrics"]["min_row_id"] == s["min"]["id"]
    assert e["metrics"]["gpu"] == "h200" and e["metrics"]["rows_total"] == out["summary"]["rows_total"]
    assert e["metrics"]["noise_floor_device_us"] == pytest.approx(out["summary"]["noise_floor"]["geomean"])
    # a reference is to the decompressed bytes: the same whether the file is stored compressed or not
    data = results_file.read_bytes(RESULTS)
    assert e["results_ref"] == {"path": "results/h200.jsonl.gz", "lines": data.count(b"\n"),
                                "sha256": __import__("hashlib").sha256(data).hexdigest(), "commit": None}
    assert "commit" not in json.loads((task_dir / "docs" / "ledger.jsonl").read_text())["results_ref"]
    assert e["commit"] == out["provenance"]["commit"]
    # the hash from the provenance's per-file hashes is the one solution_hash computes from the files
    pairs = {f"diffusion/kernels/fake_task/solution/{p.name}": __import__("hashlib").sha256(p.read_bytes()).hexdigest()
             for p in (task_dir / "solution").iterdir()}
    assert ledger.hash_of_provenance({"sources": {"candidate": pairs}}) == ledger.solution_hash(task_dir)


def test_append_bench_with_missing_metrics(task_dir):
    out = {"provenance": {"mode": "bench", "gpu_slug": "h100", "sources": {"candidate": {}}, "command": "kda bench t"},
           "summary": {"rows_total": 3, "rows_passed": 0, "metrics": {"device_us": {"vs_baseline": None}}}}
    e = ledger.append_bench(task_dir, None, out)
    assert e["metrics"]["device_us_geomean"] is None and e["metrics"]["rows_passed"] == 0
    assert e["results_ref"] is None


def test_record_bench_hook(task_dir):
    copy = task_dir / "results" / "h200.jsonl.gz"
    copy.parent.mkdir()
    copy.write_bytes(RESULTS.read_bytes())
    out = run_output(copy)
    task = SimpleNamespace(path=task_dir, name="fake_task")
    e = ledger.record_bench(task, out)
    assert e["id"] == "L0001" and (task_dir / "docs" / "ledger.md").is_file()
    assert ledger.record_bench(task, {**out, "provenance": {**out["provenance"], "mode": "check"}}) is None
    assert ledger.record_bench(task, {k: v for k, v in out.items() if k != "path"}) is None
    assert len(ledger.read(task_dir)) == 1


def test_views_keep_failed_attempts(task_dir):
    ledger.append(task_dir, decision())
    ledger.append(task_dir, decision(decision="IMPROVEMENT", parent="L0001", metrics={"device_us_geomean": 1.05,
                                                                                     "device_us_ci": [1.01, 1.09]}))
    entries = ledger.read(task_dir)
    table = ledger.render_table(entries)
    assert table.row_count == 2
    from rich.console import Console
    con = Console(width=300, record=True, file=open("/dev/null", "w"))
    con.print(table)
    assert "[1.010, 1.090]" in con.export_text()  # intervals are text, not rich markup
    md = ledger.render_markdown(entries, "fake_task")
    assert "| L0001 |" in md and "NO-GO" in md and "IMPROVEMENT" in md and "1.050x [1.010, 1.090]" in md
    assert "1 NO-GO" in md and "Failed attempts stay" in md
    path = ledger.write_markdown(task_dir)
    assert path == task_dir / "docs" / "ledger.md" and path.read_text() == md


def test_cli_ledger_add_and_print(task_dir, capsys, monkeypatch):
    monkeypatch.delenv("KDA_AUTHOR", raising=False)
    assert cli.main(["ledger", str(task_dir), "--add", "--decision", "NO-GO", "--hypothesis", "h (predicted +3%)",
                     "--change", "c", "--reason", "r", "--round", "4", "--author", "me"]) == 0
    assert cli.main(["ledger", str(task_dir), "--add", "--decision", "BLOCKED", "--hypothesis", "h2",
                     "--change", "c2", "--reason", "no GPU", "--parent", "L0001", "--author", "me"]) == 0
    out = capsys.readouterr().out
    assert "appended L0001" in out and "appended L0002" in out
    entries = ledger.read(task_dir)
    assert entries[0]["round"] == 4 and entries[1]["parent"] == "L0001" and entries[1]["round"] == 0
    assert (task_dir / "docs" / "ledger.md").is_file()
    assert cli.main(["ledger", str(task_dir), "--add", "--hypothesis", "h"]) == 2  # --decision is required
    assert "needs --decision" in capsys.readouterr().err
    assert cli.main(["ledger", str(task_dir), "--add", "--decision", "NO-GO", "--change", "c", "--reason", "r"]) == 2
    assert "hypothesis" in capsys.readouterr().err
