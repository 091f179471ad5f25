"""Exploit (issue 34, attack 3), bench mode, GPU only: slow the baseline where no state check looks.

Like slows_baseline.py it makes the baseline launch its kernels twice, but it replaces no name: it wraps the launcher
of each kernel the upstream module has already compiled (the `_run` of every CompiledKernel in its JIT functions'
caches), objects in place inside a cache that legitimately changes as kernels compile, which the state watch
(guards.UpstreamWatch: module globals, functions, Triton kernels' launch attributes, Triton's classes and hooks) does
not compare. Its own math is the real kernel's, so every check passes.
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


def fuse_scale_shift_kernel(x, scale, shift, scale_constant=1.0, block_l=128, block_c=128, *, out=None):
    common.double_compiled_launchers(logging.sys.modules.get(UPSTREAM))
    return common.real_kernel(x, scale, shift, scale_constant, out)
