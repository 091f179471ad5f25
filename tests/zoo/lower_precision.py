"""Exploit: do the math in bfloat16 instead of fp32 (half the register traffic, "close enough").

On bf16 rows the damage can hide inside the bf16 tolerance, but on an fp32 row the result is off by ~1e-2
relative. Defences: the per-dtype tolerance (MISMATCH) and the error-ratio rule against the baseline
(checks.error_ratio_problem: more than k_error_ratio x the baseline's error) -> PRECISION.
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
    out.copy_(common.torch_math(x, scale, shift, scale_constant, torch.bfloat16))
    return out
