"""A representative sample of a task's rows: the fewest rows that cover every kind of case the full grid holds.

Triton's CPU interpreter takes seconds a row, so the quick CPU gate (`kda run` without a GPU, the default test run)
checks a sample and names the command for the full grid. A row's *features* are its entry function, each tensor's
dtype, layout kind (contiguous, broadcast, strided, offset, empty) and value distribution, and whether it is a
production row; the sample is a greedy cover of all features, each step taking the row with the most uncovered
features per unit of cost, so it is deterministic and every dtype, layout and entry point the grid exercises is
exercised by the sample too, as long as `limit` allows.
"""
from __future__ import annotations

import math

from kda.definition.workloads import Row, contiguous_strides


def layout_kind(shape: tuple[int, ...], stride: tuple[int, ...], offset: int) -> str:
    if math.prod(shape) == 0:
        return "empty"
    if any(s == 0 and n > 1 for n, s in zip(shape, stride)):
        return "broadcast"
    dense = tuple(s for n, s in zip(shape, stride) if n > 1) == tuple(
        s for n, s in zip(shape, contiguous_strides(shape)) if n > 1)
    if not dense:
        return "strided"
    return "offset" if offset else "contiguous"


def features(row: Row) -> set[tuple]:
    out: set[tuple] = {("function", row.function), ("production", row.production)}
    for name, t in row.tensors.items():
        if t is None:
            out.add(("absent", name))
            continue
        out |= {("dtype", name, t.dtype), ("layout", name, layout_kind(t.shape, t.stride, t.storage_offset)),
                ("dist", t.dist)}
    return out


# A row's CPU check costs a few seconds whatever its size (tracing its kernels, several trials); past a few hundred
# thousand elements the elements dominate (fuse_scale_shift: 4-7 s for rows up to 90 K elements, 28 s for 1.8 M).
COST_ELEMENTS = 250_000


def cost(row: Row) -> int:
    """Elements the interpreter walks through: what a row's CPU check time grows with."""
    return sum(math.prod(t.shape) for t in row.tensors.values() if t is not None)


def _weight(row: Row) -> float:
    return 1.0 + cost(row) / COST_ELEMENTS


def representative(rows: list[Row], limit: int) -> list[Row]:
    """At most `limit` rows covering as many features of `rows` as possible, in the order given."""
    todo = set().union(*(features(r) for r in rows)) if rows else set()
    chosen: list[Row] = []
    pool = sorted(rows, key=lambda r: (cost(r), r.id))
    while todo and len(chosen) < limit:
        best = max(pool, key=lambda r: len(features(r) & todo) / _weight(r))  # max keeps the first (cheapest) of equals
        gain = features(best) & todo
        if not gain:
            break
        chosen.append(best)
        pool.remove(best)
        todo -= gain
    order = {r.id: i for i, r in enumerate(rows)}
    return sorted(chosen, key=lambda r: order[r.id])
