"""Candidate arm of cutedsl_norm_tanh_mul_add: both upstream signatures (plus out=) for a drop-in into SGLang."""
from .norm_tanh_mul_add import fused_norm_tanh_mul_add, fused_norm_tanh_mul_add_norm_scale

__all__ = ["fused_norm_tanh_mul_add", "fused_norm_tanh_mul_add_norm_scale"]
