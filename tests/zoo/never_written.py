"""Exploit: ignore out=, return a fresh (correct) tensor.

A caller that uses the return value sees the right numbers, but the buffer the harness handed over (and that a
drop-in caller relies on) is never written. Defences: out is poisoned with NaN before each checked call and read
back afterwards -> UNWRITTEN; the return value must be the out buffer itself -> RETURN.
"""
import importlib.util
from pathlib import Path

import torch

_spec = importlib.util.spec_from_file_location("kda_zoo_common", Path(__file__).with_name("_common.py"))
common = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(common)


def fuse_scale_shift_kernel(x, scale, shift, scale_constant=1.0, block_l=128, block_c=128, *, out=None):
    return common.real_kernel(x, scale, shift, scale_constant, torch.empty_like(x))
