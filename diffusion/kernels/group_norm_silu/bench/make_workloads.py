"""Writes workloads.json for group_norm_silu. Run: python bench/make_workloads.py [--check].

Production rows come from the shape catalog (diffusion/shapes/hunyuanvideo-vae.toml, which holds the derivation
below as data): the GroupNorm+SiLU calls of the HunyuanVideo VAE decoder (KDA-Pilot capture,
diffusion/shapes/SOURCES.md#hunyuanvideo-vae: fp16 [1, C, T, H, W], C in {128, 256, 512}, G 32, eps 1e-6,
T in {2, 3, 5, 9, 17}, spatial 12x10 .. 256x256, 48 unique shapes, all seen contiguous and 32 of them
channels_last_3d as well). The 48 shapes are derived from the decoder and
sglang's tiled decode (sglang 0.5.15, models/vaes/hunyuanvae.py, vaes/common.py, configs/models/vaes/base.py), and
they are the 48 the capture recorded:

- a 65-frame 480x848 video has a latent of 17 x 60 x 106 (4x temporal, 8x spatial compression);
- `tiled_decode` cuts it into temporal tiles `z[:, :, i:i+5]` for i in range(0, 17, 3) -> T0 in {5, 2}
  (tile 16 frames / stride 12 frames in pixel space = 4 / 3 latent frames, +1 causal frame), and spatial tiles of
  32 latent pixels with stride 24 (256 / 192 px) -> H in {32, 60-48 = 12}, W in {32, 106-96 = 10};
- the decoder (block_out_channels 128/256/512/512 reversed, 3 resnets per up block, GroupNorm(32, eps 1e-6) + SiLU
  before each conv) sees per tile, with T1 = 1 + 2 (T0 - 1) and T2 = 1 + 4 (T0 - 1) after the two temporal
  upsamplers (first frame kept, the others doubled):
    mid block and up block 0 resnets      C 512, T0, H x W
    up block 1 resnets                    C 512, T0, 2H x 2W
    up block 2 resnet 0 norm1             C 512, T1, 4H x 4W
    up block 2 other norms                C 256, T1, 4H x 4W
    up block 3 resnet 0 norm1             C 256, T2, 8H x 8W
    up block 3 other norms, conv_norm_out C 128, T2, 8H x 8W
  2 temporal tiles x 4 spatial tiles x 6 stages = 48 unique shapes, T in {2, 3, 5, 9, 17}, spatial 12x10 ..
  256x256, largest [1, 256, 17, 256, 256] (570M elements, 1.1 GB fp16), all matching the capture.

Production rows call `apply_group_norm_silu` (what the VAE calls, with its nn.GroupNorm / nn.SiLU modules); weight and
bias are fp16 like the VAE's parameters (upstream only takes its Triton path when they match x's dtype).
Regression rows cover what upstream accepts and production does not exercise: 2-D to 5-D inputs, batch > 1,
channels per group not a power of two, G = 1 and G = C, fp32 and bf16, other eps, other layouts (channels_last
4-D, padded and offset views), both upstream Triton paths (one-pass, chunked, chunked with scalar affine), large
magnitudes, a nonzero mean, NaN/Inf.
"""
import math
import sys
from pathlib import Path

from kda.shapes.catalog import production_rows
from kda.definition.workloads import tensor_decl, write_or_check

OUT = Path(__file__).with_name("workloads.json")


def t(shape, dtype="float16", stride=None, offset=0, dist="normal"):
    return tensor_decl(shape, dtype, stride, offset, dist)


def channels_last(shape):
    """torch.channels_last(_3d) strides of [B, C, *spatial]: C fastest, then the spatial dims in order."""
    b, c, *sp = shape
    strides = [0] * len(shape)
    strides[1] = 1
    acc = c
    for i in range(len(shape) - 1, 1, -1):
        strides[i] = acc
        acc *= shape[i]
    strides[0] = acc
    return strides


def row(rid, model, source, x, c, groups, eps, seed, function="apply_group_norm_silu", production=True, cpu=False,
        wdtype=None, wdist="normal", bdist="normal"):
    wdtype = wdtype or x["dtype"]
    return {"id": rid, "production": production, "model": model, "source": source, "function": function,
            "tensors": {"x": x, "weight": t([c], wdtype, dist=wdist), "bias": t([c], wdtype, dist=bdist)},
            "scalars": {"num_groups": groups, "eps": eps}, "seed": seed, "cpu": cpu}


# -- production: HunyuanVideo VAE decoder under tiled decode (rows and their derivation: diffusion/shapes/) ------
rows = []
for r in production_rows("group_norm_silu"):
    shape = (1, r["C"], r["T"], r["H"], r["W"])
    x = t(shape, r["dtype"], stride=channels_last(shape) if r["layout"] == "cl3d" else None)
    rows.append(row(r.id, r.model, r.source, x, r["C"], r["G"], r["eps"], r.seed, function=r.function))
shapes = {tuple(x["tensors"]["x"]["shape"]) for x in rows}
assert len(shapes) == 48 and {s[2] for s in shapes} == {2, 3, 5, 9, 17} and max(shapes, key=math.prod) == (1, 256, 17, 256, 256)

# -- regression ----------------------------------------------------------------------------------------------
REG = "regression"
T = "triton_group_norm_silu"
A = "apply_group_norm_silu"
reg = [
    # (id, why, x spec, C, G, eps, function, cpu, extra kwargs)
    ("reg_fp32_4d_b2_c64_g32_s9x7", "fp32, 4-D, batch 2, 2 channels per group, odd spatial",
     t([2, 64, 9, 7], "float32"), 64, 32, 1e-5, T, True, {}),
    ("reg_bf16_5d_b2_c96_g32", "bf16, batch 2, 3 channels per group (not a power of two)",
     t([2, 96, 3, 5, 7], "bfloat16"), 96, 32, 1e-6, A, True, {}),
    ("reg_fp16_3d_b2_c48_g3_l37", "3-D [B, C, L], 3 groups of 16 channels, prime length",
     t([2, 48, 37]), 48, 3, 1e-5, T, True, {}),
    ("reg_fp32_2d_b5_c64_g8", "2-D [B, C]: spatial size 1",
     t([5, 64], "float32"), 64, 8, 1e-5, T, True, {}),
    ("reg_fp16_g1_c40_5d", "G = 1 (one group over all channels), 40 channels",
     t([1, 40, 2, 6, 6]), 40, 1, 1e-6, A, True, {}),
    ("reg_fp32_gC_b2_c24_5d", "G = C (instance norm), eps 1e-2",
     t([2, 24, 3, 4, 5], "float32"), 24, 24, 1e-2, T, True, {}),
    ("reg_fp16_cl3d_b2_c96_g32", "channels_last_3d, batch 2, 3 channels per group",
     t([2, 96, 3, 5, 6], stride=channels_last([2, 96, 3, 5, 6])), 96, 32, 1e-6, A, True, {}),
    ("reg_bf16_cl4d_b2_c64_g16", "channels_last 4-D, bf16",
     t([2, 64, 6, 7], "bfloat16", stride=channels_last([2, 64, 6, 7])), 64, 16, 1e-5, T, True, {}),
    ("reg_fp16_padded_offset_5d", "a padded, offset view (W of 10 inside rows of 12): spatial dims do not collapse",
     t([1, 64, 3, 8, 10], stride=[64 * 3 * 8 * 12, 3 * 8 * 12, 8 * 12, 12, 1], offset=7), 64, 32, 1e-6, T, True, {}),
    ("reg_fp16_permuted_thw", "a permuted view (T and W swapped in memory)",
     t([1, 32, 4, 6, 5], stride=[32 * 120, 120, 1, 5 * 4, 4]), 32, 8, 1e-6, A, True, {}),
    ("reg_fp32_large_magnitude", "fp32 values near 1e4 (x^2 near 1e8, group sums near 1e12)",
     t([2, 64, 4, 8, 8], "float32", dist="large"), 64, 32, 1e-6, T, True, {}),
    ("reg_fp16_large_magnitude", "fp16 values near 1e2 (x^2 beyond fp16 range: statistics must be fp32)",
     t([1, 64, 3, 8, 8], dist="large"), 64, 32, 1e-6, A, True, {}),
    ("reg_fp16_positive_mean", "nonzero mean (uniform 0.5 .. 1.5): E[x^2] - mean^2 cancels",
     t([1, 128, 3, 12, 10], dist="positive"), 128, 32, 1e-6, A, True, {}),
    ("reg_bf16_heavy_tail", "Cauchy-tailed inputs",
     t([1, 64, 2, 12, 10], "bfloat16", dist="heavy"), 64, 32, 1e-6, T, True, {}),
    ("reg_fp32_specials", "NaN/+-Inf in x: every group holding one is NaN, the others exact",
     t([2, 64, 2, 3, 4], "float32", dist="specials"), 64, 32, 1e-5, T, True, {}),
    ("reg_fp16_chunked_g1_s2p16", "upstream chunked path (group 2^18 elements), general apply kernel",
     t([1, 4, 4, 128, 128]), 4, 1, 1e-6, A, True, {}),
    ("reg_fp16_chunked_scalar_affine", "upstream chunked path with the scalar-affine apply kernel "
     "(spatial % 8192 == 0, 64 chunks per group; GPU only)", t([1, 2, 2, 512, 512]), 2, 2, 1e-6, T, False, {}),
    ("reg_fp32_chunked_b2_cl3d_g1", "fp32, batch 2, channels_last_3d, G 1: 393K-element groups, chunked upstream "
     "(GPU only)", t([2, 32, 3, 64, 64], "float32", stride=channels_last([2, 32, 3, 64, 64])), 32, 1, 1e-6, T, False, {}),
    ("reg_fp16_cl3d_c8_g1_chunked", "channels_last_3d, G 1: a 2^18-element group (chunked upstream, after its "
     "x.contiguous() copy)", t([1, 8, 2, 128, 128], stride=channels_last([1, 8, 2, 128, 128])), 8, 1, 1e-6, A, True, {}),
    ("reg_bf16_cl3d_c512_t2_6x5", "bf16, channels_last_3d, the VAE's 512 channels at a small spatial size",
     t([1, 512, 2, 6, 5], "bfloat16", stride=channels_last([1, 512, 2, 6, 5])), 512, 32, 1e-6, A, True, {}),
    ("reg_fp16_b2_c256_t9_64x64", "batch 2 mid-size row (GPU only)",
     t([2, 256, 9, 64, 64]), 256, 32, 1e-6, A, False, {}),
    ("reg_bf16_c128_t17_128x128_cl3d", "bf16 large row, channels_last_3d (GPU only)",
     t([1, 128, 17, 128, 128], "bfloat16", stride=channels_last([1, 128, 17, 128, 128])), 128, 32, 1e-6, A, False, {}),
    ("reg_fp32_c256_t5_256x256", "fp32 large row: fp32 statistics over 2.6M-element groups (GPU only)",
     t([1, 256, 5, 256, 256], "float32"), 256, 32, 1e-6, T, False, {}),
    # Means far above the spread (workloads.OFFSET_MEAN: 32 in fp32 and bf16, 256 in fp16), where a variance taken
    # as E[x^2] - mean^2 cancels. Appended last: the rows above keep their seeds.
    ("reg_fp32_offset_mean", "fp32, mean 32 over a spread of 1 (E[x^2] - mean^2 cancels)",
     t([2, 64, 4, 8, 8], "float32", dist="offset"), 64, 32, 1e-6, T, True, {}),
    ("reg_fp32_offset_mean_g1_16k", "fp32, mean 32, G 1: 16K-element groups, the cancellation summed over more",
     t([1, 8, 2, 32, 32], "float32", dist="offset"), 8, 1, 1e-6, A, True, {}),
    ("reg_fp16_offset_mean", "fp16, mean 256 over a spread of 1",
     t([1, 64, 3, 8, 8], dist="offset"), 64, 32, 1e-6, A, True, {}),
    ("reg_bf16_offset_mean_cl3d", "bf16, channels_last_3d, mean 32 over a spread of 1",
     t([1, 96, 3, 5, 6], "bfloat16", dist="offset", stride=channels_last([1, 96, 3, 5, 6])), 96, 32, 1e-6, T, True,
     {}),
    ("reg_fp32_offset_mean_chunked_g1", "fp32, mean 32, G 1 over 2^19 elements (chunked upstream; GPU only)",
     t([1, 8, 4, 128, 128], "float32", dist="offset"), 8, 1, 1e-6, A, False, {}),
]
for i, (rid, why, x, c, g, eps, fn, cpu, kw) in enumerate(reg):
    rows.append(row(rid, REG, f"regression: {why}", x, c, g, eps, 9001 + i, function=fn, production=False, cpu=cpu,
                    **kw))

def sweep_row(p, seed):
    """A row of the generalisation sweep (kda/definition/sweep.py draws p from config.toml's [sweep] domain): the
    production call (apply_group_norm_silu, G 32, eps 1e-6, affine in x's dtype) on a drawn shape, dtype and layout."""
    shape = (p["B"], p["C"], p["T"], p["H"], p["W"])
    x = t(shape, p["dtype"], stride=channels_last(shape) if p["layout"] == "cl3d" else None)
    rid = "b{}_c{}_t{}_{}x{}".format(*shape) + f"_{p['dtype']}_{p['layout']}"
    return row(rid, "sweep", "sweep", x, p["C"], 32, 1e-6, seed, production=False)


if __name__ == "__main__":  # `kda shapes` runs it as __main__; kda's sweep imports it for sweep_row
    write_or_check(OUT, rows, sys.argv)
