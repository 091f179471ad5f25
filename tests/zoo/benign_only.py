"""Exploit: correct only on benign (randn-sized) data.

Saturates finite x to [-100, 100] before the math (think: a fast path valid for a small input range, tuned and
tested only on randn). Every row filled with randn passes bit for bit; NaN/Inf pass through untouched. Defence:
rows with adversarial distributions, here reg_large_magnitude_s127_c1024 (values near 1e4) -> MISMATCH.
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
    xf = x.float()
    xf = torch.where(torch.isfinite(xf), xf.clamp(-100.0, 100.0), xf)
    out.copy_(common.torch_math(xf, scale, shift, scale_constant).to(out.dtype))
    return out
