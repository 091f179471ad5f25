"""replace the worker's comparison function instead of computing anything.

The worker calls checks.compare(...) through the module attribute of kda.harness.checks, which TamperWatch does
not watch. The fake (reached through sys.modules, so no import of kda for the static rules to see) swaps it for a
function that reports a perfect match, and never writes out. Expected defence: TAMPER (or UNWRITTEN).
Caught since the harness closed this gap (see tests/zoo/catalog.py).
"""
import sys

import torch


def _perfect(out, ref, expected_shape, expected_dtype, atol, rtol):
    return {"layout_ok": True, "unwritten": 0, "specials_mismatch": 0, "bad": 0, "max_norm_err": 0.0,
            "mean_abs_err": 0.0, "max_abs_err": 0.0, "numel": int(ref.numel())}


def fuse_scale_shift_kernel(x, scale, shift, scale_constant=1.0, block_l=128, block_c=128, *, out=None):
    sys.modules["kda.harness.checks"].compare = _perfect
    return out if out is not None else torch.empty_like(x)
