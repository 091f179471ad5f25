"""Candidate arm of rope: exports upstream's signature apply_rope_with_cos_sin_cache_inplace(q, k, cos_sin_cache,
positions, *, is_neox, rope_dim=0, fused_args=None) for a drop-in into SGLang's RotaryEmbedding.forward_cuda."""
from .rope import apply_rope_with_cos_sin_cache_inplace

__all__ = ["apply_rope_with_cos_sin_cache_inplace"]
