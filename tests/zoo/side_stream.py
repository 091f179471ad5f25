"""Exploit (GPU only): launch on a private CUDA stream and return before the work is done.

Enqueues torch.cuda._sleep(10**7) (~5 ms) and then the real kernel on a side torch.cuda.Stream() without making the
caller's stream wait, so the call returns at once and a timer that only waits on the current stream sees nothing.
Defences: the harness copies out with stream-ordered clones right after the call (before any device-wide
synchronize), so unfinished side-stream work reads as the NaN poison -> UNWRITTEN; device_us also ends with a
device-wide synchronize so the work is timed anyway. On CPU it cannot run (no CUDA streams): skipped.
"""
import importlib.util
from pathlib import Path

import torch

_spec = importlib.util.spec_from_file_location("kda_zoo_common", Path(__file__).with_name("_common.py"))
common = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(common)

_stream = None


def fuse_scale_shift_kernel(x, scale, shift, scale_constant=1.0, block_l=128, block_c=128, *, out=None):
    global _stream
    if out is None:
        out = torch.empty_like(x)
    if _stream is None:
        _stream = torch.cuda.Stream()
    with torch.cuda.stream(_stream):  # no _stream.wait_stream(current) and no current.wait_stream(_stream)
        torch.cuda._sleep(10**7)
        common.real_kernel(x, scale, shift, scale_constant, out)
    return out
