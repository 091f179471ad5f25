"""Candidate arm of store_cache: exports the upstream signature (k, v, k_cache, v_cache, indices, *, row_bytes=0,
num_split=0, size_limit=0), writing the caches in place, for a drop-in into SGLang's MHA token pool."""
from .store_cache import store_cache

__all__ = ["store_cache"]
