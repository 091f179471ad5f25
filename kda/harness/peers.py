"""The comparator arms: the oracle's math run by PyTorch itself, eager or through torch.compile, cast to the outputs'
dtypes. Shared by the worker and `kda profile` so both time the same thing.

An oracle whose truth is wider than what a user would write (fp64 statistics for fp32 inputs) defines
`peer_reference(row, inputs)` too: the same math in the inputs' working precision. The peers run that one, so
they are timed as a PyTorch user would run them, not at fp64 rates."""
from __future__ import annotations

from typing import Callable

import torch


def peer_math(oracle) -> Callable:
    """The function the peers run for an oracle module: its peer_reference if it has one, else its reference."""
    return getattr(oracle, "peer_reference", None) or oracle.reference


def peer_call(reference: Callable, row, inputs: dict, out_dtypes: dict, kind: str) -> Callable[[], dict]:
    """A zero-argument arm. `kind` is "eager" or "compile" (a fresh dynamo state per row: every row compiles the
    same code object, and past the recompile limit dynamo would silently run eager)."""
    return peer_calls(reference, row, [inputs], out_dtypes, kind)[0]


def peer_calls(reference: Callable, row, input_sets: list[dict], out_dtypes: dict, kind: str) -> list[Callable[[], dict]]:
    """One zero-argument arm per set of inputs (rotated input sets: kda.definition.workloads.InputSets), all running
    one function: compiled once, its guards pass for every set (same shapes, strides, dtypes and alignment)."""
    inputs = input_sets[0]
    names = [k for k, v in inputs.items() if v is not None]

    def peer(*tensors):
        given = dict(zip(names, tensors))
        ref = reference(row, {k: given.get(k) for k in inputs})
        return {k: ref[k].to(dt) for k, dt in out_dtypes.items()}

    fn = peer
    if kind == "compile":
        torch._dynamo.reset()
        fn = torch.compile(peer, dynamic=False)
    elif kind != "eager":
        raise ValueError(f"unknown peer kind {kind!r}")
    return [(lambda tensors=tuple(one[k] for k in names): fn(*tensors)) for one in input_sets]
