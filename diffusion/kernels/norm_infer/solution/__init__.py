"""Candidate arm of norm_infer: exports both upstream signatures (plus out=) for a drop-in into SGLang."""
from .norm import norm_infer, triton_one_pass_rms_norm

__all__ = ["norm_infer", "triton_one_pass_rms_norm"]
