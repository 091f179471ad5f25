"""kda intake: a GPU call's results.tar taken into the task folders, checked whole before anything is written; a
superseded file is left to git history (the ledger entries citing it get the commit that holds it), raw profile
exports are left out."""
import hashlib
import io
import json
import os
import subprocess
import tarfile

import pytest

from kda.evidence import ledger
from kda.core.errors import KdaError
from kda.evidence.intake import intake, new_ledger_lines
from kda.harness import results_file

TASK = "diffusion/kernels/t"
COMMIT_OLD = "1111111" + "0" * 33
COMMIT_NEW = "2222222" + "0" * 33
RES = "results/h100.jsonl.gz"


def _results_text(commit, marker, when="2026-11-25T10:00:00Z"):
    lines = [{"type": "provenance", "commit": commit, "gpu_slug": "h100", "marker": marker, "time_utc": when},
             {"type": "row", "id": "r1"}, {"type": "summary"}]
    return "".join(json.dumps(x) + "\n" for x in lines)


def _entry(i, when, text, ref=None, parent=None, kind="measurement"):
    return {"id": f"L{i:04d}", "parent": parent, "round": 0, "time_utc": when, "kind": kind,
            "hypothesis": "h" if kind == "decision" else "", "change": text, "source_hash": "a" * 64,
            "results_ref": ref, "metrics": {}, "decision": "NO-GO" if kind == "decision" else None,
            "reason": "r", "author": "test"}


def _ref(path, text):
    return {"path": path, "lines": text.count("\n"), "sha256": hashlib.sha256(text.encode()).hexdigest()}


def _lines(entries):
    return "".join(json.dumps(e) + "\n" for e in entries)


def _git(cwd, *args):
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True,
                          env={"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
                               "GIT_COMMITTER_EMAIL": "t@t", "HOME": str(cwd), "PATH": os.environ["PATH"]}).stdout.strip()


def _stored(text):
    """A results file's stored bytes (gzip) from its JSON-lines text."""
    return results_file.compress(text.encode())


@pytest.fixture
def repo(tmp_path):
    """A git work tree with a task whose committed h100 file was cited by L0001; L0002 travelled to the GPU machine;
    L0003 was written here after (uncommitted)."""
    task = tmp_path / TASK
    (task / "docs").mkdir(parents=True)
    (task / "results").mkdir()
    (task / "task.toml").write_text("")
    old = _results_text(COMMIT_OLD, "old")
    (task / RES).write_bytes(_stored(old))
    travelled = [_entry(1, "2026-11-25T10:00:00Z", "bench", _ref(RES, old)),
                 _entry(2, "2026-11-25T10:05:00Z", "idea", kind="decision", parent="L0001")]
    (task / "docs" / "ledger.jsonl").write_text(_lines(travelled))
    _git(tmp_path, "init", "-q")
    _git(tmp_path, "add", "-A")
    _git(tmp_path, "commit", "-qm", "tree")
    here = _entry(3, "2026-11-25T11:00:00Z", "written here while the GPU ran", kind="decision", parent="L0002")
    (task / "docs" / "ledger.jsonl").write_text(_lines(travelled + [here]))
    return tmp_path, travelled, old


def _head(root):
    return _git(root, "rev-parse", "HEAD")


def _tar(tmp_path, files, link=None):
    """A results.tar of `files` (name -> text or bytes), then, if given, link = (name, target) as a hard-link
    member."""
    path = tmp_path / "results.tar"
    with tarfile.open(path, "w") as tar:
        for name, text in files.items():
            data = text if isinstance(text, bytes) else text.encode()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        if link:
            info = tarfile.TarInfo(link[0])
            info.type, info.linkname = tarfile.LNKTYPE, link[1]
            tar.addfile(info)
    return path


def _device_call(tmp_path, travelled):
    new = _results_text(_head(tmp_path), "new", "2026-11-25T11:30:00Z")
    appended = [_entry(3, "2026-11-25T11:30:00Z", "bench on the GPU machine", _ref(RES, new)),
                _entry(4, "2026-11-25T11:31:00Z", "its decision", kind="decision", parent="L0003")]
    return new, _tar(tmp_path, {f"{TASK}/{RES}": _stored(new),
                                f"{TASK}/docs/ledger.jsonl": _lines(travelled + appended),
                                f"{TASK}/docs/profile/h100/r1-candidate.json": "{}\n",
                                f"{TASK}/docs/profile/h100/csv/r1-candidate.csv": "raw,export\n",
                                f"{TASK}/docs/profile/h100/r1-sass.csv.gz": b"raw"})


def _strip(ref):
    return {k: v for k, v in ref.items() if v is not None}


def test_intake_replaces_the_old_file_appends_renumbered_lines_and_copies_summaries_only(repo):
    root, travelled, old = repo
    head = _head(root)
    new, tar = _device_call(root, travelled)
    [got] = intake(tar, root, {"t": "v1"})
    task = root / TASK
    assert got.archived == [(task / RES, head, ["L0001"])]
    assert not (task / "results" / "history").exists()  # nothing copied: git history holds the old file
    assert results_file.read_text(task / RES) == new
    entries = ledger.read(task)
    assert [e["id"] for e in entries] == ["L0001", "L0002", "L0003", "L0004", "L0005"]
    assert _strip(entries[0]["results_ref"]) == {**_ref(RES, old), "commit": head}
    assert results_file.ref_bytes(task, entries[0]["results_ref"]) == old.encode()  # read back through git
    assert entries[3]["change"] == "bench on the GPU machine" and _strip(entries[3]["results_ref"]) == _ref(RES, new)
    assert entries[4]["parent"] == "L0004"  # followed its renumbered parent
    assert got.ledger_ids == [("L0003", "L0004"), ("L0004", "L0005")]
    assert got.profiles == [task / "docs" / "profile" / "h100" / "r1-candidate.json"]  # raw exports left out
    assert not list((task / "docs" / "profile").rglob("*.csv*"))
    assert (task / "docs" / "ledger.md").exists()


def test_an_uncommitted_local_file_is_not_replaced(repo):
    """The file a tar replaces must be in git: its bytes would be nowhere otherwise. Nothing is written."""
    root, travelled, _ = repo
    task = root / TASK
    edited = _results_text(COMMIT_OLD, "edited here", "2026-11-25T10:30:00Z")
    (task / RES).write_bytes(_stored(edited))
    before = (task / "docs" / "ledger.jsonl").read_text()
    _, tar = _device_call(root, travelled)
    with pytest.raises(KdaError, match="would replace h100.jsonl.gz.*differs from the copy HEAD"):
        intake(tar, root)
    assert results_file.read_text(task / RES) == edited and (task / "docs" / "ledger.jsonl").read_text() == before


def test_a_superseded_file_no_entry_cites_gets_an_entry_and_the_new_lines_follow_it(repo):
    root, travelled, old = repo
    task = root / TASK
    uncited = [dict(e, results_ref=None) for e in travelled]
    (task / "docs" / "ledger.jsonl").write_text(_lines(uncited))
    _git(root, "commit", "-qam", "no entry cites the h100 file")
    new = _results_text(_head(root), "new", "2026-11-25T11:30:00Z")
    tar = _tar(root, {f"{TASK}/{RES}": _stored(new), f"{TASK}/docs/ledger.jsonl": _lines(
        uncited + [_entry(3, "2026-11-25T11:30:00Z", "bench on the GPU machine", _ref(RES, new))])})
    [got] = intake(tar, root, {"t": "v1"})
    [(_, commit, [cited])] = got.archived
    entries = ledger.read(task)
    assert cited == "L0003" and entries[2]["results_ref"]["commit"] == commit and "v1" in entries[2]["change"]
    assert got.ledger_ids == [("L0003", "L0004")] and entries[3]["change"] == "bench on the GPU machine"


def test_a_plain_file_from_an_older_gpu_machine_replaces_the_compressed_one_of_its_run(repo):
    root, travelled, _ = repo
    task = root / TASK
    new = _results_text(_head(root), "new", "2026-11-25T11:30:00Z")
    [got] = intake(_tar(root, {f"{TASK}/results/h100.jsonl": new, f"{TASK}/docs/ledger.jsonl": _lines(travelled)}),
                   root)
    assert [p.name for p in results_file.list_files(task / "results")] == ["h100.jsonl"]
    assert got.archived[0][0] == task / RES and (task / "results" / "h100.jsonl").read_text() == new


def test_intake_twice_takes_nothing_the_second_time(repo):
    root, travelled, _ = repo
    _, tar = _device_call(root, travelled)
    intake(tar, root)
    before = (root / TASK / "docs" / "ledger.jsonl").read_text()
    [got] = intake(tar, root)
    assert not got.archived and not got.results and not got.ledger_ids and not got.profiles
    assert (root / TASK / "docs" / "ledger.jsonl").read_text() == before


def test_a_ref_pinned_here_after_the_tree_travelled_is_still_the_same_entry():
    here = _entry(1, "2026-11-25T10:00:00Z", "bench", {"path": RES, "lines": 1, "sha256": "b" * 64,
                                                      "commit": "c" * 40})
    there = dict(here, results_ref={"path": RES, "lines": 1, "sha256": "b" * 64})
    assert new_ledger_lines([json.dumps(here)], [json.dumps(there)]) == []


def test_a_bad_results_file_in_the_tar_writes_nothing(repo):
    root, travelled, old = repo
    before = (root / TASK / "docs" / "ledger.jsonl").read_text()
    tar = _tar(root, {f"{TASK}/{RES}": _stored('{"type": "row"}\n'),
                      f"{TASK}/docs/ledger.jsonl": before})
    with pytest.raises(KdaError, match="h100.jsonl.gz"):
        intake(tar, root)
    assert results_file.read_text(root / TASK / RES) == old
    assert (root / TASK / "docs" / "ledger.jsonl").read_text() == before


def test_a_tar_member_outside_the_repository_is_refused(repo):
    root, _, _ = repo
    with pytest.raises(KdaError, match="not a plain path"):
        intake(_tar(root, {"../escape.jsonl": "x\n"}), root)


def test_a_task_folder_unknown_here_is_refused(repo):
    root, _, _ = repo
    tar = _tar(root, {f"diffusion/kernels/other/{RES}": _stored(_results_text(COMMIT_NEW, "x"))})
    with pytest.raises(KdaError, match="not a task folder here"):
        intake(tar, root)


def test_an_older_copy_travelling_back_does_not_replace_a_newer_file(repo):
    """Every call carries the whole tree, so its tar brings back files it did not write as they travelled; taken in
    after a later call's tar, such a copy must not replace the later measurement."""
    root, travelled, old = repo
    _, later = _device_call(root, travelled)
    intake(later, root)
    stale = _tar(root, {f"{TASK}/{RES}": _stored(old), f"{TASK}/docs/ledger.jsonl": _lines(travelled)})
    newer = results_file.read_text(root / TASK / RES)
    [got] = intake(stale, root)
    assert got.kept == [root / TASK / RES] and not got.results and not got.archived
    assert results_file.read_text(root / TASK / RES) == newer


def test_a_results_file_without_a_measurement_time_is_refused(repo):
    root, travelled, old = repo
    undated = old.replace(', "time_utc": "2026-11-25T10:00:00Z"', "").replace('"old"', '"other"')
    tar = _tar(root, {f"{TASK}/{RES}": _stored(undated), f"{TASK}/docs/ledger.jsonl": _lines(travelled)})
    with pytest.raises(KdaError, match="h100.jsonl.gz.*time_utc"):
        intake(tar, root)
    assert results_file.read_text(root / TASK / RES) == old


def test_a_hard_link_to_a_file_earlier_in_the_tar_is_a_second_copy(repo):
    """Old gpu_tasks.sh tars named docs/profile once per profiled row: the repeats are hard links to the first."""
    root, travelled, _ = repo
    prof = f"{TASK}/docs/profile/h100/r1-candidate.json"
    tar = _tar(root, {f"{TASK}/docs/ledger.jsonl": _lines(travelled), prof: "{}\n"}, (prof, prof))
    [got] = intake(tar, root)
    assert got.profiles == [root / prof] and (root / prof).read_text() == "{}\n"


def test_a_hard_link_to_anything_else_is_refused(repo):
    root, travelled, _ = repo
    tar = _tar(root, {f"{TASK}/docs/ledger.jsonl": _lines(travelled)},
               (f"{TASK}/docs/profile/h100/x.json", "etc/passwd"))
    with pytest.raises(KdaError, match="not a plain path"):
        intake(tar, root)


def test_a_results_file_naming_no_commit_of_the_repository_is_refused(repo):
    """In a git work tree, a results file taken in must name one of its commits: a typed KDA_COMMIT, or one read
    from the GPU machine's stale .git, would otherwise be found only by kda verify, after it was committed."""
    root, travelled, old = repo
    head = _head(root)
    typo = head[:8] + ("0" if head[8] != "0" else "1") + head[9:]
    bad = _results_text(typo, "new", "2026-11-25T11:30:00Z")
    tar = _tar(root, {f"{TASK}/{RES}": _stored(bad), f"{TASK}/docs/ledger.jsonl": _lines(travelled)})
    with pytest.raises(KdaError, match=f"h100.jsonl.gz names commit {typo}.*not a commit of this repository"):
        intake(tar, root)
    assert results_file.read_text(root / TASK / RES) == old  # nothing written
    good = _results_text(head, "new", "2026-11-25T11:30:00Z")
    tar = _tar(root, {f"{TASK}/{RES}": _stored(good), f"{TASK}/docs/ledger.jsonl": _lines(travelled)})
    [got] = intake(tar, root)
    assert got.results == [root / TASK / RES]


def test_a_results_file_whose_commit_holds_other_sources_is_refused(repo):
    """The GPU machine's stale .git named an old commit that exists: the sources recorded in the file tell that it
    is not the tree measured."""
    root, travelled, old = repo
    cand = root / TASK / "solution.py"
    cand.write_text("v1\n")
    _git(root, "add", "-A")
    _git(root, "commit", "-q", "-m", "v1")
    first = _head(root)
    cand.write_text("v2\n")
    _git(root, "commit", "-qam", "v2")
    measured = {f"{TASK}/solution.py": hashlib.sha256(b"v2\n").hexdigest()}

    def results(commit):
        head = {"type": "provenance", "commit": commit, "gpu_slug": "h100", "time_utc": "2026-11-25T11:30:00Z",
                "sources": {"candidate": measured, "harness": {}}}
        return _stored("".join(json.dumps(x) + "\n" for x in (head, {"type": "row", "id": "r1"}, {"type": "summary"})))

    tar = _tar(root, {f"{TASK}/{RES}": results(first), f"{TASK}/docs/ledger.jsonl": _lines(travelled)})
    with pytest.raises(KdaError, match=f"names commit {first}, whose files differ.*solution.py"):
        intake(tar, root)
    assert results_file.read_text(root / TASK / RES) == old
    tar = _tar(root, {f"{TASK}/{RES}": results(_head(root)), f"{TASK}/docs/ledger.jsonl": _lines(travelled)})
    [got] = intake(tar, root)
    assert got.results == [root / TASK / RES]


def test_a_sweep_results_file_is_taken_in_beside_the_production_ones_without_a_ledger_entry(repo):
    root, travelled, _ = repo
    sweep = _results_text(_head(root), "sweep", "2026-11-25T12:00:00Z")
    tar = _tar(root, {f"{TASK}/results/sweep/h100.jsonl.gz": _stored(sweep)})
    (got,) = intake(tar, root)
    here = root / TASK / "results" / "sweep" / "h100.jsonl.gz"
    assert got.results == [here] and results_file.read_bytes(here) == sweep.encode()
    assert got.ledger_ids == [] and got.archived == []
    assert intake(tar, root)[0].results == []  # the same bytes again: nothing to take


def test_a_cold_l2_results_file_is_taken_in_to_its_own_folder(repo):
    root, _, _ = repo
    cold = _results_text(_head(root), "cold", "2026-11-25T12:30:00Z")
    (got,) = intake(_tar(root, {f"{TASK}/results/cold/h100.jsonl.gz": _stored(cold)}), root)
    assert got.results == [root / TASK / "results" / "cold" / "h100.jsonl.gz"] and got.ledger_ids == []
