"""How the harness calls each arm of qknorm_rope with the inputs a row declares.

The op works in place on q and k and returns None (config `check.inplace = ["q", "k"]`): the outputs ARE q and k,
so `output_specs` names exactly those two (with their own shapes and dtypes) and the `out` dict the harness passes
holds the input tensors themselves; neither arm gets a buffer of its own. Both arms are called with the keyword
arguments SGLang's apply_qk_norm_rope passes (head_dim and rope_dim explicit; a row with 0 takes upstream's defaults).
"""
import torch

FN = "fused_inplace_qknorm_rope"


def build_key(row):
    """The template signature upstream JIT-builds a module for (scripts/warm_baseline.py builds them in parallel)."""
    sc, q = row.scalars, row.tensors["q"]
    return (int(sc["head_dim"]) or q.shape[-1], int(sc["rope_dim"]) or row.tensors["cos_sin_cache"].shape[-1],
            bool(sc["is_neox"]), q.dtype)


def output_specs(row, inputs):
    return {k: (tuple(inputs[k].shape), inputs[k].dtype) for k in ("q", "k")}


def _args(row, inputs):
    i, sc = inputs, row.scalars
    args = (i["q"], i["k"], i["q_weight"], i["k_weight"], i["cos_sin_cache"], i["positions"])
    kwargs = {"is_neox": bool(sc["is_neox"]), "eps": float(sc["eps"]), "head_dim": int(sc["head_dim"]),
              "rope_dim": int(sc["rope_dim"])}
    return args, kwargs


def call_baseline(upstream, row, inputs, out):
    args, kwargs = _args(row, inputs)
    upstream[FN](*args, **kwargs)


def call_candidate(solution, row, inputs, out):
    args, kwargs = _args(row, inputs)
    return solution.fused_inplace_qknorm_rope(*args, **kwargs)


def bytes_moved(row):
    """q and k read once and written once; each weight read once; positions read once; one cache row of R fp32 values
    per token (production positions are distinct tokens, so no row is shared)."""
    t = row.tensors
    q, k = t["q"], t["k"]
    esize = torch.empty((), dtype=q.torch_dtype).element_size()
    n = q.shape[0]
    R = t["cos_sin_cache"].shape[-1]
    return (2 * (q.numel + k.numel) * esize + t["q_weight"].nbytes + t["k_weight"].nbytes + t["positions"].nbytes
            + n * R * 4)
