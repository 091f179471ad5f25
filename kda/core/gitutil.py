"""Thin git helpers for the agent-run tooling: one place that runs git and turns failures into readable errors."""
from __future__ import annotations

import subprocess
from pathlib import Path

from kda.core.errors import KdaError


def git(*args: str, cwd: Path | str, check: bool = True, input: str | None = None) -> str:
    """stdout of `git ARGS` in cwd (stripped of the final newline); a failure names the command and git's message."""
    try:
        p = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, input=input, timeout=300)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise KdaError(f"git {' '.join(args)} (in {cwd}): {e}") from None
    if check and p.returncode != 0:
        raise KdaError(f"git {' '.join(args)} (in {cwd}) failed: {(p.stderr or p.stdout).strip()}")
    return p.stdout.rstrip("\n")


def ok(*args: str, cwd: Path | str) -> bool:
    """True when `git ARGS` exits 0 (for yes/no questions such as `merge-base --is-ancestor`)."""
    try:
        return subprocess.run(["git", *args], cwd=cwd, capture_output=True, timeout=120).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def toplevel(path: Path | str) -> Path:
    return Path(git("rev-parse", "--show-toplevel", cwd=path))


def commit_of(ref: str, cwd: Path | str) -> str:
    out = git("rev-parse", "--verify", "-q", f"{ref}^{{commit}}", cwd=cwd, check=False)
    if len(out) != 40:
        raise KdaError(f"{ref!r} does not name a commit in {cwd}")
    return out


def changed_files(cwd: Path | str, base: str) -> list[str]:
    """Files that differ between `base` and the work tree: committed, staged, unstaged and untracked (not ignored)."""
    tracked = git("diff", "--name-only", base, cwd=cwd).splitlines()
    untracked = git("ls-files", "--others", "--exclude-standard", cwd=cwd).splitlines()
    return sorted(set(f for f in tracked + untracked if f))


def diff_with_untracked(cwd: Path | str, base: str) -> str:
    """`git diff BASE` of the work tree plus new-file diffs of untracked files (a plain diff leaves those out)."""
    out = [git("diff", base, cwd=cwd)]
    for f in git("ls-files", "--others", "--exclude-standard", cwd=cwd).splitlines():
        if f:
            p = subprocess.run(["git", "diff", "--no-index", "--", "/dev/null", f], cwd=cwd, capture_output=True,
                               text=True, timeout=60)
            out.append(p.stdout.rstrip("\n"))
    return "\n".join(x for x in out if x) + "\n"


def worktrees(cwd: Path | str) -> list[dict]:
    """`git worktree list --porcelain` as dicts: path, head, branch (refs/heads/... stripped) or None, prunable."""
    items, cur = [], {}
    for line in git("worktree", "list", "--porcelain", cwd=cwd).splitlines() + [""]:
        if not line:
            if cur:
                items.append(cur)
            cur = {}
            continue
        key, _, value = line.partition(" ")
        if key == "worktree":
            cur = {"path": value, "head": None, "branch": None, "prunable": False}
        elif key == "HEAD":
            cur["head"] = value
        elif key == "branch":
            cur["branch"] = value.removeprefix("refs/heads/")
        elif key == "prunable":
            cur["prunable"] = True
    return items
