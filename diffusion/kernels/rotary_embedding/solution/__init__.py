"""Candidate arm of rotary_embedding: both upstream signatures (plus out=), for a drop-in into SGLang."""
from .rotary import apply_ltx2_split_rotary_emb, apply_rotary_embedding

__all__ = ["apply_rotary_embedding", "apply_ltx2_split_rotary_emb"]
