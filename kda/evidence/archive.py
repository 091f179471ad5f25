"""Superseded results files: kept in git history, reached through the ledger.

A results file (`TASK/results/<gpu>.jsonl.gz`) is replaced by the next run on its GPU (`kda intake`) or removed
(`kda archive`). Until 2026-11-28 the superseded file was kept as a gzip copy under `results/history/`, which made up
a third of the tracked tree (the tree travels to the GPU machine under a size limit) and copied bytes git history
already held. Now nothing is copied: `supersede` checks that HEAD holds the file byte for byte (an uncommitted or
modified file is refused: its bytes would be nowhere once replaced), and records that commit in every ledger
`results_ref` that cites the file (same path, same sha256 of the decompressed bytes). Readers, `kda verify` first,
then read the bytes with `git show COMMIT:PATH` and check the sha256 (kda.harness.results_file.ref_bytes). A file no
entry cites gets a measurement entry that does, so every superseded run stays reachable from the ledger.

Files archived under `results/history/` before then keep their references: path `results/history/<name>.jsonl.gz`
and the commit that last held it there.
"""
from __future__ import annotations

import hashlib
import json
from pathlib import Path

from kda.core import gitutil
from kda.core.errors import KdaError
from kda.evidence import ledger
from kda.evidence.ledger import ledger_path
from kda.harness import results_file
from kda.harness.results_file import read_bytes


def head_commit_holding(task_dir: Path, src: Path) -> str:
    """The full id of HEAD, after checking that HEAD holds `src` (a file in the task folder) byte for byte; raises,
    naming the file and what to do, when it is untracked, uncommitted or modified."""
    task_dir, src = Path(task_dir).resolve(), Path(src).resolve()
    rel = src.relative_to(task_dir).as_posix()
    top, inside = results_file.repo_path(task_dir, rel)
    head = gitutil.git("rev-parse", "--verify", "-q", "HEAD^{commit}", cwd=top, check=False)
    if len(head) != 40:
        raise KdaError(f"{src}: the repository has no commit yet, so nothing would hold this file once superseded")
    blob = results_file.git_blob(top, f"{head}:{inside}")
    if blob is None:
        raise KdaError(f"{inside}: not committed (HEAD {head[:12]} has no such file). Superseding it would leave its "
                       "bytes nowhere: commit it first (git add it and git commit), then run this again")
    if blob != src.read_bytes():
        raise KdaError(f"{inside}: differs from the copy HEAD {head[:12]} holds (modified since it was committed). "
                       "Commit it or restore it (git checkout -- it) first, then run this again")
    return head


def pin(task_dir: Path, rel: str, sha256: str, commit: str) -> list[str]:
    """Add `commit` to every ledger results_ref that cites (rel, sha256) without one; other lines keep their bytes.
    Returns the ids of the entries changed."""
    path = ledger_path(task_dir)
    if not path.exists():
        return []
    lines, changed = path.read_text().splitlines(), []
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        e = json.loads(line)
        ref = e.get("results_ref")
        if ref and ref.get("path") == rel and ref.get("sha256") == sha256 and not ref.get("commit"):
            ref["commit"] = commit
            lines[i] = json.dumps(e, sort_keys=False)
            changed.append(e.get("id"))
    if changed:
        path.write_text("\n".join(lines) + "\n")
    return changed


def supersede(task_dir: Path, src: Path, label: str | None = None, remove: bool = True) -> tuple[str, list[str]]:
    """Supersede results file `src` (in TASK/results): record the commit that holds it (HEAD, checked) in the ledger
    entries citing it, appending one that cites it when none does; then delete it when `remove` (`kda intake`
    overwrites it instead). `label` (the candidate's version, `v9c`) goes into an appended entry's text. Returns
    (the commit, the ids of the entries that now cite it through git)."""
    task_dir, src = Path(task_dir).resolve(), Path(src).resolve()
    results = task_dir / "results"
    if not src.is_file():
        raise KdaError(f"{src}: no such results file")
    if results not in src.parents:
        raise KdaError(f"{src}: not under {results}")
    commit = head_commit_holding(task_dir, src)
    data = read_bytes(src)
    rel, sha = src.relative_to(task_dir).as_posix(), hashlib.sha256(data).hexdigest()
    ids = pin(task_dir, rel, sha, commit)
    if not ids:
        ids = [_cite(task_dir, src, rel, data, commit, label)["id"]]
    if remove:
        src.unlink()
    return commit, ids


def _cite(task_dir: Path, src: Path, rel: str, data: bytes, commit: str, label: str | None) -> dict:
    """A measurement entry citing a superseded results file no entry cited, with the metrics of its summary."""
    recs = results_file.parse(data.decode(), str(src))
    prov, summ = (recs[0], recs[-1]) if recs else ({}, {})
    ref = {"path": rel, "lines": data.count(b"\n"), "sha256": hashlib.sha256(data).hexdigest(), "commit": commit}
    what = f"{label} " if label else ""
    return ledger.append(task_dir, {
        "kind": "measurement", "decision": None,
        "change": f"superseded results file {rel} ({what}{prov.get('mode', '?')} on {prov.get('gpu_slug', '?')}, "
                  f"measured {prov.get('time_utc', '?')} at commit {(prov.get('commit') or '?')[:12]})",
        "reason": f"no ledger entry cited it when it was superseded; this one does, so the file stays reachable "
                  f"through git (commit {commit[:12]}); {summ.get('rows_passed')}/{summ.get('rows_total')} rows passed",
        "source_hash": ledger.hash_of_provenance(prov),
        "results_ref": ref,
        "metrics": ledger.metrics_from_summary(summ, prov),
        "commit": prov.get("commit") if isinstance(prov.get("commit"), str) and prov.get("commit") else None,
    })


def repoint(task_dir: Path, old_rel: str, new_rel: str, sha256: str, new_sha256: str | None = None) -> int:
    """Point every ledger entry whose results_ref is (old_rel, sha256) at new_rel (and new_sha256, for a file
    re-encoded); other lines keep their bytes. Returns how many entries changed."""
    path = ledger_path(task_dir)
    if not path.exists():
        return 0
    lines, changed = path.read_text().splitlines(), 0
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        e = json.loads(line)
        ref = e.get("results_ref")
        if ref and ref.get("path") == old_rel and ref.get("sha256") == sha256:
            ref["path"] = new_rel
            if new_sha256:
                ref["sha256"] = new_sha256
            lines[i] = json.dumps(e, sort_keys=False)
            changed += 1
    if changed:
        path.write_text("\n".join(lines) + "\n")
    return changed
