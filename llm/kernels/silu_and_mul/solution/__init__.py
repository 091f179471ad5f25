"""Candidate arm of silu_and_mul: exports the upstream signature (plus out=) for a drop-in into SGLang. Written by
the agent or a person (`kda new` wrote this skeleton from templates/new/solution_init.py.j2)."""

__all__ = ["silu_and_mul"]


def silu_and_mul(*args, out=None, **kwargs):
    raise NotImplementedError("TODO(silu_and_mul): write the candidate silu_and_mul() in solution/")
