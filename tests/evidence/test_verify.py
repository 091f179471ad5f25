"""kda.evidence.verify: a results file's recorded commit against the sources it records, in a scratch git repository and on
this repository's own results files; superseded files reached through the ledger and git."""
import hashlib
import json
import subprocess

import pytest

from kda.core.gitutil import git
from kda.core.paths import all_task_dirs, repo_root
from kda.evidence.verify import NO_COMMIT, NO_RECORD, OTHER_COMMIT, REF_BROKEN, VERIFIED, verify
from kda.harness import results_file


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _commit(repo, files: dict, message: str) -> str:
    for rel, text in files.items():
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_text(text)
    git("add", "-A", cwd=repo)
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", message, cwd=repo)
    return git("rev-parse", "HEAD", cwd=repo)


def _results(repo, name: str, commit, candidate: dict, harness: dict):
    path = repo / "task" / "results" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    header = {"type": "header", "commit": commit, "sources": {"baseline": {}, "candidate": candidate, "harness": harness}}
    path.write_text(json.dumps(header) + "\n")


def test_verdicts_in_a_scratch_repository(tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    git("init", "-q", cwd=repo)
    a = _commit(repo, {"task/solution/k.py": "v1", "task/oracle.py": "o"}, "v1")
    b = _commit(repo, {"task/solution/k.py": "v2"}, "v2")
    cand1, cand2, harness = {"task/solution/k.py": _sha("v1")}, {"task/solution/k.py": _sha("v2")}, \
        {"task/oracle.py": _sha("o")}
    _results(repo, "right.jsonl", a, cand1, harness)                  # the commit holds what was measured
    _results(repo, "older.jsonl", a, cand2, harness)                  # measured v2, named v1's commit
    _results(repo, "typo.jsonl", "0" * 40, cand1, harness)            # a commit that exists nowhere
    _results(repo, "edited.jsonl", b, {"task/solution/k.py": _sha("v3")}, harness)  # sources no commit holds
    _results(repo, "aa.jsonl", a, "the baseline, timed against itself", {})
    got = {v.path.name: v for v in verify(repo, [repo / "task"])}
    assert got["right.jsonl"].status == VERIFIED
    assert got["older.jsonl"].status == OTHER_COMMIT and got["older.jsonl"].matches == [b]
    assert got["older.jsonl"].differing == ["task/solution/k.py"]
    assert got["typo.jsonl"].status == OTHER_COMMIT and got["typo.jsonl"].matches == [a]
    assert got["typo.jsonl"].differing == ["(the commit is not in this repository)"]
    assert got["edited.jsonl"].status == NO_COMMIT and got["edited.jsonl"].matches == []
    assert got["aa.jsonl"].status == NO_RECORD


def _shallow() -> bool:
    out = subprocess.run(["git", "rev-parse", "--is-shallow-repository"], cwd=repo_root(), capture_output=True,
                         text=True).stdout.strip()
    return out != "false"


def _entry(i, ref):
    return {"id": f"L{i:04d}", "parent": None, "round": 0, "time_utc": "2026-11-25T00:00:00Z", "kind": "measurement",
            "hypothesis": "", "change": "bench", "source_hash": "a" * 64, "results_ref": ref, "metrics": {},
            "decision": None, "reason": "r", "author": "t"}


def test_superseded_files_are_read_from_git_at_the_commit_the_ledger_names(tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    git("init", "-q", cwd=repo)
    a = _commit(repo, {"task/solution/k.py": "v1", "task/oracle.py": "o"}, "v1")
    header = {"type": "provenance", "commit": a, "sources": {"candidate": {"task/solution/k.py": _sha("v1")},
                                                             "harness": {"task/oracle.py": _sha("o")}}}
    path = results_file.write(repo / "task" / "results" / "h100.jsonl.gz", [header, {"type": "summary"}])
    data = results_file.read_bytes(path)
    ref = {"path": "results/h100.jsonl.gz", "lines": 2, "sha256": hashlib.sha256(data).hexdigest()}
    (repo / "task" / "docs").mkdir()
    (repo / "task" / "docs" / "ledger.jsonl").write_text(json.dumps(_entry(1, ref)) + "\n")
    held = _commit(repo, {}, "the run")
    [v] = verify(repo, [repo / "task"])  # in the work tree, cited without a commit
    assert v.status == VERIFIED and v.held_by is None
    # superseded: the file leaves the tree, the entry names the commit that holds it
    path.unlink()
    entries = [_entry(1, {**ref, "commit": held}),
               _entry(2, {**ref, "commit": held, "sha256": "0" * 64}),                 # other bytes than recorded
               _entry(3, {**ref, "commit": "1" * 40}),                                 # no such commit
               _entry(4, {**ref, "path": "results/h200.jsonl.gz", "commit": held}),    # no such file in it
               _entry(5, {**ref, "path": "results/gone.jsonl.gz"})]                    # not here, no commit
    (repo / "task" / "docs" / "ledger.jsonl").write_text("".join(json.dumps(e) + "\n" for e in entries))
    got = {tuple(v.entries): v for v in verify(repo, [repo / "task"])}
    assert got[("L0001",)].status == VERIFIED and got[("L0001",)].held_by == held
    assert got[("L0001",)].shown(repo) == f"task/results/h100.jsonl.gz @ {held[:10]} (git)"
    assert all(got[(i,)].status == REF_BROKEN for i in ("L0002", "L0003", "L0004", "L0005"))
    assert "sha256" in got[("L0002",)].differing[0] and "no commit recorded" in got[("L0005",)].differing[0]


@pytest.mark.skipif(_shallow(), reason="needs the repository's history (a shallow clone lacks the recorded commits)")
def test_every_committed_results_file_holds_sources_some_commit_holds():
    verdicts = verify(repo_root(), all_task_dirs())
    assert len(verdicts) >= 50
    assert not [v.path.name for v in verdicts if v.status in (NO_COMMIT, REF_BROKEN)]
    odd = {v.path.name: v for v in verdicts if v.status != VERIFIED}
    # the one known slip: a commit typed wrong in a GPU call (group_norm_silu run log, 2026-11-25)
    assert set(odd) <= {"h100-v8d-0030dad.jsonl.gz"}
    if odd:
        assert any(c.startswith("0030dad") for c in odd["h100-v8d-0030dad.jsonl.gz"].matches)
