"""`kda verify`: does each results file's commit hold the sources the file says it measured?

A results file records the commit of its tree (from git, or from KDA_COMMIT on a GPU machine whose copy has no
usable history) and the sha256 of every candidate and task-harness file it ran. A commit passed by hand can be
wrong: on 2026-11-25 one file named the commit of an earlier call and another a sha that exists nowhere. This reads
each recorded file at the recorded commit and compares the hashes. Where they differ or the commit is unknown, it
looks for the commits whose files do match (the measured tree), so a reader learns what was measured without
anyone editing a results file.
"""
from __future__ import annotations

import hashlib
import json
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from kda.evidence.archive import SUFFIX, read_text
from kda.core.errors import KdaError
from kda.core.gitutil import git

VERIFIED = "verified"
OTHER_COMMIT = "sources match other commits"
NO_COMMIT = "no commit holds these sources"
NO_RECORD = "no commit or sources recorded"


@dataclass
class Verdict:
    path: Path
    commit: str | None
    status: str
    differing: list[str] = field(default_factory=list)  # files whose hash differs at the recorded commit
    matches: list[str] = field(default_factory=list)    # commits holding every recorded file, newest first


class Blobs:
    """sha256 of files at commits, through one `git cat-file --batch` process (thousands of lookups stay fast)."""

    def __init__(self, root: Path):
        self.proc = subprocess.Popen(["git", "cat-file", "--batch"], cwd=root, stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE)
        self.cache: dict[str, str | None] = {}

    def _get(self, spec: str) -> tuple[bytes, bytes]:
        """(object type, contents) of a `git cat-file` object spec; type b"missing" when there is none."""
        self.proc.stdin.write(spec.encode() + b"\n")
        self.proc.stdin.flush()
        header = self.proc.stdout.readline().split()
        if len(header) < 3:
            return b"missing", b""
        return header[1], self.proc.stdout.read(int(header[2]) + 1)[:-1]

    def sha256(self, commit: str, path: str) -> str | None:
        key = f"{commit}:{path}"
        if key not in self.cache:
            kind, body = self._get(key)  # missing: no such commit, or no such file in it
            self.cache[key] = hashlib.sha256(body).hexdigest() if kind == b"blob" else None
        return self.cache[key]

    def is_commit(self, ref: str) -> bool:
        return self._get(f"{ref}^{{commit}}")[0] == b"commit"

    def close(self) -> None:
        self.proc.stdin.close()
        self.proc.wait(timeout=30)


def recorded_files(header: dict) -> dict[str, str]:
    """Repository-relative path -> sha256 of every candidate and task-harness file a results header names (the
    baseline's files are the pinned wheel's, checked by `kda vendor`)."""
    sources = header.get("sources") or {}
    # an A/A run's "candidate" is a note (the baseline timed against itself), not files
    return {k: v for part in ("candidate", "harness") if isinstance(sources.get(part), dict)
            for k, v in sources[part].items()}


def verify_file(path: Path, blobs: Blobs, history: list[str]) -> Verdict:
    try:
        header = json.loads(read_text(path).splitlines()[0])
    except (OSError, IndexError, json.JSONDecodeError) as e:
        raise KdaError(f"{path}: line 1 is not a results header ({e})") from None
    commit, files = header.get("commit"), recorded_files(header)
    if not files:
        return Verdict(path, commit, NO_RECORD)
    if commit and blobs.is_commit(commit):
        differing = sorted(p for p, h in files.items() if blobs.sha256(commit, p) != h)
        if not differing:
            return Verdict(path, commit, VERIFIED)
    else:
        differing = ["(the commit is not in this repository)"]
    matches = [c for c in history if all(blobs.sha256(c, p) == h for p, h in files.items())]
    return Verdict(path, commit, OTHER_COMMIT if matches else NO_COMMIT, differing, matches)


def results_files(task_dirs: list[Path]) -> list[Path]:
    out = []
    for d in task_dirs:
        hist = d / "results" / "history"
        out += sorted((d / "results").glob("*.jsonl")) + sorted([*hist.glob("*.jsonl"), *hist.glob("*" + SUFFIX)])
    return out


def verify(root: Path, task_dirs: list[Path], progress=None) -> list[Verdict]:
    """A verdict per results file of the tasks; `progress(i, n, path)` is called before each file."""
    files = results_files(task_dirs)
    history = git("rev-list", "HEAD", cwd=root).split()  # newest first
    blobs = Blobs(root)
    try:
        verdicts = []
        for i, path in enumerate(files):
            if progress:
                progress(i, len(files), path)
            verdicts.append(verify_file(path, blobs, history))
        return verdicts
    finally:
        blobs.close()
