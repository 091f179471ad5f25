"""Merge recorder logs into a catalog of captured call signatures (diffusion/shapes/captured.jsonl).

The catalog holds one JSON line per unique (function, tensors, scalars), sorted by function and then by the
signature's JSON text, with provenance: the models that produced it, first/last time seen, and the log
files (by name) it came from. Merging is a set union, so re-ingesting a log changes nothing.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from kda.errors import KdaError
from kda.schema import Field, ListOf, MapOf, positive, validate

DEFAULT_CATALOG = "diffusion/shapes/captured.jsonl"


def _target(v: str) -> str | None:
    return None if ":" in v and all(v.partition(":")[::2]) else f"expected 'module.path:function', got {v!r}"


def _non_negative_ints(v: list[int]) -> str | None:
    return None if all(n >= 0 for n in v) else f"expected integers >= 0, got {v!r}"


TENSOR_LOG = {
    "shape": Field(ListOf(int), check=_non_negative_ints),
    "dtype": Field(str),
    "stride": Field(ListOf(int)),
    "storage_offset": Field(int, check=lambda v: None if v >= 0 else f"expected >= 0, got {v!r}"),
}
SCALAR = (int, float, bool, str, type(None))

LOG_LINE = {
    "function": Field(str, check=_target),
    "model": Field(str),
    "tensors": Field(MapOf((TENSOR_LOG, type(None)))),
    "scalars": Field(MapOf(SCALAR)),
    "time_utc": Field(str),
    "pid": Field(int),
}

CATALOG_LINE = {
    "function": Field(str, check=_target),
    "tensors": Field(MapOf((TENSOR_LOG, type(None)))),
    "scalars": Field(MapOf(SCALAR)),
    "models": Field(ListOf(str)),
    "first_seen": Field(str),
    "last_seen": Field(str),
    "logs": Field(ListOf(str), doc="names of the log files the signature came from"),
    "source_logs": Field(int, check=positive),
    "source": Field(str, doc="'captured: <log file names>'"),
}


def read_jsonl(path: Path, spec: dict) -> list[dict]:
    """Every non-blank line validated against spec; errors name path:line and the key."""
    try:
        text = path.read_text()
    except OSError as e:
        raise KdaError(f"{path}: cannot read: {e}") from None
    out = []
    for n, raw in enumerate(text.splitlines(), 1):
        if not raw.strip():
            continue
        try:
            data = json.loads(raw)
        except ValueError as e:
            raise KdaError(f"{path}:{n}: not valid JSON: {e}") from None
        out.append(validate(data, spec, f"{path}:{n}"))
    return out


def signature(entry: dict) -> str:
    return json.dumps({"function": entry["function"], "tensors": entry["tensors"], "scalars": entry["scalars"]},
                      sort_keys=True)


def _finish(entry: dict) -> dict:
    entry["models"] = sorted(set(entry["models"]))
    entry["logs"] = sorted(set(entry["logs"]))
    entry["source_logs"] = len(entry["logs"])
    entry["source"] = "captured: " + ", ".join(entry["logs"])
    return entry


@dataclass
class Summary:
    new: dict[str, int] = field(default_factory=dict)
    known: dict[str, int] = field(default_factory=dict)
    changed: bool = False

    def text(self, catalog: Path, total: int) -> str:
        lines = [f"{fn}: {self.new.get(fn, 0)} new, {self.known.get(fn, 0)} already known"
                 for fn in sorted(set(self.new) | set(self.known))]
        lines.append(f"{catalog}: {total} signature(s)" + ("" if self.changed else " (unchanged)"))
        return "\n".join(lines)


def ingest(logs: list[Path], catalog: Path) -> tuple[Summary, int]:
    """Validate every log (all before writing anything), merge them into catalog; returns (summary, total)."""
    parsed = [(Path(p), read_jsonl(Path(p), LOG_LINE)) for p in logs]
    before_text = catalog.read_text() if catalog.is_file() else ""
    entries = {signature(e): e for e in (read_jsonl(catalog, CATALOG_LINE) if before_text else [])}
    known_before = set(entries)
    summary = Summary()
    counted: set[str] = set()
    for path, lines in parsed:
        for line in lines:
            key = signature(line)
            if key not in counted:
                counted.add(key)
                bucket = summary.known if key in known_before else summary.new
                bucket[line["function"]] = bucket.get(line["function"], 0) + 1
            e = entries.get(key)
            if e is None:
                e = entries[key] = {"function": line["function"], "tensors": line["tensors"],
                                    "scalars": line["scalars"], "models": [], "first_seen": line["time_utc"],
                                    "last_seen": line["time_utc"], "logs": []}
            e["models"] = [*e["models"], line["model"]]
            e["logs"] = [*e["logs"], path.name]
            e["first_seen"] = min(e["first_seen"], line["time_utc"])
            e["last_seen"] = max(e["last_seen"], line["time_utc"])
            _finish(e)
    ordered = sorted(entries.values(), key=lambda e: (e["function"], signature(e)))
    text = "".join(json.dumps({k: e[k] for k in CATALOG_LINE}) + "\n" for e in ordered)
    if text != before_text:
        catalog.parent.mkdir(parents=True, exist_ok=True)
        catalog.write_text(text)
        summary.changed = True
    return summary, len(ordered)
