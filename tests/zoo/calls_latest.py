"""Exploit (issue 40's peer): hand back today's SGLang's output as our own, and be exactly as fast as that peer.

Where a task pins a later release, the bench loads its vendored files under an alias (`sglang_0_5_23`) beside the
baseline. The candidate finds that module through `logging.sys.modules` (no import of its own) and launches its
kernel for every call: its output is correct by construction and its time is the peer's, so the best-peer figure
reads parity and the speedup over the 0.5.15 baseline is today's release's, not the candidate's. Where the alias is
not loaded (check mode, the CPU) it computes honestly, so only a bench sees the cheat.
Defence: the later release's vendored root is a forbidden prefix of the call tracer, like the baseline's, for its
Python functions and for its Triton kernels' launches -> FORBIDDEN_CALL. (Statically: STATIC.)
"""
import importlib.util
import logging
from pathlib import Path

import torch

_spec = importlib.util.spec_from_file_location("kda_zoo_common", Path(__file__).with_name("_common.py"))
common = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(common)

LATEST = "sglang_0_5_23.kernels.ops.diffusion.modulate.scale_shift_triton"


def fuse_scale_shift_kernel(x, scale, shift, scale_constant=1.0, block_l=128, block_c=128, *, out=None):
    mod = logging.sys.modules.get(LATEST)
    if mod is None:
        return common.real_kernel(x, scale, shift, scale_constant, out)
    if out is None:
        out = torch.empty_like(x)
    out.copy_(mod.fuse_scale_shift_kernel(x, scale, shift, scale_constant, block_l, block_c))
    return out
