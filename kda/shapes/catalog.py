"""The production shape catalog: one TOML file per model in diffusion/shapes/, read by every task's generator.

A model file holds the model's config dimensions (`[dims]`), how token counts follow from resolution and frames
(`[tokens]`: formulas as text, evaluated here with exact rational arithmetic), worked examples of those formulas
that must come out as stated (`[[examples]]`), and per-kernel rows (`[[rows]]`) with provenance: `captured` with
the capture named in `source`, or `derived` with the formulas in `derive`. Each task's bench/make_workloads.py
turns its rows into workloads.json rows (`production_rows(task)`); `kda shapes --check` regenerates every task in
memory and names the task and row that no longer match the committed file.

Formulas allow integers, decimals, names (dims, the row's `vars`, earlier `derive` entries), + - * / // % **,
parentheses and calls of the model's token formulas with keyword arguments: `video(frames=81, H=720, W=1280)`.
A result that is not a whole number is an error: a frame count or resolution that does not divide evenly is
almost always a mistake in the row, not a shape production runs.
"""
from __future__ import annotations

import ast
import operator
import tomllib
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any, Callable

from kda.core.errors import KdaError
from kda.core.schema import Field, ListOf, MapOf, one_of, validate

CATALOG_DIR = "diffusion/shapes"
CAPTURED_FILE = "captured.toml"  # written by `kda shapes ingest`; not a model file

PARAM = (int, float, bool, str)

MODEL = {
    "name": Field(str, doc="label the rows carry as `model`"),
    "source": Field(str, doc="where the dimensions come from (config file, paper, capture)"),
    "notes": Field(str, required=False, default=""),
}
EXAMPLE = {
    "of": Field(str, doc="a formula, e.g. 'video(frames=81, H=720, W=1280)'"),
    "expect": Field(int),
    "source": Field(str, doc="where the expected value is stated"),
}
ROW = {
    "task": Field(str, doc="task folder the row belongs to"),
    "id": Field(str, doc="row id in the task's workloads.json"),
    "function": Field(str, doc="upstream entry point"),
    "provenance": Field(str, check=one_of("captured", "derived")),
    "source": Field(str, doc="the row's source text: 'captured: <where>' or 'derived: <how>'"),
    "seed": Field(int),
    "model": Field(str, required=False, doc="label when it differs from model.name"),
    "params": Field(MapOf(PARAM), required=False, default={}, doc="literal parameters for the task's generator"),
    "vars": Field(MapOf((int, float)), required=False, default={}, doc="row-local names for the formulas"),
    "derive": Field(MapOf(str), required=False, default={}, doc="parameter -> formula, evaluated in order"),
}
MODEL_FILE = {
    "model": Field(MODEL),
    "dims": Field(MapOf(PARAM), required=False, default={}),
    "tokens": Field(MapOf(str), required=False, default={}, doc="name -> formula over dims and call arguments"),
    "examples": Field(ListOf(EXAMPLE), required=False, default=[]),
    "rows": Field(ListOf(dict), required=False, default=[]),
}


# ---------------------------------------------------------------------------------------------------------------
# Formulas

_BINOPS: dict[type, Callable[[Fraction, Fraction], Fraction]] = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
    ast.FloorDiv: lambda a, b: Fraction(a // b), ast.Mod: operator.mod,
}


class FormulaError(ValueError):
    pass


def _fmt(v: Fraction) -> str:
    return str(v.numerator) if v.denominator == 1 else f"{float(v):g} ({v})"


def evaluate(expr: str, names: dict[str, Any], funcs: dict[str, str] | None = None,
             _depth: int = 0) -> Fraction:
    """Exact value of expr; names may be numbers; funcs maps a token-formula name to its formula text."""
    funcs = funcs or {}
    if _depth > 8:
        raise FormulaError("token formulas call each other too deeply")
    try:
        tree = ast.parse(expr.strip(), mode="eval")
    except SyntaxError as e:
        raise FormulaError(f"{expr!r} is not a formula: {e.msg}") from None

    def ev(node: ast.AST) -> Fraction:
        if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) and not isinstance(node.value, bool):
            return Fraction(str(node.value)) if isinstance(node.value, float) else Fraction(node.value)
        if isinstance(node, ast.Name):
            if node.id not in names:
                known = ", ".join(sorted(k for k, v in names.items() if _number(v))) or "none"
                raise FormulaError(f"unknown name {node.id!r} in {expr!r} (known: {known})")
            v = names[node.id]
            if not _number(v):
                raise FormulaError(f"{node.id!r} in {expr!r} is {v!r}, not a number")
            return v if isinstance(v, Fraction) else Fraction(str(v)) if isinstance(v, float) else Fraction(v)
        if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
            a, b = ev(node.left), ev(node.right)
            if isinstance(node.op, (ast.Div, ast.FloorDiv, ast.Mod)) and b == 0:
                raise FormulaError(f"division by zero in {expr!r}")
            return _BINOPS[type(node.op)](a, b)
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Pow):
            a, b = ev(node.left), ev(node.right)
            if b.denominator != 1 or abs(b) > 64:
                raise FormulaError(f"exponent {_fmt(b)} in {expr!r}: only small whole exponents")
            return a ** int(b)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.UAdd, ast.USub)):
            v = ev(node.operand)
            return -v if isinstance(node.op, ast.USub) else v
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in funcs:
            if node.args:
                raise FormulaError(f"{node.func.id}(...) in {expr!r} takes keyword arguments only")
            kwargs = {k.arg: ev(k.value) for k in node.keywords}
            clash = sorted(set(kwargs) & {k for k in names if k in _dims_of(names)})
            if clash:
                raise FormulaError(f"{node.func.id}(...) in {expr!r} overrides the model dimension {clash[0]!r}")
            value = evaluate(funcs[node.func.id], {**names, **kwargs}, funcs, _depth + 1)
            if value.denominator != 1:
                args = ", ".join(f"{k}={_fmt(v)}" for k, v in kwargs.items())
                raise FormulaError(f"{node.func.id}({args}) = {_fmt(value)} is not a whole number")
            return value
        if isinstance(node, ast.Call):
            name = getattr(node.func, "id", "?")
            raise FormulaError(f"{name}(...) in {expr!r} is not a token formula (known: {', '.join(funcs) or 'none'})")
        raise FormulaError(f"{ast.unparse(node)!r} in {expr!r}: only numbers, names, + - * / // % ** and token "
                           "formula calls are allowed")

    return ev(tree.body)


_DIMS_KEY = "__dims__"


def _dims_of(names: dict[str, Any]) -> set[str]:
    return names.get(_DIMS_KEY, set())


def _number(v: Any) -> bool:
    return isinstance(v, (int, float, Fraction)) and not isinstance(v, bool)


def whole(expr: str, names: dict[str, Any], funcs: dict[str, str]) -> int:
    value = evaluate(expr, names, funcs)
    if value.denominator != 1:
        raise FormulaError(f"{expr!r} = {_fmt(value)} is not a whole number")
    return int(value)


# ---------------------------------------------------------------------------------------------------------------
# Loading


@dataclass(frozen=True)
class CatalogRow:
    task: str
    id: str
    model: str
    function: str
    provenance: str
    source: str
    seed: int
    params: dict[str, Any]  # literal params plus the evaluated derive entries
    formulas: dict[str, str]  # the derive entries as written
    file: str

    def __getitem__(self, key: str) -> Any:
        try:
            return self.params[key]
        except KeyError:
            raise KdaError(f"{self.file} row {self.id!r}: the task {self.task!r} needs parameter {key!r} "
                           f"(has: {', '.join(self.params) or 'none'})") from None

    def get(self, key: str, default: Any = None) -> Any:
        return self.params.get(key, default)


@dataclass(frozen=True)
class ModelEntry:
    name: str
    file: str
    dims: dict[str, Any]
    tokens: dict[str, str]
    rows: list[CatalogRow]

    def tokens_for(self, call: str, **extra: Any) -> int:
        """Evaluate a token-formula call such as 'video(frames=81, H=720, W=1280)'."""
        return whole(call, {**self.dims, **extra, _DIMS_KEY: set(self.dims)}, self.tokens)


def load_model_file(path: Path) -> ModelEntry:
    where = str(path)
    try:
        raw = tomllib.loads(path.read_text())
    except OSError as e:
        raise KdaError(f"{where}: cannot read: {e}") from None
    except tomllib.TOMLDecodeError as e:
        raise KdaError(f"{where}: not valid TOML: {e}") from None
    data = validate(raw, MODEL_FILE, where)
    dims, tokens = data["dims"], data["tokens"]
    clash = sorted(set(dims) & set(tokens))
    if clash:
        raise KdaError(f"{where}: key 'tokens.{clash[0]}': the name is also a dimension")
    base = {**dims, _DIMS_KEY: set(dims)}
    for name, formula in tokens.items():
        try:
            ast.parse(formula.strip(), mode="eval")
        except SyntaxError as e:
            raise KdaError(f"{where}: key 'tokens.{name}': {formula!r} is not a formula: {e.msg}") from None
    for i, ex in enumerate(data["examples"]):
        try:
            got = whole(ex["of"], base, tokens)
        except FormulaError as e:
            raise KdaError(f"{where}: key 'examples[{i}].of': {e}") from None
        if got != ex["expect"]:
            raise KdaError(f"{where}: key 'examples[{i}]': {ex['of']} = {got}, but the example expects "
                           f"{ex['expect']} ({ex['source']})")
    model = data["model"]["name"]
    rows = [_load_row(item, i, where, model, base, tokens) for i, item in enumerate(data["rows"])]
    return ModelEntry(model, where, dims, tokens, rows)


def _load_row(item: dict, i: int, where: str, model: str, base: dict, tokens: dict) -> CatalogRow:
    label = f"{where} row {i}" + (f" ({item.get('id')!r})" if "id" in item else "")
    r = validate(item, ROW, label)
    prov, source = r["provenance"], r["source"]
    if not source.startswith(f"{prov}:") or not source[len(prov) + 1:].strip():
        raise KdaError(f"{label}: key 'source' must start with '{prov}:' and name where the row comes from, "
                       f"got {source!r}")
    if prov == "derived" and not r["derive"]:
        raise KdaError(f"{label}: key 'derive': a derived row needs its formulas (parameter = formula)")
    clash = sorted(set(r["vars"]) & set(base))
    if clash:
        raise KdaError(f"{label}: key 'vars.{clash[0]}' shadows the model dimension of that name")
    params = dict(r["params"])
    names = {**base, **r["vars"]}
    for key, formula in r["derive"].items():
        if key in params:
            raise KdaError(f"{label}: key 'derive.{key}' is also a literal in 'params'")
        try:
            params[key] = whole(formula, names, tokens)
        except FormulaError as e:
            raise KdaError(f"{label}: key 'derive.{key}': {e}") from None
        names[key] = params[key]
    return CatalogRow(r["task"], r["id"], r["model"] or model, r["function"], prov, source, r["seed"], params,
                      dict(r["derive"]), where)


def catalog_dir(path: Path | str | None = None) -> Path:
    if path is not None:
        return Path(path)
    from kda.core.paths import repo_root

    return repo_root() / CATALOG_DIR


def load_catalog(directory: Path | str | None = None) -> list[ModelEntry]:
    """Every model file of the catalog (sorted by file name); row ids must be unique within each task."""
    d = catalog_dir(directory)
    files = sorted(p for p in d.glob("*.toml") if p.name != CAPTURED_FILE)
    if not files:
        raise KdaError(f"{d}: no model files (*.toml) in the shape catalog")
    models = [load_model_file(p) for p in files]
    seen: dict[tuple[str, str], str] = {}
    names: dict[str, str] = {}
    for m in models:
        if m.name in names:
            raise KdaError(f"{m.file}: key 'model.name': {m.name!r} is also the model of {names[m.name]}")
        names[m.name] = m.file
        for row in m.rows:
            key = (row.task, row.id)
            if key in seen:
                raise KdaError(f"{m.file} row {row.id!r}: duplicate id in task {row.task!r} (also in {seen[key]})")
            seen[key] = m.file
    return models


def production_rows(task: str, directory: Path | str | None = None,
                    model_order: tuple[str, ...] = ()) -> list[CatalogRow]:
    """The task's catalog rows: grouped by model in model_order (others after, by file name), file order within."""
    rows = [r for m in load_catalog(directory) for r in m.rows if r.task == task]
    if not rows:
        raise KdaError(f"{catalog_dir(directory)}: no catalog rows for task {task!r}")
    rank = {name: i for i, name in enumerate(model_order)}
    return sorted(rows, key=lambda r: rank.get(r.model, len(rank)))  # stable: file order within a model
