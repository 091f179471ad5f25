"""Writes workloads.json for cutedsl_norm_scale_shift. Run: python bench/make_workloads.py [--check].

Two upstream entry points share the task (sglang 0.5.15, `jit_kernel/diffusion/cutedsl/scale_residual_norm_scale_shift.py`):
- `fused_norm_scale_shift(x, weight, bias, scale, shift, norm_type, eps)`, reached from
  `layers/layernorm.py: _NormScaleShift.forward_cuda` (LayerNormScaleShift / RMSNorm variant);
- `fused_scale_residual_norm_scale_shift(residual, x, gate, weight, bias, scale, shift, norm_type, eps)`, reached from
  `_ScaleResidualNormScaleShift.forward_cuda`; an int gate (always 1) arrives as None.
Both layers pass `.contiguous()` tensors, so production rows declare what the entry point receives after that copy
(for instance Wan2.2-TI2V's per-token scale is a strided chunk in the model and contiguous here). The entry points
accept more (strided leading dims, every broadcast form, fp16/fp32): regression rows cover it.

Upstream refuses D % 256 != 0 and D > 8192, and x must be [B, S, D] with stride(-1) == 1; every row respects that.
Production rows come from the shape catalog (diffusion/shapes/); their shapes follow the KDA-Pilot capture (39 unique
signatures up to mova [1, 176400, 5120]: diffusion/shapes/SOURCES.md#kda-pilot-capture, and each row's source names
its model's section); dtypes, affine flags and eps come from the 0.5.15 model files named in each row's source.
"""
import sys
from pathlib import Path

from kda.shapes.catalog import production_rows
from kda.definition.workloads import tensor_decl, write_or_check

OUT = Path(__file__).with_name("workloads.json")
NSS, SRN = "fused_norm_scale_shift", "fused_scale_residual_norm_scale_shift"


def t(shape, dtype="bfloat16", stride=None, offset=0, dist="normal"):
    return tensor_decl(shape, dtype, stride, offset, dist)


def nss(rid, model, source, x, weight, bias, scale, shift, norm, eps, seed, production=True, cpu=False):
    return {"id": rid, "production": production, "model": model, "source": source, "function": NSS,
            "tensors": {"x": x, "weight": weight, "bias": bias, "scale": scale, "shift": shift},
            "scalars": {"norm_type": norm, "eps": eps}, "seed": seed, "cpu": cpu}


def srn(rid, model, source, residual, x, gate, weight, bias, scale, shift, norm, eps, seed, production=True,
        cpu=False):
    """A residual row; gate None is the int gate 1 the layer turns into None."""
    return {"id": rid, "production": production, "model": model, "source": source, "function": SRN,
            "tensors": {"residual": residual, "x": x, "gate": gate, "weight": weight, "bias": bias, "scale": scale,
                        "shift": shift},
            "scalars": {"norm_type": norm, "eps": eps}, "seed": seed, "cpu": cpu}


# --- Production rows come from the shape catalog (diffusion/shapes/: wan2.2-*, hunyuanvideo, qwen-image, helios,
# mova-720p), in seed order. Each row names its form (plain / residual), the layout and dtype of scale and shift
# (`mod`: "1,1,D", "1,S,D", "1,D" or "1"), the gate's (residual form; "none" is the int gate 1 the layer turns into
# None) and the dtype of weight and bias ("none": affine off). Why each model passes what it passes:
# - Wan2.2-T2V / I2V-A14B (wanvideo.py WanTransformerBlock, D 5120, eps 1e-6): temb is 3-D, so
#   `(scale_shift_table + temb.float()).chunk(6, dim=1)` gives fp32 [1, 1, D] modulation. norm1 is
#   LayerNormScaleShift (affine off); self_attn_residual_norm is ScaleResidualLayerNormScaleShift (fp32 affine) with
#   gate_msa fp32 [1, 1, D] and the bf16 zeros((1,)) shift/scale placeholders (declared with random values: a stricter
#   test of the [1] form); cross_attn_residual_norm (affine off) gets gate 1 -> None.
# - Wan2.2-TI2V-5B (D 3072): temb is 4-D, so the modulation is per token, fp32 [1, S, D] (a strided chunk of
#   [1, S, 6, D] that forward_cuda makes contiguous).
# - HunyuanVideo (hunyuanvideo.py, D 3072, eps 1e-6, affine off): `mod(vec).chunk(6, dim=-1)`, bf16 [1, D].
# - Qwen-Image (qwen_image.py, D 3072, eps 1e-6, affine off): `mod_params.chunk(3, -1)` then unsqueeze(1): bf16
#   [1, 1, D]; 0.5.15's native CUDA path takes these on compute capability >= 10, an H100/H200 runs CuTe DSL.
# - Helios (helios.py, D 5120): timestep_proj is permuted to [B, S, 6, D]: per-token fp32 modulation.
# - MOVA-720p (mova_video_dit.py: video D 5120, audio D 1536): modulation assumed as Wan's fp32 [1, 1, D].
def mod_tensor(form, dtype, S, D, B=1):
    if form == "none":
        return None
    return t([S if p == "S" else D if p == "D" else B if p == "B" else int(p) for p in form.split(",")], dtype)


rows = []
for r in sorted(production_rows("cutedsl_norm_scale_shift"), key=lambda r: r.seed):
    S, D = r["S"], r["D"]
    x = t([1, S, D])
    w = None if r["affine"] == "none" else t([D], r["affine"])
    mod = mod_tensor(r["mod"], r["mod_dtype"], S, D)
    if r["form"] == "plain":
        rows.append(nss(r.id, r.model, r.source, x, w, w, mod, mod, r["norm"], r["eps"], r.seed))
    else:
        gate = mod_tensor(r["gate"], r["gate_dtype"], S, D)
        rows.append(srn(r.id, r.model, r.source, x, x, gate, w, w, mod, mod, r["norm"], r["eps"], r.seed))

# --- Regressions: everything the entry points accept that production does not exercise.
REG = "regression"
rows += [
    # broadcast forms of scale/shift (validate_scale_shift): [1], [D], [1|B, D], [1|B, 1|S, D], [B, F, 1, D]
    nss("reg_nss_bf16_scalar_bcast_b1_s7_d256", REG, "regression: [1] scale and shift (the scalar form), D = 256 "
        "(one warp upstream)", t([1, 7, 256]), None, None, t([1]), t([1]), "layer", 1e-6, 9001, False, True),
    nss("reg_nss_bf16_vec_d_b2_s5_d512", REG, "regression: [D] scale/shift, B = 2",
        t([2, 5, 512]), None, None, t([512]), t([512], "float32"), "layer", 1e-6, 9002, False, True),
    nss("reg_nss_bf16_bd_b2_s3_d768", REG, "regression: [B, D] scale/shift (per-batch), B = 2",
        t([2, 3, 768]), None, None, t([2, 768]), t([2, 768]), "layer", 1e-6, 9003, False, True),
    nss("reg_nss_fp16_b1d_b3_s4_d256", REG, "regression: fp16 x, [B, 1, D] and [1, D] scale/shift, B = 3",
        t([3, 4, 256], "float16"), None, None, t([3, 1, 256], "float16"), t([1, 256], "float16"), "layer", 1e-5,
        9004, False, True),
    nss("reg_nss_bf16_bsd_b2_s9_d256", REG, "regression: full [B, S, D] scale/shift, B = 2, S = 9",
        t([2, 9, 256]), None, None, t([2, 9, 256]), t([2, 9, 256]), "layer", 1e-6, 9005, False, True),
    nss("reg_nss_bf16_frames_b2_s12_f3_d256", REG, "regression: per-frame [B, F, 1, D] scale/shift (F = 3 frames of "
        "4 tokens)", t([2, 12, 256]), None, None, t([2, 3, 1, 256], "float32"), t([2, 3, 1, 256], "float32"),
        "layer", 1e-6, 9006, False, True),
    nss("reg_nss_bf16_mixed_forms_b2_s6_d512", REG, "regression: scale and shift in different forms ([1, 1, D] fp32 "
        "and [B, F, 1, D] bf16)", t([2, 6, 512]), None, None, t([1, 1, 512], "float32"), t([2, 2, 1, 512]),
        "layer", 1e-6, 9007, False, True),
    # norms, affine, dtypes
    nss("reg_nss_fp32_affine_b1_s13_d1024", REG, "regression: all fp32, LayerNorm with fp32 weight and bias",
        t([1, 13, 1024], "float32"), t([1024], "float32"), t([1024], "float32"), t([1, 1, 1024], "float32"),
        t([1, 1, 1024], "float32"), "layer", 1e-5, 9101, False, True),
    nss("reg_nss_bf16_affine_bf16_b1_s11_d1536", REG, "regression: bf16 weight and bias",
        t([1, 11, 1536]), t([1536]), t([1536]), t([1, 1, 1536]), t([1, 1, 1536]), "layer", 1e-6, 9102, False, True),
    nss("reg_nss_bf16_ln_weight_only_b1_s5_d256", REG, "regression: LayerNorm with a weight and no bias: upstream "
        "applies the LayerNorm affine only when both are given, so the lone weight is ignored",
        t([1, 5, 256]), t([256], "float32"), None, t([1, 1, 256], "float32"), t([1, 1, 256], "float32"), "layer",
        1e-6, 9103, False, True),
    nss("reg_nss_bf16_rms_b1_s17_d3840", REG, "regression: RMSNorm with a bf16 weight (RMSNormScaleShift), Z-Image "
        "width", t([1, 17, 3840]), t([3840]), None, t([1, 1, 3840]), t([1, 1, 3840]), "rms", 1e-5, 9104, False, True),
    nss("reg_nss_fp16_rms_bias_b2_s3_d512", REG, "regression: RMSNorm given a bias: upstream's RMS path ignores it",
        t([2, 3, 512], "float16"), t([512], "float16"), t([512], "float16"), t([2, 512], "float16"),
        t([2, 512], "float16"), "rms", 1e-6, 9105, False, True),
    nss("reg_nss_fp32_rms_noweight_b1_s9_d768", REG, "regression: RMSNorm without weight, fp32",
        t([1, 9, 768], "float32"), None, None, t([768], "float32"), t([1], "float32"), "rms", 1e-6, 9106, False, True),
    # sizes: D limits, odd token counts, one token
    nss("reg_nss_bf16_maxwidth_b1_s3_d8192", REG, "regression: D = 8192, the widest upstream accepts (32 warps)",
        t([1, 3, 8192]), None, None, t([1, 1, 8192], "float32"), t([1, 1, 8192], "float32"), "layer", 1e-6, 9201,
        False, True),
    nss("reg_nss_bf16_one_token_d5120", REG, "regression: a single token (S = 1)",
        t([1, 1, 5120]), None, None, t([1, 1, 5120], "float32"), t([1, 1, 5120], "float32"), "layer", 1e-6, 9202,
        False, True),
    nss("reg_nss_bf16_prime_tokens_s1021_d3072", REG, "regression: S = 1021 (prime), Qwen width",
        t([1, 1021, 3072]), None, None, t([1, 1, 3072]), t([1, 1, 3072]), "layer", 1e-6, 9203, False),
    # layouts the entry point accepts: strided leading dims, storage offsets
    nss("reg_nss_bf16_strided_x_b2_s5_d512", REG, "regression: x a token slice of a wider buffer (padded batch "
        "stride) with a storage offset of one row", t([2, 5, 512], stride=[8 * 512, 512, 1], offset=512), None,
        None, t([1, 1, 512], "float32"), t([1, 1, 512], "float32"), "layer", 1e-6, 9301, False, True),
    nss("reg_nss_fp32_strided_scale_s6_d256", REG, "regression: per-token fp32 scale/shift as strided chunks of "
        "[1, S, 6, D] (what the TI2V model builds before forward_cuda's .contiguous())",
        t([1, 6, 256]), None, None, t([1, 6, 256], "float32", stride=[6 * 6 * 256, 6 * 256, 1], offset=256),
        t([1, 6, 256], "float32", stride=[6 * 6 * 256, 6 * 256, 1]), "layer", 1e-6, 9302, False, True),
    # values
    nss("reg_nss_bf16_large_b1_s8_d1024", REG, "regression: x near 1e4 (LayerNorm is scale-invariant), "
        "Cauchy-tailed scale", t([1, 8, 1024], dist="large"), None, None, t([1, 1, 1024], "float32", dist="heavy"),
        t([1, 1, 1024], "float32"), "layer", 1e-6, 9401, False, True),
    nss("reg_nss_fp32_offset_mean_b1_s8_d512", REG, "regression: positive inputs (mean far from 0): centred variance",
        t([1, 8, 512], "float32", dist="positive"), None, None, t([1, 1, 512], "float32"), t([1, 1, 512], "float32"),
        "layer", 1e-6, 9402, False, True),
    nss("reg_nss_fp32_specials_b1_s16_d256", REG, "regression: NaN and +-Inf in x poison their whole row",
        t([1, 16, 256], "float32", dist="specials"), None, None, t([1, 1, 256], "float32"),
        t([1, 1, 256], "float32"), "layer", 1e-6, 9403, False, True),
    # means far above the spread (workloads.OFFSET_MEAN), where a variance taken as E[x^2] - mean^2 cancels
    nss("reg_nss_fp32_offset_b1_s16_d3072", REG, "regression: fp32 x, mean 32 over a spread of 1",
        t([1, 16, 3072], "float32", dist="offset"), None, None, t([1, 1, 3072], "float32"),
        t([1, 1, 3072], "float32"), "layer", 1e-6, 9404, False, True),
    nss("reg_nss_bf16_offset_b1_s16_d3072", REG, "regression: bf16 x, mean 32 over a spread of 1",
        t([1, 16, 3072], dist="offset"), None, None, t([1, 1, 3072], "float32"), t([1, 1, 3072], "float32"),
        "layer", 1e-6, 9405, False, True),
    # residual form: every gate form, dtypes, affine
    srn("reg_srn_bf16_gate_none_b1_s7_d256", REG, "regression: residual form with gate None (the int gate 1)",
        t([1, 7, 256]), t([1, 7, 256]), None, None, None, t([1, 1, 256], "float32"), t([1, 1, 256], "float32"),
        "layer", 1e-6, 9501, False, True),
    srn("reg_srn_bf16_gate_scalar_b2_s3_d512", REG, "regression: [1] gate, [1] scale and shift, B = 2",
        t([2, 3, 512]), t([2, 3, 512]), t([1]), None, None, t([1]), t([1]), "layer", 1e-6, 9502, False, True),
    srn("reg_srn_fp32_gate_frames_b2_s8_d256", REG, "regression: all fp32, per-frame [B, F, 1, D] gate and "
        "modulation, affine", t([2, 8, 256], "float32"), t([2, 8, 256], "float32"), t([2, 4, 1, 256], "float32"),
        t([256], "float32"), t([256], "float32"), t([2, 4, 1, 256], "float32"), t([2, 4, 1, 256], "float32"),
        "layer", 1e-5, 9503, False, True),
    srn("reg_srn_fp16_gate_bsd_rms_b1_s5_d768", REG, "regression: fp16, full [B, S, D] gate, RMSNorm with weight",
        t([1, 5, 768], "float16"), t([1, 5, 768], "float16"), t([1, 5, 768], "float16"), t([768], "float16"), None,
        t([768], "float16"), t([1, 768], "float16"), "rms", 1e-6, 9504, False, True),
    srn("reg_srn_mixed_fp32res_bf16x_b1_s6_d1024", REG, "regression: fp32 residual with bf16 x and fp32 [B, D] "
        "gate (residual_out takes x's dtype)", t([1, 6, 1024], "float32"), t([1, 6, 1024]), t([1, 1024], "float32"),
        None, None, t([1, 1, 1024], "float32"), t([1, 1, 1024], "float32"), "layer", 1e-6, 9505, False, True),
    srn("reg_srn_bf16_large_residual_b1_s4_d512", REG, "regression: residual near 1e4 with a small update",
        t([1, 4, 512], dist="large"), t([1, 4, 512]), t([1, 1, 512], "float32"), None, None,
        t([1, 1, 512], "float32"), t([1, 1, 512], "float32"), "layer", 1e-6, 9506, False, True),
    srn("reg_srn_fp32_offset_residual_b1_s8_d3072", REG, "regression: fp32 residual with mean 32 plus a unit "
        "update: the normalised sum cancels under E[x^2] - mean^2", t([1, 8, 3072], "float32", dist="offset"),
        t([1, 8, 3072], "float32"), t([1, 1, 3072], "float32"), None, None, t([1, 1, 3072], "float32"),
        t([1, 1, 3072], "float32"), "layer", 1e-6, 9509, False, True),
    srn("reg_srn_bf16_maxwidth_b1_s2_d8192", REG, "regression: residual form at D = 8192",
        t([1, 2, 8192]), t([1, 2, 8192]), t([1, 1, 8192]), t([8192], "float32"), t([8192], "float32"),
        t([1, 1, 8192]), t([1, 1, 8192]), "layer", 1e-6, 9507, False, True),
    srn("reg_srn_bf16_odd_tokens_s999_d5120", REG, "regression: S = 999 at Wan width with fp32 affine (GPU only)",
        t([1, 999, 5120]), t([1, 999, 5120]), t([1, 1, 5120], "float32"), t([5120], "float32"),
        t([5120], "float32"), t([1]), t([1]), "layer", 1e-6, 9508, False),
]

def sweep_row(p, seed):
    """A row of the generalisation sweep (kda/definition/sweep.py draws p from config.toml's [sweep] domain): the
    production LayerNorm call (eps 1e-6), plain or residual, with the drawn modulation and gate forms (the `mod`
    strings of the catalog, B the batch), dtypes and affine."""
    B, S, D, dt = p["B"], p["S"], p["D"], p["dtype"]
    x = t([B, S, D], dt)
    w = None if p["affine"] == "none" else t([D], p["affine"])
    mod = mod_tensor(p["mod"], p["mod_dtype"], S, D, B)
    rid = f"{p['form']}_b{B}_s{S}_d{D}_{dt}_mod{p['mod'].replace(',', '')}_{p['mod_dtype']}_affine_{p['affine']}"
    if p["form"] == "plain":
        return nss(rid, "sweep", "sweep", x, w, w, mod, mod, "layer", 1e-6, seed, production=False)
    gate = mod_tensor(p["gate"], p["mod_dtype"], S, D, B)
    return srn(rid + f"_gate{p['gate'].replace(',', '')}", "sweep", "sweep", x, x, gate, w, w, mod, mod, "layer",
               1e-6, seed, production=False)


if __name__ == "__main__":  # `kda shapes` runs it as __main__; kda's sweep imports it for sweep_row
    write_or_check(OUT, rows, sys.argv)
