"""rope written from the math, in fp32. Outputs are q and k after the op, returned in fp32; the kernels store q's
dtype in place.

For each token n with p = positions[n], cos = cos_sin_cache[p, :R/2] and sin = cos_sin_cache[p, R/2:R]
(R = rope_dim, or the cache's width when rope_dim is 0), every head x = q[n, h, :R] (and k[n, h, :R]) is rotated:
    NeoX (is_neox=True), halves a = x[:R/2], b = x[R/2:]:   out = [a cos - b sin, b cos + a sin]
    interleaved (GPT-J), pairs (x[2i], x[2i+1]):           out[2i]   = x[2i] cos[i] - x[2i+1] sin[i]
                                                           out[2i+1] = x[2i+1] cos[i] + x[2i] sin[i]
q and k are [T, H, R] views (partial rotary: the first R columns of wider heads; what lies outside the view is not
an output). NaN/Inf propagate as the products put them (an Inf times a zero sin is NaN).
"""
import torch


def _rotate(x, cos, sin, is_neox):
    xf = x.float()
    R = xf.shape[-1]
    if is_neox:
        a, b = xf[..., : R // 2], xf[..., R // 2:]
        return torch.cat((a * cos - b * sin, b * cos + a * sin), dim=-1)
    a, b = xf[..., 0::2], xf[..., 1::2]
    return torch.stack((a * cos - b * sin, b * cos + a * sin), dim=-1).flatten(-2)


def reference(row, inputs):
    q, k = inputs["q"], inputs["k"]
    cache, positions = inputs["cos_sin_cache"], inputs["positions"]
    R = int(row.scalars.get("rope_dim") or 0) or cache.shape[-1]
    rows = cache.float()[positions.long()]  # [T, R]
    cos, sin = rows[:, None, : R // 2], rows[:, None, R // 2: R]  # broadcast over heads
    is_neox = bool(row.scalars["is_neox"])
    return {"q": _rotate(q, cos, sin, is_neox), "k": _rotate(k, cos, sin, is_neox)}
