"""Shared by the agent-run tests: a throwaway clone of this repository, and the launcher run inside it.

The clone gets the working tree's versions of the files the launcher reads (they may not be committed yet), committed
in the clone only. The `kda` the launcher and the Stop hook call is a wrapper around *this* checkout's package, so
the code under test is what runs, whatever `kda` is on PATH.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TASK_PATH = "diffusion/kernels/fuse_scale_shift"
LAUNCHER = "scripts/launch_kernels/k01_fuse_scale_shift.sh"
OVERLAY = ("scripts/launch_kernels", "templates/launch_task.sh.j2", f"{TASK_PATH}/config.toml")
GIT_ID = ["-c", "user.name=kda-test", "-c", "user.email=kda-test@example.invalid"]


def git(repo: Path, *args: str, check: bool = True) -> str:
    p = subprocess.run(["git", *GIT_ID, *args], cwd=repo, capture_output=True, text=True)
    if check and p.returncode != 0:
        raise AssertionError(f"git {' '.join(args)} failed in {repo}:\n{p.stdout}{p.stderr}")
    return p.stdout.strip()


def kda_wrapper(tmp: Path) -> Path:
    """An executable `kda` that imports this checkout's package (never the clone's or the worktree's copy)."""
    path = tmp / "bin" / "kda"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"#!/bin/sh\nPYTHONPATH={ROOT} exec {sys.executable} -c "
                    "'import sys; sys.path.pop(0); from kda.cli import main; sys.exit(main())' \"$@\"\n")
    path.chmod(0o755)
    return path


def make_clone(tmp: Path) -> Path:
    repo = tmp / "repo"
    subprocess.run(["git", "clone", "-q", str(ROOT), str(repo)], check=True, capture_output=True)
    # The tests expect the clone on `main`, as a checkout of main is; a worktree on another branch clones that branch.
    git(repo, "checkout", "-q", "-B", "main")
    for rel in OVERLAY:
        src, dst = ROOT / rel, repo / rel
        if src.is_dir():
            shutil.rmtree(dst, ignore_errors=True)
            shutil.copytree(src, dst)
        else:
            dst.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dst)
    # The campaign's own history (ledger, promotions) would leak into the tests' expectations: start them blank.
    task_docs = repo / "diffusion" / "kernels" / "fuse_scale_shift" / "docs"
    for name in ("ledger.jsonl", "ledger.md"):
        (task_docs / name).unlink(missing_ok=True)
    shutil.rmtree(task_docs / "review", ignore_errors=True)
    git(repo, "add", "-A")
    if git(repo, "status", "--porcelain"):
        git(repo, "commit", "-q", "-m", "test overlay: launcher files from the working tree, empty ledger")
    return repo


def clean_env(**extra: str) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("KDA_") and k not in ("IS_SANDBOX",)}
    env.update({"CUDA_VISIBLE_DEVICES": "", "COLUMNS": "200"})
    env.update(extra)
    return env


def launch(repo: Path, tmp: Path, **env: str) -> subprocess.CompletedProcess:
    base = {"KDA_BIN": str(kda_wrapper(tmp)), "KDA_SKIP_VENDOR": "1", "KDA_WORKTREE_ROOT": str(tmp / "worktrees"),
            "KDA_CACHE": str(tmp / "cache")}
    return subprocess.run(["bash", str(repo / LAUNCHER)], cwd=repo, capture_output=True, text=True, timeout=300,
                          env=clean_env(**{**base, **env}))


def worktree_of(tmp: Path, run_id: str) -> Path:
    return tmp / "worktrees" / f"fuse_scale_shift-{run_id}"
