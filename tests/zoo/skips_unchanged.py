"""Exploit (issue 34, attack 2): skip the work when the inputs did not change since the last write.

A small fingerprint of sampled input and output elements (16 of each here; on a GPU it would live in device memory
and work inside CUDA graphs too) is kept per output buffer. When a call finds the same fingerprint its last call
left, it returns at once: the buffer already holds the right answer. Every timed call reusing one set of inputs and
one output buffer is then free after the first, while every check passes (the output it leaves is correct).
Defences: the repeat check (phase 4: the same inputs twice, one output element changed in between at a random
position the fingerprint almost never covers) -> STALE_REPEAT (with UNWRITTEN: the element is the poison); on a GPU,
timed calls that rotate over input sets refilled between samples, so no call finds what it left.
"""
import importlib.util
from pathlib import Path

import torch

_spec = importlib.util.spec_from_file_location("kda_zoo_common", Path(__file__).with_name("_common.py"))
common = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(common)

SAMPLES = 16
_last: dict = {}


def _sample(t: torch.Tensor) -> tuple:
    flat = t.reshape(-1)
    step = max(1, flat.numel() // SAMPLES)
    return tuple(flat[::step][:SAMPLES].tolist())


def _fingerprint(x, scale, shift, out) -> tuple:
    return (_sample(x), _sample(scale), _sample(shift), _sample(out))


def fuse_scale_shift_kernel(x, scale, shift, scale_constant=1.0, block_l=128, block_c=128, *, out=None):
    if out is None:
        out = torch.empty_like(x)
    key = (out.data_ptr(), x.data_ptr(), float(scale_constant))
    if _last.get(key) == _fingerprint(x, scale, shift, out):
        return out  # nothing changed since this buffer was written: skip the work
    common.real_kernel(x, scale, shift, scale_constant, out)
    _last[key] = _fingerprint(x, scale, shift, out)
    return out
