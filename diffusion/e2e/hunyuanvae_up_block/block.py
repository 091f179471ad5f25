"""One up block of the HunyuanVideo VAE decoder on one tile of sglang's tiled decode, in plain PyTorch, following
SGLang 0.5.15's `sglang/multimodal_gen/runtime/models/vaes/hunyuanvae.py` call by call:
`HunyuanVideoUpBlock3D.forward` (lines 587-600), each `HunyuanVideoResnetBlockCausal3D.forward` (341-360) with
`_apply_group_norm_silu` (87-99), `HunyuanVideoCausalConv3d.forward` (228-236) and
`HunyuanVideoUpsampleCausal3D.forward` (259-285); after the final up block (index 3), the decoder's post-process
`HunyuanVideoDecoder3D.forward` lines 840-847 (conv_norm_out + SiLU, conv_out), which runs straight after it.

Kernel call sites go through `k.<site>(x, norm, activation)`: the wheel's `apply_group_norm_silu(x, norm,
nonlinearity)` with the block's own nn.GroupNorm and nn.SiLU modules (the entry point reads norm.weight, norm.bias,
norm.num_groups, norm.eps). Convolutions are nn.Conv3d after F.pad (replicate), as the causal conv runs them.

The up block's shape comes from the decoder's construction (`HunyuanVideoDecoder3D.__init__`, lines 766-808): up block
i of 4 has 3 resnets (layers_per_block 2, + 1), in_channels -> out_channels on the first, an upsampler that doubles H
and W for i < 3 and doubles the frames after the first for 1 <= i < 3 (time_compression_ratio 4), none for i = 3.

Layouts, as the wheel makes them (what the group_norm_silu entry point receives at each site):
- norm1 of every resnet: contiguous, always (`hidden_states = hidden_states.contiguous()`, line 342);
- norm2 of every resnet and conv_norm_out: the layout of a conv output (norm2: conv1's; conv_norm_out: the last
  resnet's `conv2(...) + residual`, which takes its first operand's layout). With the VAE loader's channels_last_3d
  conversion of the Conv3d weights (`runtime/loader/component_loaders/vae_loader.py`
  `_convert_conv3d_weights_to_channels_last_3d`, on for HunyuanVideo only with SGLANG_DIFFUSION_VAE_CHANNELS_LAST_3D=1:
  `_should_use_channels_last_3d` returns False for its pipeline config otherwise) cuDNN returns channels_last_3d
  conv outputs; without it they are contiguous. The block holds its conv weights in channels_last_3d when the norm2
  catalog row (`out`) is a channels_last_3d row. On the CPU, where the check runs, PyTorch's conv returns a contiguous
  output even for channels_last_3d weights, so there `_conv` asks for the layout cuDNN gives (never on a GPU).

What this block fixes that the wheel leaves to the call:
- no spatial-parallel decode (`spatial_parallel` False: `_apply_group_norm_silu` calls the entry point directly);
- inference (no grad, dropout 0: `nn.Dropout` is the identity), no gradient checkpointing;
- the input tile is already cut (tiled_decode's slicing and blending are outside the decoder).
"""
from __future__ import annotations

import math

import torch
import torch.nn as nn
import torch.nn.functional as F

RESNETS = 3  # layers_per_block 2 + 1 (HunyuanVideoDecoder3D.__init__, line 797); block.toml has a site per norm
FINAL_UP_BLOCK = 3  # len(block_out_channels) - 1: no upsampler, followed by the decoder's post-process
OUT_CHANNELS = 3  # HunyuanVideoDecoder3D(out_channels=3): conv_out's RGB


def _conv3d(n_in: int, n_out: int, kernel: int) -> nn.Conv3d:
    """Random weights at the scale of a trained layer: unit-variance outputs from unit-variance inputs."""
    conv = nn.Conv3d(n_in, n_out, kernel, 1, 0, bias=True)
    nn.init.normal_(conv.weight, std=1.0 / math.sqrt(n_in * kernel ** 3))
    nn.init.normal_(conv.bias, std=0.02)
    return conv


def _group_norm(groups: int, channels: int, eps: float) -> nn.GroupNorm:
    """A trained GroupNorm's affine: weight near 1, small bias."""
    norm = nn.GroupNorm(groups, channels, eps=eps, affine=True)
    with torch.no_grad():
        norm.weight.copy_(1.0 + 0.1 * torch.randn(channels))
        norm.bias.copy_(0.1 * torch.randn(channels))
    return norm


def upsample_factor(up_block: int) -> tuple[int, int, int] | None:
    """HunyuanVideoDecoder3D.__init__ (lines 779-794) with block_out_channels of length 4, spatial ratio 8, time 4."""
    spatial = up_block < 3  # int(np.log2(8)) spatial upsample layers
    temporal = up_block >= 4 - 1 - 2 and up_block != FINAL_UP_BLOCK  # int(np.log2(4)) time upsample layers
    if not (spatial or temporal):
        return None
    return (2 if temporal else 1, 2 if spatial else 1, 2 if spatial else 1)


class CausalConv3d(nn.Module):
    """HunyuanVideoCausalConv3d: F.pad (time_causal_padding, replicate) then nn.Conv3d, as forward (228-236) runs it."""

    def __init__(self, n_in: int, n_out: int, kernel: int):
        super().__init__()
        self.time_causal_padding = (kernel // 2, kernel // 2, kernel // 2, kernel // 2, kernel - 1, 0)
        self.conv = _conv3d(n_in, n_out, kernel)

    def forward(self, x: torch.Tensor, cl3d: bool) -> torch.Tensor:
        if any(self.time_causal_padding):
            x = F.pad(x, self.time_causal_padding, mode="replicate")
        y = self.conv(x)
        if cl3d and not y.is_cuda:  # the layout cuDNN returns for channels_last_3d weights (see the docstring)
            y = y.contiguous(memory_format=torch.channels_last_3d)
        return y


class Resnet(nn.Module):
    """HunyuanVideoResnetBlockCausal3D (lines 311-360)."""

    def __init__(self, n_in: int, n_out: int, groups: int, eps: float):
        super().__init__()
        self.nonlinearity = nn.SiLU()  # get_act_fn("silu") -> nn.SiLU() (layers/activation.py)
        self.norm1 = _group_norm(groups, n_in, eps)
        self.conv1 = CausalConv3d(n_in, n_out, 3)
        self.norm2 = _group_norm(groups, n_out, eps)
        self.conv2 = CausalConv3d(n_out, n_out, 3)
        self.conv_shortcut = CausalConv3d(n_in, n_out, 1) if n_in != n_out else None

    def forward(self, k, i: int, hidden_states: torch.Tensor, cl3d: bool) -> torch.Tensor:
        hidden_states = hidden_states.contiguous()
        residual = hidden_states
        hidden_states = getattr(k, f"resnet{i}_norm1")(hidden_states, self.norm1, self.nonlinearity)
        hidden_states = self.conv1(hidden_states, cl3d)
        hidden_states = getattr(k, f"resnet{i}_norm2")(hidden_states, self.norm2, self.nonlinearity)
        # self.dropout: nn.Dropout(0.0), the identity
        hidden_states = self.conv2(hidden_states, cl3d)
        if self.conv_shortcut is not None:
            residual = self.conv_shortcut(residual, cl3d)
        return hidden_states + residual


class Block(nn.Module):
    def __init__(self, dims: dict):
        super().__init__()
        groups, eps = int(dims["groups"]), float(dims["eps"])
        n_in, n_out = int(dims["x_C"]), int(dims["out_C"])
        self.up_block = int(dims["up_block"])
        self.cl3d = bool(dims["out_cl3d"])
        # HunyuanVideoUpBlock3D.__init__: resnet 0 in -> out, the others out -> out; the upsampler's conv out -> out
        self.resnets = nn.ModuleList([Resnet(n_in if i == 0 else n_out, n_out, groups, eps) for i in range(RESNETS)])
        self.factor = upsample_factor(self.up_block)
        self.upsample_conv = CausalConv3d(n_out, n_out, 3) if self.factor else None
        if self.up_block == FINAL_UP_BLOCK:  # HunyuanVideoDecoder3D: conv_norm_out, conv_act, conv_out
            self.conv_norm_out = _group_norm(groups, n_out, eps)
            self.conv_act = nn.SiLU()
            self.conv_out = CausalConv3d(n_out, OUT_CHANNELS, 3)
        if self.cl3d:  # vae_loader._convert_conv3d_weights_to_channels_last_3d
            for m in self.modules():
                if isinstance(m, nn.Conv3d):
                    m.weight.data = m.weight.data.to(memory_format=torch.channels_last_3d)

    def _upsample(self, hidden_states: torch.Tensor) -> torch.Tensor:
        """HunyuanVideoUpsampleCausal3D.forward (lines 259-285)."""
        num_frames = hidden_states.size(2)
        first_frame, other_frames = hidden_states.split((1, num_frames - 1), dim=2)
        first_frame = F.interpolate(first_frame.squeeze(2), scale_factor=self.factor[1:], mode="nearest").unsqueeze(2)
        if num_frames > 1:
            other_frames = other_frames.contiguous()
            other_frames = F.interpolate(other_frames, scale_factor=self.factor, mode="nearest")
            hidden_states = torch.cat((first_frame, other_frames), dim=2)
        else:
            hidden_states = first_frame
        return self.upsample_conv(hidden_states, self.cl3d)

    def forward(self, k, hidden_states):
        """HunyuanVideoUpBlock3D.forward; after the final up block, the decoder's post-process."""
        for i, resnet in enumerate(self.resnets):
            hidden_states = resnet(k, i, hidden_states, self.cl3d)
        if self.factor is not None:
            hidden_states = self._upsample(hidden_states)
        if self.up_block == FINAL_UP_BLOCK:
            hidden_states = k.conv_norm_out(hidden_states, self.conv_norm_out, self.conv_act)
            hidden_states = self.conv_out(hidden_states, self.cl3d)
        return (hidden_states,)


def make_inputs(dims: dict, dtype: torch.dtype, generator: torch.Generator) -> dict:
    """The tile's activation entering the up block: a conv output (the mid block's last resnet sum, or the previous
    upsampler's conv), so channels_last_3d under channels_last_3d weights, contiguous otherwise."""
    shape = (int(dims["batch"]), int(dims["x_C"]), int(dims["x_T"]), int(dims["x_H"]), int(dims["x_W"]))
    x = torch.randn(*shape, generator=generator).to(dtype)
    if dims["out_cl3d"]:
        x = x.contiguous(memory_format=torch.channels_last_3d)
    return {"hidden_states": x}


def output_shapes(dims: dict) -> tuple:
    B, C, T, H, W = (int(dims[n]) for n in ("batch", "out_C", "x_T", "x_H", "x_W"))
    factor = upsample_factor(int(dims["up_block"]))
    if factor is not None:
        T, H, W = 1 + factor[0] * (T - 1), H * factor[1], W * factor[2]
    if int(dims["up_block"]) == FINAL_UP_BLOCK:
        C = OUT_CHANNELS
    return ((B, C, T, H, W),)


def check_dims(dims: dict) -> str | None:
    """The wheel sends every one of these calls to the Triton kernel (apply_group_norm_silu: CUDA, no grad, an
    affine nn.GroupNorm and nn.SiLU; triton_group_norm_silu: C % groups == 0, weight and bias in x's dtype); what
    remains to check is that the catalog rows are the shapes this up block sees."""
    G = int(dims["groups"])
    if int(dims["up_block"]) not in range(4):
        return f"up_block {dims['up_block']}: the decoder has up blocks 0 to 3"
    for name in ("x", "out"):
        if int(dims[f"{name}_C"]) % G:
            return f"{name}_C {dims[f'{name}_C']} is not a multiple of {G} groups"
    if any(dims[f"x_{p}"] != dims[f"out_{p}"] for p in ("T", "H", "W")):
        return (f"x is {dims['x_T']}x{dims['x_H']}x{dims['x_W']} but out is {dims['out_T']}x{dims['out_H']}x"
                f"{dims['out_W']}: every resnet of an up block runs at the size its input has")
    if dims["x_cl3d"]:
        return "x is a channels_last_3d row, but resnet 0's norm1 gets hidden_states.contiguous() (hunyuanvae.py:342)"
    return None
