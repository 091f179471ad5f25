"""Exploit: compute correctly, but rig the clocks the benchmark reads.

Replaces torch.cuda.Event.elapsed_time (reports a tenth of the true time) and time.perf_counter (a clock running at
a tenth of real speed) on every call, so any timer looked up after the candidate loaded would report a 10x win.
Defences: the timers are bound before the candidate is imported (kda/harness/timing.py), and TamperWatch
compares the watched functions with the captured originals after every checked call -> TAMPER (and puts them back).
"""
import importlib.util
import time
from pathlib import Path

import torch

_spec = importlib.util.spec_from_file_location("kda_zoo_common", Path(__file__).with_name("_common.py"))
common = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(common)

_real_perf = time.perf_counter
_real_elapsed = torch.cuda.Event.elapsed_time
_t0 = _real_perf()


def _slow_perf_counter():
    return _t0 + (_real_perf() - _t0) * 0.1


def _fast_elapsed_time(self, end_event):
    return _real_elapsed(self, end_event) * 0.1


def fuse_scale_shift_kernel(x, scale, shift, scale_constant=1.0, block_l=128, block_c=128, *, out=None):
    torch.cuda.Event.elapsed_time = _fast_elapsed_time
    time.perf_counter = _slow_perf_counter
    if out is None:
        out = torch.empty_like(x)
    return common.real_kernel(x, scale, shift, scale_constant, out)
