"""kda.evidence.archive: results files moved into the history compressed, the ledger's references following them."""
import gzip
import hashlib
import json

import pytest

from kda.evidence import ledger
from kda.evidence.archive import SUFFIX, archive, compress, default_name, read_bytes, repoint
from kda.core.errors import KdaError
from kda.evidence.verify import results_files

COMMIT = "0123456789abcdef0123456789abcdef01234567"


def _results(path, commit=COMMIT, marker="a"):
    lines = [{"type": "provenance", "commit": commit, "gpu_slug": "h100", "marker": marker},
             {"type": "row", "id": "r1"}, {"type": "summary"}]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    return path


def _task(tmp_path):
    task = tmp_path / "t"
    (task / "docs").mkdir(parents=True)
    return task


def _cite(task, rel, entry_id="L0001"):
    data = read_bytes(task / rel)
    e = {"id": entry_id, "parent": None, "round": 0, "time_utc": "2026-11-25T00:00:00Z", "kind": "measurement",
         "hypothesis": "", "change": "bench", "source_hash": "a" * 64, "results_ref": ledger.results_ref(task, task / rel),
         "metrics": {}, "decision": None, "reason": "r", "author": "test"}
    assert e["results_ref"]["sha256"] == hashlib.sha256(data).hexdigest()
    with open(task / "docs" / "ledger.jsonl", "a") as f:
        f.write(json.dumps(e) + "\n")


def test_compress_is_deterministic_and_reads_back():
    data = b'{"a": 1}\n' * 100
    assert compress(data) == compress(data)
    assert gzip.decompress(compress(data)) == data


def test_archive_moves_the_file_and_repoints_only_the_entries_citing_those_bytes(tmp_path):
    task = _task(tmp_path)
    cur = _results(task / "results" / "h100.jsonl")
    _cite(task, "results/h100.jsonl", "L0001")
    before = cur.read_bytes()
    # a later run overwrote h100.jsonl once before: an entry citing other bytes at that path must not move
    other = {"path": "results/h100.jsonl", "lines": 3, "sha256": "f" * 64}
    with open(task / "docs" / "ledger.jsonl", "a") as f:
        f.write(json.dumps({"id": "L0002", "results_ref": other}) + "\n")
    dst = archive(task, cur, label="v9c")
    assert dst == task / "results" / "history" / ("h100-v9c-0123456" + SUFFIX)
    assert not cur.exists() and read_bytes(dst) == before
    refs = [json.loads(line)["results_ref"] for line in (task / "docs" / "ledger.jsonl").read_text().splitlines()]
    assert refs[0] == {"path": "results/history/h100-v9c-0123456" + SUFFIX, "lines": 3,
                       "sha256": hashlib.sha256(before).hexdigest()}
    assert refs[1] == other
    # the moved reference still resolves the way ledger.results_ref writes one
    assert ledger.results_ref(task, dst) == refs[0]


def test_archive_refuses_to_overwrite_another_run_and_keeps_the_source(tmp_path):
    task = _task(tmp_path)
    _results(task / "results" / "history" / "h100-0123456.jsonl", marker="old")
    archive(task, task / "results" / "history" / "h100-0123456.jsonl")   # an uncompressed history file, packed
    cur = _results(task / "results" / "h100.jsonl", marker="new")
    with pytest.raises(KdaError, match="holds another run"):
        archive(task, cur)
    assert cur.exists()


def test_archive_refuses_files_outside_the_task_results(tmp_path):
    task = _task(tmp_path)
    stray = _results(tmp_path / "elsewhere" / "h100.jsonl")
    with pytest.raises(KdaError, match="not under"):
        archive(task, stray)


def test_default_name_needs_a_commit(tmp_path):
    assert default_name(_results(tmp_path / "h200-aa.jsonl")) == "h200-aa-0123456"
    with pytest.raises(KdaError, match="names no commit"):
        default_name(_results(tmp_path / "h200.jsonl", commit=None))


def test_repoint_leaves_other_lines_byte_for_byte(tmp_path):
    task = _task(tmp_path)
    raw = ['{"id": "L0001",   "results_ref": null}', json.dumps({"id": "L0002", "results_ref": {
        "path": "results/a.jsonl", "lines": 1, "sha256": "b" * 64}})]
    (task / "docs" / "ledger.jsonl").write_text("\n".join(raw) + "\n")
    assert repoint(task, "results/a.jsonl", "results/history/a" + SUFFIX, "b" * 64) == 1
    out = (task / "docs" / "ledger.jsonl").read_text().splitlines()
    assert out[0] == raw[0] and json.loads(out[1])["results_ref"]["path"] == "results/history/a" + SUFFIX


def test_verify_lists_archived_history_files(tmp_path):
    task = _task(tmp_path)
    _results(task / "results" / "h100.jsonl")
    archive(task, _results(task / "results" / "h200.jsonl"))
    names = [p.name for p in results_files([task])]
    assert names == ["h100.jsonl", "h200-0123456" + SUFFIX]
