"""Superseded results files: `TASK/results/history/<name>.jsonl.gz`.

A results file keeps every timing sample of every arm, so one file of a large task is most of a megabyte, and the
history of superseded files was half of the tracked tree (which travels to the GPU machine under a size limit).
History files are kept gzip-compressed, written deterministically (no name, no time in the gzip header), and every
reference to one is to its *decompressed* bytes: a ledger entry's `results_ref` (path, lines, sha256) stays valid
when its file is archived, only the path changes.

`archive` moves a results file into the history and points the ledger entries that cite it at the new path, in
one step, so no reference is left behind (they were moved by hand before, and three pointed at the wrong file).
"""
from __future__ import annotations

import gzip
import hashlib
import json
from pathlib import Path

from kda.core.errors import KdaError
from kda.evidence.ledger import ledger_path
from kda.harness.results_file import compress, read_bytes, read_text  # noqa: F401 (re-exported)

SUFFIX = ".jsonl.gz"


def default_name(path: Path, label: str | None = None) -> str:
    """`<gpu>[-aa][-<label>]-<commit7>`, the history's naming, from the file's name and its provenance line."""
    header = json.loads(read_text(path).splitlines()[0])
    commit = (header.get("commit") or "").strip()
    if len(commit) < 7:
        raise KdaError(f"{path}: line 1 names no commit; give the history name explicitly")
    stem = Path(path).name.split(".")[0]  # h100, h100-aa
    parts = [stem] + ([label] if label else []) + [commit[:7]]
    return "-".join(parts)


def archive(task_dir: Path, src: Path, name: str | None = None, label: str | None = None) -> Path:
    """Move results file `src` (under TASK/results, plain or already archived) to results/history/<name>.jsonl.gz
    (default: default_name, or its own name for a history file) and rewrite the ledger references that cite it
    (same path and same bytes) to the new path. Returns the new path. Refuses to overwrite a different history
    file of that name."""
    task_dir, src = Path(task_dir).resolve(), Path(src).resolve()
    results = task_dir / "results"
    if not src.is_file():
        raise KdaError(f"{src}: no such results file")
    if results not in src.parents:
        raise KdaError(f"{src}: not under {results}")
    data = read_bytes(src)
    if name is None and src.parent == results / "history":
        name = src.name.split(".")[0]  # a history file packed in place keeps its name
    name = name or default_name(src, label)
    dst = results / "history" / (name + SUFFIX)
    if dst == src:
        return dst
    if dst.exists() and read_bytes(dst) != data:
        raise KdaError(f"{dst}: exists and holds another run; choose another name")
    dst.parent.mkdir(parents=True, exist_ok=True)
    packed = compress(data)
    if gzip.decompress(packed) != data:  # never delete what could not be read back
        raise KdaError(f"{src}: the compressed copy does not read back")
    dst.write_bytes(packed)
    old_rel, new_rel = src.relative_to(task_dir).as_posix(), dst.relative_to(task_dir).as_posix()
    repoint(task_dir, old_rel, new_rel, hashlib.sha256(data).hexdigest())
    src.unlink()
    return dst


def repoint(task_dir: Path, old_rel: str, new_rel: str, sha256: str) -> int:
    """Point every ledger entry whose results_ref is (old_rel, sha256) at new_rel; other lines keep their bytes.
    Returns how many entries changed."""
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
            lines[i] = json.dumps(e, sort_keys=False)
            changed += 1
    if changed:
        path.write_text("\n".join(lines) + "\n")
    return changed
