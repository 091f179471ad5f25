"""Writes workloads.json for cutedsl_norm_tanh_mul_add. Run: python bench/make_workloads.py [--check].

Two upstream entry points share the task (sglang 0.5.15, `jit_kernel/diffusion/cutedsl/norm_tanh_mul_add_norm_scale.py`),
both reached from Z-Image's transformer block (`models/dits/zimage.py`, modulated layers, D 3840, RMSNorm eps 1e-5):
- attention half: `fused_norm_tanh_mul_add_norm_scale(attn_out, attention_norm2.weight, None, gate_msa, x,
  ffn_norm1.weight, None, scale_mlp, "rms", eps)` -> (new x, ffn input);
- FFN half, through `layers/layernorm.py: apply_rmsnorm_tanh_mul_add`: `fused_norm_tanh_mul_add(ffn_out,
  ffn_norm2.weight, None, gate_mlp, x, "rms", eps)`.
The gates and scale_mlp are `[1, 1, D]` chunks of one adaLN output `[1, 1, 4D]` (storage offsets D, 2D, 3D; `.contiguous()`
keeps them as views); shift is the residual stream `[1, S, D]`. Weights and activations are bf16.

Upstream requires x 3-D with stride(-1) == 1, scale/shift/scale2 3-D `[1|B, 1|S, D]`, weights None or `[D]`,
D % 256 == 0 and D <= 8192; every row respects that. Token counts follow the KDA-Pilot capture (S 4096 in the
noise refiner, 4128 = 4096 image + 32 caption tokens in the main layers; captured x [1, 4096|4128, 3840]:
diffusion/shapes/SOURCES.md#z-image-turbo).
"""
import sys
from pathlib import Path

from kda.shapes.catalog import production_rows
from kda.definition.workloads import tensor_decl, write_or_check

OUT = Path(__file__).with_name("workloads.json")
TMA, TMAN = "fused_norm_tanh_mul_add", "fused_norm_tanh_mul_add_norm_scale"


def t(shape, dtype="bfloat16", stride=None, offset=0, dist="normal"):
    return tensor_decl(shape, dtype, stride, offset, dist)


def tma(rid, model, source, x, weight, bias, scale, shift, norm, eps, seed, production=True, cpu=False):
    return {"id": rid, "production": production, "model": model, "source": source, "function": TMA,
            "tensors": {"x": x, "weight": weight, "bias": bias, "scale": scale, "shift": shift},
            "scalars": {"norm_type": norm, "eps": eps}, "seed": seed, "cpu": cpu}


def tman(rid, model, source, x, weight, bias, scale, shift, weight2, bias2, scale2, norm, eps, seed,
         production=True, cpu=False):
    return {"id": rid, "production": production, "model": model, "source": source, "function": TMAN,
            "tensors": {"x": x, "weight": weight, "bias": bias, "scale": scale, "shift": shift, "weight2": weight2,
                        "bias2": bias2, "scale2": scale2},
            "scalars": {"norm_type": norm, "eps": eps}, "seed": seed, "cpu": cpu}


D = 3840  # Z-Image width, also used by regression rows
# Production rows come from the shape catalog (diffusion/shapes/z-image-turbo.toml). scale / scale2 are [1, 1, D]
# adaLN chunks at storage offset chunk x D; shift is per token; bias None (RMSNorm).
rows = []
for r in sorted(production_rows("cutedsl_norm_tanh_mul_add"), key=lambda r: (r["S"], r.seed)):
    S, d, wd = r["S"], r["D"], r["weight"]
    assert not r["bias"]
    x, w = t([1, S, d]), t([d], wd)
    scale = t([1, 1, d], offset=r["scale_chunk"] * d)
    if r["form"] == "norm_scale":
        rows.append(tman(r.id, r.model, r.source, x, w, None, scale, t([1, S, d]), t([d], wd), None,
                         t([1, 1, d], offset=r["scale2_chunk"] * d), r["norm"], r["eps"], r.seed))
    else:
        rows.append(tma(r.id, r.model, r.source, x, w, None, scale, t([1, S, d]), r["norm"], r["eps"], r.seed))

REG = "regression"
rows += [
    # forms of scale/shift (validate_3d: [1|B, 1|S, D])
    tma("reg_tma_bf16_zimage_small_s7", REG, "regression: the Z-Image call on 7 tokens",
        t([1, 7, D]), t([D]), None, t([1, 1, D]), t([1, 7, D]), "rms", 1e-5, 9001, False, True),
    tma("reg_tma_bf16_per_token_scale_b2_s5_d256", REG, "regression: per-token [B, S, D] scale, per-batch [B, 1, D] "
        "shift, B = 2, D = 256 (one warp upstream)", t([2, 5, 256]), t([256]), None, t([2, 5, 256]), t([2, 1, 256]),
        "rms", 1e-5, 9002, False, True),
    tma("reg_tma_fp32_bcast_shift_b3_s4_d512", REG, "regression: fp32, [1, S, D] scale and [1, 1, D] shift, B = 3",
        t([3, 4, 512], "float32"), t([512], "float32"), None, t([1, 4, 512], "float32"), t([1, 1, 512], "float32"),
        "rms", 1e-6, 9003, False, True),
    tma("reg_tma_bf16_fp32_modulation_s6_d1024", REG, "regression: bf16 x with fp32 scale and shift and an fp32 "
        "weight", t([1, 6, 1024]), t([1024], "float32"), None, t([1, 1, 1024], "float32"),
        t([1, 6, 1024], "float32"), "rms", 1e-5, 9004, False, True),
    # norms and affine
    tma("reg_tma_fp16_rms_noweight_s9_d768", REG, "regression: fp16 RMSNorm without weight",
        t([1, 9, 768], "float16"), None, None, t([1, 1, 768], "float16"), t([1, 9, 768], "float16"), "rms", 1e-6,
        9101, False, True),
    tma("reg_tma_fp16_rms_bias_ignored_s3_d512", REG, "regression: RMSNorm given a bias: upstream's RMS path "
        "ignores it", t([1, 3, 512], "float16"), t([512], "float16"), t([512], "float16"), t([1, 1, 512], "float16"),
        t([1, 3, 512], "float16"), "rms", 1e-6, 9102, False, True),
    tma("reg_tma_fp32_layer_affine_b2_s3_d1536", REG, "regression: LayerNorm with fp32 weight and bias",
        t([2, 3, 1536], "float32"), t([1536], "float32"), t([1536], "float32"), t([2, 1, 1536], "float32"),
        t([2, 3, 1536], "float32"), "layer", 1e-5, 9103, False, True),
    tma("reg_tma_bf16_layer_noaffine_s11_d3072", REG, "regression: LayerNorm without affine (LayerNormTanhMulAdd)",
        t([1, 11, 3072]), None, None, t([1, 1, 3072]), t([1, 11, 3072]), "layer", 1e-6, 9104, False, True),
    tma("reg_tma_bf16_layer_weight_only_s5_d256", REG, "regression: LayerNorm with a weight and no bias: upstream "
        "applies the LayerNorm affine only when both are given, so the lone weight is ignored",
        t([1, 5, 256]), t([256]), None, t([1, 1, 256]), t([1, 5, 256]), "layer", 1e-6, 9105, False, True),
    # sizes and layouts
    tma("reg_tma_bf16_maxwidth_s3_d8192", REG, "regression: D = 8192, the widest upstream accepts",
        t([1, 3, 8192]), t([8192]), None, t([1, 1, 8192]), t([1, 3, 8192]), "rms", 1e-5, 9201, False, True),
    tma("reg_tma_bf16_one_token_d3840", REG, "regression: a single token",
        t([1, 1, D]), t([D]), None, t([1, 1, D]), t([1, 1, D]), "rms", 1e-5, 9202, False, True),
    tma("reg_tma_bf16_prime_tokens_s1021_d3840", REG, "regression: S = 1021 (prime) at Z-Image width (GPU only)",
        t([1, 1021, D]), t([D]), None, t([1, 1, D]), t([1, 1021, D]), "rms", 1e-5, 9203, False),
    tma("reg_tma_bf16_strided_b2_s5_d512", REG, "regression: x and shift token slices of wider buffers (padded "
        "strides, storage offsets of one row)", t([2, 5, 512], stride=[8 * 512, 512, 1], offset=512), t([512]), None,
        t([1, 1, 512]), t([2, 5, 512], stride=[6 * 512, 512, 1], offset=512), "rms", 1e-5, 9204, False, True),
    # values
    tma("reg_tma_bf16_large_s8_d1024", REG, "regression: x near 1e4 (the norm is scale-invariant), heavy-tailed "
        "scale (tanh saturates)", t([1, 8, 1024], dist="large"), t([1024]), None, t([1, 1, 1024], dist="heavy"),
        t([1, 8, 1024]), "rms", 1e-5, 9401, False, True),
    tma("reg_tma_fp32_specials_s16_d256", REG, "regression: NaN and +-Inf in x land where the math puts them",
        t([1, 16, 256], "float32", dist="specials"), t([256], "float32"), None, t([1, 1, 256], "float32"),
        t([1, 16, 256], "float32"), "rms", 1e-6, 9402, False, True),
    tma("reg_tma_fp32_layer_positive_s8_d512", REG, "regression: positive inputs (mean far from 0): centred variance",
        t([1, 8, 512], "float32", dist="positive"), None, None, t([1, 1, 512], "float32"),
        t([1, 8, 512], "float32"), "layer", 1e-6, 9403, False, True),
    # means far above the spread (workloads.OFFSET_MEAN), where a variance taken as E[x^2] - mean^2 cancels. Not
    # on the second norm of the _norm_scale form: its input y is itself an fp32 result, whose rounding at a mean of
    # 32 is already 0.2-0.4 of the fp32 tolerance (the real candidate measured 1.03 of it there, CPU).
    tma("reg_tma_fp32_layer_offset_s16_d3072", REG, "regression: LayerNorm of fp32 x with mean 32 over a spread of 1",
        t([1, 16, 3072], "float32", dist="offset"), None, None, t([1, 1, 3072], "float32"),
        t([1, 16, 3072], "float32"), "layer", 1e-6, 9404, False, True),
    tma("reg_tma_bf16_layer_offset_s16_d3072", REG, "regression: LayerNorm of bf16 x with mean 32 over a spread of 1",
        t([1, 16, 3072], dist="offset"), None, None, t([1, 1, 3072]), t([1, 16, 3072]), "layer", 1e-6, 9405, False,
        True),
    # the _norm_scale form
    tman("reg_tman_bf16_zimage_small_s7", REG, "regression: the Z-Image _norm_scale call on 7 tokens",
         t([1, 7, D]), t([D]), None, t([1, 1, D]), t([1, 7, D]), t([D]), None, t([1, 1, D]), "rms", 1e-5, 9501,
         False, True),
    tman("reg_tman_fp32_layer_affine_b2_s4_d512", REG, "regression: LayerNorm with both affine pairs, fp32, B = 2, "
         "per-batch scale2", t([2, 4, 512], "float32"), t([512], "float32"), t([512], "float32"),
         t([2, 1, 512], "float32"), t([2, 4, 512], "float32"), t([512], "float32"), t([512], "float32"),
         t([2, 1, 512], "float32"), "layer", 1e-5, 9502, False, True),
    tman("reg_tman_fp16_per_token_scale2_s6_d768", REG, "regression: fp16, per-token scale2 [1, S, D], second norm "
         "without weight", t([1, 6, 768], "float16"), t([768], "float16"), None, t([1, 1, 768], "float16"),
         t([1, 6, 768], "float16"), None, None, t([1, 6, 768], "float16"), "rms", 1e-6, 9503, False, True),
    tman("reg_tman_bf16_mixed_dtypes_s5_d1024", REG, "regression: bf16 x with fp32 modulation and weights",
         t([1, 5, 1024]), t([1024], "float32"), None, t([1, 1, 1024], "float32"), t([1, 5, 1024], "float32"),
         t([1024], "float32"), None, t([1, 1, 1024], "float32"), "rms", 1e-5, 9504, False, True),
    tman("reg_tman_bf16_maxwidth_s2_d8192", REG, "regression: _norm_scale at D = 8192",
         t([1, 2, 8192]), t([8192]), None, t([1, 1, 8192]), t([1, 2, 8192]), t([8192]), None, t([1, 1, 8192]),
         "rms", 1e-5, 9505, False, True),
    tman("reg_tman_bf16_large_shift_s4_d256", REG, "regression: residual stream (shift) near 1e4, so y and its "
         "second norm are dominated by the shift", t([1, 4, 256]), t([256]), None, t([1, 1, 256]),
         t([1, 4, 256], dist="large"), t([256]), None, t([1, 1, 256]), "rms", 1e-5, 9506, False, True),
    tman("reg_tman_bf16_prime_tokens_s1021_d3840", REG, "regression: S = 1021 at Z-Image width (GPU only)",
         t([1, 1021, D]), t([D]), None, t([1, 1, D]), t([1, 1021, D]), t([D]), None, t([1, 1, D]), "rms", 1e-5,
         9507, False),
]

def sweep_row(p, seed):
    """A row of the generalisation sweep (kda/definition/sweep.py draws p from config.toml's [sweep] domain): the
    Z-Image call (RMSNorm, eps 1e-5, no bias, shift the per-token residual stream) on a drawn shape and dtypes; scale
    and scale2 are [1, 1, D] chunks of one adaLN output as in production, or dense per-batch [B, 1, D]."""
    B, S, d, dt = p["B"], p["S"], p["D"], p["dtype"]
    wd = dt if p["weight_dtype"] == "x" else p["weight_dtype"]
    x, w = t([B, S, d], dt), t([d], wd)

    def scale(chunk):
        return t([1, 1, d], dt, offset=chunk * d) if p["scale"] == "chunk" else t([B, 1, d], dt)

    rid = f"{p['form']}_b{B}_s{S}_d{d}_{dt}_w_{wd}_scale_{p['scale']}"
    if p["form"] == "norm_scale":
        return tman(rid, "sweep", "sweep", x, w, None, scale(1), t([B, S, d], dt), t([d], wd), None, scale(2), "rms",
                    1e-5, seed, production=False)
    return tma(rid, "sweep", "sweep", x, w, None, scale(3), t([B, S, d], dt), "rms", 1e-5, seed, production=False)


if __name__ == "__main__":  # `kda shapes` runs it as __main__; kda's sweep imports it for sweep_row
    write_or_check(OUT, rows, sys.argv)
