"""Writes workloads.json for rotary_embedding. Run: python bench/make_workloads.py [--check].

Two upstream entry points, told apart by each row's `function`:

- apply_rotary_embedding(x, cos, sin, interleaved): x [B, T, H, D] or [T, H, D], cos/sin [T, D/2] (or [T, D] with
  interleaved=True, of which every other column is used). Production: HunyuanVideo image stream
  (diffusion/shapes/SOURCES.md#hunyuanvideo, `[1, 27030, 24, 128]` bf16; cos/sin fp32 [27030, 64] as
  NDRotaryEmbedding._forward_cached_from_grid allocates them: torch.empty((num_tokens, head_dim // 2),
  dtype=float32), contiguous).
- apply_ltx2_split_rotary_emb(x, cos, sin): x [B, S, H*D] bf16 contiguous, cos/sin [B, H, S, D/2] bf16. Shapes from
  diffusion/shapes/SOURCES.md#ltx-2 (video 32 x 128, S 1536 / 6144 / 24576, B 1 or 2; audio 32 x 64, S 126). The
  cos/sin layout is derived from sglang 0.5.15 LTX2AudioVideoRotaryPosEmbed.forward (rope_type "split"): freqs
  [B, S, H*D/2] fp32 is contiguous (a flatten of a transpose, then a cat with the padding when H*D/2 is not a
  multiple of the number of position axes), reshaped to [B, S, H, D/2], swapaxes(1, 2) -> [B, H, S, D/2] with
  strides (S*H*D/2, D/2, H*D/2, 1), then .to(bfloat16), which keeps those strides (preserve_format on a dense tensor).
  Video coords are .repeat()-ed over the batch, so the batch stride is real, not 0.

Tensors are filled by the harness; cos/sin use dist "uniform" ([-1, 1), like real cos/sin values).
"""
import sys
from pathlib import Path

from kda.shapes.catalog import production_rows
from kda.definition.workloads import tensor_decl, write_or_check

OUT = Path(__file__).with_name("workloads.json")


def t(shape, dtype="bfloat16", stride=None, offset=0, dist="normal"):
    return tensor_decl(shape, dtype, stride, offset, dist)


def rot_row(rid, model, source, x, cos, sin, seed, interleaved=False, production=False, cpu=True):
    return {"id": rid, "production": production, "model": model, "source": source,
            "function": "apply_rotary_embedding", "tensors": {"x": x, "cos": cos, "sin": sin},
            "scalars": {"interleaved": interleaved}, "seed": seed, "cpu": cpu}


def ltx_row(rid, model, source, x, cos, sin, seed, production=False, cpu=True):
    return {"id": rid, "production": production, "model": model, "source": source,
            "function": "apply_ltx2_split_rotary_emb", "tensors": {"x": x, "cos": cos, "sin": sin},
            "scalars": {}, "seed": seed, "cpu": cpu}


def cs(shape, dtype="float32", stride=None, offset=0):
    """cos or sin: values in [-1, 1)."""
    return t(shape, dtype, stride, offset, dist="uniform")


def ltx_cs(b, h, s, half, offset=0, heads_total=None):
    """LTX-2 split cos/sin: a [B, H, S, D/2] swapaxes view of a contiguous [B, S, H_total, D/2] bf16 tensor."""
    ht = heads_total or h
    return cs([b, h, s, half], "bfloat16", [s * ht * half, half, ht * half, 1], offset)


rows = []

# ---- production: both entry points, rows and provenance from diffusion/shapes/ (hunyuanvideo.toml, ltx-2.toml) ----
for r in production_rows("rotary_embedding", model_order=("HunyuanVideo", "LTX-2")):
    half = r["D"] // 2
    if r.function == "apply_rotary_embedding":
        rows.append(rot_row(r.id, r.model, r.source, t([1, r["T"], r["H"], r["D"]]), cs([r["T"], half]),
                            cs([r["T"], half]), r.seed, interleaved=r["interleaved"], production=True, cpu=False))
    else:
        b, s = r["B"], r["S"]
        rows.append(ltx_row(r.id, r.model, r.source, t([b, s, r["H"] * r["D"]]), ltx_cs(b, r["H"], s, half),
                            ltx_cs(b, r["H"], s, half), r.seed, production=True, cpu=False))

# ---- derived from the code (kept out of the gate as regression rows): LTX-2 audio-video cross-attention query ----
# (diffusion/shapes/SOURCES.md#ltx-2 says which of these the KDA-Pilot capture also recorded)
# cross_attn_rope(video_coords[:, 0:1]) with dim = audio_cross_attention_dim 2048, 32 heads: q [B, S_video, 2048],
# cos [B, 32, S_video, 32] (temporal axis only: 1024 freqs, no padding). The key side is [B, 126, 2048] (as audio).
XATTN_CAPTURE = {(6144, 1): "the KDA-Pilot capture has [1, 6144, 2048] with cos/sin [1, 32, 6144, 32]",
                 (24576, 2): "the KDA-Pilot capture has S 24576 at B 1 only"}
for s, b in ((6144, 1), (24576, 2)):
    rows.append(ltx_row(
        f"ltx2_xattn_b{b}_s{s}_h32_d64", "LTX-2",
        "regression: LTX-2 audio-video cross-attention query, derived from sglang 0.5.15 ltx_2.py "
        f"cross_attn_rope(dim=audio_cross_attention_dim=2048, heads=32) on video tokens S {s}, split layout as the "
        f"video rows ({XATTN_CAPTURE[(s, b)]}: diffusion/shapes/SOURCES.md#ltx-2)",
        t([b, s, 32 * 64]), ltx_cs(b, 32, s, 32), ltx_cs(b, 32, s, 32), 3100 + b + s, cpu=False))

# ---- regression: apply_rotary_embedding --------------------------------------------------------------------------
# CPU rows stay near 64 (batch, token, head) rows: under the interpreter upstream runs one program per row and head
# block (autotuning keeps its first config, one head per program) at a few ms each.
REG = "regression"
rows += [
    rot_row("reg_rot_3d_t13_h5_d64", REG, "regression: 3-D x [T, H, D] (bsz 1), prime T",
            t([13, 5, 64]), cs([13, 32]), cs([13, 32]), 9001),
    rot_row("reg_rot_b2_t7_h3_d128_fp16_interleaved_half", REG,
            "regression: fp16 x, batch 2 (cos indexed by token = bt % T), interleaved=True with [T, D/2] cos (no-op)",
            t([2, 7, 3, 128], "float16"), cs([7, 64]), cs([7, 64]), 9002, interleaved=True),
    rot_row("reg_rot_fp32_t9_h7_d96", REG, "regression: fp32 x, D 96 (half 48: not a power of two), H 7",
            t([1, 9, 7, 96], "float32"), cs([9, 48]), cs([9, 48]), 9003),
    rot_row("reg_rot_t5_h9_d66", REG, "regression: half 33 = 32 + 1, H 9 = 8 + 1 (upstream block sizes + 1)",
            t([1, 5, 9, 66]), cs([5, 33]), cs([5, 33]), 9004),
    rot_row("reg_rot_b2_t5_h7_d62", REG, "regression: half 31 = 32 - 1, H 7 = 8 - 1, batch 2",
            t([2, 5, 7, 62]), cs([5, 31]), cs([5, 31]), 9005),
    rot_row("reg_rot_qkv_slice_k", REG,
            "regression: x = qkv.view(B,T,3,H,D)[:, :, 1] (token stride 3*H*D, storage offset H*D), as a fused QKV "
            "projection hands it over",
            t([2, 8, 4, 64], stride=[8 * 3 * 256, 3 * 256, 64, 1], offset=256), cs([8, 32]), cs([8, 32]), 9006),
    rot_row("reg_rot_single_stream_slice", REG,
            "regression: HunyuanVideo single-stream layout q[:, :-txt_len] (B 1; token stride of the image+text "
            "tensor, text tail left in storage), at small size",
            t([1, 6, 6, 128], stride=[13 * 768, 768, 128, 1]), cs([6, 64]), cs([6, 64]), 9007),
    rot_row("reg_rot_cos_cache_slices", REG,
            "regression: non-contiguous cos/sin: halves of one [T, D] cos|sin cache (row stride D, sin at offset "
            "D/2); upstream copies them with .contiguous()",
            t([1, 13, 4, 64]), cs([13, 32], stride=[64, 1]), cs([13, 32], stride=[64, 1], offset=32), 9008),
    rot_row("reg_rot_interleaved_fullcos", REG,
            "regression: interleaved=True with full-width [T, D] cos/sin: columns 0, 2, 4, ... are used",
            t([1, 11, 5, 64]), cs([11, 64]), cs([11, 64]), 9009, interleaved=True),
    rot_row("reg_rot_bf16_cos", REG, "regression: bf16 cos/sin (callers that cast cos/sin to x's dtype)",
            t([1, 9, 4, 128]), cs([9, 64], "bfloat16"), cs([9, 64], "bfloat16"), 9010),
    rot_row("reg_rot_large_bf16", REG, "regression: |x| near 1e4 (bf16), fp32 cos/sin",
            t([1, 8, 4, 128], dist="large"), cs([8, 64]), cs([8, 64]), 9011),
    rot_row("reg_rot_specials_fp32", REG, "regression: NaN and +-Inf in x must land where the math puts them",
            t([1, 16, 4, 64], "float32", dist="specials"), cs([16, 32]), cs([16, 32]), 9012),
    rot_row("reg_rot_tiny_t1_h1_d2", REG, "regression: one token, one head, D 2",
            t([1, 1, 1, 2], "float32"), cs([1, 1]), cs([1, 1]), 9013),
    rot_row("reg_rot_specials_bf16_h24", REG, "regression: bf16 NaN/Inf, production head count 24 x 128",
            t([1, 2, 24, 128], dist="specials"), cs([2, 64]), cs([2, 64]), 9014),
    # GPU-only riders at a size where many programs run: a strided batch-2 x and bf16 specials at 24 x 128.
    rot_row("reg_rot_gpu_b2_t1024_h24_qkv_slice", REG,
            "regression: batch 2 fused-QKV slice (token stride 3*H*D, offset 2*H*D: the v-position slice), 24 x 128",
            t([2, 1024, 24, 128], stride=[1024 * 3 * 3072, 3 * 3072, 128, 1], offset=2 * 3072),
            cs([1024, 64]), cs([1024, 64]), 9015, cpu=False),
    rot_row("reg_rot_gpu_specials_t2048_h24", REG, "regression: bf16 NaN/Inf over 2048 tokens x 24 x 128",
            t([1, 2048, 24, 128], dist="specials"), cs([2048, 64]), cs([2048, 64]), 9016, cpu=False),
]

# ---- regression: apply_ltx2_split_rotary_emb (bf16 only: SGLang routes only bf16 x/cos/sin here) -----------------
rows += [
    ltx_row("reg_ltx2_b2_s17_h5_d64_contig_cos", REG, "regression: contiguous [B, H, S, D/2] cos/sin, H 5, prime S",
            t([2, 17, 5 * 64]), cs([2, 5, 17, 32], "bfloat16"), cs([2, 5, 17, 32], "bfloat16"), 9101),
    ltx_row("reg_ltx2_b2_s21_h4_d128_swapaxes", REG, "regression: the production swapaxes layout at small size",
            t([2, 21, 4 * 128]), ltx_cs(2, 4, 21, 64), ltx_cs(2, 4, 21, 64), 9102),
    ltx_row("reg_ltx2_s19_h17_d96", REG, "regression: H 17 = 16 + 1 (upstream head block + 1), half 48",
            t([1, 19, 17 * 96]), ltx_cs(1, 17, 19, 48), ltx_cs(1, 17, 19, 48), 9103),
    ltx_row("reg_ltx2_b3_s11_h15_d32", REG, "regression: H 15 = 16 - 1, half 16, batch 3",
            t([3, 11, 15 * 32]), ltx_cs(3, 15, 11, 16), ltx_cs(3, 15, 11, 16), 9104),
    ltx_row("reg_ltx2_tp2_rank1_slice", REG,
            "regression: tensor-parallel slice (_slice_rope_for_tp, TP 2, rank 1): heads 16..31 of a 32-head "
            "swapaxes cos/sin, storage offset 16*64",
            t([1, 24, 16 * 128]), ltx_cs(1, 16, 24, 64, offset=16 * 64, heads_total=32),
            ltx_cs(1, 16, 24, 64, offset=16 * 64, heads_total=32), 9105),
    ltx_row("reg_ltx2_batch_broadcast_cos", REG, "regression: cos/sin expanded over the batch (batch stride 0)",
            t([2, 21, 4 * 64]), cs([2, 4, 21, 32], "bfloat16", [0, 21 * 32, 32, 1]),
            cs([2, 4, 21, 32], "bfloat16", [0, 21 * 32, 32, 1]), 9106),
    ltx_row("reg_ltx2_large", REG, "regression: |x| near 1e4 (the bf16 rounding of x*cos is then far above atol)",
            t([1, 33, 4 * 128], dist="large"), ltx_cs(1, 4, 33, 64), ltx_cs(1, 4, 33, 64), 9107),
    ltx_row("reg_ltx2_specials", REG, "regression: NaN and +-Inf in x",
            t([1, 24, 4 * 128], dist="specials"), ltx_cs(1, 4, 24, 64), ltx_cs(1, 4, 24, 64), 9108),
]

def sweep_row(p, seed):
    """A row of the generalisation sweep (kda/definition/sweep.py draws p from config.toml's [sweep] domain), in
    either entry point's production form: apply_rotary_embedding with [T, D/2] cos/sin (x contiguous or the k slice
    of a fused QKV), or the LTX-2 split form with its swapaxes cos/sin (bf16 only, as SGLang routes it)."""
    B, T, H, D = p["B"], p["tokens"], p["heads"], p["head_dim"]
    half = D // 2
    if p["function"] == "apply_ltx2_split_rotary_emb":
        return ltx_row(f"ltx2_b{B}_s{T}_h{H}_d{D}", "sweep", "sweep", t([B, T, H * D]), ltx_cs(B, H, T, half),
                       ltx_cs(B, H, T, half), seed)
    dt, cdt = p["dtype"], p["cos_dtype"]
    stride, offset = ([T * 3 * H * D, 3 * H * D, D, 1], H * D) if p["layout"] == "qkv_slice" else (None, 0)
    return rot_row(f"rot_b{B}_t{T}_h{H}_d{D}_{dt}_cos_{cdt}_{p['layout']}", "sweep", "sweep",
                   t([B, T, H, D], dt, stride, offset), cs([T, half], cdt), cs([T, half], cdt), seed)


if __name__ == "__main__":  # `kda shapes` runs it as __main__; kda's sweep imports it for sweep_row
    write_or_check(OUT, rows, sys.argv)
