"""Writes workloads.json for silu_and_mul. Run: python bench/make_workloads.py [--check]. Hand-written (`kda new`
wrote this skeleton from templates/new/make_workloads.py.j2; `kda render` never touches it).

Production rows say where they come from (`captured: ...` with the source, or `derived: ...` with the formula);
regression rows (`regression: ...`) cover what production does not exercise: odd sizes, non-contiguous and
broadcast forms, storage offsets, every dtype upstream accepts, large magnitudes, NaN/Inf.
"""
import sys
from pathlib import Path

from kda.definition.workloads import tensor_decl, write_or_check

OUT = Path(__file__).with_name("workloads.json")


def rows() -> list[dict]:
    # One dict per row: id, production, model, source, function, tensors (name -> tensor_decl(...)), scalars,
    # seed, cpu (small enough for the CPU gate). docs/task-contract.md describes every field.
    _ = tensor_decl
    raise NotImplementedError("TODO(silu_and_mul): write the rows of bench/make_workloads.py")


if __name__ == "__main__":
    write_or_check(OUT, rows(), sys.argv[1:])
