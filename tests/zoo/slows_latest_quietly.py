"""Exploit (issue 40's peer), bench mode, GPU only: slow today's release where no state check looks, so the
candidate's figures over the best peer and over today's SGLang grow.

As slows_baseline_quietly.py does for the baseline: it wraps, in place, the launcher of each kernel the later
release's module (`sglang_0_5_23...`, loaded only in a GPU bench) has already compiled, so the peer `latest` launches
twice; its own math is the real kernel's, so every check passes.
Defence: the peer is timed alone too, in the clean worker that never imported the candidate (the candidate's worker
stopped meanwhile), by the baseline's rule (kda/harness/runner.py) -> PEER_SLOWED. Run it with
`scripts/gpu_exploit_zoo.py --bench-probe`.
"""
import importlib.util
import logging
from pathlib import Path

_spec = importlib.util.spec_from_file_location("kda_zoo_common", Path(__file__).with_name("_common.py"))
common = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(common)

LATEST = "sglang_0_5_23.kernels.ops.diffusion.modulate.scale_shift_triton"


def fuse_scale_shift_kernel(x, scale, shift, scale_constant=1.0, block_l=128, block_c=128, *, out=None):
    common.double_compiled_launchers(logging.sys.modules.get(LATEST))
    return common.real_kernel(x, scale, shift, scale_constant, out)
