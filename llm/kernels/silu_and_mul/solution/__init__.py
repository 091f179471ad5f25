"""Candidate arm of silu_and_mul: exports the three upstream signatures (input, out=None, expert_ids=None,
expert_step=1) for a drop-in into SGLang: silu, erf-gelu and tanh-gelu gated activations."""
from .act_and_mul import gelu_and_mul, gelu_tanh_and_mul, silu_and_mul

__all__ = ["silu_and_mul", "gelu_and_mul", "gelu_tanh_and_mul"]
