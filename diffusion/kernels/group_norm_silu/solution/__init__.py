"""Candidate arm of group_norm_silu: exports both upstream entry points' signatures (plus out=) for a drop-in into
SGLang."""
from .group_norm_silu import apply_group_norm_silu, triton_group_norm_silu

__all__ = ["triton_group_norm_silu", "apply_group_norm_silu"]
