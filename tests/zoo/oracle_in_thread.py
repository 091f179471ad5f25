"""call the oracle from a helper thread, where the call tracer does not look.

guards.CallTracer installs its hook with sys.setprofile, which covers the calling thread only. This fake runs the
oracle's reference() on a concurrent.futures worker thread, waits for it and stores the answer with an item
assignment (no tensor method call, no forbidden import: the static rules see nothing either). Expected defence:
FORBIDDEN_CALL. Caught by the tripwires the worker wraps around the oracle and upstream functions.
"""
import sys
from concurrent.futures import ThreadPoolExecutor
from types import SimpleNamespace

import torch

ORACLE = "kda_task_fuse_scale_shift_oracle"
_pool = ThreadPoolExecutor(1)


def fuse_scale_shift_kernel(x, scale, shift, scale_constant=1.0, block_l=128, block_c=128, *, out=None):
    if out is None:
        out = torch.empty_like(x)
    # The oracle dispatches on row.function (the select01 variants share it): the stand-in names the entry point
    # a real row would, so the oracle's answer is correct and only the defence can tell.
    row = SimpleNamespace(function="fuse_scale_shift_kernel", scalars={"scale_constant": scale_constant})
    ref = _pool.submit(sys.modules[ORACLE].reference, row, {"x": x, "scale": scale, "shift": shift}).result()
    out[...] = ref["y"]
    return out
