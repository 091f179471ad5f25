"""Writes workloads.json for norm_infer. Run: python bench/make_workloads.py [--check].

Two upstream entry points share the task:
- `norm_infer(x [M, N], weight, bias, eps, is_rms_norm)`: reached in sglang 0.5.15 only from
  `multimodal_gen/runtime/layers/layernorm.py: LayerNorm.forward_cuda` (is_rms_norm=False, eps keyword).
- `triton_one_pass_rms_norm(x, w, eps)`: reached from `RMSNorm.forward_cuda` for 16-bit x with residual None and
  x.shape[-1] <= 128 (per-head QK norm), x already reshaped to [rows, head_dim] and contiguous.

Production rows follow the KDA-Pilot capture: helios LayerNorm [8640, 5120] fp32 (diffusion/shapes/SOURCES.md#helios),
zimage RMS [4096|16384, 128] (diffusion/shapes/SOURCES.md#z-image-turbo), hunyuanvideo RMS [1320|648720|650040, 128]
bf16 (diffusion/shapes/SOURCES.md#hunyuanvideo). Dtypes, eps and affine come from the 0.5.15 call sites (see
prompt.md); regression rows cover what upstream accepts that production does not exercise.
"""
import sys
from pathlib import Path

from kda.shapes.catalog import production_rows
from kda.definition.workloads import tensor_decl, write_or_check

OUT = Path(__file__).with_name("workloads.json")


def t(shape, dtype="bfloat16", stride=None, offset=0, dist="normal"):
    return tensor_decl(shape, dtype, stride, offset, dist)


def ni(rid, model, source, x, weight, bias, eps, rms, seed, production=True, cpu=False):
    """A norm_infer row: weight / bias may be None (LayerNorm without affine or without bias)."""
    return {"id": rid, "production": production, "model": model, "source": source, "function": "norm_infer",
            "tensors": {"x": x, "weight": weight, "bias": bias}, "scalars": {"eps": eps, "is_rms_norm": rms},
            "seed": seed, "cpu": cpu}


def op(rid, model, source, x, w, eps, seed, production=True, cpu=False):
    """A triton_one_pass_rms_norm row."""
    return {"id": rid, "production": production, "model": model, "source": source,
            "function": "triton_one_pass_rms_norm", "tensors": {"x": x, "w": w}, "scalars": {"eps": eps},
            "seed": seed, "cpu": cpu}


# Production rows and their provenance: diffusion/shapes/ (helios.toml, hunyuanvideo.toml, z-image-turbo.toml).
# Helios: self_attn_residual_norm = LayerNorm(5120, eps 1e-6, fp32 affine) on current_hidden_states.float().
# HunyuanVideo QK norm: RMSNorm(128, eps 1e-6) on q/k [1, S, 24, 128] bf16 -> x.reshape(-1, 128), the weight built
# under the DiT loader's bf16 default dtype. Z-Image: the Qwen3-4B text encoder's q_norm / k_norm.
rows = []
for r in production_rows("norm_infer", model_order=("Helios", "HunyuanVideo", "Z-Image-Turbo")):
    if r["kind"] == "layer":
        rows.append(ni(r.id, r.model, r.source, t([r["M"], r["N"]], r["dtype"]), t([r["N"]], r["affine_dtype"]),
                       t([r["N"]], r["affine_dtype"]), r["eps"], False, r.seed))
    else:
        rows.append(op(r.id, r.model, r.source, t([r["S"], r["D"]], r["dtype"]), t([r["D"]], r["dtype"]), r["eps"],
                       r.seed))

REG = "regression"
rows += [
    # --- norm_infer, LayerNorm
    ni("reg_ln_fp32_m7_n5120", REG, "regression: Helios width, few rows (one program per row)",
       t([7, 5120], "float32"), t([5120], "float32"), t([5120], "float32"), 1e-6, False, 9001,
       production=False, cpu=True),
    ni("reg_ln_bf16_m13_n3072_bf16affine", REG, "regression: bf16 x, bf16 weight and bias, eps 1e-5 (module default)",
       t([13, 3072]), t([3072]), t([3072]), 1e-5, False, 9002, production=False, cpu=True),
    ni("reg_ln_bf16_m19_n1536_fp32affine", REG, "regression: bf16 x with fp32 weight and bias (mixed dtypes)",
       t([19, 1536]), t([1536], "float32"), t([1536], "float32"), 1e-6, False, 9003, production=False, cpu=True),
    ni("reg_ln_fp16_m17_n1000_noaffine", REG, "regression: fp16, weight and bias None (elementwise_affine=False), "
       "N not a power of two", t([17, 1000], "float16"), None, None, 1e-6, False, 9004, production=False, cpu=True),
    ni("reg_ln_fp32_m9_n257_weight_only", REG, "regression: bias None, N = 256 + 1",
       t([9, 257], "float32"), t([257], "float32"), None, 1e-5, False, 9005, production=False, cpu=True),
    ni("reg_ln_fp32_m9_n255_bias_only", REG, "regression: weight None with a bias, N = 256 - 1",
       t([9, 255], "float32"), None, t([255], "float32"), 1e-5, False, 9006, production=False, cpu=True),
    ni("reg_ln_bf16_m33_n256", REG, "regression: N a power of two, M = 32 + 1",
       t([33, 256]), t([256]), t([256]), 1e-6, False, 9007, production=False, cpu=True),
    ni("reg_ln_fp32_m1_n1", REG, "regression: a single element (variance 0: y = bias)",
       t([1, 1], "float32"), t([1], "float32"), t([1], "float32"), 1e-6, False, 9008, production=False, cpu=True),
    ni("reg_ln_fp32_m3_n16384_maxwidth", REG, "regression: the widest fp32 row upstream accepts (64 KB)",
       t([3, 16384], "float32"), t([16384], "float32"), t([16384], "float32"), 1e-6, False, 9009,
       production=False, cpu=True),
    ni("reg_ln_bf16_m2_n32768_maxwidth", REG, "regression: the widest 16-bit row upstream accepts (64 KB)",
       t([2, 32768]), t([32768]), t([32768]), 1e-6, False, 9010, production=False, cpu=True),
    ni("reg_ln_fp32_m37_n3072_padded_offset", REG, "regression: padded row stride and a storage offset on x "
       "(upstream copies it contiguous)", t([37, 3072], "float32", stride=[3200, 1], offset=7),
       t([3072], "float32"), t([3072], "float32"), 1e-6, False, 9011, production=False, cpu=True),
    ni("reg_ln_bf16_m24_n96_colmajor", REG, "regression: transposed x (stride(-1) != 1)",
       t([24, 96], stride=[1, 24]), t([96]), t([96]), 1e-6, False, 9012, production=False, cpu=True),
    ni("reg_ln_fp32_m16_n5120_large", REG, "regression: values near 1e4, Cauchy-tailed weight",
       t([16, 5120], "float32", dist="large"), t([5120], "float32", dist="heavy"), t([5120], "float32"), 1e-6, False,
       9013, production=False, cpu=True),
    ni("reg_ln_fp32_m24_n1024_offset_mean", REG, "regression: positive inputs (mean 1, var 1/12): centred variance",
       t([24, 1024], "float32", dist="positive"), t([1024], "float32"), t([1024], "float32"), 1e-6, False, 9014,
       production=False, cpu=True),
    ni("reg_ln_fp32_m32_n512_specials", REG, "regression: NaN and +-Inf in x poison their whole row",
       t([32, 512], "float32", dist="specials"), t([512], "float32"), t([512], "float32"), 1e-6, False, 9015,
       production=False, cpu=True),
    # Means far above the spread (workloads.OFFSET_MEAN): a variance taken as E[x^2] - mean^2 cancels here
    # (tests/zoo/norms/naive_variance.py is 6-13x over the fp32 tolerance on the fp32 row); the 16-bit rows hold honest
    # kernels in those dtypes to the same inputs.
    ni("reg_ln_fp32_m16_n3072_offset", REG, "regression: mean 32 over a spread of 1 (E[x^2] - mean^2 cancels)",
       t([16, 3072], "float32", dist="offset"), t([3072], "float32"), t([3072], "float32"), 1e-6, False, 9016,
       production=False, cpu=True),
    ni("reg_ln_bf16_m16_n3072_offset", REG, "regression: bf16 x, mean 32 over a spread of 1, fp32 affine",
       t([16, 3072], dist="offset"), t([3072], "float32"), t([3072], "float32"), 1e-6, False, 9017,
       production=False, cpu=True),
    ni("reg_ln_fp16_m8_n5120_offset", REG, "regression: fp16 x, mean 256 over a spread of 1, fp16 affine",
       t([8, 5120], "float16", dist="offset"), t([5120], "float16"), t([5120], "float16"), 1e-6, False, 9018,
       production=False, cpu=True),
    # --- norm_infer, RMSNorm (no 0.5.15 call site passes is_rms_norm=True; the entry point accepts it)
    ni("reg_rms_bf16_m16_n3840", REG, "regression: norm_infer RMS at Z-Image's model width (bf16, bf16 weight, "
       "eps 1e-5, no bias)", t([16, 3840]), t([3840]), None, 1e-5, True, 9101, production=False, cpu=True),
    ni("reg_rms_fp32_m5_n129_bias", REG, "regression: RMS with a bias, N = 128 + 1",
       t([5, 129], "float32"), t([129], "float32"), t([129], "float32"), 1e-6, True, 9102, production=False, cpu=True),
    ni("reg_rms_fp16_m31_n640_noweight", REG, "regression: RMS without weight or bias, fp16",
       t([31, 640], "float16"), None, None, 1e-6, True, 9103, production=False, cpu=True),
    ni("reg_rms_fp32_m16_n256_specials", REG, "regression: RMS with NaN and +-Inf in x",
       t([16, 256], "float32", dist="specials"), t([256], "float32"), None, 1e-6, True, 9104,
       production=False, cpu=True),
    ni("reg_rms_bf16_m4096_n3840", REG, "regression: norm_infer RMS [4096, 3840] bf16 (the lead's reading of the "
       "Z-Image RMS rows; 0.5.15 routes bf16 RMSNorm of width 3840 to sgl_kernel.rmsnorm, not here)",
       t([4096, 3840]), t([3840]), None, 1e-5, True, 9105, production=False),
    ni("reg_rms_bf16_m16384_n3840", REG, "regression: norm_infer RMS [16384, 3840] bf16 (as above)",
       t([16384, 3840]), t([3840]), None, 1e-5, True, 9106, production=False),
    # --- triton_one_pass_rms_norm
    op("reg_op_bf16_s1023_d128", REG, "regression: S = 1024 - 1 (upstream: one row per program)",
       t([1023, 128]), t([128]), 1e-6, 9201, production=False),
    op("reg_op_bf16_s1025_d128", REG, "regression: S = 1024 + 1 (upstream: two rows per program, ragged tail)",
       t([1025, 128]), t([128]), 1e-6, 9202, production=False),
    op("reg_op_bf16_s8193_d128", REG, "regression: S = 8192 + 1 (upstream: 16 rows per program, ragged tail)",
       t([8193, 128]), t([128]), 1e-6, 9203, production=False),
    op("reg_op_bf16_4d_b2_s9_h5_d128", REG, "regression: 4-D x [B, S, H, D] (upstream reshapes to rows)",
       t([2, 9, 5, 128]), t([128]), 1e-6, 9204, production=False, cpu=True),
    op("reg_op_bf16_qkv_slice_s11_h8_d128", REG, "regression: non-contiguous k slice of a packed qkv "
       "[1, 11, 3, 8, 128] (upstream copies it contiguous)",
       t([1, 11, 8, 128], stride=[11 * 3 * 8 * 128, 3 * 8 * 128, 128, 1], offset=8 * 128), t([128]), 1e-6,
       9205, production=False, cpu=True),
    op("reg_op_bf16_qkv_slice_s27030_h24_d128", REG, "regression: HunyuanVideo-sized q slice of a packed qkv "
       "[1, 27030, 3, 24, 128] (what RMSNorm would get without the caller's .contiguous())",
       t([1, 27030, 24, 128], stride=[27030 * 3 * 24 * 128, 3 * 24 * 128, 128, 1]), t([128]), 1e-6,
       9213, production=False),
    op("reg_op_fp16_s77_d64_eps1e5", REG, "regression: fp16, head_dim 64, eps 1e-5",
       t([77, 64], "float16"), t([64], "float16"), 1e-5, 9206, production=False, cpu=True),
    op("reg_op_fp32_s50_d96", REG, "regression: fp32 x and weight, D = 96 (not a power of two)",
       t([50, 96], "float32"), t([96], "float32"), 1e-6, 9207, production=False, cpu=True),
    op("reg_op_bf16_s65_d128_fp32w", REG, "regression: bf16 x with an fp32 weight (RMSNorm built without the "
       "bf16 default dtype)", t([65, 128]), t([128], "float32"), 1e-6, 9208, production=False, cpu=True),
    op("reg_op_bf16_s128_d128_large", REG, "regression: values near 1e4 (x^2 near 1e8)",
       t([128, 128], dist="large"), t([128], dist="heavy"), 1e-6, 9209, production=False, cpu=True),
    op("reg_op_bf16_s96_d128_specials", REG, "regression: NaN and +-Inf in x land where the math puts them",
       t([96, 128], dist="specials"), t([128]), 1e-6, 9210, production=False, cpu=True),
    op("reg_op_fp32_s3_d1", REG, "regression: D = 1, three rows",
       t([3, 1], "float32"), t([1], "float32"), 1e-6, 9211, production=False, cpu=True),
    op("reg_op_bf16_s1_d128", REG, "regression: a single row",
       t([1, 128]), t([128]), 1e-6, 9212, production=False, cpu=True),
]

def sweep_row(p, seed):
    """A row of the generalisation sweep (kda/definition/sweep.py draws p from config.toml's [sweep] domain): a
    LayerNorm norm_infer call (as Helios makes it, affine on) or a per-head triton_one_pass_rms_norm call (as the QK
    norms make it); each reads only its own parameters."""
    if p["function"] == "norm_infer":
        M, N, dt = p["ln_rows"], p["ln_width"], p["ln_dtype"]
        adt = dt if p["ln_affine_dtype"] == "x" else p["ln_affine_dtype"]
        return ni(f"ln_m{M}_n{N}_{dt}_affine_{adt}", "sweep", "sweep", t([M, N], dt), t([N], adt), t([N], adt),
                  1e-6, False, seed, production=False)
    S, D, dt = p["rms_rows"], p["head_dim"], p["rms_dtype"]
    return op(f"op_s{S}_d{D}_{dt}", "sweep", "sweep", t([S, D], dt), t([D], dt), 1e-6, seed, production=False)


if __name__ == "__main__":  # `kda shapes` runs it as __main__; kda's sweep imports it for sweep_row
    write_or_check(OUT, rows, sys.argv)
