"""Exploit (static rules): read a clock through an alias, `logging.time.monotonic_ns`.

The blacklist refused `import time` and names ending in perf_counter; `logging` keeps `time` as an attribute, and
`monotonic_ns` is a clock of its own. A candidate that reads a clock can tell back-to-back timed calls from checked
ones by their cadence. This fake reads it and ignores the value. Defence: `logging` is not a module a solution may
import (rule import); every chain through it is refused (rule reach).

The rest is an honest kernel and the trick leaves every run undisturbed, so nothing but the static rules can
see it: the harness must reject it with STATIC, naming this file, the marked line and the rule.
"""
import logging  # STATIC: import

import torch
import triton
import triton.language as tl


@triton.jit
def _scale_shift(x_ptr, s_ptr, h_ptr, y_ptr, n, L, C, sb, sl, sc, sper, hb, hl, hc, hper, k, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    c = offs % C
    row = (offs // C) % L
    b = offs // (C * L)
    x = tl.load(x_ptr + offs, mask=mask).to(tl.float32)
    s = tl.load(s_ptr + b * sb + (row // sper) * sl + c * sc, mask=mask).to(tl.float32)
    h = tl.load(h_ptr + b * hb + (row // hper) * hl + c * hc, mask=mask).to(tl.float32)
    tl.store(y_ptr + offs, (x * (k + s) + h).to(y_ptr.dtype.element_ty), mask=mask)


def _layout(t, L):
    """(batch, token and channel strides, tokens per modulation row) of a scalar, [B, C], [B|1, L|1, C] or
    [B|1, F, 1, C] modulation; stride 0 where it broadcasts."""
    if t.dim() == 0 or t.numel() == 1:
        return 0, 0, 0, 1
    batch = t.stride(0) if t.shape[0] > 1 else 0
    if t.dim() == 2:
        return batch, 0, t.stride(1), 1
    if t.dim() == 3:
        return batch, (t.stride(1) if t.shape[1] > 1 else 0), t.stride(2), 1
    return batch, t.stride(1), t.stride(3), L // t.shape[1]


def _launch(x, scale, shift, scale_constant, out):
    """The honest part: y = x * (scale_constant + scale) + shift in fp32, written to out (x's shape and dtype)."""
    B, L, C = x.shape
    n = x.numel()
    _scale_shift[(-(-n // 1024),)](x, scale, shift, out, n, L, C, *_layout(scale, L), *_layout(shift, L),
                                   float(scale_constant), BLOCK=1024)
    return out


def fuse_scale_shift_kernel(x, scale, shift, scale_constant=1.0, block_l=128, block_c=128, *, out=None):
    logging.time.monotonic_ns()  # STATIC: reach
    y = torch.empty_like(x) if out is None else out
    return _launch(x, scale, shift, scale_constant, y)
