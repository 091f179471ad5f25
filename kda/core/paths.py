"""Where things live: repository root, campaigns, task folders and the ignored cache."""
from __future__ import annotations

import os
from pathlib import Path

from kda.core.errors import KdaError

CAMPAIGNS = ("diffusion", "llm")


def repo_root() -> Path:
    """The checkout that holds the campaigns: KDA_ROOT, else the nearest parent with pyproject.toml and diffusion/."""
    env = os.environ.get("KDA_ROOT")
    if env:
        return Path(env).resolve()
    for start in (Path.cwd(), Path(__file__).resolve().parent):
        for cand in (start, *start.parents):
            if (cand / "pyproject.toml").is_file() and (cand / "diffusion").is_dir():
                return cand
    raise KdaError("cannot find the kda repository root (a folder with pyproject.toml and diffusion/); set KDA_ROOT")


def cache_dir() -> Path:
    """Ignored folder for downloaded wheels and vendored upstream files (KDA_CACHE overrides)."""
    env = os.environ.get("KDA_CACHE")
    path = Path(env).resolve() if env else repo_root() / ".kda-cache"
    path.mkdir(parents=True, exist_ok=True)
    return path


def all_task_dirs() -> list[Path]:
    root = repo_root()
    found = []
    for campaign in CAMPAIGNS:
        kernels = root / campaign / "kernels"
        if kernels.is_dir():
            found += sorted(p.parent for p in kernels.glob("*/config.toml"))
    return found


def resolve_task(ref: str) -> Path:
    """A task is named by its folder path or by its bare name (unique across campaigns)."""
    path = Path(ref)
    if (path / "config.toml").is_file():
        return path.resolve()
    matches = [p for p in all_task_dirs() if p.name == ref]
    if len(matches) == 1:
        return matches[0]
    if not matches:
        names = ", ".join(sorted(p.name for p in all_task_dirs())) or "none"
        raise KdaError(f"no task named {ref!r} (a folder with config.toml); known tasks: {names}")
    raise KdaError(f"task name {ref!r} is ambiguous: {', '.join(map(str, matches))}; pass the folder path")
