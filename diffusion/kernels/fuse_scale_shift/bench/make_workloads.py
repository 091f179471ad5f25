"""Writes workloads.json for fuse_scale_shift. Run: python bench/make_workloads.py [--check].

Production rows follow ../shared anchors (captured by KDA-Pilot from live SGLang runs, or derived from model
configs: S = (1 + (frames-1)/4) * (H/16) * (W/16) for the video DiTs); regression rows cover the forms the
upstream wrapper accepts that production does not exercise.
"""
import sys
from pathlib import Path

from kda.workloads import tensor_decl, write_or_check

OUT = Path(__file__).with_name("workloads.json")


def t(shape, dtype="bfloat16", stride=None, offset=0, dist="normal"):
    return tensor_decl(shape, dtype, stride, offset, dist)


def row(rid, model, source, x, scale, shift, c, seed, production=True, cpu=False):
    return {"id": rid, "production": production, "model": model, "source": source,
            "function": "fuse_scale_shift_kernel", "tensors": {"x": x, "scale": scale, "shift": shift},
            "scalars": {"scale_constant": c}, "seed": seed, "cpu": cpu}


CAP = "captured: KDA-Pilot live SGLang capture (fuse_scale_shift workloads)"
rows = []
# Qwen-Image text/image streams: [1,1,C] bf16 modulation, scale_constant 0 as captured.
for s in (19, 47, 4096):
    rows.append(row(f"qwen_image_s{s}_c3072_bcast11", "Qwen-Image", CAP, t([1, s, 3072]), t([1, 1, 3072]),
                    t([1, 1, 3072]), 0.0, 1000 + s))
for s in (189, 195, 8424):
    rows.append(row(f"qwen_edit_s{s}_c3072_bcast11", "Qwen-Image-Edit", CAP, t([1, s, 3072]), t([1, 1, 3072]),
                    t([1, 1, 3072]), 1.0, 2000 + s))
rows.append(row("qwen_edit_s8424_c3072_full3d", "Qwen-Image-Edit", CAP, t([1, 8424, 3072]), t([1, 8424, 3072]),
                t([1, 8424, 3072]), 1.0, 2999))
# HunyuanVideo: 65 frames at 848x480 -> 27030 image tokens, +55 text; [B, C] modulation.
for s in (55, 27030, 27085):
    rows.append(row(f"hunyuanvideo_s{s}_c3072_bcast2d", "HunyuanVideo", CAP, t([1, s, 3072]), t([1, 3072]),
                    t([1, 3072]), 1.0, 3000 + s))
# Wan2.2 TI2V-5B: per-token fp32 modulation, each a chunk of one [1, L, 2C] tensor (non-contiguous).
L, C = 18144, 3072
rows.append(row("wan_ti2v_s18144_c3072_chunk_fp32", "Wan2.2-TI2V-5B", CAP, t([1, L, C]),
                t([1, L, C], "float32", [L * 2 * C, 2 * C, 1], 0), t([1, L, C], "float32", [L * 2 * C, 2 * C, 1], C),
                1.0, 4000))
# Wan2.2 T2V / I2V A14B at 720p: 81 frames -> 75600 (T2V) / 74088 (I2V); half-length clips 37800 / 37044.
# Output AdaLN: fp32 [1,1,C] scale, per-token bf16 shift, scale_constant 0.
for model, s in (("Wan2.2-T2V-A14B", 37800), ("Wan2.2-T2V-A14B", 75600), ("Wan2.2-I2V-A14B", 37044), ("Wan2.2-I2V-A14B", 74088)):
    tag = "t2v" if "T2V" in model else "i2v"
    rows.append(row(f"wan_{tag}_s{s}_c5120_fp32scale", model,
                    "derived: S = (1 + (81-1)/4) * (720/16) * (1280/16) (and the 41-frame / I2V variants); dtypes as anchors",
                    t([1, s, 5120]), t([1, 1, 5120], "float32"), t([1, s, 5120]), 0.0, 5000 + s))

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

write_or_check(OUT, rows, sys.argv)
