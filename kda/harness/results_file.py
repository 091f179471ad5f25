"""Reading and writing results files: one place that knows their encoding, for the runner that writes them and
the evidence tools (ledger, report, verify, archive) that read them."""
from __future__ import annotations

import gzip
from pathlib import Path


def read_bytes(path: Path) -> bytes:
    """A results file's JSON-lines bytes, decompressed when it is an archived (.gz) one."""
    path = Path(path)
    data = path.read_bytes()
    return gzip.decompress(data) if path.name.endswith(".gz") else data


def read_text(path: Path) -> str:
    return read_bytes(path).decode()


def compress(data: bytes) -> bytes:
    """gzip at level 9 with mtime 0 and no file name: the same bytes in give the same bytes out."""
    return gzip.compress(data, compresslevel=9, mtime=0)
