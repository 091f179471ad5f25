"""kda.evidence.archive: a superseded results file leaves the tree; the ledger entries citing it get the commit that
holds it, and nothing is copied into a history folder."""
import hashlib
import json
import subprocess

import pytest

from kda.core.errors import KdaError
from kda.evidence import ledger
from kda.evidence.archive import head_commit_holding, pin, repoint, supersede
from kda.harness import results_file

COMMIT = "0123456789abcdef0123456789abcdef01234567"


def _git(repo, *args):
    return subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=repo, check=True,
                          capture_output=True, text=True).stdout.strip()


def _results(path, marker="a", commit=COMMIT):
    recs = [{"type": "provenance", "commit": commit, "gpu_slug": "h100", "mode": "bench", "marker": marker,
             "time_utc": "2026-11-25T00:00:00Z"},
            {"type": "row", "id": "r1"},
            {"type": "summary", "rows_passed": 1, "rows_total": 1, "metrics": {}}]
    return results_file.write(path, recs)


def _cite(task, rel, entry_id):
    e = {"id": entry_id, "parent": None, "round": 0, "time_utc": "2026-11-25T00:00:00Z", "kind": "measurement",
         "hypothesis": "", "change": "bench", "source_hash": "a" * 64, "results_ref": ledger.results_ref(task, task / rel),
         "metrics": {}, "decision": None, "reason": "r", "author": "test"}
    with open(task / "docs" / "ledger.jsonl", "a") as f:
        f.write(json.dumps(e) + "\n")
    return e


@pytest.fixture
def task(tmp_path):
    repo = tmp_path / "repo"
    task = repo / "diffusion" / "kernels" / "t"
    (task / "docs").mkdir(parents=True)
    (task / "docs" / "ledger.jsonl").write_text("")
    _git(repo, "init", "-q")
    return task


def _commit(task, message="tree"):
    repo = task.parents[2]
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", message)
    return _git(repo, "rev-parse", "HEAD")


def test_supersede_records_the_commit_in_the_citing_entries_and_copies_nothing(task):
    cur = _results(task / "results" / "h100.jsonl.gz")
    cited = _cite(task, "results/h100.jsonl.gz", "L0001")
    # a later run overwrote h100 once before: an entry citing other bytes at that path must not change
    other = {"path": "results/h100.jsonl.gz", "lines": 3, "sha256": "f" * 64}
    with open(task / "docs" / "ledger.jsonl", "a") as f:
        f.write(json.dumps({**cited, "id": "L0002", "results_ref": other}) + "\n")
    data = results_file.read_bytes(cur)
    head = _commit(task)
    commit, ids = supersede(task, cur)
    assert (commit, ids) == (head, ["L0001"])
    assert not cur.exists() and not (task / "results" / "history").exists()
    refs = [json.loads(line)["results_ref"] for line in (task / "docs" / "ledger.jsonl").read_text().splitlines()]
    assert refs[0] == {**cited["results_ref"], "commit": head} and refs[1] == other
    assert refs[0]["sha256"] == hashlib.sha256(data).hexdigest()
    # the reference now resolves through git, the sha256 checked
    assert results_file.ref_bytes(task, refs[0]) == data
    ledger.read(task)  # still a valid ledger


def test_an_uncommitted_or_modified_file_is_refused_and_kept(task):
    _commit(task, "empty ledger")
    cur = _results(task / "results" / "h100.jsonl.gz")
    _cite(task, "results/h100.jsonl.gz", "L0001")
    before = (task / "docs" / "ledger.jsonl").read_text()
    with pytest.raises(KdaError, match="not committed.*commit it first"):
        supersede(task, cur)
    _commit(task)
    _results(cur, marker="edited")
    with pytest.raises(KdaError, match="differs from the copy HEAD"):
        supersede(task, cur)
    assert cur.exists() and (task / "docs" / "ledger.jsonl").read_text() == before


def test_a_file_no_entry_cites_gets_an_entry_that_does(task):
    cur = _results(task / "results" / "h200-aa.jsonl.gz")
    head = _commit(task)
    commit, ids = supersede(task, cur, label="v9c")
    [e] = ledger.read(task)
    assert ids == [e["id"]] and e["results_ref"]["commit"] == head and e["results_ref"]["path"] == "results/h200-aa.jsonl.gz"
    assert "v9c" in e["change"] and e["commit"] == COMMIT and e["metrics"]["rows_passed"] == 1
    assert results_file.ref_bytes(task, e["results_ref"]).count(b"\n") == 3


def test_intake_style_supersede_keeps_the_file_for_the_new_one_to_overwrite(task):
    cur = _results(task / "results" / "h100.jsonl.gz")
    _cite(task, "results/h100.jsonl.gz", "L0001")
    _commit(task)
    supersede(task, cur, remove=False)
    assert cur.exists()


def test_files_outside_the_task_results_are_refused(task):
    stray = _results(task.parent / "elsewhere" / "h100.jsonl.gz")
    with pytest.raises(KdaError, match="not under"):
        supersede(task, stray)


def test_head_commit_holding_needs_a_commit(task):
    cur = _results(task / "results" / "h100.jsonl.gz")
    with pytest.raises(KdaError, match="no commit yet"):
        head_commit_holding(task, cur)


def test_repoint_and_pin_leave_other_lines_byte_for_byte(tmp_path):
    task = tmp_path / "t"
    (task / "docs").mkdir(parents=True)
    raw = ['{"id": "L0001",   "results_ref": null}', json.dumps({"id": "L0002", "results_ref": {
        "path": "results/a.jsonl", "lines": 1, "sha256": "b" * 64}})]
    (task / "docs" / "ledger.jsonl").write_text("\n".join(raw) + "\n")
    assert repoint(task, "results/a.jsonl", "results/a.jsonl.gz", "b" * 64, "c" * 64) == 1
    out = (task / "docs" / "ledger.jsonl").read_text().splitlines()
    assert out[0] == raw[0] and json.loads(out[1])["results_ref"] == {"path": "results/a.jsonl.gz", "lines": 1,
                                                                      "sha256": "c" * 64}
    assert pin(task, "results/a.jsonl.gz", "c" * 64, COMMIT) == ["L0002"]
    assert pin(task, "results/a.jsonl.gz", "c" * 64, "f" * 40) == []  # already pinned: the first commit stays
    assert json.loads((task / "docs" / "ledger.jsonl").read_text().splitlines()[1])["results_ref"]["commit"] == COMMIT
