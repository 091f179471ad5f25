"""Writes workloads.json for fuse_scale_shift. Run: python bench/make_workloads.py [--check].

Production rows come from the shape catalog (diffusion/shapes/, sources in diffusion/shapes/SOURCES.md): captured
by KDA-Pilot from live SGLang runs, or derived from model configs with the formulas the catalog evaluates, e.g.
S = (1 + (frames-1)/4) * (H/16) * (W/16) for the video DiTs (diffusion/shapes/SOURCES.md#token-counts); regression
rows cover the forms the upstream wrapper accepts that production does not exercise.
"""
import sys
from pathlib import Path

from kda.shapes.catalog import production_rows
from kda.definition.workloads import tensor_decl, write_or_check

OUT = Path(__file__).with_name("workloads.json")


def t(shape, dtype="bfloat16", stride=None, offset=0, dist="normal"):
    return tensor_decl(shape, dtype, stride, offset, dist)


def row(rid, model, source, x, scale, shift, c, seed, production=True, cpu=False):
    return {"id": rid, "production": production, "model": model, "source": source,
            "function": "fuse_scale_shift_kernel", "tensors": {"x": x, "scale": scale, "shift": shift},
            "scalars": {"scale_constant": c}, "seed": seed, "cpu": cpu}


# Production rows and their provenance come from the shape catalog (diffusion/shapes/: qwen-image, qwen-image-edit,
# hunyuanvideo, wan2.2-*); each row's `variant` names the modulation layout:
#   bcast11     [1,1,C] bf16 scale and shift (Qwen-Image / -Edit)
#   full3d      per-token [1,S,C] bf16 scale and shift (Qwen-Image-Edit)
#   bcast2d     [B,C] bf16 modulation (HunyuanVideo)
#   chunk_fp32  per-token fp32 scale and shift, each a chunk of one [1, S, 2C] tensor (Wan2.2 TI2V-5B)
#   fp32scale   output AdaLN: fp32 [1,1,C] scale, per-token bf16 shift (Wan2.2 A14B)
#   select01    the gate variants, built further down
def scale_shift(v, B, S, C, mod_dtype="bfloat16", x_dtype="bfloat16"):
    """scale and shift of modulation layout `v` for x [B, S, C] (mod_dtype: of the layouts that do not fix it)."""
    return {
        "bcast11": lambda: (t([1, 1, C], mod_dtype), t([1, 1, C], mod_dtype)),
        "full3d": lambda: (t([B, S, C], mod_dtype), t([B, S, C], mod_dtype)),
        "bcast2d": lambda: (t([B, C], mod_dtype), t([B, C], mod_dtype)),
        "chunk_fp32": lambda: (t([B, S, C], "float32", [S * 2 * C, 2 * C, 1], 0),
                               t([B, S, C], "float32", [S * 2 * C, 2 * C, 1], C)),
        "fp32scale": lambda: (t([1, 1, C], "float32"), t([B, S, C], x_dtype)),
    }[v]()


MODEL_ORDER = ("Qwen-Image", "Qwen-Image-Edit", "HunyuanVideo", "Wan2.2-TI2V-5B", "Wan2.2-T2V-A14B", "Wan2.2-I2V-A14B")
CATALOG = production_rows("fuse_scale_shift", model_order=MODEL_ORDER)
rows = []
for r in CATALOG:
    S, C, v = r["S"], r["C"], r["variant"]
    if v == "select01":
        continue
    x = t([1, S, C])
    scale, shift = scale_shift(v, 1, S, C)
    rows.append(row(r.id, r.model, r.source, x, scale, shift, r["scale_constant"], r.seed))

REG = "regression"
rows += [
    row("reg_4d_frames4_s128_c3072", REG, "regression: per-frame [B,F,1,C] scale with per-token shift",
        t([1, 128, 3072]), t([1, 4, 1, 3072]), t([1, 128, 3072]), 1.0, 9001, production=False, cpu=True),
    row("reg_fp16_b2_s33_c512_bcast2d", REG, "regression: fp16, batch 2, [B,C] broadcast",
        t([2, 33, 512], "float16"), t([2, 512], "float16"), t([2, 512], "float16"), 1.0, 9002, production=False, cpu=True),
    row("reg_fp32_b4_s67_c1536_full3d", REG, "regression: fp32 everywhere, full per-token modulation, prime L",
        t([4, 67, 1536], "float32"), t([4, 67, 1536], "float32"), t([4, 67, 1536], "float32"), 0.0, 9003,
        production=False, cpu=True),
    row("reg_scalar_s7_c130", REG, "regression: 0-d fp32 scale and shift, C = block + 2",
        t([1, 7, 130]), t([], "float32"), t([], "float32"), 1.0, 9004, production=False, cpu=True),
    row("reg_b3_s1_c129_bcastB1C", REG, "regression: L = 1, C = 128 + 1, [B,1,C] fp16",
        t([3, 1, 129], "float16"), t([3, 1, 129], "float16"), t([3, 1, 129], "float16"), 1.0, 9005,
        production=False, cpu=True),
    row("reg_offset_padded_s61_c256", REG, "regression: storage offset and padded row stride on scale and shift",
        t([2, 61, 256]), t([1, 61, 256], stride=[61 * 264, 264, 1], offset=5), t([2, 1, 256], stride=[300, 256, 1], offset=3),
        0.0, 9006, production=False, cpu=True),
    row("reg_large_magnitude_s127_c1024", REG, "regression: values near 1e4 and Cauchy-tailed shift",
        t([2, 127, 1024], dist="large"), t([1, 1, 1024], "float32", dist="large"), t([2, 127, 1024], dist="heavy"),
        1.0, 9007, production=False, cpu=True),
    row("reg_mixed_bcast_b2_s67_c384", REG, "regression: [1,L,C] scale with [B,1,C] shift",
        t([2, 67, 384], "float16"), t([1, 67, 384], "float16"), t([2, 1, 384], "float16"), 1.0, 9008,
        production=False, cpu=True),
    row("reg_specials_s64_c512_fp32", REG, "regression: NaN and +-Inf in x must land where the math puts them",
        t([1, 64, 512], "float32", dist="specials"), t([1, 1, 512], "float32"), t([1, 64, 512], "float32"), 1.0,
        9009, production=False, cpu=True),
    row("reg_tiny_b1_s1_c1", REG, "regression: a single element",
        t([1, 1, 1], "float32"), t([1, 1, 1], "float32"), t([1, 1, 1], "float32"), 1.0, 9010, production=False, cpu=True),
    row("reg_bf16_s96_c3072_pertoken_shift", REG, "regression: bf16 row with a per-token shift",
        t([1, 96, 3072]), t([1, 1, 3072]), t([1, 96, 3072]), 0.0, 9011, production=False, cpu=True),
]


# ---------------------------------------------------------------------------------------------------------------
# The select01 gate variants (LayerNorm + scale/shift + gate, picking per token between two modulation sets).
# In sglang 0.5.15 only Qwen-Image-Edit-2511 (zero_cond_t) calls them, on the image stream of every block:
# qwen_image.py concatenates the real timestep with a zero timestep, so img_mod's Linear yields [2B, 6C] bf16; its
# halves feed norm1 (plain) and norm2 (residual); each half chunks into shift | scale | gate, rows [:B] are set 0
# (the generated image) and rows [B:2B] set 1 (the condition images); build_modulate_index marks each token with
# its set (int32 [B, L]). FP32LayerNorm without affine: weight and bias None, eps 1e-6.
# The rows (ids, seeds, provenance) live in diffusion/shapes/qwen-image-edit.toml.
F_LN = "fuse_layernorm_scale_shift_gate_select01_kernel"
F_RES = "fuse_residual_layernorm_scale_shift_gate_select01_kernel"
MOD_NAMES = ("shift", "scale", "gate")

def modulation_views(C, B, half, dtype):
    """The six [B, C] tensors one _modulate call passes, laid out as chunks of the [2B, 6C] Linear output.

    B = 1 keeps the views (a [1, C] view is contiguous to PyTorch); larger B would be copied by forward_cuda's
    .contiguous(), so those arrive dense."""
    out = {}
    for k, name in enumerate(MOD_NAMES):
        for s in (0, 1):
            if B == 1:
                out[f"{name}{s}"] = t([1, C], dtype, [6 * C, 1], s * 6 * C + half * 3 * C + k * C)
            else:
                out[f"{name}{s}"] = t([B, C], dtype)
    return out


def sel_row(rid, model, source, function, x, mods, index, seed, weight=None, bias=None, residual=None,
            residual_gate=None, eps=1e-6, production=False, cpu=False):
    tensors = {"x": x}
    if function == F_RES:
        tensors.update({"residual": residual, "residual_gate": residual_gate})
    tensors.update({"weight": weight, "bias": bias})
    tensors.update({f"{n}{s}": mods[f"{n}{s}"] for s in (0, 1) for n in ("scale", "shift", "gate")})
    tensors["index"] = index
    return {"id": rid, "production": production, "model": model, "source": source, "function": function,
            "tensors": tensors, "scalars": {"eps": eps}, "seed": seed, "cpu": cpu}


def dense_mods(B, C, dtype="bfloat16", stride=None, dist="normal"):
    return {f"{n}{s}": t([B, C], dtype, stride, dist=dist) for n in MOD_NAMES for s in (0, 1)}


for r in CATALOG:
    if r["variant"] != "select01":
        continue
    B, L, C, dt = r["B"], r["S"], r["C"], r["dtype"]
    x = t([B, L, C], dt)
    index = t([B, L], "int32", dist="index01")
    if r.function == F_LN:
        rows.append(sel_row(r.id, r.model, r.source, F_LN, x, modulation_views(C, B, 0, dt), index, r.seed,
                            eps=r["eps"], production=True))
    else:  # norm2: x is the attention output, residual the block input, residual_gate norm1's gate_out ([B, L, C]).
        rows.append(sel_row(r.id, r.model, r.source, F_RES, x, modulation_views(C, B, 1, dt), index, r.seed,
                            residual=x, residual_gate=x, eps=r["eps"], production=True))

TEXT = ("regression: Qwen-Image-Edit text length {L}, production argument forms; 0.5.15 never calls select01 on "
        "the text stream (txt_norm1/txt_norm2 are LayerNormScaleShift), kept as a small host-bound row")
rows += [
    sel_row("reg_sel_ln_s189_c3072_textlen", REG, TEXT.format(L=189), F_LN, t([1, 189, 3072]),
            modulation_views(3072, 1, 0, "bfloat16"), t([1, 189], "int32", dist="index01"), 9101, cpu=True),
    sel_row("reg_sel_res_s195_c3072_textlen", REG, TEXT.format(L=195), F_RES, t([1, 195, 3072]),
            modulation_views(3072, 1, 1, "bfloat16"), t([1, 195], "int32", dist="index01"), 9102,
            residual=t([1, 195, 3072]), residual_gate=t([1, 195, 3072]), cpu=True),
    sel_row("reg_sel_ln_b2_s67_c384_affine_i64", REG,
            "regression: batch 2 (dense [B, C] sets), fp32 weight and bias with bf16 x, int64 index",
            F_LN, t([2, 67, 384]), dense_mods(2, 384), t([2, 67], "int64", dist="index01"), 9103,
            weight=t([384], "float32"), bias=t([384], "float32"), cpu=True),
    # No row passes a non-contiguous [B > 1, C] set or a non-contiguous index: upstream copies those with
    # .contiguous() but hands the kernel the original tensor's strides, so it reads the wrong elements (past the
    # copy's end for the [2B, 6C] chunk views). SGLang's forward_cuda makes them contiguous first, so production
    # never gets there; tests/tasks/test_fuse_scale_shift.py checks the candidate on those forms instead.
    sel_row("reg_sel_ln_fp16_b2_s33_c1025", REG, "regression: fp16, batch 2, C = 1024 + 1 (no 16-byte vectors)",
            F_LN, t([2, 33, 1025], "float16"), dense_mods(2, 1025, "float16"), t([2, 33], "int32", dist="index01"),
            9104, cpu=True),
    sel_row("reg_sel_ln_fp32_b3_s31_c130_bcast", REG,
            "regression: fp32, C = 128 + 2, stride-0 broadcast sets and index over the batch, bool index, "
            "strided weight, no bias",
            F_LN, t([3, 31, 130], "float32"), dense_mods(3, 130, "float32", [0, 1]), t([3, 31], "bool", [0, 1]), 9105,
            weight=t([130], "float32", [2]), cpu=True),
    sel_row("reg_sel_res_b2_s61_c256_fp32mod_offset", REG,
            "regression: bf16 x with fp32 modulation (gate rounds to bf16 on the way out), bf16 affine, x at a "
            "storage offset (not 16-byte aligned), uint8 index",
            F_RES, t([2, 61, 256], offset=3), dense_mods(2, 256, "float32"), t([2, 61], "uint8", dist="index01"),
            9106, weight=t([256]), bias=t([256]), residual=t([2, 61, 256]), residual_gate=t([2, 61, 256]), cpu=True),
    sel_row("reg_sel_res_fp32_large_b1_s37_c512", REG,
            "regression: fp32, x near 1e4, Cauchy-tailed residual, fp32 affine",
            F_RES, t([1, 37, 512], "float32", dist="large"), dense_mods(1, 512, "float32"),
            t([1, 37], "int32", dist="index01"), 9107, weight=t([512], "float32"), bias=t([512], "float32"),
            residual=t([1, 37, 512], "float32", dist="heavy"), residual_gate=t([1, 37, 512], "float32"), cpu=True),
    sel_row("reg_sel_ln_specials_s64_c512_fp32", REG,
            "regression: NaN and +-Inf in x must land where the math puts them (a whole row for the norm)",
            F_LN, t([1, 64, 512], "float32", dist="specials"), dense_mods(1, 512, "float32"),
            t([1, 64], "int32", dist="index01"), 9108, cpu=True),
    sel_row("reg_sel_res_specials_s48_c256_bf16", REG,
            "regression: NaN and +-Inf in the residual (residual_out keeps them, the normed row follows the math)",
            F_RES, t([1, 48, 256]), dense_mods(1, 256), t([1, 48], "int32", dist="index01"), 9109,
            residual=t([1, 48, 256], dist="specials"), residual_gate=t([1, 48, 256]), cpu=True),
    sel_row("reg_sel_ln_tiny_b1_s1_c1", REG, "regression: a single element (zero variance)",
            F_LN, t([1, 1, 1], "float32"), dense_mods(1, 1, "float32"), t([1, 1], "int32", dist="index01"), 9110,
            cpu=True),
    sel_row("reg_sel_res_fp16_b1_s5_c4097", REG, "regression: fp16, C = 4096 + 1 (block size + 1)",
            F_RES, t([1, 5, 4097], "float16"), dense_mods(1, 4097, "float16"), t([1, 5], "int32", dist="index01"),
            9111, residual=t([1, 5, 4097], "float16"), residual_gate=t([1, 5, 4097], "float16"), cpu=True),
    sel_row("reg_sel_ln_b1_s8_c32768_widest", REG, "regression: the widest row upstream accepts for bf16 (64 KB)",
            F_LN, t([1, 8, 32768]), dense_mods(1, 32768), t([1, 8], "int32", dist="index01"), 9112, cpu=True),
]

def sweep_row(p, seed):
    """A row of the generalisation sweep (kda/definition/sweep.py draws p from config.toml's [sweep] domain), built
    like the production rows above: the same modulation layouts, with batch and dtypes drawn too."""
    B, S, C, v, dt = p["B"], p["S"], p["C"], p["variant"], p["dtype"]
    mod = dt if p["mod_dtype"] == "x" else p["mod_dtype"]
    rid = f"{v}_b{B}_s{S}_c{C}_{dt}_mod_{mod}"
    x = t([B, S, C], dt)
    if v in ("select01_ln", "select01_res"):
        index = t([B, S], "int32", dist="index01")
        if v == "select01_ln":
            return sel_row(rid, "sweep", "sweep", F_LN, x, modulation_views(C, B, 0, mod), index, seed)
        return sel_row(rid, "sweep", "sweep", F_RES, x, modulation_views(C, B, 1, mod), index, seed, residual=x,
                       residual_gate=x)
    scale, shift = scale_shift(v, B, S, C, mod, dt)
    return row(rid + f"_k{p['scale_constant']:g}", "sweep", "sweep", x, scale, shift, p["scale_constant"], seed,
               production=False)


if __name__ == "__main__":  # `kda shapes` runs it as __main__; kda's sweep imports it for sweep_row
    write_or_check(OUT, rows, sys.argv)
