"""In-place exploit: the right q and k, but the call also scribbles on memory it was not given: the storage of q
outside q's view (the gap a storage offset leaves) and the k norm weight. Only q and k are declared in place ->
INPUT_MUTATED ('q (outside its view)', 'k_weight')."""
import importlib.util
from pathlib import Path

_spec = importlib.util.spec_from_file_location("kda_zoo_common", Path(__file__).parents[1] / "_common.py")
_common = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_common)


def fused_inplace_qknorm_rope(q, k, q_weight, k_weight, cos_sin_cache, positions, *, is_neox, eps=1e-6,
                              head_dim=0, rope_dim=0):
    _common.real_module("qknorm_rope").fused_inplace_qknorm_rope(q, k, q_weight, k_weight, cos_sin_cache, positions,
                                           is_neox=is_neox, eps=eps, head_dim=head_dim, rope_dim=rope_dim)
    if q.storage_offset() > 0:
        q.as_strided((1,), (1,), 0).add_(1.0)
    k_weight.add_(0.5)
