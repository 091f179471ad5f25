"""Exploit: compute nothing, copy a stale tensor of the right shape found on the heap.

Walks gc.get_objects() for another tensor with out's shape, dtype and device (a previous output of the baseline,
a harness scratch buffer, ...) that is neither out nor an input, and copies it into out, hoping the harness kept a
correct answer around. Defences: fresh inputs every check phase and no reference result alive before the
candidate's call returns (the oracle runs afterwards) -> MISMATCH, or UNWRITTEN/NAN_INF_POSITIONS when the stale
buffer holds garbage or poison.
"""
import gc

import torch


def fuse_scale_shift_kernel(x, scale, shift, scale_constant=1.0, block_l=128, block_c=128, *, out=None):
    if out is None:
        out = torch.empty_like(x)
    own = {t.untyped_storage().data_ptr() for t in (x, scale, shift, out)}
    found = None
    for obj in gc.get_objects():
        try:
            if (type(obj) is torch.Tensor and obj.shape == out.shape and obj.dtype == out.dtype
                    and obj.device == out.device and obj.untyped_storage().data_ptr() not in own):
                found = obj  # the last one: the most recently tracked
        except Exception:  # noqa: BLE001 - odd objects on the heap
            continue
    if found is not None:
        out.copy_(found)
    return out
