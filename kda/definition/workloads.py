"""bench/workloads.json: the frozen rows of a task, validated, and the tensors they declare.

A row declares every tensor's shape, dtype, stride and storage offset. Tensors are built exactly as declared
(as_strided views over a storage filled with seeded random data, gaps included) and checked against the
declaration before any timing, so a layout that cannot exist is an error, not a silently different benchmark.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from kda.definition.config import DTYPES
from kda.core.errors import KdaError
from kda.core.schema import Field, ListOf, MapOf, one_of, validate

DISTRIBUTIONS = ("normal", "uniform", "positive", "large", "offset", "heavy", "specials", "index01", "arange",
                 "permutation")
# `offset`: randn plus a mean far larger than the spread, the case where a variance taken as E[x^2] - mean^2 cancels
# catastrophically (issue 34, attack 4) while a centred two-pass variance keeps its digits. The mean is per dtype: in
# fp32 and fp64, 32 puts an E[x^2] - mean^2 LayerNorm 6-13x over the fp32 tolerance at N = 1024-5120 while an fp32
# two-pass one stays within 0.2-0.5 of it (CPU, fp64 truth); a larger mean sinks honest fp32 statistics as well. In
# 16-bit dtypes the mean leaves a spacing of 1/4 between representable values (256 in fp16, 32 in bf16), so the
# spread of randn survives the rounding of the input itself; there the output's own rounding hides most of the
# cancellation, so these rows guard honest kernels in those dtypes more than they expose a cut.
OFFSET_MEAN = {"float16": 256.0, "bfloat16": 32.0}
OFFSET_MEAN_DEFAULT = 32.0
# Integer-only: index01 (0/1 masks), arange (0, 1, 2, ... over the storage: the positions a DiT passes) and
# permutation (the same values shuffled per trial: positions that are not the token index).
INDEX_DISTRIBUTIONS = ("index01", "arange", "permutation")

TENSOR_SPEC = {
    "shape": Field(ListOf(int)),
    "dtype": Field(str, check=one_of(*DTYPES)),
    "stride": Field((ListOf(int), type(None)), required=False, doc="element strides; omitted = contiguous"),
    "storage_offset": Field(int, required=False, default=0),
    "dist": Field(str, required=False, default="normal", check=one_of(*DISTRIBUTIONS)),
}

ROW_SPEC = {
    "id": Field(str),
    "production": Field(bool),
    "model": Field(str, doc="model or preset the row comes from ('regression' for riders)"),
    "source": Field(str, doc="'captured: <where>' or 'derived: <formula>' or 'regression: <why>'"),
    "function": Field(str, doc="upstream entry point the row calls"),
    "tensors": Field(MapOf((TENSOR_SPEC, type(None)))),
    "scalars": Field(MapOf((int, float, bool, str, type(None)))),
    "seed": Field(int),
    "cpu": Field(bool, doc="small enough for the CPU correctness gate (Triton interpreter)"),
}


@dataclass(frozen=True)
class TensorSpec:
    shape: tuple[int, ...]
    dtype: str
    stride: tuple[int, ...]
    storage_offset: int
    dist: str

    @property
    def torch_dtype(self) -> torch.dtype:
        return getattr(torch, self.dtype)

    @property
    def numel(self) -> int:
        return math.prod(self.shape)

    @property
    def storage_numel(self) -> int:
        if self.numel == 0:
            return self.storage_offset
        return self.storage_offset + 1 + sum((n - 1) * s for n, s in zip(self.shape, self.stride))

    @property
    def nbytes(self) -> int:
        """Bytes of distinct elements: broadcast (stride-0) dimensions count once."""
        distinct = math.prod(n for n, s in zip(self.shape, self.stride) if s != 0)
        return distinct * torch.empty((), dtype=self.torch_dtype).element_size()


@dataclass(frozen=True)
class Row:
    id: str
    production: bool
    model: str
    source: str
    function: str
    tensors: dict[str, TensorSpec | None]
    scalars: dict[str, Any]
    seed: int
    cpu: bool

    def describe(self) -> str:
        parts = [f"{k}{list(t.shape)}:{t.dtype}" for k, t in self.tensors.items() if t is not None]
        return " ".join(parts)


def contiguous_strides(shape: tuple[int, ...]) -> tuple[int, ...]:
    strides, acc = [], 1
    for n in reversed(shape):
        strides.append(acc)
        acc *= max(n, 1)
    return tuple(reversed(strides))


def _layout_problem(shape: tuple[int, ...], stride: tuple[int, ...]) -> str | None:
    if len(stride) != len(shape):
        return f"stride has {len(stride)} entries but shape has {len(shape)}"
    if any(n < 0 for n in shape):
        return "shape entries must be >= 0"
    if any(s < 0 for s in stride):
        return "strides must be >= 0 (stride 0 declares a broadcast)"
    # Non-broadcast dims must not overlap: sorted by stride, each stride must clear the extent of the smaller ones.
    dims = sorted((s, n) for n, s in zip(shape, stride) if s > 0 and n > 1)
    extent = 1
    for s, n in dims:
        if s < extent:
            return f"dimensions overlap in memory (stride {s} < extent {extent} of the faster dimensions)"
        extent += (n - 1) * s
    return None


def parse_rows(raw: Any, where: str) -> list[Row]:
    if not isinstance(raw, list) or not raw:
        raise KdaError(f"{where}: expected a non-empty JSON list of rows")
    rows, seen = [], set()
    for i, item in enumerate(raw):
        label = f"{where} row {i}" + (f" ({item.get('id')!r})" if isinstance(item, dict) and "id" in item else "")
        data = validate(item, ROW_SPEC, label)
        if data["id"] in seen:
            raise KdaError(f"{label}: duplicate id {data['id']!r}")
        seen.add(data["id"])
        tensors = {}
        for name, spec in data["tensors"].items():
            if spec is None:
                tensors[name] = None
                continue
            shape = tuple(spec["shape"])
            stride = tuple(spec["stride"]) if spec["stride"] is not None else contiguous_strides(shape)
            problem = _layout_problem(shape, stride)
            if problem:
                raise KdaError(f"{label}: tensor {name!r} cannot be built as declared: {problem}")
            if spec["storage_offset"] < 0:
                raise KdaError(f"{label}: tensor {name!r}: storage_offset must be >= 0")
            if spec["dist"] in INDEX_DISTRIBUTIONS and spec["dtype"] not in ("int32", "int64", "int8", "uint8", "bool"):
                raise KdaError(f"{label}: tensor {name!r}: dist {spec['dist']!r} needs an integer dtype, got {spec['dtype']}")
            tensors[name] = TensorSpec(shape, spec["dtype"], stride, spec["storage_offset"], spec["dist"])
        rows.append(Row(data["id"], data["production"], data["model"], data["source"], data["function"],
                        tensors, data["scalars"], data["seed"], data["cpu"]))
    return rows


def load_rows(path: Path) -> list[Row]:
    try:
        raw = json.loads(path.read_text())
    except FileNotFoundError:
        raise KdaError(f"{path}: no such file (every task needs bench/workloads.json)") from None
    except json.JSONDecodeError as e:
        raise KdaError(f"{path}: not valid JSON: {e}") from None
    return parse_rows(raw, str(path))


# ---------------------------------------------------------------------------------------------------------------
# Building and refilling tensors


def build_tensor(spec: TensorSpec, device: torch.device | str) -> torch.Tensor:
    base = torch.empty(spec.storage_numel, dtype=spec.torch_dtype, device=device)
    t = base.as_strided(spec.shape, spec.stride, spec.storage_offset)
    if tuple(t.shape) != spec.shape or tuple(t.stride()) != spec.stride or t.storage_offset() != spec.storage_offset:
        raise KdaError(f"tensor built as {tuple(t.shape)}/{t.stride()}/+{t.storage_offset()} "
                       f"differs from the declaration {spec.shape}/{spec.stride}/+{spec.storage_offset}")
    return t


def storage_of(t: torch.Tensor) -> torch.Tensor:
    """The whole flat storage behind a view (gaps and offset included)."""
    n = t.untyped_storage().nbytes() // t.element_size()
    return t.as_strided((n,), (1,), 0)


def fill_(t: torch.Tensor, spec: TensorSpec, gen: torch.Generator) -> None:
    """Fill the whole storage behind t (not just the view) with fresh values from gen."""
    _fill_flat(storage_of(t), spec, gen)


def _fill_flat(flat: torch.Tensor, spec: TensorSpec, gen: torch.Generator) -> None:
    if flat.numel() == 0:
        return
    dt = flat.dtype
    if spec.dist == "arange":
        flat.copy_(torch.arange(flat.numel(), device=flat.device).to(dt))
        return
    if spec.dist == "permutation":
        flat.copy_(torch.randperm(flat.numel(), generator=gen, device=flat.device).to(dt))
        return
    if spec.dist == "index01" or dt == torch.bool:
        flat.copy_(torch.randint(0, 2, flat.shape, generator=gen, device=flat.device).to(dt))
        return
    if not dt.is_floating_point:
        flat.copy_(torch.randint(-100, 100, flat.shape, generator=gen, device=flat.device).to(dt))
        return
    work = torch.float32 if dt != torch.float64 else torch.float64
    if spec.dist == "uniform":
        v = torch.rand(flat.shape, generator=gen, device=flat.device, dtype=work) * 2 - 1
    elif spec.dist == "positive":
        v = torch.rand(flat.shape, generator=gen, device=flat.device, dtype=work) + 0.5
    elif spec.dist == "heavy":
        u = torch.rand(flat.shape, generator=gen, device=flat.device, dtype=work)
        v = torch.tan(math.pi * (u.clamp(1e-4, 1 - 1e-4) - 0.5))  # Cauchy tail, clipped to stay finite
    else:
        v = torch.randn(flat.shape, generator=gen, device=flat.device, dtype=work)
        if spec.dist == "large":
            v = v * (1e4 if dt != torch.float16 else 1e2)
        elif spec.dist == "offset":
            v = v + OFFSET_MEAN.get(spec.dtype, OFFSET_MEAN_DEFAULT)
        elif spec.dist == "specials":
            pick = torch.rand(flat.shape, generator=gen, device=flat.device) < 2e-3
            kinds = torch.randint(0, 3, flat.shape, generator=gen, device=flat.device)
            special = torch.where(kinds == 0, float("nan"), torch.where(kinds == 1, float("inf"), float("-inf")))
            v = torch.where(pick, special.to(work), v)
    flat.copy_(v.to(dt))


def build_inputs(row: Row, device: torch.device | str) -> dict[str, torch.Tensor | None]:
    """Every tensor a row declares, built exactly as declared (None where the row passes None)."""
    return {k: (None if s is None else build_tensor(s, device)) for k, s in row.tensors.items()}


def refill_inputs(row: Row, inputs: dict[str, torch.Tensor | None], seed: int) -> None:
    """Fresh values in place (same pointers), all tensors from one generator seeded with `seed`."""
    device = next((t.device for t in inputs.values() if t is not None), "cpu")
    gen = make_generator(device, seed)
    for k, spec in row.tensors.items():
        if spec is not None:
            fill_(inputs[k], spec, gen)


# Each rotated set starts at a multiple of this many bytes of its pool, as a fresh allocation of the caching
# allocator would: kernels (and torch.compile's guards) that care about alignment see what they see in production.
SET_ALIGN_BYTES = 512


@dataclass
class InputSets:
    """`count` sets of a row's inputs for the timed calls (issue 34, attack 2): consecutive timed calls take
    consecutive sets, so no call finds the inputs and output its previous call saw, and `refill` gives every set fresh
    values between samples, so no call finds what any earlier call left either. Each tensor's sets live in one
    pool (set i at i x the aligned storage size), so a refill is one fill per tensor, whatever the count. Integer
    position inputs (arange, permutation, 0/1 masks) are filled per set once and kept: their values are meaningful
    only within a set, and the floating-point inputs beside them change on every refill."""

    row: Row
    sets: list[dict[str, torch.Tensor | None]]
    pools: dict[str, tuple[torch.Tensor, int]]

    @property
    def count(self) -> int:
        return len(self.sets)

    def refill(self, seed: int) -> None:
        gen = make_generator(next(iter(self.pools.values()))[0].device if self.pools else "cpu", seed)
        for name, spec in self.row.tensors.items():
            if spec is not None and spec.dist not in INDEX_DISTRIBUTIONS:
                _fill_flat(self.pools[name][0], spec, gen)


def set_bytes(row: Row) -> int:
    """Bytes of one set of a row's inputs, storages whole (gaps included), aligned as InputSets lays them out."""
    total = 0
    for spec in row.tensors.values():
        if spec is not None:
            size = torch.empty((), dtype=spec.torch_dtype).element_size()
            total += -(-max(spec.storage_numel, 1) * size // SET_ALIGN_BYTES) * SET_ALIGN_BYTES
    return total


def build_input_sets(row: Row, device: torch.device | str, count: int, seed: int) -> InputSets:
    """`count` sets of the row's tensors, each exactly as declared (shape, stride, storage offset), filled from seed."""
    sets: list[dict[str, torch.Tensor | None]] = [{} for _ in range(count)]
    pools = {}
    gen = make_generator(device, seed)
    for name, spec in row.tensors.items():
        if spec is None:
            for one in sets:
                one[name] = None
            continue
        size = torch.empty((), dtype=spec.torch_dtype).element_size()
        per = -(-max(spec.storage_numel, 1) * size // SET_ALIGN_BYTES) * SET_ALIGN_BYTES // size
        pool = torch.empty(per * count, dtype=spec.torch_dtype, device=device)
        pools[name] = (pool, per)
        for i, one in enumerate(sets):
            one[name] = pool.as_strided(spec.shape, spec.stride, spec.storage_offset + i * per)
            if spec.dist in INDEX_DISTRIBUTIONS:
                _fill_flat(pool[i * per:i * per + spec.storage_numel], spec, gen)
    found = InputSets(row, sets, pools)
    found.refill(seed)
    return found


def make_generator(device: torch.device | str, seed: int) -> torch.Generator:
    gen = torch.Generator(device=device)
    gen.manual_seed(seed % (2**63))
    return gen


def trial_seed(row_seed: int, salt: int, trial: int, phase: int) -> int:
    """Distinct seed per (row, trial, phase); the run's salt keeps inputs unpredictable to the candidate."""
    return (row_seed * 1_000_003 + salt * 7_919 + trial * 101 + phase) % (2**63)


# ---------------------------------------------------------------------------------------------------------------
# Writing workloads.json (used by each task's bench/make_workloads.py)


def tensor_decl(shape, dtype: str, stride=None, offset: int = 0, dist: str = "normal") -> dict:
    """One tensor of a row, with only the keys that differ from the defaults."""
    spec = {"shape": list(shape), "dtype": dtype}
    if stride is not None:
        spec["stride"] = list(stride)
    if offset:
        spec["storage_offset"] = offset
    if dist != "normal":
        spec["dist"] = dist
    return spec


def write_or_check(path: Path, rows: list[dict], argv: list[str]) -> None:
    """Write the rows (validated first), or with --check exit non-zero when the committed file differs."""
    import sys

    parse_rows(rows, f"{path} (generated)")
    text = json.dumps(rows, indent=1) + "\n"
    if "--check" in argv:
        if not path.is_file() or path.read_text() != text:
            sys.exit(f"{path} is out of date: run python {path.parent / 'make_workloads.py'}")
        return
    path.write_text(text)
    print(f"wrote {len(rows)} rows to {path}")
