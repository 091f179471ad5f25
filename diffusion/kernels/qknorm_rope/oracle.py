"""qknorm_rope written from the math, in fp32. Outputs are q and k after the op, returned in fp32; the kernels store
q's dtype in place.

For each token n and each head h of q (weight q_weight) and of k (weight k_weight), with x = x[n, h, :] of D elements:
    y = x * (rsqrt(mean(x^2) + eps) * w)                               (RMSNorm over the head, fp32 statistics)
then the first R = rope_dim elements of y are rotated by row p = positions[n] of cos_sin_cache [max_pos, R]
(cos = cache[p, :R/2], sin = cache[p, R/2:]); elements R..D-1 keep y.
    NeoX (is_neox=True), halves a = y[:R/2], b = y[R/2:R]:   out = [a cos - b sin, b cos + a sin]
    interleaved (GPT-J), pairs (y[2i], y[2i+1]):            out[2i] = y[2i] cos[i] - y[2i+1] sin[i]
                                                            out[2i+1] = y[2i+1] cos[i] + y[2i] sin[i]
rope_dim 0 means the cache's width, head_dim 0 means q's last dimension, as upstream's defaults.
"""
import torch


def _norm_rope(x, w, cos, sin, eps, is_neox, R):
    xf = x.float()
    rstd = torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)
    y = xf * (rstd * w.float())
    r, rest = y[..., :R], y[..., R:]
    if is_neox:
        a, b = r[..., : R // 2], r[..., R // 2:]
        rot = torch.cat((a * cos - b * sin, b * cos + a * sin), dim=-1)
    else:
        a, b = r[..., 0::2], r[..., 1::2]
        rot = torch.stack((a * cos - b * sin, b * cos + a * sin), dim=-1).flatten(-2)
    return torch.cat((rot, rest), dim=-1)


def reference(row, inputs):
    q, k = inputs["q"], inputs["k"]
    cache, positions = inputs["cos_sin_cache"], inputs["positions"]
    sc = row.scalars
    R = sc.get("rope_dim") or cache.shape[-1]
    rows = cache.float()[positions.long()]  # [N, R]
    cos, sin = rows[:, None, : R // 2], rows[:, None, R // 2: R]  # broadcast over heads
    is_neox, eps = bool(sc["is_neox"]), float(sc["eps"])
    return {"q": _norm_rope(q, inputs["q_weight"], cos, sin, eps, is_neox, R),
            "k": _norm_rope(k, inputs["k_weight"], cos, sin, eps, is_neox, R)}
