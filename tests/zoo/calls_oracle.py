"""Exploit: call the task's oracle (the harness's own reference) and copy its answer into out.

The oracle module is loaded by the harness under the private name kda_task_fuse_scale_shift_oracle; it is found
in sys.modules and its reference() called with a stand-in row. Defence: the call tracer (guards.CallTracer) flags
any Python call into oracle.py during a checked candidate call -> FORBIDDEN_CALL.
"""
import sys
from types import SimpleNamespace

import torch

ORACLE = "kda_task_fuse_scale_shift_oracle"


def fuse_scale_shift_kernel(x, scale, shift, scale_constant=1.0, block_l=128, block_c=128, *, out=None):
    if out is None:
        out = torch.empty_like(x)
    oracle = sys.modules[ORACLE]
    # The oracle dispatches on row.function (the select01 variants share it): the stand-in names the entry point
    # a real row would, so the oracle's answer is correct and only the defence can tell.
    row = SimpleNamespace(function="fuse_scale_shift_kernel", scalars={"scale_constant": scale_constant})
    out.copy_(oracle.reference(row, {"x": x, "scale": scale, "shift": shift})["y"])
    return out
