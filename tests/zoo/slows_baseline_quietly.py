"""Exploit (issue 34, attack 3), bench mode, GPU only: slow the baseline where no state check can see it.

Like slows_baseline.py it replaces the upstream Triton kernel with a proxy that launches twice, but only from its
first call after a checked one, and the proxy puts the original back itself after a few launches. Every watch of
upstream's state then finds the original in place; what stays behind is the baseline's CUDA graph, captured while
the proxy was in place (its replays launch twice), and eager baseline samples timed before the proxy left. Checks
pass by construction (the candidate's own math is the real kernel's).
Defence: the baseline timed in a second worker that never imported the candidate, with the candidate's worker
stopped meanwhile, compared median over median (kda/harness/runner.py) -> BASELINE_SLOWED. Run it with
`scripts/gpu_exploit_zoo.py --bench-probe`.
"""
import importlib.util
import logging
from pathlib import Path

_spec = importlib.util.spec_from_file_location("kda_zoo_common", Path(__file__).with_name("_common.py"))
common = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(common)

UPSTREAM = "sglang.jit_kernel.diffusion.triton.scale_shift"
KERNEL = "fuse_scale_shift_kernel_blc_opt"
LAUNCHES = 64  # the proxy's life: past one graph capture of up to max_inner calls it may be gone, by design of the fake


class _TwiceForAWhile:
    def __init__(self, mod, kernel):
        self.mod, self.kernel, self.left = mod, kernel, LAUNCHES

    def __getitem__(self, grid):
        launch = self.kernel[grid]

        def twice(*args, **kwargs):
            self.left -= 1
            if self.left <= 0:
                setattr(self.mod, KERNEL, self.kernel)  # leave no trace for the next state check
            launch(*args, **kwargs)
            return launch(*args, **kwargs)

        return twice

    def __getattr__(self, name):
        return getattr(self.kernel, name)


def fuse_scale_shift_kernel(x, scale, shift, scale_constant=1.0, block_l=128, block_c=128, *, out=None):
    mod = logging.sys.modules.get(UPSTREAM)
    if mod is not None and not isinstance(getattr(mod, KERNEL), _TwiceForAWhile):
        setattr(mod, KERNEL, _TwiceForAWhile(mod, getattr(mod, KERNEL)))
    return common.real_kernel(x, scale, shift, scale_constant, out)
