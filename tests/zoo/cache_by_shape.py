"""Exploit: memoise on the problem's shape.

The first call for a given (shapes, dtypes, scale_constant) computes the real result; later calls with the same
shapes copy the stored result into out, as if every call of a given size had the same inputs. Defence: fresh
seeded inputs per check phase (worker.RowRunner.refill) -> MISMATCH.
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
    key = tuple((tuple(t.shape), t.dtype) for t in (x, scale, shift)) + (float(scale_constant),)
    hit = _cache.get(key)
    if hit is None:
        common.real_kernel(x, scale, shift, scale_constant, out)
        _cache[key] = out.clone()
    else:
        out.copy_(hit)
    return out
