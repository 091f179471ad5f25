"""A task's baseline/ folder: a read-only copy of the verified upstream files it pins (issue 38).

The code a candidate is measured against should be where the agent and the reviewer look, not in a cache folder of
another checkout. `kda vendor TASK` (which the launcher runs in each worktree) copies every file it verified into
`<task>/baseline/<package>-<version>/<path in the wheel>`, the later release beside it where the task pins one.
The copies are ignored by git (never committed: upstream code is fetched at run time) and read-only, and a copy
that no longer matches its pin is replaced, a file the pin no longer names removed. Nothing imports them: the
harness loads upstream from the cache through its guarded importer.
"""
from __future__ import annotations

import os
import shutil
import stat
from pathlib import Path

from kda.vendor.fetch import VendorInfo, sha256_file

READ_ONLY = stat.S_IRUSR | stat.S_IRGRP | stat.S_IROTH


def release_dir(task_dir: Path, info: VendorInfo) -> Path:
    return Path(task_dir) / "baseline" / f"{info.package}-{info.version}"


def mirror(task_dir: Path, info: VendorInfo) -> Path:
    """Copy the release's verified files into the task's baseline/; returns the release's folder there."""
    dest = release_dir(task_dir, info)
    for path, digest in info.files.items():
        target = dest / path
        if target.is_file() and sha256_file(target) == digest:
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        if target.exists():
            os.chmod(target, stat.S_IWUSR | READ_ONLY)  # a stale read-only copy: writable to be replaced
            target.unlink()
        shutil.copyfile(info.root / path, target)
        os.chmod(target, READ_ONLY)
    wanted = {dest / p for p in info.files}
    for old in [p for p in dest.rglob("*") if p.is_file() and p not in wanted]:
        os.chmod(old, stat.S_IWUSR | READ_ONLY)
        old.unlink()
    for folder in sorted((p for p in dest.rglob("*") if p.is_dir()), key=lambda p: -len(p.parts)):
        if not any(folder.iterdir()):
            folder.rmdir()
    return dest
