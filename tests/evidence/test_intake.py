"""kda intake: a GPU call's results.tar taken into the task folders, checked whole before anything is written."""
import hashlib
import io
import json
import tarfile

import pytest

from kda.evidence import ledger
from kda.evidence.archive import SUFFIX, read_bytes
from kda.core.errors import KdaError
from kda.evidence.intake import intake, new_ledger_lines

TASK = "diffusion/kernels/t"
COMMIT_OLD = "1111111" + "0" * 33
COMMIT_NEW = "2222222" + "0" * 33


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


@pytest.fixture
def repo(tmp_path):
    """A task whose h100 file was cited by L0001; L0002 travelled to the GPU machine; L0003 was written here after."""
    task = tmp_path / TASK
    (task / "docs").mkdir(parents=True)
    (task / "results").mkdir()
    (task / "task.toml").write_text("")
    old = _results_text(COMMIT_OLD, "old")
    (task / "results" / "h100.jsonl").write_text(old)
    travelled = [_entry(1, "2026-11-25T10:00:00Z", "bench", _ref("results/h100.jsonl", old)),
                 _entry(2, "2026-11-25T10:05:00Z", "idea", kind="decision", parent="L0001")]
    here = _entry(3, "2026-11-25T11:00:00Z", "written here while the GPU ran", kind="decision", parent="L0002")
    (task / "docs" / "ledger.jsonl").write_text(_lines(travelled + [here]))
    return tmp_path, travelled, old


def _tar(tmp_path, files, link=None):
    """A results.tar of `files` (name -> text), then, if given, link = (name, target) as a hard-link member."""
    path = tmp_path / "results.tar"
    with tarfile.open(path, "w") as tar:
        for name, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        if link:
            info = tarfile.TarInfo(link[0])
            info.type, info.linkname = tarfile.LNKTYPE, link[1]
            tar.addfile(info)
    return path


def _device_call(tmp_path, travelled):
    new = _results_text(COMMIT_NEW, "new", "2026-11-25T11:30:00Z")
    appended = [_entry(3, "2026-11-25T11:30:00Z", "bench on the GPU machine", _ref("results/h100.jsonl", new)),
                _entry(4, "2026-11-25T11:31:00Z", "its decision", kind="decision", parent="L0003")]
    return new, _tar(tmp_path, {f"{TASK}/results/h100.jsonl": new,
                                f"{TASK}/docs/ledger.jsonl": _lines(travelled + appended),
                                f"{TASK}/docs/profile/h100/r1-candidate.json": "{}\n"})


def test_intake_archives_the_old_file_appends_renumbered_lines_and_copies_profiles(repo):
    root, travelled, old = repo
    new, tar = _device_call(root, travelled)
    [got] = intake(tar, root, {"t": "v1"})
    task = root / TASK
    hist = task / "results" / "history" / ("h100-v1-1111111" + SUFFIX)
    assert got.archived == [hist] and read_bytes(hist) == old.encode()
    assert (task / "results" / "h100.jsonl").read_text() == new
    entries = ledger.read(task)
    assert [e["id"] for e in entries] == ["L0001", "L0002", "L0003", "L0004", "L0005"]
    assert entries[0]["results_ref"]["path"] == "results/history/h100-v1-1111111" + SUFFIX
    assert entries[3]["change"] == "bench on the GPU machine" and entries[3]["results_ref"] == _ref(
        "results/h100.jsonl", new)
    assert entries[4]["parent"] == "L0004"  # followed its renumbered parent
    assert got.ledger_ids == [("L0003", "L0004"), ("L0004", "L0005")]
    assert (task / "docs" / "profile" / "h100" / "r1-candidate.json").exists()
    assert (task / "docs" / "ledger.md").exists()


def test_intake_twice_takes_nothing_the_second_time(repo):
    root, travelled, _ = repo
    _, tar = _device_call(root, travelled)
    intake(tar, root)
    before = (root / TASK / "docs" / "ledger.jsonl").read_text()
    [got] = intake(tar, root)
    assert not got.archived and not got.results and not got.ledger_ids and not got.profiles
    assert (root / TASK / "docs" / "ledger.jsonl").read_text() == before


def test_a_ref_repointed_here_after_the_tree_travelled_is_still_the_same_entry():
    here = _entry(1, "2026-11-25T10:00:00Z", "bench", {"path": "results/history/x" + SUFFIX, "lines": 1,
                                                      "sha256": "b" * 64})
    there = dict(here, results_ref={"path": "results/h100.jsonl", "lines": 1, "sha256": "b" * 64})
    assert new_ledger_lines([json.dumps(here)], [json.dumps(there)]) == []


def test_a_bad_results_file_in_the_tar_writes_nothing(repo):
    root, travelled, old = repo
    before = (root / TASK / "docs" / "ledger.jsonl").read_text()
    tar = _tar(root, {f"{TASK}/results/h100.jsonl": '{"type": "row"}\n',
                      f"{TASK}/docs/ledger.jsonl": before})
    with pytest.raises(KdaError, match="h100.jsonl"):
        intake(tar, root)
    assert (root / TASK / "results" / "h100.jsonl").read_text() == old
    assert (root / TASK / "docs" / "ledger.jsonl").read_text() == before


def test_a_tar_member_outside_the_repository_is_refused(repo):
    root, _, _ = repo
    with pytest.raises(KdaError, match="not a plain path"):
        intake(_tar(root, {"../escape.jsonl": "x\n"}), root)


def test_a_task_folder_unknown_here_is_refused(repo):
    root, _, _ = repo
    tar = _tar(root, {"diffusion/kernels/other/results/h100.jsonl": _results_text(COMMIT_NEW, "x")})
    with pytest.raises(KdaError, match="not a task folder here"):
        intake(tar, root)


def test_an_older_copy_travelling_back_does_not_replace_a_newer_file(repo):
    """Every call carries the whole tree, so its tar brings back files it did not write as they travelled; taken in
    after a later call's tar, such a copy must not replace the later measurement."""
    root, travelled, old = repo
    _, later = _device_call(root, travelled)
    intake(later, root)
    stale = _tar(root, {f"{TASK}/results/h100.jsonl": old, f"{TASK}/docs/ledger.jsonl": _lines(travelled)})
    newer = (root / TASK / "results" / "h100.jsonl").read_text()
    [got] = intake(stale, root)
    assert got.kept == [root / TASK / "results" / "h100.jsonl"] and not got.results and not got.archived
    assert (root / TASK / "results" / "h100.jsonl").read_text() == newer


def test_a_results_file_without_a_measurement_time_is_refused(repo):
    root, travelled, old = repo
    undated = old.replace(', "time_utc": "2026-11-25T10:00:00Z"', "").replace('"old"', '"other"')
    tar = _tar(root, {f"{TASK}/results/h100.jsonl": undated, f"{TASK}/docs/ledger.jsonl": _lines(travelled)})
    with pytest.raises(KdaError, match="h100.jsonl.*time_utc"):
        intake(tar, root)
    assert (root / TASK / "results" / "h100.jsonl").read_text() == old


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


def _git(cwd, *args):
    import subprocess
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True,
                   env={"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
                        "GIT_COMMITTER_EMAIL": "t@t", "HOME": str(cwd), "PATH": __import__("os").environ["PATH"]})


def test_a_results_file_naming_no_commit_of_the_repository_is_refused(repo):
    """In a git work tree, a results file taken in must name one of its commits: a typed KDA_COMMIT, or one read
    from the GPU machine's stale .git, would otherwise be found only by kda verify, after it was committed."""
    import subprocess
    root, travelled, old = repo
    _git(root, "init", "-q")
    _git(root, "add", "-A")
    _git(root, "commit", "-q", "-m", "tree")
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True).stdout.strip()
    typo = head[:8] + ("0" if head[8] != "0" else "1") + head[9:]
    bad = _results_text(typo, "new", "2026-11-25T11:30:00Z")
    tar = _tar(root, {f"{TASK}/results/h100.jsonl": bad, f"{TASK}/docs/ledger.jsonl": _lines(travelled)})
    with pytest.raises(KdaError, match=f"h100.jsonl names commit {typo}.*not a commit of this repository"):
        intake(tar, root)
    assert (root / TASK / "results" / "h100.jsonl").read_text() == old  # nothing written
    good = _results_text(head, "new", "2026-11-25T11:30:00Z")
    tar = _tar(root, {f"{TASK}/results/h100.jsonl": good, f"{TASK}/docs/ledger.jsonl": _lines(travelled)})
    [got] = intake(tar, root)
    assert got.results == [root / TASK / "results" / "h100.jsonl"]


def test_a_results_file_whose_commit_holds_other_sources_is_refused(repo):
    """The GPU machine's stale .git named an old commit that exists: the sources recorded in the file tell that it
    is not the tree measured."""
    import subprocess
    root, travelled, old = repo
    cand = root / TASK / "solution.py"
    cand.write_text("v1\n")
    _git(root, "init", "-q")
    _git(root, "add", "-A")
    _git(root, "commit", "-q", "-m", "v1")
    first = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True).stdout.strip()
    cand.write_text("v2\n")
    _git(root, "commit", "-qam", "v2")
    measured = {f"{TASK}/solution.py": hashlib.sha256(b"v2\n").hexdigest()}

    def results(commit):
        head = {"type": "provenance", "commit": commit, "gpu_slug": "h100", "time_utc": "2026-11-25T11:30:00Z",
                "sources": {"candidate": measured, "harness": {}}}
        return "".join(json.dumps(x) + "\n" for x in (head, {"type": "row", "id": "r1"}, {"type": "summary"}))

    tar = _tar(root, {f"{TASK}/results/h100.jsonl": results(first), f"{TASK}/docs/ledger.jsonl": _lines(travelled)})
    with pytest.raises(KdaError, match=f"names commit {first}, whose files differ.*solution.py"):
        intake(tar, root)
    assert (root / TASK / "results" / "h100.jsonl").read_text() == old
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True).stdout.strip()
    tar = _tar(root, {f"{TASK}/results/h100.jsonl": results(head), f"{TASK}/docs/ledger.jsonl": _lines(travelled)})
    [got] = intake(tar, root)
    assert got.results == [root / TASK / "results" / "h100.jsonl"]
