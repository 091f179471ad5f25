"""A small declarative validator for the files people and agents write (config.toml, workloads.json, ledgers).

Every error names the file, the key path (and row) and what was expected, so the fix is obvious.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from kda.core.errors import KdaError


@dataclass(frozen=True)
class Field:
    kind: Any  # a type, a tuple of types, a nested dict spec, or ListOf/MapOf
    required: bool = True
    doc: str = ""
    check: Callable[[Any], str | None] | None = None  # returns an error text or None
    default: Any = None


@dataclass(frozen=True)
class ListOf:
    item: Any


@dataclass(frozen=True)
class MapOf:
    value: Any


def _type_name(kind: Any) -> str:
    if isinstance(kind, dict):
        return "a table"
    if isinstance(kind, ListOf):
        return f"a list of {_type_name(kind.item)}"
    if isinstance(kind, MapOf):
        return f"a table of {_type_name(kind.value)}"
    if isinstance(kind, tuple):
        return " or ".join(_type_name(k) for k in kind)
    return {str: "a string", int: "an integer", float: "a number", bool: "true/false", type(None): "null"}.get(
        kind, getattr(kind, "__name__", str(kind))
    )


def _is(value: Any, kind: Any) -> bool:
    if isinstance(kind, tuple):
        return any(_is(value, k) for k in kind)
    if kind is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if kind is int:
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(value, kind)


def validate(value: Any, kind: Any, where: str, key: str = "") -> Any:
    """Check value against kind; return it with defaults filled. `where` names the file (and row)."""
    label = key or "(top level)"
    if isinstance(kind, tuple) and not all(isinstance(k, type) for k in kind):
        # A union holding a structured alternative: pick the alternative whose container type matches.
        for alt in kind:
            container = dict if isinstance(alt, (dict, MapOf)) else list if isinstance(alt, ListOf) else alt
            if isinstance(container, type) and _is(value, container):
                return validate(value, alt, where, key)
        raise KdaError(f"{where}: {label} must be {_type_name(kind)}, got {value!r}")
    if isinstance(kind, dict):
        if not isinstance(value, dict):
            raise KdaError(f"{where}: {label} must be {_type_name(kind)}, got {type(value).__name__}")
        unknown = sorted(set(value) - set(kind))
        if unknown:
            known = ", ".join(sorted(kind))
            raise KdaError(f"{where}: unknown key {_join(key, unknown[0])!r} (known keys here: {known})")
        out = {}
        for name, field in kind.items():
            path = _join(key, name)
            if name not in value:
                if field.required:
                    raise KdaError(f"{where}: missing key {path!r}: expected {_type_name(field.kind)}"
                                   + (f" ({field.doc})" if field.doc else ""))
                out[name] = field.default
                continue
            out[name] = validate(value[name], field.kind, where, path)
            if field.check is not None:
                problem = field.check(out[name])
                if problem:
                    raise KdaError(f"{where}: key {path!r}: {problem}")
        return out
    if isinstance(kind, ListOf):
        if not isinstance(value, list):
            raise KdaError(f"{where}: {label} must be {_type_name(kind)}, got {type(value).__name__}")
        return [validate(v, kind.item, where, f"{key}[{i}]") for i, v in enumerate(value)]
    if isinstance(kind, MapOf):
        if not isinstance(value, dict):
            raise KdaError(f"{where}: {label} must be {_type_name(kind)}, got {type(value).__name__}")
        return {k: validate(v, kind.value, where, _join(key, k)) for k, v in value.items()}
    if not _is(value, kind):
        raise KdaError(f"{where}: {label} must be {_type_name(kind)}, got {value!r}")
    return float(value) if kind is float else value


def _join(prefix: str, name: str) -> str:
    return f"{prefix}.{name}" if prefix else name


def one_of(*choices: str) -> Callable[[Any], str | None]:
    return lambda v: None if v in choices else f"expected one of {', '.join(choices)}, got {v!r}"


def positive(v: Any) -> str | None:
    return None if v > 0 else f"expected a positive number, got {v!r}"
