"""`kda verify`: does each results file's commit hold the sources the file says it measured?

A results file records the commit of its tree (from git, or from KDA_COMMIT on a GPU machine whose copy has no
usable history) and the sha256 of every candidate and task-harness file it ran. A commit passed by hand can be
wrong: on 2026-11-25 one file named the commit of an earlier call and another a sha that exists nowhere. This reads
each recorded file at the recorded commit and compares the hashes. Where they differ or the commit is unknown, it
looks for the commits whose files do match (the measured tree), so a reader learns what was measured without
anyone editing a results file.

Superseded results files are not in the work tree: the ledger entries citing one name the commit that holds it
(kda.evidence.archive). They are read from git at that commit, checked against the sha256 the entries recorded, and
then verified like the others; a reference that does not resolve (no such commit or file, other bytes) is a
failure, as is a reference to a file in the work tree whose bytes are not the recorded ones.
"""
from __future__ import annotations

import hashlib
import json
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from kda.core.errors import KdaError
from kda.core.gitutil import git
from kda.evidence import ledger
from kda.harness import results_file

VERIFIED = "verified"
OTHER_COMMIT = "sources match other commits"
NO_COMMIT = "no commit holds these sources"
NO_RECORD = "no commit or sources recorded"
REF_BROKEN = "ledger reference does not resolve"  # no such file or commit, or other bytes than the recorded sha256
FAILING = (NO_COMMIT, REF_BROKEN)  # what makes `kda verify` exit non-zero


@dataclass
class Verdict:
    path: Path                                          # in the work tree, or where a superseded file was
    commit: str | None                                  # the commit the results file records
    status: str
    differing: list[str] = field(default_factory=list)  # files whose hash differs at the recorded commit
    matches: list[str] = field(default_factory=list)    # commits holding every recorded file, newest first
    held_by: str | None = None                          # a superseded file: the commit its bytes were read from
    entries: list[str] = field(default_factory=list)    # ledger entries whose results_ref names it (superseded)

    def shown(self, root: Path) -> str:
        try:
            rel = self.path.relative_to(root).as_posix()
        except ValueError:
            rel = str(self.path)
        return rel + (f" @ {self.held_by[:10]} (git)" if self.held_by else "")


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

    def blob(self, spec: str) -> bytes | None:
        """The contents of blob `COMMIT:PATH`, or None."""
        kind, body = self._get(spec)
        return body if kind == b"blob" else None

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
    """The verdict on a results file in the work tree."""
    return verify_text(path, results_file.read_text(path), blobs, history)


def verify_text(path: Path, text: str, blobs: Blobs, history: list[str]) -> Verdict:
    try:
        header = json.loads(text.splitlines()[0])
    except (IndexError, json.JSONDecodeError) as e:
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
    """The results files in the work tree of each task (its `results/` folder and the folders beside: sweep, cold)."""
    return [p for d in task_dirs for folder in ("", *results_file.BESIDE)
            for p in results_file.list_files(Path(d) / "results" / folder)]


@dataclass
class Superseded:
    """A results file out of the work tree, named by ledger references: where it was, the commit that holds it, the
    sha256 of its decompressed bytes, the entries citing it."""
    path: Path
    inside: str          # its path inside the repository
    commit: str
    sha256: str
    entries: list[str]


def superseded_files(root: Path, task_dirs: list[Path]) -> tuple[list[Superseded], list[Verdict]]:
    """The superseded results files the ledgers cite (references with a commit), one per (path, commit, bytes), and
    a REF_BROKEN verdict for each reference to a file in the work tree whose bytes are not the recorded ones."""
    root = Path(root).resolve()
    found: dict[tuple, Superseded] = {}
    broken = []
    for d in task_dirs:
        d = Path(d).resolve()
        for e in ledger.read(d):
            ref = e["results_ref"]
            if not ref or not ref.get("sha256"):
                continue
            path = d / ref["path"]
            if ref.get("commit"):
                inside = path.relative_to(root).as_posix()
                key = (inside, ref["commit"], ref["sha256"])
                found.setdefault(key, Superseded(path, inside, ref["commit"], ref["sha256"], [])).entries.append(e["id"])
                continue
            try:
                results_file.ref_bytes(d, ref)
            except KdaError as err:
                broken.append(Verdict(path, None, REF_BROKEN, [f"{e['id']}: {err}"], entries=[e["id"]]))
    return list(found.values()), broken


def verify(root: Path, task_dirs: list[Path], progress=None) -> list[Verdict]:
    """A verdict per results file of the tasks: those in the work tree, then the superseded ones their ledgers cite,
    read from git at the commit each reference names (their sha256 checked first). `progress(i, n, path)` is called
    before each file."""
    files = results_files(task_dirs)
    superseded, verdicts = superseded_files(root, task_dirs)
    history = git("rev-list", "HEAD", cwd=root).split()  # newest first
    blobs = Blobs(root)
    n = len(files) + len(superseded)
    try:
        for i, path in enumerate(files):
            if progress:
                progress(i, n, path)
            verdicts.append(verify_file(path, blobs, history))
        for i, s in enumerate(superseded, len(files)):
            if progress:
                progress(i, n, s.path)
            raw = blobs.blob(f"{s.commit}:{s.inside}")
            if raw is None:
                verdicts.append(Verdict(s.path, None, REF_BROKEN, [f"{', '.join(s.entries)}: commit {s.commit[:12]} "
                                        "holds no such file (or is not in this repository)"], held_by=s.commit,
                                        entries=s.entries))
                continue
            data = results_file.decode(raw, f"{s.inside} at {s.commit[:12]}")
            if hashlib.sha256(data).hexdigest() != s.sha256:
                verdicts.append(Verdict(s.path, None, REF_BROKEN, [f"{', '.join(s.entries)}: other bytes than the "
                                        "recorded sha256"], held_by=s.commit, entries=s.entries))
                continue
            v = verify_text(s.path, data.decode(), blobs, history)
            v.held_by, v.entries = s.commit, s.entries
            verdicts.append(v)
        return verdicts
    finally:
        blobs.close()
