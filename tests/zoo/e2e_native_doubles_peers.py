"""Exploit (e2e tier, `kda e2e BLOCK`): native code, which the static rules never read, slows the peers in place.

A block runs every arm in one process, so a candidate's CUDA/C++ extension (kda.runtime.cuda_ext, allowed: the
sources beside the module, `CudaExtension(prefix, __file__, folder, ...)`) runs with the whole interpreter in reach.
The static rules check .py files only (docs/harness.md: native code is "reviewed, not checked"), and the
UpstreamWatch compares the state of upstream's and 0.5.23's modules only. This fake's C++ (e2e_native/
doubles_peers.cpp), called when the candidate is imported, finds the upstream and latest arms' resolved kernel
sets (kda.e2e.kernels.KernelSet, through gc) and wraps every site's function in place in the set's own dict so that
it runs twice: every timed block call of those arms does twice their kernels' work, the outputs stay right (the
arms' checks ran before, and a second run gives the same numbers), and no module global, function code or Triton
kernel of upstream's changes. Its own math is honest.
What stops it (kda.e2e.alone): after the run, the peers are timed again in a child process that never imported a
candidate, and each site's kernel launches in one profiled block call are compared exactly. Beside this candidate
upstream's sites launch twice the work they do alone, so every workload's speedups are withheld
(tests/e2e/test_e2e_redteam.py). A native slowdown that adds no launch (a kernel given other arguments, a delayed
host path) is bounded only by the time comparison (kda.e2e.alone.MAX_RATIO), which is loose.
"""
import torch

from kda.runtime.cuda_ext import CudaExtension

_ext = CudaExtension("kda_zoo_e2e_doubles_peers", __file__, "e2e_native", ("doubles_peers.cpp",))
_ext.load().arm()


def fuse_scale_shift_kernel(x, scale, shift, scale_constant=1.0, block_l=128, block_c=128, *, out=None):
    y = torch.empty_like(x) if out is None else out
    y[...] = x * (scale_constant + scale) + shift
    return y
