"""Merge recorder logs into the shape catalog's captured signatures (diffusion/shapes/captured.toml).

The file is TOML like the catalog's model files: one `[[captured]]` entry per unique (function, tensors,
scalars), sorted by function and then by the signature's JSON text, with provenance: the models that produced it,
first/last time seen, and the log files (by name) it came from. TOML has no null, so arguments passed as None
are listed in `nulls` ("tensors.bias", "scalars.eps") and restored on reading. Merging is a set union, so
re-ingesting a log changes nothing.
"""
from __future__ import annotations

import json
import math
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from kda.core.errors import KdaError
from kda.core.schema import Field, ListOf, MapOf, positive, validate

DEFAULT_CATALOG = "diffusion/shapes/captured.toml"


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
    entries = {signature(e): e for e in (read_captured(catalog) if before_text else [])}
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
    text = render_captured(ordered)
    if text != before_text:
        catalog.parent.mkdir(parents=True, exist_ok=True)
        catalog.write_text(text)
        summary.changed = True
    return summary, len(ordered)


# ---------------------------------------------------------------------------------------------------------------
# captured.toml


HEADER = ("# Captured call signatures: written by `kda shapes ingest` (see README.md); do not edit by hand.\n"
          "# Arguments passed as None are listed in `nulls` (TOML has no null).\n")


def _toml_value(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return ("nan" if math.isnan(v) else ("inf" if v > 0 else "-inf")) if not math.isfinite(v) else repr(v)
    if isinstance(v, str):
        return json.dumps(v)  # a JSON string is a valid TOML basic string
    if isinstance(v, list):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{ " + ", ".join(f"{json.dumps(k)} = {_toml_value(x)}" for k, x in v.items()) + " }" if v else "{}"
    raise KdaError(f"cannot write {v!r} to TOML")


def render_captured(entries: list[dict]) -> str:
    out = [HEADER]
    for e in entries:
        nulls = [f"{part}.{k}" for part in ("tensors", "scalars") for k, v in e[part].items() if v is None]
        out.append("\n[[captured]]\n")
        for key in CATALOG_LINE:
            value = e[key]
            if key in ("tensors", "scalars"):
                value = {k: v for k, v in value.items() if v is not None}
            out.append(f"{key} = {_toml_value(value)}\n")
        out.append(f"nulls = {_toml_value(nulls)}\n")
    return "".join(out)


def read_captured(path: Path) -> list[dict]:
    """Every [[captured]] entry validated (errors name the file and the entry); None restored from `nulls`."""
    try:
        raw = tomllib.loads(path.read_text())
    except OSError as e:
        raise KdaError(f"{path}: cannot read: {e}") from None
    except tomllib.TOMLDecodeError as e:
        raise KdaError(f"{path}: not valid TOML: {e}") from None
    unknown = sorted(set(raw) - {"captured"})
    if unknown:
        raise KdaError(f"{path}: unknown key {unknown[0]!r} (known keys here: captured)")
    out = []
    for i, item in enumerate(raw.get("captured", [])):
        where = f"{path} captured[{i}]"
        if not isinstance(item, dict):
            raise KdaError(f"{where}: must be a table")
        item = dict(item)
        nulls = item.pop("nulls", [])
        if not isinstance(nulls, list) or not all(isinstance(n, str) for n in nulls):
            raise KdaError(f"{where}: key 'nulls' must be a list of strings")
        for n in nulls:
            part, _, name = n.partition(".")
            if part not in ("tensors", "scalars") or not name or not isinstance(item.get(part), dict):
                raise KdaError(f"{where}: key 'nulls': {n!r} must be 'tensors.NAME' or 'scalars.NAME'")
            item[part] = {**item[part], name: None}
        out.append(validate(item, CATALOG_LINE, where))
    return out
