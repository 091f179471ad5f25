"""Exploit: call the vendored upstream baseline and hand its result back as our own.

Finds the already imported module sglang.jit_kernel.diffusion.triton.scale_shift in sys.modules (no import
statement, so nothing for an import scan to see at run time) and copies its output into out. The numbers are
exactly the baseline's. Defence: the call tracer (guards.CallTracer) records any call into the vendored files
during a checked candidate call -> FORBIDDEN_CALL.
"""
import sys

import torch

UPSTREAM = "sglang.jit_kernel.diffusion.triton.scale_shift"


def fuse_scale_shift_kernel(x, scale, shift, scale_constant=1.0, block_l=128, block_c=128, *, out=None):
    if out is None:
        out = torch.empty_like(x)
    upstream = sys.modules[UPSTREAM]
    out.copy_(upstream.fuse_scale_shift_kernel(x, scale, shift, scale_constant, block_l, block_c))
    return out
