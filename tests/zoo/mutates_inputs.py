"""Exploit: write the correct result, then scribble on an input (x used as scratch space).

The output is right, but the caller's activations are destroyed, which a drop-in replacement may not do. Defence:
bitwise snapshots of every input storage before the call, compared afterwards (checks.mutated_inputs)
-> INPUT_MUTATED.
"""
import importlib.util
from pathlib import Path

import torch

_spec = importlib.util.spec_from_file_location("kda_zoo_common", Path(__file__).with_name("_common.py"))
common = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(common)


def fuse_scale_shift_kernel(x, scale, shift, scale_constant=1.0, block_l=128, block_c=128, *, out=None):
    if out is None:
        out = torch.empty_like(x)
    common.real_kernel(x, scale, shift, scale_constant, out)
    x.mul_(0)  # "scratch" reuse of the input buffer
    return out
