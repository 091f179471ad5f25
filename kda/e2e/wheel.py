"""A block's claims about the wheel, checked: every file it follows is the pinned one (sha256), and every line it
says a call mirrors holds that text there. The files come out of the cached wheel (`kda vendor` fetches it)."""
from __future__ import annotations

from kda.e2e.block import BlockDef, Mirror
from kda.vendor.fetch import pinned_wheel_files


def mirror_problems(block: BlockDef, *, allow_download: bool = True) -> list[str]:
    """One line per claim that does not hold (empty: every claim holds)."""
    w = block.data["wheel"]
    files = pinned_wheel_files(w["package"], w["version"], block.wheel_files, block.label,
                               allow_download=allow_download)
    lines = {p: f.read_text().splitlines() for p, f in files.items()}
    claims = [("block.follows", block.follows)] + [(f"site {s.name!r}", m) for s in block.sites for m in s.mirrors]
    return [f"{block.label} {who}: {problem}" for who, m in claims
            if (problem := _problem(m, lines[m.file])) is not None]


def _problem(m: Mirror, lines: list[str]) -> str | None:
    if m.line > len(lines):
        return f"{m}: the file has {len(lines)} lines"
    if m.text not in lines[m.line - 1]:
        near = [i + 1 for i, text in enumerate(lines) if m.text in text]
        return (f"{m}: {m.text!r} is not on that line" +
                (f" (found on line {', '.join(map(str, near[:5]))})" if near else " nor anywhere in the file"))
    return None
