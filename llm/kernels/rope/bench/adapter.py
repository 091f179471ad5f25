"""How the harness calls each arm of rope with the inputs a row declares.

The op works in place on q and k and returns None (config `check.inplace = ["q", "k"]`): the outputs ARE q and k,
so `output_specs` names exactly those two and the `out` dict the harness passes holds the input tensors themselves;
neither arm gets a buffer of its own. Both arms are called as SGLang 0.5.15's RotaryEmbedding.forward_cuda
(srt/layers/rotary_embedding/base.py:370-384) calls the entry point: keywords positions, q, k, cos_sin_cache,
is_neox, no rope_dim (0: the cache's width; a regression row passes it explicitly) and no fused_args.
"""
import torch

FN = "apply_rope_with_cos_sin_cache_inplace"


def build_key(row):
    """The template signature upstream JIT-builds a module for: (is_neox, rope_dim, dtype)."""
    sc = row.scalars
    return (bool(sc["is_neox"]), int(sc["rope_dim"]) or row.tensors["cos_sin_cache"].shape[-1],
            row.tensors["q"].dtype)


def output_specs(row, inputs):
    return {k: (tuple(inputs[k].shape), inputs[k].dtype) for k in ("q", "k")}


def _kwargs(row, inputs):
    i, sc = inputs, row.scalars
    kw = {"positions": i["positions"], "q": i["q"], "k": i["k"], "cos_sin_cache": i["cos_sin_cache"],
          "is_neox": bool(sc["is_neox"])}
    if int(sc["rope_dim"]):
        kw["rope_dim"] = int(sc["rope_dim"])
    return kw


def call_baseline(upstream, row, inputs, out):
    upstream[FN](**_kwargs(row, inputs))


def call_candidate(solution, row, inputs, out):
    return solution.apply_rope_with_cos_sin_cache_inplace(**_kwargs(row, inputs))


def bytes_moved(row):
    """q and k (their R-wide views) read once and written once, positions read once, one cache row of R fp32 values
    per token (production positions are distinct tokens, so no row is shared)."""
    t = row.tensors
    q, k = t["q"], t["k"]
    esize = torch.empty((), dtype=q.torch_dtype).element_size()
    n = q.shape[0]
    R = t["cos_sin_cache"].shape[-1]
    return 2 * (q.numel + k.numel) * esize + t["positions"].nbytes + n * R * 4
