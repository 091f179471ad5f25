"""Take what a GPU call returned (`scripts/gpu_tasks.sh`'s results.tar) into the task folders, in one checked step.

The tar holds, per task, `results/` (results files), `docs/ledger.jsonl` as the GPU machine left it (the ledger that
travelled plus the lines `kda bench` appended there) and `docs/profile/`. Taking them in by hand meant: moving the
superseded current file to the history and its ledger reference with it, copying the new files, appending only the
new ledger lines (renumbered when entries were added here since the tree travelled), and copying profiles. Done by
hand, three ledger references once ended up on the wrong file. Here:

1. the new ledger lines are the tar's entries the local ledger does not hold (same time, author and text: ids and
   results_ref may differ), schema-checked and numbered after the local ledger's last id (parents among them
   follow);
2. a local results file the tar replaces with different bytes is superseded first (`kda.evidence.archive`: the
   ledger entries citing it get the commit that holds it, HEAD, which must hold it byte for byte: an uncommitted or
   modified local file is refused before anything is written), then the new file is copied. Only a file measured later than
   the local one replaces it: each call carries the whole tree, so a tar also brings back every results file the
   call did not write, as it travelled; taking in calls out of order, one of those would otherwise replace a newer
   file taken in from a later call (it happened on 2026-11-26). Such a file is listed as kept;
3. profile files that are new or changed are copied, except raw Nsight Compute exports (`*.csv`, `*.csv.gz`, kept
   out of the tree: kda.evidence.profile.is_raw_export);
4. a results file taken in must name a commit of this repository that holds the sources it records (checked where
   the repository is a git work tree, as `kda verify` checks them). On 2026-11-26 a typed `KDA_COMMIT` named no
   commit and one read from the GPU machine's stale `.git` named an old one; only `kda verify`, run after intake,
   told;
5. nothing is written unless every check passes (the tar is read whole and every results file parsed first).
"""
from __future__ import annotations

import json
import shutil
import tarfile
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from kda.core import gitutil

from kda.evidence import ledger
from kda.evidence.archive import head_commit_holding, supersede
from kda.core.errors import KdaError
from kda.evidence.profile import is_raw_export
from kda.evidence.report import load_results
from kda.evidence.verify import VERIFIED, Blobs, verify_file
from kda.harness import results_file


@dataclass
class Intake:
    task_dir: Path
    archived: list[tuple[Path, str, list[str]]] = field(default_factory=list)  # (old file, commit holding it, entries)
    results: list[Path] = field(default_factory=list)
    ledger_ids: list[tuple[str, str]] = field(default_factory=list)   # (id on the GPU machine, id here)
    profiles: list[Path] = field(default_factory=list)
    kept: list[Path] = field(default_factory=list)     # local files the tar held an older measurement of


def _identity(e: dict) -> tuple:
    """What makes an entry the same entry on both machines: when and where it was written and what it says. Not the
    id (both machines number new lines after the same last id) and not results_ref (archiving here repoints it)."""
    return (e.get("time_utc"), e.get("kind"), e.get("author"), e.get("hypothesis"), e.get("change"),
            e.get("source_hash"), e.get("reason"))


def new_ledger_lines(local: list[str], remote: list[str]) -> list[tuple[str, dict]]:
    """(id on the GPU machine, entry) for the entries of `remote` (the GPU machine's ledger: the one that travelled
    plus what `kda bench` appended there) that `local` does not hold, in order, numbered after local's last id
    (parents among them follow their new ids)."""
    held = {_identity(json.loads(line)) for line in local}
    last = max((int(json.loads(line)["id"][1:]) for line in local), default=0)
    renamed, new = {}, []
    for line in remote:
        e = json.loads(line)
        if _identity(e) in held:
            continue
        last += 1
        remote_id = e["id"]
        renamed[remote_id] = e["id"] = f"L{last:04d}"
        if e.get("parent") in renamed:
            e["parent"] = renamed[e["parent"]]
        new.append((remote_id, e))
    return new


def intake(tar_path: Path, root: Path, labels: dict[str, str] | None = None) -> list[Intake]:
    """Take a GPU call's results.tar into the task folders under `root`. `labels` names the candidate version of a
    superseded file per task (task name -> 'v9c'), for the ledger entry written when no entry cites that file."""
    labels = labels or {}
    root = Path(root).resolve()
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        with tarfile.open(tar_path) as tar:
            files = set()
            for m in tar.getmembers():
                # a hard link to a file earlier in the tar is a second copy of it: tar writes one when a folder is
                # named twice (gpu_tasks.sh did, once per profiled row, until 2026-11-26)
                same = m.islnk() and m.linkname in files
                if m.name.startswith("/") or ".." in Path(m.name).parts or not (m.isfile() or m.isdir() or same):
                    raise KdaError(f"{tar_path}: member {m.name!r} is not a plain path inside the repository")
                if m.isfile():
                    files.add(m.name)
            # the members were checked above; the "data" filter (Python 3.12, and 3.10.12+ / 3.11.4+) checks again
            if hasattr(tarfile, "data_filter"):
                tar.extractall(tmp, filter="data")
            else:
                tar.extractall(tmp)
        task_dirs = sorted({p.parent.parent for p in tmp.rglob("docs/ledger.jsonl")}
                           | {p.parent.parent for p in tmp.rglob("results/*")
                              if p.is_file() and results_file.is_results_name(p.name)}
                           | {p.parent.parent.parent for folder in BESIDE for p in tmp.rglob(f"results/{folder}/*")
                              if p.is_file() and results_file.is_results_name(p.name)})
        if not task_dirs:
            raise KdaError(f"{tar_path}: no task folder (docs/ledger.jsonl or results/*.jsonl.gz) in it")
        plans = [_plan(src, root / src.relative_to(tmp), tar_path) for src in task_dirs]
        return [_apply(p, labels.get(p["dst"].name)) for p in plans]


def _plan(src: Path, dst: Path, tar_path: Path) -> dict:
    """Everything checked before anything is written: the destination is a task folder, the results files parse,
    the new ledger lines validate against the local ledger."""
    if not (dst / "docs" / "ledger.jsonl").exists() and not (dst / "task.toml").exists():
        raise KdaError(f"{tar_path}: {dst} is not a task folder here")
    results, kept, commits, replaces = [], [], {}, {}
    for f in results_file.list_files(src / "results"):
        provenance = _provenance(f)
        here = results_file.find(dst / "results", results_file.stem(f))  # the same run, in either encoding
        if here is not None:
            if results_file.read_bytes(here) == results_file.read_bytes(f):
                continue
            if provenance["time_utc"] <= _provenance(here)["time_utc"]:
                kept.append(here)
                continue
            replaces[f] = here
        results.append(f)
        commits[f] = provenance.get("commit")
    if results and gitutil.ok("rev-parse", "--is-inside-work-tree", cwd=dst):
        for f in results:
            _check_commit(f, commits[f], dst, tar_path)
    for f, here in replaces.items():
        try:  # the file replaced must be in git, or its bytes would be lost
            head_commit_holding(dst, here)
        except KdaError as e:
            raise KdaError(f"{tar_path}: {dst.name}/results/{f.name} would replace {here.name}, but {e}; nothing was "
                           "taken in") from None
    new, remote_lines = [], []
    remote = src / "docs" / "ledger.jsonl"
    if remote.exists():
        local_path = ledger.ledger_path(dst)
        local = local_path.read_text().splitlines() if local_path.exists() else []
        ledger.parse_text(remote.read_text(), f"{tar_path}:{remote.relative_to(src.parent.parent.parent)}")
        remote_lines = remote.read_text().splitlines()
        new = new_ledger_lines(local, remote_lines)
        # the whole ledger as it will be, checked before it is written
        ledger.parse_text("".join(line + "\n" for line in local) + "".join(json.dumps(e) + "\n" for _, e in new),
                          f"{local_path} (with the new lines)")
    beside = _plan_beside(src, dst, tar_path)
    profiles = []
    for f in sorted((src / "docs" / "profile").rglob("*")) if (src / "docs" / "profile").exists() else []:
        here = dst / f.relative_to(src)
        if f.is_file() and not is_raw_export(f) and (not here.exists() or here.read_bytes() != f.read_bytes()):
            profiles.append((f, here))
    return {"src": src, "dst": dst, "results": results, "replaces": replaces, "kept": kept, "ledger": new,
            "remote_lines": remote_lines, "profiles": profiles, "beside": beside}


BESIDE = results_file.BESIDE


def _plan_beside(src: Path, dst: Path, tar_path: Path) -> list[tuple[Path, Path]]:
    """Results files beside the production ones (results/sweep/, results/cold/): taken in when new or newer, their
    commit checked as a production file's; one replaced must be in git (its bytes stay there). No ledger entry: a
    sweep or a cold run is evidence about the candidate, not a decision."""
    out = []
    for f in [f for folder in BESIDE for f in results_file.list_files(src / "results" / folder)]:
        provenance = _provenance(f)
        here = results_file.find(dst / "results" / f.parent.name, results_file.stem(f))
        if here is not None:
            if results_file.read_bytes(here) == results_file.read_bytes(f) or \
                    provenance["time_utc"] <= _provenance(here)["time_utc"]:
                continue
            try:
                head_commit_holding(dst, here)
            except KdaError as e:
                raise KdaError(f"{tar_path}: {dst.name}/results/{f.parent.name}/{f.name} would replace {here.name}, but {e}; "
                               "nothing was taken in") from None
        if gitutil.ok("rev-parse", "--is-inside-work-tree", cwd=dst):
            _check_commit(f, provenance.get("commit"), dst, tar_path)
        out.append((f, dst / "results" / f.parent.name / f.name))
    return out


def _check_commit(path: Path, commit, dst: Path, tar_path: Path) -> None:
    """Raises, naming the file, the commit and what is wrong with it, when `commit` (the file's provenance's) is not
    a commit of the repository or does not hold the candidate and harness files the results file records."""
    if not isinstance(commit, str) or not commit:
        return  # a run outside git records none; kda verify reports such files
    blobs = Blobs(gitutil.toplevel(dst))
    try:
        if not blobs.is_commit(commit):
            problem = "which is not a commit of this repository"
        else:
            verdict = verify_file(path, blobs, [])
            if verdict.status == VERIFIED or not verdict.differing:
                return
            problem = f"whose files differ from the ones it measured ({', '.join(verdict.differing[:3])})"
    finally:
        blobs.close()
    raise KdaError(f"{tar_path}: {dst.name}/results/{path.name} names commit {commit}, {problem}; nothing was taken "
                   f"in. Measure again with KDA_COMMIT set to `git rev-parse HEAD` run here (not typed, and not read "
                   f"from the GPU machine's copy of .git)")


def _provenance(path: Path) -> dict:
    """The provenance line of a results file, with a time_utc (ISO 8601 UTC, so strings order as times); raises,
    naming the file, on a file that is not a results file or has no measurement time."""
    provenance = load_results(path).provenance
    time_utc = provenance.get("time_utc")
    if not isinstance(time_utc, str) or not time_utc:
        raise KdaError(f"{path}: the provenance line (line 1) has no time_utc")
    return provenance


def _apply(plan: dict, label: str | None) -> Intake:
    dst = plan["dst"]
    out = Intake(dst, kept=list(plan["kept"]))
    for f in plan["results"]:
        old = plan["replaces"].get(f)
        if old is not None:
            commit, ids = supersede(dst, old, label=label)
            out.archived.append((old, commit, ids))
        here = dst / "results" / f.name
        shutil.copyfile(f, here)
        out.results.append(here)
    new = plan["ledger"]
    if out.archived and new:  # superseding may have appended an entry here: number the new lines after it
        local = ledger.ledger_path(dst).read_text().splitlines()
        new = new_ledger_lines(local, plan["remote_lines"])
    if new:
        with open(ledger.ledger_path(dst), "a") as fh:
            for remote_id, e in new:
                fh.write(json.dumps(e, sort_keys=False) + "\n")
                out.ledger_ids.append((remote_id, e["id"]))
    if new or out.archived:
        ledger.read(dst)  # the written ledger parses
        ledger.write_markdown(dst)
    for f, here in plan["profiles"]:
        here.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(f, here)
        out.profiles.append(here)
    for f, here in plan["beside"]:
        for old in results_file.list_files(here.parent):
            if results_file.stem(old) == results_file.stem(f) and old != here:
                old.unlink()  # the other encoding of the same run, in git (checked in the plan)
        here.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(f, here)
        out.results.append(here)
    return out
