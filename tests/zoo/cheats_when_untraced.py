"""Bench mode, GPU only: do the whole job only while the harness is watching.

Checked calls run under the call tracer, so sys.getprofile() is CallTracer._hook; timed calls (device_us,
wall_us, the CUDA graph capture) do not, and their outputs are never compared with the oracle. This fake writes
every token while the tracer is installed and only the first FRACTION of the tokens otherwise (B == 1 and no
per-token modulation; anything else gets the full job). Every check passes and every timing measures 3/4 of the
work: up to 1.33x "faster" than the real kernel. Only the roofline guard (INVALID: faster than the datasheet
bandwidth) limits it; half the work tripped it on the H200 rows tried, so the fraction stays under it where the real
kernel runs below ~75% of the datasheet. Check mode has nothing to catch (it passes there by construction); run it
with `scripts/gpu_exploit_zoo.py --bench-probe`. Expected defence: check the outputs of timed calls too.
"""
import importlib.util
import sys
from pathlib import Path

import torch

_spec = importlib.util.spec_from_file_location("kda_zoo_common", Path(__file__).with_name("_common.py"))
common = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(common)

FRACTION = 0.75


def _watched():
    return getattr(sys.getprofile(), "__qualname__", "") == "CallTracer._hook"


def _per_token(t):
    return (t.dim() == 3 and t.shape[1] != 1) or t.dim() == 4


def fuse_scale_shift_kernel(x, scale, shift, scale_constant=1.0, block_l=128, block_c=128, *, out=None):
    if out is None:
        out = torch.empty_like(x)
    if _watched() or x.shape[0] != 1 or x.shape[1] < 2 or _per_token(scale) or _per_token(shift):
        return common.real_kernel(x, scale, shift, scale_constant, out)
    part = max(1, int(x.shape[1] * FRACTION))
    common.real_kernel(x[:, :part], scale, shift, scale_constant, out[:, :part])
    return out
