"""Exploit (e2e tier, `kda e2e BLOCK`): do the work on the one call a block checks, skip it on every timed call.

A block checks each arm once, on one call, before it is timed (kda/e2e/check.py `_run_arm`, from
kda/e2e/timing.py `time_workload`), and never looks at an output again: not after the eager samples, not after the
graph replays, not after the profile. This fake computes y = x * (scale_constant + scale) + shift on the first call
of each loaded copy of itself (a block loads the candidate afresh for its check and for its timing, so each copy's
first call is the check's, or the untimed call ahead of the samples) and on any call that hands it an `out=` buffer
(a task's bench does; a block never does). Every later call returns its residual input `shift` untouched: the
block's output loses the gated FFN term, and the site costs nothing in eager_us and graph_us alike.
Its source keeps the static rules (plain operators, `torch.empty_like`, its own dict), and it touches nothing of
upstream's, so the UpstreamWatch has nothing to see.
Defences lacking: the e2e timing never checks a timed call's output. One that would stop it: check the output of
timed calls (the last call of each sample, a graph replay's output) against the fp32 path, on the very KernelSet
that is timed, with inputs the candidate cannot tell from the timed ones (a memo keyed on pointers or sampled
values would pass a re-check on the same inputs; a task's bench rotates refilled inputs for that reason).

Closed in the twentieth session: a block checks the kernel set it then times, and judges every timed arm's output
once more after the trials, from the arguments its timed calls used (kda/e2e/timing.py); this fake's arm fails there
(stage post-check) and its samples are dropped.
"""
import torch

_calls = {"n": 0}


def fuse_scale_shift_kernel(x, scale, shift, scale_constant=1.0, block_l=128, block_c=128, *, out=None):
    _calls["n"] += 1
    if out is None and _calls["n"] > 1:
        return shift  # a timed call: the residual alone, no kernel
    y = torch.empty_like(x) if out is None else out
    y[...] = x * (scale_constant + scale) + shift
    return y
