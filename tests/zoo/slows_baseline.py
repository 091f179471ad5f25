"""Exploit (issue 34, attack 3): compute correctly, and make the baseline arm launch its kernel twice.

The candidate is imported into the worker's interpreter, where the upstream modules live too. It reaches them
through `logging.sys.modules` (no import of sys of its own) and replaces the Triton kernel the upstream wrapper
looks up in its module globals at every call with a proxy that launches it twice: the baseline arm's time doubles
and the candidate's speedup with it. It also starts an idle thread through `logging.threading`, which could do the
same from outside any call. It re-installs the proxy on each of its own calls, so a harness that merely puts the
original back still times a slowed baseline.
Defences: upstream's state (module globals, functions, Triton kernels, Triton's classes and launch hooks) is
snapshotted before the candidate is imported and compared after every call and every sample (guards.UpstreamWatch)
-> UPSTREAM_TAMPERED; a thread whose code lives in the candidate's files -> TAMPER. (Statically its imports and the
module-attribute chain are refused as well: STATIC.)
"""
import importlib.util
import logging
from pathlib import Path

_spec = importlib.util.spec_from_file_location("kda_zoo_common", Path(__file__).with_name("_common.py"))
common = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(common)

UPSTREAM = "sglang.jit_kernel.diffusion.triton.scale_shift"
KERNEL = "fuse_scale_shift_kernel_blc_opt"


class _Twice:
    """Looks like the JIT kernel to `kernel[grid](...)`; every launch runs twice."""

    def __init__(self, kernel):
        self.kernel = kernel

    def __getitem__(self, grid):
        launch = self.kernel[grid]

        def twice(*args, **kwargs):
            launch(*args, **kwargs)
            return launch(*args, **kwargs)

        return twice

    def __getattr__(self, name):
        return getattr(self.kernel, name)


def _install():
    mod = logging.sys.modules.get(UPSTREAM)
    if mod is not None and not isinstance(getattr(mod, KERNEL, None), _Twice):
        setattr(mod, KERNEL, _Twice(getattr(mod, KERNEL)))


def _idle():
    logging.threading.Event().wait()


_install()
logging.threading.Thread(target=_idle, name="kda-zoo-idle", daemon=True).start()


def fuse_scale_shift_kernel(x, scale, shift, scale_constant=1.0, block_l=128, block_c=128, *, out=None):
    _install()
    return common.real_kernel(x, scale, shift, scale_constant, out)
