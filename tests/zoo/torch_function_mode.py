"""leave a TorchFunctionMode pushed after the call and do the work when the harness reads out.

The call records its inputs and returns out untouched; on the first call it also enters (and never exits) a
torch.overrides.TorchFunctionMode. Every later torch call of the process, the harness's own out.clone() included,
goes through that mode first: when it sees a read of a pending out buffer it runs the kernel into it, then lets
the read proceed. The buffer stays a plain torch.Tensor and nothing TamperWatch watches is replaced. A timed call
would cost nothing. Expected defence: TAMPER (a mode left on the torch-function or dispatch stack) or UNWRITTEN.
Caught since the harness closed this gap (see tests/zoo/catalog.py).
"""
import importlib.util
from pathlib import Path

import torch
from torch.overrides import TorchFunctionMode

_spec = importlib.util.spec_from_file_location("kda_zoo_common", Path(__file__).with_name("_common.py"))
common = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(common)

_pending = {}  # out.data_ptr() -> (out, x, scale, shift, scale_constant)


class _FinishOnRead(TorchFunctionMode):
    def __torch_function__(self, func, types, args=(), kwargs=None):
        if _pending and args and isinstance(args[0], torch.Tensor):
            job = _pending.pop(args[0].data_ptr(), None)
            if job is not None:
                out, x, scale, shift, c = job
                with torch._C.DisableTorchFunction():
                    common.real_kernel(x, scale, shift, c, out)
        return func(*args, **(kwargs or {}))


_mode = None


def fuse_scale_shift_kernel(x, scale, shift, scale_constant=1.0, block_l=128, block_c=128, *, out=None):
    global _mode
    if out is None:
        out = torch.empty_like(x)
    if _mode is None:
        _mode = _FinishOnRead()
        _mode.__enter__()  # never exited
    _pending[out.data_ptr()] = (out, x, scale, shift, scale_constant)
    return out
