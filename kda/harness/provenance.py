"""Provenance of a results file: code, sources of every arm, upstream release, machine, clocks, command."""
from __future__ import annotations

import hashlib
import platform
import shutil
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path

from kda.core.paths import repo_root

SMI_FIELDS = "name,uuid,driver_version,clocks.sm,clocks.mem,clocks.max.sm,temperature.gpu,power.draw,power.limit"


def git_state() -> dict:
    """The commit of the tree. A copy without git history (the GPU machine gets one) passes it in KDA_COMMIT."""
    import os

    env = os.environ.get("KDA_COMMIT")
    if env:
        return {"commit": env, "dirty": os.environ.get("KDA_DIRTY", "0") == "1", "commit_source": "KDA_COMMIT"}

    def git(*args):
        try:
            return subprocess.run(["git", *args], cwd=repo_root(), capture_output=True, text=True, timeout=10).stdout.strip()
        except (OSError, subprocess.TimeoutExpired):
            return ""
    commit = git("rev-parse", "--verify", "-q", "HEAD")
    if not (len(commit) == 40 and all(c in "0123456789abcdef" for c in commit)):
        return {"commit": None, "dirty": None, "commit_source": "unknown (no git repository)"}
    dirty = git("status", "--porcelain", "--untracked-files=no")
    return {"commit": commit, "dirty": bool(dirty), "commit_source": "git"}


def nvidia_smi() -> dict | None:
    if not shutil.which("nvidia-smi"):
        return None
    try:
        line = subprocess.run(["nvidia-smi", f"--query-gpu={SMI_FIELDS}", "--format=csv,noheader,nounits", "-i", "0"],
                              capture_output=True, text=True, timeout=20).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        return None
    values = [v.strip() for v in line.split(",")]
    return dict(zip(SMI_FIELDS.split(","), values)) if len(values) == len(SMI_FIELDS.split(",")) else {"raw": line}


def sha256_files(paths: list[Path], root: Path) -> dict[str, str]:
    out = {}
    for p in paths:
        try:
            key = str(p.resolve().relative_to(root))
        except ValueError:
            key = str(p)
        out[key] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


def software() -> dict:
    import torch
    import triton

    return {"python": platform.python_version(), "torch": torch.__version__, "cuda": torch.version.cuda,
            "triton": triton.__version__, "platform": platform.platform()}


def now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def shown_path(arg: str) -> str:
    """An absolute path as results files record it: relative to the repository, else its name alone (no machine's
    layout in a committed file); any other argument as it is."""
    path = Path(arg)
    if not path.is_absolute():
        return arg
    try:
        return str(path.relative_to(repo_root()))
    except ValueError:
        return path.name


def command_line() -> str:
    args = [shown_path(a) for a in sys.argv[1:]]
    return " ".join(["kda", *args]) if Path(sys.argv[0]).name in ("kda", "__main__.py") else \
        " ".join([shown_path(sys.argv[0]), *args])


# How timing.device_us stamps a sample's start, written into every results file's provenance as `device_us_start`.
DEVICE_US_START = "lead call"
# Commits whose results files used the lead-call device_us protocol before provenance named it (device_us_start).
LEAD_CALL_BEFORE_FIELD = {"62825fac493826deb14c7f0ebd93d91715af1b23"}


def device_us_start(prov: dict) -> str:
    """How a results file's device_us samples stamped their start (docs/harness.md): behind a lead call, or on an
    idle GPU (every file written before 2026-11-25's change)."""
    if prov.get("device_us_start"):
        return prov["device_us_start"]
    return "lead call" if prov.get("commit") in LEAD_CALL_BEFORE_FIELD else "idle GPU"


# ---- the candidate's source hash -------------------------------------------------------------------------------

# The solution files that count as the candidate's source (the same suffixes Task.solution_files keeps).
SOURCE_SUFFIXES = (".py", ".cu", ".cuh", ".cpp", ".h")


def hash_pairs(pairs: dict[str, str]) -> str:
    """sha256 over 'relative path NUL file sha256' lines, sorted by path."""
    h = hashlib.sha256()
    for rel in sorted(pairs):
        h.update(f"{rel}\0{pairs[rel]}\n".encode())
    return h.hexdigest()


def solution_hash(task_dir: Path) -> str:
    sol = Path(task_dir) / "solution"
    files = sorted(p for p in sol.rglob("*") if p.is_file() and p.suffix in SOURCE_SUFFIXES) if sol.is_dir() else []
    return hash_pairs({p.relative_to(sol).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest() for p in files})


def _solution_rel(key: str) -> str:
    parts = Path(key).parts
    if "solution" in parts:
        i = len(parts) - 1 - parts[::-1].index("solution")
        return "/".join(parts[i + 1:])
    return Path(key).name  # a --candidate override file


def hash_of_provenance(prov: dict) -> str:
    """The same hash as solution_hash, from the per-file hashes a results file's provenance recorded."""
    cand = (prov.get("sources") or {}).get("candidate")
    if isinstance(cand, dict):
        return hash_pairs({_solution_rel(k): v for k, v in cand.items()})
    base = (prov.get("sources") or {}).get("baseline") or {}
    return hash_pairs({f"baseline:{k}": v for k, v in base.items()})  # A/A: the baseline timed against itself
