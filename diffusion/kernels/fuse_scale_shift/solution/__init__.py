"""Candidate arm of fuse_scale_shift: exports the upstream signature (plus out=) for a drop-in into SGLang."""
from .scale_shift import fuse_scale_shift_kernel

__all__ = ["fuse_scale_shift_kernel"]
