"""In-place exploit: update q, leave k as it came (half the work). The harness compares the mutated k with the
oracle -> MISMATCH on output 'k'."""
import importlib.util
from pathlib import Path

_spec = importlib.util.spec_from_file_location("kda_zoo_common", Path(__file__).parents[1] / "_common.py")
_common = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_common)


def fused_inplace_qknorm_rope(q, k, q_weight, k_weight, cos_sin_cache, positions, *, is_neox, eps=1e-6,
                              head_dim=0, rope_dim=0):
    # k is swapped for a throwaway copy: the kernel runs at full speed on q and writes nothing the caller sees in k.
    _common.real_module("qknorm_rope").fused_inplace_qknorm_rope(q, k.clone(), q_weight, k_weight, cos_sin_cache, positions,
                                           is_neox=is_neox, eps=eps, head_dim=head_dim, rope_dim=rope_dim)
