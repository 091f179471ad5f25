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
Production shapes follow ../shared anchors (section 3) and the KDA-Pilot frozen rows it summarises
(shared/research/kda-pilot.md: "cutedsl_norm_scale_shift: 39 signatures up to mova [1, 176400, 5120]"); dtypes,
affine flags and eps come from the 0.5.15 model files named in each row's source.
"""
import sys
from pathlib import Path

from kda.workloads import tensor_decl, write_or_check

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


PILOT = "captured: KDA-Pilot live SGLang capture (token counts in ../shared anchors section 3)"
rows = []

# --- Wan2.2-T2V / I2V-A14B (wanvideo.py WanTransformerBlock, D 5120, eps 1e-6). temb is 3-D, so
# `(scale_shift_table + temb.float()).chunk(6, dim=1)` gives fp32 [1, 1, D] modulation.
#   norm1 = LayerNormScaleShift(affine off): x bf16, fp32 scale/shift [1, 1, D]
#   self_attn_residual_norm = ScaleResidualLayerNormScaleShift(affine on, fp32 weight/bias): gate_msa fp32 [1, 1, D],
#     shift/scale are the bf16 zeros((1,)) placeholders (declared with random values: a stricter test of the [1] form)
#   cross_attn_residual_norm (affine off): gate 1 -> None, fp32 [1, 1, D] scale/shift
WAN = PILOT + "; dtypes and affine from wanvideo.py (fp32 [1,1,D] modulation, eps 1e-6)"
for s, tag, seed in ((37800, "t2v", 1001), (75600, "t2v", 1002), (37044, "i2v", 1003), (74088, "i2v", 1004)):
    rows.append(nss(f"wan_{tag}_norm1_s{s}_d5120", f"Wan2.2-{tag.upper()}-A14B", WAN, t([1, s, 5120]), None, None,
                    t([1, 1, 5120], "float32"), t([1, 1, 5120], "float32"), "layer", 1e-6, seed))
for s, tag, seed in ((37800, "t2v", 1011), (74088, "i2v", 1012)):
    rows.append(srn(f"wan_{tag}_selfattn_res_s{s}_d5120", f"Wan2.2-{tag.upper()}-A14B",
                    WAN + "; self_attn_residual_norm with the [1] null shift/scale",
                    t([1, s, 5120]), t([1, s, 5120]), t([1, 1, 5120], "float32"), t([5120], "float32"),
                    t([5120], "float32"), t([1]), t([1]), "layer", 1e-6, seed))
rows.append(srn("wan_t2v_crossattn_res_s75600_d5120", "Wan2.2-T2V-A14B", WAN + "; cross_attn_residual_norm, gate 1",
                t([1, 75600, 5120]), t([1, 75600, 5120]), None, None, None, t([1, 1, 5120], "float32"),
                t([1, 1, 5120], "float32"), "layer", 1e-6, 1013))

# --- Wan2.2-TI2V-5B (D 3072, 18144 tokens): temb is 4-D, so the modulation is per token, fp32 [1, S, D] (a strided
# chunk of [1, S, 6, D] that forward_cuda makes contiguous).
TI2V = PILOT + "; per-token fp32 modulation (temb.dim() == 4 in wanvideo.py), made contiguous by forward_cuda"
rows.append(nss("wan_ti2v_norm1_s18144_d3072", "Wan2.2-TI2V-5B", TI2V, t([1, 18144, 3072]), None, None,
                t([1, 18144, 3072], "float32"), t([1, 18144, 3072], "float32"), "layer", 1e-6, 1101))
rows.append(srn("wan_ti2v_selfattn_res_s18144_d3072", "Wan2.2-TI2V-5B", TI2V + "; affine fp32, [1] null shift/scale",
                t([1, 18144, 3072]), t([1, 18144, 3072]), t([1, 18144, 3072], "float32"), t([3072], "float32"),
                t([3072], "float32"), t([1]), t([1]), "layer", 1e-6, 1102))
rows.append(srn("wan_ti2v_crossattn_res_s18144_d3072", "Wan2.2-TI2V-5B", TI2V + "; gate 1, affine off",
                t([1, 18144, 3072]), t([1, 18144, 3072]), None, None, None, t([1, 18144, 3072], "float32"),
                t([1, 18144, 3072], "float32"), "layer", 1e-6, 1103))

# --- HunyuanVideo (hunyuanvideo.py, D 3072, eps 1e-6, affine off): modulation is `mod(vec).chunk(6, dim=-1)`, bf16
# [1, D] (2-D); 27030 image tokens in double-stream blocks, 27085 (image + 55 text) in single-stream blocks.
HY = PILOT + "; bf16 [1, D] modulation chunks from hunyuanvideo.py"
rows.append(nss("hunyuanvideo_img_norm_s27030_d3072", "HunyuanVideo", HY, t([1, 27030, 3072]), None, None,
                t([1, 3072]), t([1, 3072]), "layer", 1e-6, 1201))
rows.append(srn("hunyuanvideo_img_res_s27030_d3072", "HunyuanVideo", HY + "; img_attn_residual_mlp_norm",
                t([1, 27030, 3072]), t([1, 27030, 3072]), t([1, 3072]), None, None, t([1, 3072]), t([1, 3072]),
                "layer", 1e-6, 1202))
rows.append(nss("hunyuanvideo_single_norm_s27085_d3072", "HunyuanVideo", HY + "; single-stream input_norm_scale_shift",
                t([1, 27085, 3072]), None, None, t([1, 3072]), t([1, 3072]), "layer", 1e-6, 1203))
rows.append(nss("hunyuanvideo_txt_norm_s55_d3072", "HunyuanVideo", HY + "; txt_attn_norm on 55 text tokens",
                t([1, 55, 3072]), None, None, t([1, 3072]), t([1, 3072]), "layer", 1e-6, 1204))

# --- Qwen-Image (qwen_image.py, D 3072, eps 1e-6, affine off): `mod_params.chunk(3, -1)` then unsqueeze(1): bf16
# [1, 1, D] shift/scale/gate. These are the shapes 0.5.15's native CUDA path takes on compute capability >= 10; an
# H100/H200 runs the CuTe DSL kernel for them.
QW = PILOT + "; bf16 [1,1,D] modulation from qwen_image.py _modulate"
rows.append(nss("qwen_image_img_norm1_s4096_d3072", "Qwen-Image", QW, t([1, 4096, 3072]), None, None,
                t([1, 1, 3072]), t([1, 1, 3072]), "layer", 1e-6, 1301))
rows.append(srn("qwen_image_img_norm2_res_s4096_d3072", "Qwen-Image", QW + "; img_norm2 (residual, gate_x)",
                t([1, 4096, 3072]), t([1, 4096, 3072]), t([1, 1, 3072]), None, None, t([1, 1, 3072]),
                t([1, 1, 3072]), "layer", 1e-6, 1302))
for s, seed in ((19, 1303), (47, 1304)):
    rows.append(nss(f"qwen_image_txt_norm1_s{s}_d3072", "Qwen-Image", QW + f"; txt_norm1 on {s} text tokens",
                    t([1, s, 3072]), None, None, t([1, 1, 3072]), t([1, 1, 3072]), "layer", 1e-6, seed))
rows.append(srn("qwen_image_txt_norm2_res_s47_d3072", "Qwen-Image", QW + "; txt_norm2 on 47 text tokens",
                t([1, 47, 3072]), t([1, 47, 3072]), t([1, 1, 3072]), None, None, t([1, 1, 3072]), t([1, 1, 3072]),
                "layer", 1e-6, 1305))

# --- Helios (helios.py, D 5120, eps 1e-6, affine off): the transformer permutes timestep_proj to [B, S, 6, D], so
# norm1 / norm3 get per-token fp32 modulation, made contiguous by forward_cuda.
HE = PILOT + "; per-token fp32 modulation (timestep_proj [B, S, 6, D] in helios.py)"
for s, seed in ((8640, 1401), (11040, 1402)):
    rows.append(nss(f"helios_norm1_s{s}_d5120", "Helios", HE, t([1, s, 5120]), None, None,
                    t([1, s, 5120], "float32"), t([1, s, 5120], "float32"), "layer", 1e-6, seed))

# --- MOVA-720p (mova_video_dit.py: video D 5120, audio D 1536, eps 1e-6, affine off). The modulation dtype follows
# t_mod; taken as the Wan-style fp32 [1, 1, D] chunk (3-D t_mod path). cross_attn_residual_norm passes gate 1.
MO = PILOT + "; modulation dtype/shape assumed as Wan's fp32 [1,1,D] (3-D t_mod path of mova_video_dit.py)"
for s, seed in ((44100, 1501), (176400, 1502)):
    rows.append(nss(f"mova_video_norm1_s{s}_d5120", "MOVA-720p", MO, t([1, s, 5120]), None, None,
                    t([1, 1, 5120], "float32"), t([1, 1, 5120], "float32"), "layer", 1e-6, seed))
rows.append(nss("mova_audio_norm1_s101_d1536", "MOVA-720p", MO + "; audio tower", t([1, 101, 1536]), None, None,
                t([1, 1, 1536], "float32"), t([1, 1, 1536], "float32"), "layer", 1e-6, 1503))
rows.append(srn("mova_video_crossattn_res_s44100_d5120", "MOVA-720p", MO + "; cross_attn_residual_norm, gate 1",
                t([1, 44100, 5120]), t([1, 44100, 5120]), None, None, None, t([1, 1, 5120], "float32"),
                t([1, 1, 5120], "float32"), "layer", 1e-6, 1504))

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
    srn("reg_srn_bf16_maxwidth_b1_s2_d8192", REG, "regression: residual form at D = 8192",
        t([1, 2, 8192]), t([1, 2, 8192]), t([1, 1, 8192]), t([8192], "float32"), t([8192], "float32"),
        t([1, 1, 8192]), t([1, 1, 8192]), "layer", 1e-6, 9507, False, True),
    srn("reg_srn_bf16_odd_tokens_s999_d5120", REG, "regression: S = 999 at Wan width with fp32 affine (GPU only)",
        t([1, 999, 5120]), t([1, 999, 5120]), t([1, 1, 5120], "float32"), t([5120], "float32"),
        t([5120], "float32"), t([1]), t([1]), "layer", 1e-6, 9508, False),
]

write_or_check(OUT, rows, sys.argv)
