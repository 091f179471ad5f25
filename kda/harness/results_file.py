"""Results files: the one place that knows their encoding, for the runner that writes them and every tool that reads
them (ledger, report, verify, archive, intake, profile, campaign, promote, `kda tasks`, scripts/gpu_tasks.sh).

A results file is `TASK/results/<gpu>.jsonl.gz` (`<gpu>-aa.jsonl.gz` for an A/A run): JSON lines (one of
provenance, one per row with its per-trial samples, one summary), every float rounded to SIGNIFICANT_DIGITS
significant digits, compressed with gzip at level 9 with mtime 0 and no file name, so the same records always give
the same bytes. A plain `TASK/results/<gpu>.jsonl` (how files were written until 2026-11-28) is still read, so old
references and a GPU machine running older code keep working.

Every reference to a results file (a ledger entry's `results_ref`: path, lines, sha256) is to its *decompressed*
bytes. A file no longer in the work tree (superseded by a later run) is read from git: the reference names the
`commit` that holds it, and `ref_bytes` reads `git show COMMIT:PATH` and checks the sha256.
"""
from __future__ import annotations

import gzip
import hashlib
import json
import math
import os
import subprocess
from pathlib import Path
from typing import Iterable

from kda.core.errors import KdaError

SUFFIX = ".jsonl.gz"
PLAIN_SUFFIX = ".jsonl"  # read, never written
# 7 significant digits: a device_us median of 12.34567 us keeps 10 ps, a geomean 1.234567x keeps 1e-6. CUDA events
# resolve about 0.5 us and a row's 95% interval spans a percent or more, so the rounding is far below the timing
# noise. Rounding alone could still move a printed figure: a median of 61.925 us computed as 61.92500000000001
# prints 61.93, the decimal 61.925 read back prints 61.92. So a value keeps more digits (up to its full repr) where 7
# would change how it prints at the precisions the tools print (0 to 3 decimals, and x100 at 0 for shares of copy)
# or move it across a threshold they compare with (KEEP_SIDE_OF). Those are few (values ending on a half at the
# printed digit), and every figure `kda report` prints reads the same from the rounded file.
SIGNIFICANT_DIGITS = 7
PRINTED_DECIMALS = (0, 1, 2, 3)
KEEP_SIDE_OF = (0.85, 1.0, 1.2, 1.5)  # the share of copy bandwidth, CI bounds against 1, fast_p's thresholds
GZIP_MAGIC = b"\x1f\x8b"


def _prints_alike(r: float, v: float) -> bool:
    return (all(f"{r:.{n}f}" == f"{v:.{n}f}" for n in PRINTED_DECIMALS) and f"{100 * r:.0f}" == f"{100 * v:.0f}"
            and all((r > t) == (v > t) and (r < t) == (v < t) for t in KEEP_SIDE_OF))


def round_float(v: float, digits: int = SIGNIFICANT_DIGITS) -> float:
    """`v` to `digits` significant digits, or to as few more as keep every figure printed from it (see above)."""
    if not math.isfinite(v):
        return v
    for d in range(digits, 18):
        r = float(f"{v:.{d}g}")
        if _prints_alike(r, v):
            return r
    return v


def round_floats(value, digits: int = SIGNIFICANT_DIGITS):
    """`value` with every float (in nested dicts and lists) rounded by round_float; NaN and infinities, ints and
    bools unchanged."""
    if isinstance(value, float):
        return round_float(value, digits)
    if isinstance(value, dict):
        return {k: round_floats(v, digits) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [round_floats(v, digits) for v in value]
    return value


def encode(records: Iterable[dict]) -> bytes:
    """The JSON-lines bytes of a results file (its decompressed form: what a ledger reference's sha256 is of)."""
    return b"".join((json.dumps(round_floats(r), sort_keys=False) + "\n").encode() for r in records)


def compress(data: bytes) -> bytes:
    """gzip at level 9 with mtime 0 and no file name: the same bytes in give the same bytes out."""
    return gzip.compress(data, compresslevel=9, mtime=0)


def decode(data: bytes, where: str = "results file") -> bytes:
    """JSON-lines bytes from a file's stored bytes: decompressed when they are gzip, as they are otherwise."""
    if data[:2] != GZIP_MAGIC:
        return data
    try:
        return gzip.decompress(data)
    except (OSError, EOFError) as e:
        raise KdaError(f"{where}: not a readable gzip file ({e})") from None


def write(path: Path, records: Iterable[dict]) -> Path:
    """Write a results file (`path` must end in .jsonl.gz) atomically; a plain .jsonl file of the same run kind
    beside it (the older encoding) is removed, as a new run replaces the file of its GPU. Returns `path`."""
    path = Path(path)
    if not path.name.endswith(SUFFIX):
        raise KdaError(f"{path}: a results file is written as <name>{SUFFIX}")
    data = encode(records)
    packed = compress(data)
    if gzip.decompress(packed) != data:  # never leave a file that does not read back
        raise KdaError(f"{path}: the compressed results do not read back")
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_bytes(packed)
    os.replace(tmp, path)
    plain = path.with_name(stem(path) + PLAIN_SUFFIX)
    if plain.exists():
        plain.unlink()
    return path


# Folders of a task's results/ beside its production files: the generalisation sweep (`kda bench --sweep`) and the
# cold-L2 runs (`kda bench --cold`). Readers of the production files never list them.
BESIDE = ("sweep", "cold")


def file_name(slug: str, aa: bool = False) -> str:
    """`<gpu>.jsonl.gz`, `<gpu>-aa.jsonl.gz` for an A/A run."""
    return f"{slug}-aa{SUFFIX}" if aa else f"{slug}{SUFFIX}"


def is_results_name(name: str) -> bool:
    return name.endswith((SUFFIX, PLAIN_SUFFIX)) and not name.startswith(".")


def stem(path: Path | str) -> str:
    """The run's name without the encoding: `h100` for results/h100.jsonl.gz or results/h100.jsonl."""
    name = Path(path).name
    for suffix in (SUFFIX, PLAIN_SUFFIX):
        if name.endswith(suffix):
            return name[: -len(suffix)]
    return Path(name).stem


def list_files(results_dir: Path) -> list[Path]:
    """The results files directly in a task's `results/` folder (either encoding), sorted by name. Two files of one
    run (h100.jsonl and h100.jsonl.gz) are an error: which one holds the run would be a guess."""
    results_dir = Path(results_dir)
    if not results_dir.is_dir():
        return []
    files = sorted(p for p in results_dir.iterdir() if p.is_file() and is_results_name(p.name))
    seen: dict[str, Path] = {}
    for p in files:
        if stem(p) in seen:
            raise KdaError(f"{results_dir}: two results files of one run, {seen[stem(p)].name} and {p.name}; "
                           "keep the newer one (git rm the other)")
        seen[stem(p)] = p
    return files


def find(results_dir: Path, run: str) -> Path | None:
    """The results file of run `run` (`h100`, `h100-aa`) in `results_dir`, either encoding, or None."""
    return next((p for p in list_files(results_dir) if stem(p) == run), None)


def read_bytes(path: Path) -> bytes:
    """A results file's JSON-lines bytes (decompressed)."""
    path = Path(path)
    return decode(path.read_bytes(), str(path))


def read_text(path: Path) -> str:
    return read_bytes(path).decode()


def parse(text: str, where: str) -> list[dict]:
    """The records of results-file text; an error names `where` and the line."""
    recs = []
    for i, line in enumerate(text.splitlines(), 1):
        if line.strip():
            try:
                recs.append(json.loads(line))
            except json.JSONDecodeError as e:
                raise KdaError(f"{where}:{i}: not valid JSON: {e}") from None
    return recs


def read_records(path: Path) -> list[dict]:
    return parse(read_text(path), str(path))


# ---- files reached through git -------------------------------------------------------------------------------


def git_blob(repo: Path, spec: str) -> bytes | None:
    """The stored bytes of `git cat-file blob SPEC` (`COMMIT:PATH`) in `repo`, or None when there is no such blob."""
    try:
        p = subprocess.run(["git", "cat-file", "blob", spec], cwd=repo, capture_output=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise KdaError(f"git cat-file blob {spec} (in {repo}): {e}") from None
    return p.stdout if p.returncode == 0 else None


def repo_path(task_dir: Path, rel: str) -> tuple[Path, str]:
    """(repository top level, path inside the repository) of `rel`, a path relative to the task folder."""
    task_dir = Path(task_dir).resolve()
    try:
        top = subprocess.run(["git", "rev-parse", "--show-toplevel"], cwd=task_dir, capture_output=True, text=True,
                             timeout=60).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        top = ""
    if not top:
        raise KdaError(f"{task_dir}: not inside a git work tree, so a file held by a commit cannot be read")
    top_path = Path(top).resolve()
    return top_path, (task_dir / rel).resolve().relative_to(top_path).as_posix()


def ref_bytes(task_dir: Path, ref: dict) -> bytes:
    """The decompressed bytes a ledger `results_ref` cites: from `git show COMMIT:PATH` when it names a commit (a
    superseded file), else from the file in the task folder. Raises, naming the reference, when they cannot be read
    or their sha256 is not the recorded one."""
    rel, commit = ref["path"], ref.get("commit")
    if commit:
        top, inside = repo_path(task_dir, rel)
        raw = git_blob(top, f"{commit}:{inside}")
        if raw is None:
            raise KdaError(f"results_ref {rel} at commit {commit[:12]}: no such file in that commit (or no such "
                           "commit in this repository)")
        where = f"{inside} at {commit[:12]}"
    else:
        path = Path(task_dir) / rel
        if not path.is_file():
            raise KdaError(f"results_ref {rel}: no such file in {task_dir} and no commit recorded to read it from")
        raw, where = path.read_bytes(), str(path)
    data = decode(raw, where)
    if ref.get("sha256") and hashlib.sha256(data).hexdigest() != ref["sha256"]:
        raise KdaError(f"results_ref {rel}{' at ' + commit[:12] if commit else ''}: sha256 "
                       f"{hashlib.sha256(data).hexdigest()[:16]}... is not the recorded {ref['sha256'][:16]}...")
    return data
