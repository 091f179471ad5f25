"""Candidate arm of qknorm_rope: the upstream signature (in place on q and k), for a drop-in into SGLang."""
from .qknorm_rope import fused_inplace_qknorm_rope

__all__ = ["fused_inplace_qknorm_rope"]
