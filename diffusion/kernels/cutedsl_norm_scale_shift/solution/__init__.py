"""Candidate arm of cutedsl_norm_scale_shift: both upstream signatures (plus out=) for a drop-in into SGLang."""
from .norm_scale_shift import fused_norm_scale_shift, fused_scale_residual_norm_scale_shift

__all__ = ["fused_norm_scale_shift", "fused_scale_residual_norm_scale_shift"]
