"""LTX-2's latent upsampler (the two-stage pipeline's spatial x2 upscaler between stage 1 and stage 2), in plain
PyTorch, following SGLang 0.5.15's `sglang/multimodal_gen/runtime/models/upsampler/latent_upsampler.py` call by call:
`LatentUpsampler.forward` (lines 243-277, the dims == 3 branch, 257-275) with its 2 x 4 `ResBlock.forward` (111-122)
and the spatial upsampler (`Conv2d` + `PixelShuffleND(2)`, lines 219-224, run per frame at 269-271).

Kernel call sites go through `k.<site>(x, norm, activation)`: the wheel's `apply_group_norm_silu(x, self.norm1,
self.activation)` (and the initial norm's) with the block's own nn.GroupNorm and nn.SiLU. ResBlock's second norm is
`self.activation(self.norm2(x) + residual)` in the wheel, which no entry point covers (the wheel's comment, lines
114-117): it is nn.GroupNorm + nn.SiLU in every arm, as are the convolutions (nn.Conv3d / nn.Conv2d, zero padding 1).
einops' rearranges are written as the reshape / permute they perform (the same views and copies).

Configuration: the constructor's defaults (lines 175-185: in_channels 128, mid_channels 512, num_blocks_per_stage 4,
dims 3, spatial x2 by Conv2d + pixel shuffle, no temporal upsample, no rational resampler). The loader
(`runtime/loader/component_loaders/upsampler_loader.py`) reads the real config from the checkpoint's metadata or
config.json, which this block has not seen (nothing is downloaded): the workloads state in_channels and mid_channels
as dims, and num_blocks_per_stage 4 is fixed by the block's 9 call sites. The loader casts to bf16; the upsample stage
(`ltx_2/upsampling.py` `_upsample_video_latents`) then moves it to the latents' dtype, the prompt embeddings' dtype
(`ltx_2/latent_preparation_av.py` `_get_latent_dtype`), taken here as bf16.

Layouts: every group_norm_silu call gets a conv output of contiguous weights (the VAE loader's channels_last_3d
conversion is for the "vae" / "video_vae" components only), so contiguous inputs.

What this block fixes that the wheel leaves to the call: inference (no grad); the latents arrive de-normalised
(`latents * vae_std + vae_mean`, done by the stage before the call) as one contiguous [B, C, F, H, W] tensor.
"""
from __future__ import annotations

import math

import torch
import torch.nn as nn

BLOCKS = 4  # num_blocks_per_stage (constructor default); block.toml has a site per ResBlock norm1
GROUPS = 32  # torch.nn.GroupNorm(32, mid_channels) throughout (lines 106, 108, 199)


def _conv(cls, n_in: int, n_out: int) -> nn.Module:
    """kernel 3, padding 1 (every conv of the upsampler); weights at the scale of a trained layer."""
    conv = cls(n_in, n_out, kernel_size=3, padding=1)
    nn.init.normal_(conv.weight, std=1.0 / math.sqrt(conv.weight[0].numel()))
    nn.init.normal_(conv.bias, std=0.02)
    return conv


def _group_norm(channels: int) -> nn.GroupNorm:
    norm = nn.GroupNorm(GROUPS, channels)  # eps 1e-5, affine (defaults, as the wheel builds them)
    with torch.no_grad():
        norm.weight.copy_(1.0 + 0.1 * torch.randn(channels))
        norm.bias.copy_(0.1 * torch.randn(channels))
    return norm


class ResBlock(nn.Module):
    """ResBlock (lines 95-122), dims 3."""

    def __init__(self, channels: int):
        super().__init__()
        self.conv1 = _conv(nn.Conv3d, channels, channels)
        self.norm1 = _group_norm(channels)
        self.conv2 = _conv(nn.Conv3d, channels, channels)
        self.norm2 = _group_norm(channels)
        self.activation = nn.SiLU()

    def forward(self, k, site: str, x: torch.Tensor) -> torch.Tensor:
        residual = x
        x = self.conv1(x)
        x = getattr(k, site)(x, self.norm1, self.activation)
        x = self.conv2(x)
        x = self.norm2(x)
        return self.activation(x + residual)


def pixel_shuffle_2d(x: torch.Tensor, p1: int = 2, p2: int = 2) -> torch.Tensor:
    """PixelShuffleND(2).forward: rearrange 'b (c p1 p2) h w -> b c (h p1) (w p2)'."""
    b, cpp, h, w = x.shape
    c = cpp // (p1 * p2)
    return x.reshape(b, c, p1, p2, h, w).permute(0, 1, 4, 2, 5, 3).reshape(b, c, h * p1, w * p2)


class Block(nn.Module):
    def __init__(self, dims: dict):
        super().__init__()
        n_in, mid = int(dims["in_channels"]), int(dims["mid_channels"])
        self.initial_conv = _conv(nn.Conv3d, n_in, mid)
        self.initial_norm = _group_norm(mid)
        self.initial_activation = nn.SiLU()
        self.res_blocks = nn.ModuleList([ResBlock(mid) for _ in range(BLOCKS)])
        self.upsampler_conv = _conv(nn.Conv2d, mid, 4 * mid)  # upsampler = Sequential(Conv2d, PixelShuffleND(2))
        self.post_upsample_res_blocks = nn.ModuleList([ResBlock(mid) for _ in range(BLOCKS)])
        self.final_conv = _conv(nn.Conv3d, mid, n_in)

    def forward(self, k, latent):
        """LatentUpsampler.forward, dims == 3, spatial upsample without the rational resampler."""
        b, _, f, _, _ = latent.shape
        x = self.initial_conv(latent)
        x = k.initial_norm(x, self.initial_norm, self.initial_activation)
        for i, block in enumerate(self.res_blocks):
            x = block(k, f"res{i}_norm1", x)
        # rearrange(x, "b c f h w -> (b f) c h w"), the upsampler, rearrange(x, "(b f) c h w -> b c f h w", b=b, f=f)
        x = x.permute(0, 2, 1, 3, 4).reshape(b * f, *x.shape[1:2], *x.shape[3:])
        x = pixel_shuffle_2d(self.upsampler_conv(x))
        x = x.reshape(b, f, *x.shape[1:]).permute(0, 2, 1, 3, 4)
        for i, block in enumerate(self.post_upsample_res_blocks):
            x = block(k, f"post{i}_norm1", x)
        return (self.final_conv(x),)


def make_inputs(dims: dict, dtype: torch.dtype, generator: torch.Generator) -> dict:
    shape = (int(dims["batch"]), int(dims["in_channels"]), int(dims["latent_frames"]), int(dims["latent_height"]),
             int(dims["latent_width"]))
    return {"latent": torch.randn(*shape, generator=generator).to(dtype)}


def output_shapes(dims: dict) -> tuple:
    return ((int(dims["batch"]), int(dims["in_channels"]), int(dims["latent_frames"]), 2 * int(dims["latent_height"]),
             2 * int(dims["latent_width"])),)


def check_dims(dims: dict) -> str | None:
    """apply_group_norm_silu takes the Triton path for every call here (CUDA, no grad, an affine nn.GroupNorm and a
    non-inplace nn.SiLU, weight and bias in x's dtype) once mid_channels divides into the 32 groups."""
    if int(dims["mid_channels"]) % GROUPS:
        return f"mid_channels {dims['mid_channels']}: torch.nn.GroupNorm(32, mid_channels) needs a multiple of 32"
    return None
