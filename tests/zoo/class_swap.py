"""turn the harness's own out buffer into a lazy tensor subclass and do the work only when it is read.

Assigns out.__class__ = LazyOut (allowed for a Python subclass of torch.Tensor) and returns out itself, so the
return check is satisfied and the call does no work. The harness then reads the buffer with out.clone(), which
dispatches through LazyOut.__torch_function__: that is where the kernel finally runs, and the clone it returns
is a plain tensor holding the right numbers. A timed call would cost nothing. Expected defence: LAYOUT/RETURN or
TAMPER (the out buffer must stay a plain torch.Tensor). Caught since the harness closed this gap (see tests/zoo/catalog.py).
"""
import importlib.util
from pathlib import Path

import torch

_spec = importlib.util.spec_from_file_location("kda_zoo_common", Path(__file__).with_name("_common.py"))
common = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(common)


class LazyOut(torch.Tensor):
    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        with torch._C.DisableTorchFunction():
            for a in args:
                pending = a.__dict__.pop("_pending", None) if isinstance(a, LazyOut) else None
                if pending is not None:
                    common.real_kernel(*pending, out=a)
            ret = func(*args, **(kwargs or {}))
        return ret


def fuse_scale_shift_kernel(x, scale, shift, scale_constant=1.0, block_l=128, block_c=128, *, out=None):
    if out is None:
        out = torch.empty_like(x)
    out.__class__ = LazyOut
    out.__dict__["_pending"] = (x, scale, shift, scale_constant)
    return out
