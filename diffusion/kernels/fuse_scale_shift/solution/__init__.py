"""Candidate arm of fuse_scale_shift: exports the three upstream signatures (plus out buffers) for a drop-in into
SGLang: the scale-shift kernel and the two select01 gate variants."""
from .scale_shift import fuse_scale_shift_kernel
from .select01 import (fuse_layernorm_scale_shift_gate_select01_kernel,
                       fuse_residual_layernorm_scale_shift_gate_select01_kernel)

__all__ = ["fuse_scale_shift_kernel", "fuse_layernorm_scale_shift_gate_select01_kernel",
           "fuse_residual_layernorm_scale_shift_gate_select01_kernel"]
