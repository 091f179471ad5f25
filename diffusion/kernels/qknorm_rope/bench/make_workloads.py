"""Writes workloads.json for qknorm_rope. Run: python bench/make_workloads.py [--check].

One upstream entry point, fused_inplace_qknorm_rope(q, k, q_weight, k_weight, cos_sin_cache, positions, *, is_neox,
eps, head_dim, rope_dim), called the way sglang 0.5.15's apply_qk_norm_rope (multimodal_gen/runtime/layers/
layernorm.py) calls it: q and k contiguous [B*S, H, D] (reshape of [B, S, H, D]; every DiT below makes them
contiguous first), the norm weights in q's dtype (RMSNorm parameters), positions int64 (`.to(torch.long)`, or an
arange from position_offset when the model passes none), head_dim and rope_dim explicit, rope_dim = the cache width.
Every production model passes is_neox=False (interleaved pairs) and a full-width cache (rope_dim = head_dim = 128).

Production rows come from the shape catalog (diffusion/shapes/, sources in diffusion/shapes/SOURCES.md; B = 1,
image 1024^2 -> 4096 tokens with patch 2):
- Qwen-Image: 24 heads, image 4096 and text 19 / 47 tokens, separate image and text caches, eps 1e-6.
- Qwen-Image-Edit: image 8424, text 189 / 195.
- FLUX.1 (24 heads) and FLUX.2 (48 heads): double-stream blocks call text (512) and image (4096) separately on one
  joint cache of 4608 rows, the image with position_offset = 512 (declared as a view at storage offset 512 of an
  arange over 4608); single-stream blocks call the joint 4608 tokens.
- Z-Image-Turbo: 30 heads, 4096 / 4128 tokens, eps 1e-5.
- JoyAI-Image (derived): joy_image.py config 32 heads x 128, patch (1, 2, 2), Wan VAE (8x spatial): 1024^2 -> 4096
  image tokens. Its text length is not fixed by the config, so no text row.

Regression rows (mostly small enough for the CPU gate): D 64 and 256, NeoX and interleaved, partial rotary, fp16,
GQA (Hk != Hq), one token, odd token and head counts, int32 and permuted positions, fused-QKV token strides (which
upstream accepts: q and k only need a shared head stride and unit stride along D), storage offsets (kept 16-byte
aligned: upstream loads whole vectors of up to 16 bytes), large magnitudes, NaN/Inf, upstream's defaults
(head_dim = rope_dim = 0).

Cache values are uniform in [-1, 1) (real cos/sin), norm weights positive around 1 (RMSNorm weights), q and k normal.
"""
import sys
from pathlib import Path

from kda.shapes.catalog import production_rows
from kda.definition.workloads import tensor_decl, write_or_check

OUT = Path(__file__).with_name("workloads.json")
FN = "fused_inplace_qknorm_rope"


def qk_row(rid, model, source, n, hq, d, seed, *, hk=None, rope=None, neox=False, eps=1e-6, dtype="bfloat16",
           pos_dtype="int64", pos_dist="arange", pos_offset=0, cache_rows=None, qk_stride=None, q_offset=0,
           k_offset=0, cache_offset=0, qk_dist="normal", defaults=False, production=False, cpu=True):
    hk = hk or hq
    r = rope or d
    rows = cache_rows or (n + pos_offset)
    tensors = {
        "q": tensor_decl([n, hq, d], dtype, qk_stride(hq) if qk_stride else None, q_offset, qk_dist),
        "k": tensor_decl([n, hk, d], dtype, qk_stride(hk) if qk_stride else None, k_offset, qk_dist),
        "q_weight": tensor_decl([d], dtype, dist="positive"),
        "k_weight": tensor_decl([d], dtype, dist="positive"),
        "cos_sin_cache": tensor_decl([rows, r], "float32", None, cache_offset, "uniform"),
        "positions": tensor_decl([n], pos_dtype, None, pos_offset, pos_dist),
    }
    scalars = {"is_neox": neox, "eps": eps, "head_dim": 0 if defaults else d, "rope_dim": 0 if defaults else r}
    return {"id": rid, "production": production, "model": model, "source": source, "function": FN,
            "tensors": tensors, "scalars": scalars, "seed": seed, "cpu": cpu}


def prod(r):
    """A production row from its shape-catalog entry (bf16 in every model; eps, cache length and position offset
    only where a model differs from the defaults)."""
    return qk_row(r.id, r.model, r.source, r["S"], r["Hq"], r["D"], r.seed, hk=r["Hk"], eps=r.get("eps", 1e-6),
                  dtype=r["dtype"], pos_offset=r.get("pos_offset", 0), cache_rows=r.get("cache_rows"),
                  production=True, cpu=False)


# Production rows come from the shape catalog (diffusion/shapes/: qwen-image, qwen-image-edit, flux.1-dev,
# flux.2-dev, z-image-turbo, joyai-image), in this model order and file order within a model.
MODEL_ORDER = ("Qwen-Image", "Qwen-Image-Edit", "FLUX.1", "FLUX.2", "Z-Image-Turbo", "JoyAI-Image")
rows = [prod(r) for r in production_rows("qknorm_rope", model_order=MODEL_ORDER)]

# ---- regression -------------------------------------------------------------------------------------------------
REG = "regression: {why}"
for d in (64, 128, 256):
    for neox in (False, True):
        style = "neox" if neox else "interleaved"
        rows.append(qk_row(f"reg_d{d}_{style}_n7_h3", "regression", REG.format(why=f"head_dim {d}, {style}, full rotary"),
                           7, 3, d, 1000 + d + neox, neox=neox))
for d, r, neox in ((64, 32, False), (128, 64, True), (128, 32, False), (256, 128, True), (256, 64, False)):
    style = "neox" if neox else "interleaved"
    rows.append(qk_row(f"reg_d{d}_r{r}_{style}_n9_h2", "regression",
                       REG.format(why=f"partial rotary: rope_dim {r} of head_dim {d}, {style}"),
                       9, 2, d, 1100 + d + r + neox, rope=r, neox=neox))
rows.append(qk_row("reg_fp16_d128_interleaved_n11_h4", "regression", REG.format(why="fp16 q/k/weights"),
                   11, 4, 128, 1200, dtype="float16"))
rows.append(qk_row("reg_fp16_d64_neox_n11_h4", "regression", REG.format(why="fp16, NeoX, D 64"),
                   11, 4, 64, 1201, dtype="float16", neox=True))
rows.append(qk_row("reg_gqa_hq8_hk2_n5", "regression", REG.format(why="fewer k heads than q heads (GQA)"),
                   5, 8, 128, 1300, hk=2))
rows.append(qk_row("reg_n1_h24", "regression", REG.format(why="one token"), 1, 24, 128, 1301))
rows.append(qk_row("reg_odd_n131_h3", "regression", REG.format(why="odd token and head counts"), 131, 3, 128, 1302))
rows.append(qk_row("reg_positions_int32_perm_n33_h2", "regression",
                   REG.format(why="int32 positions, a permutation (not the token index), a cache longer than N"),
                   33, 2, 128, 1303, pos_dtype="int32", pos_dist="permutation", cache_rows=50))
rows.append(qk_row("reg_fused_qkv_strides_n6_h4", "regression",
                   REG.format(why="q and k as slices of a fused [N, 3, H, D] QKV buffer: token stride 3*H*D"),
                   6, 4, 128, 1304, qk_stride=lambda h: [3 * h * 128, 128, 1]))
rows.append(qk_row("reg_storage_offsets_n6_h2", "regression",
                   REG.format(why="storage offsets on q, k (16-byte multiples), positions and the cache"),
                   6, 2, 128, 1305, q_offset=64, k_offset=128, pos_offset=3, cache_offset=256, cache_rows=12))
rows.append(qk_row("reg_large_n8_h4", "regression", REG.format(why="large magnitudes (x 1e4): sum of squares in fp32"),
                   8, 4, 128, 1306, qk_dist="large"))
rows.append(qk_row("reg_specials_n16_h4", "regression", REG.format(why="NaN and +-Inf in q and k"),
                   16, 4, 128, 1307, qk_dist="specials"))
rows.append(qk_row("reg_defaults_d64_neox_n5_h2", "regression",
                   REG.format(why="head_dim = rope_dim = 0: upstream takes q's last dim and the cache width"),
                   5, 2, 64, 1308, neox=True, defaults=True, eps=1e-5))
rows.append(qk_row("reg_neox_d128_n8192_h32", "regression",
                   REG.format(why="a large NeoX row (the production models are all interleaved)"),
                   8192, 32, 128, 1309, neox=True, cpu=False))


def sweep_row(p, seed):
    """A row of the generalisation sweep (kda/definition/sweep.py draws p from config.toml's [sweep] domain): the
    production call (cache as wide as the head, positions an arange) on B*S tokens, q and k contiguous or slices of
    a fused [N, 3, H, D] QKV buffer."""
    n, h, d = p["B"] * p["S"], p["heads"], p["head_dim"]
    style = "neox" if p["neox"] else "interleaved"
    fused = p["layout"] == "fused_qkv"
    return qk_row(f"b{p['B']}_s{p['S']}_h{h}_d{d}_{p['dtype']}_{style}_{p['layout']}", "sweep", "sweep", n, h, d,
                  seed, neox=p["neox"], dtype=p["dtype"], qk_stride=(lambda heads: [3 * heads * d, d, 1]) if fused
                  else None, cpu=False)

if __name__ == "__main__":
    write_or_check(OUT, rows, sys.argv[1:])
