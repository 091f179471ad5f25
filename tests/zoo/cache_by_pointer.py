"""Exploit: memoise on the input's address.

The first call computes the real result and stores a copy keyed on (x, scale, shift).data_ptr(); every later call
with the same buffers copies the stored result into out without looking at the data. The harness keeps its input
buffers and refills them in place with fresh seeded data for every checked call, so the address stays the same but
the values do not. Defence: fresh inputs per check phase (worker.RowRunner.refill) -> MISMATCH.
"""
import importlib.util
from pathlib import Path

import torch

_spec = importlib.util.spec_from_file_location("kda_zoo_common", Path(__file__).with_name("_common.py"))
common = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(common)

_cache = {}


def fuse_scale_shift_kernel(x, scale, shift, scale_constant=1.0, block_l=128, block_c=128, *, out=None):
    if out is None:
        out = torch.empty_like(x)
    key = (x.data_ptr(), scale.data_ptr(), shift.data_ptr(), float(scale_constant))
    hit = _cache.get(key)
    if hit is None:
        common.real_kernel(x, scale, shift, scale_constant, out)
        _cache[key] = out.clone()
    else:
        out.copy_(hit)
    return out
