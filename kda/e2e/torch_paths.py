"""The PyTorch path of each task entry point a block calls: plain torch ops with the entry point's signature.

These are what SGLang's layers run when the fused kernel is off (their `forward_native`: FP32LayerNorm, RMSNorm,
MulAdd, the native residual-gate form), with the kernel inside `forward_native` (fuse_scale_shift_kernel) written
out as the torch ops it stands for. They serve three arms: `eager` (the block's dtype), `compile` (the same under
torch.compile) and the fp32 reference (the same code on fp32 tensors). In-place entry points stay in place.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F


def _norm(x, weight, bias, norm_type, eps):
    """FP32LayerNorm / RMSNorm.forward_native: fp32 statistics, the result back in x's dtype."""
    xf = x.float()
    if norm_type == "layer":
        both = weight is not None and bias is not None  # the fused kernel applies the affine only with both
        n = F.layer_norm(xf, (x.shape[-1],), weight.float() if both else None, bias.float() if both else None, eps)
    elif norm_type == "rms":
        n = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)
        n = n * weight.float() if weight is not None else n
    else:
        raise ValueError(f"unknown norm_type {norm_type!r}")
    return n.to(x.dtype)


def fuse_scale_shift_kernel(x, scale, shift, scale_constant=1.0, block_l=128, block_c=128):
    """MulAdd.forward_native (elementwise.py): x * (scale_constant + scale) + shift; a [B, F, 1, C] scale (and
    shift) applies per frame of x [B, F*L, C]."""
    if scale.dim() == 4:
        frames = scale.shape[1]
        y = x.unflatten(1, (frames, x.shape[1] // frames)) * (scale_constant + scale)
        if shift.dim() == 4:
            return (y + shift).flatten(1, 2)
        return y.flatten(1, 2) + shift
    return x * (scale_constant + scale) + shift


def fused_norm_scale_shift(x, weight, bias, scale, shift, norm_type, eps=1e-5):
    """_NormScaleShift.forward_native (layernorm.py): norm(x) * (1 + scale) + shift, in x's dtype."""
    return fuse_scale_shift_kernel(_norm(x, weight, bias, norm_type, eps), scale, shift).to(x.dtype)


def fused_scale_residual_norm_scale_shift(residual, x, gate, weight, bias, scale, shift, norm_type, eps=1e-5):
    """_ScaleResidualNormScaleShift.forward_native: r = residual + gate * x; (norm(r) * (1 + scale) + shift, r)."""
    if gate is None:
        r = residual + x
    elif gate.dim() == 4:
        frames = gate.shape[1]
        r = residual + (x.unflatten(1, (frames, x.shape[1] // frames)) * gate).flatten(1, 2)
    else:
        r = residual + x * gate
    return fuse_scale_shift_kernel(_norm(r, weight, bias, norm_type, eps), scale, shift).to(x.dtype), r


def _rms_rope(x, w, cos, sin, eps, is_neox, rope_dim):
    xf = x.float()
    y = (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps) * w.float()).to(x.dtype).float()
    r, rest = y[..., :rope_dim], y[..., rope_dim:]
    if is_neox:
        a, b = r[..., : rope_dim // 2], r[..., rope_dim // 2:]
        rot = torch.cat((a * cos - b * sin, b * cos + a * sin), dim=-1)
    else:
        a, b = r[..., 0::2], r[..., 1::2]
        rot = torch.stack((a * cos - b * sin, b * cos + a * sin), dim=-1).flatten(-2)
    return torch.cat((rot, rest), dim=-1)


def fused_inplace_qknorm_rope(q, k, q_weight, k_weight, cos_sin_cache, positions, *, is_neox, eps=1e-6,
                              head_dim=0, rope_dim=0):
    """apply_qk_norm_rope's unfused path (layernorm.py): RMSNorm.forward_native per head, then the rotation of
    apply_flashinfer_rope_qk_inplace (cos_sin_cache [max_pos, R]: cos half, sin half), written into q and k."""
    rope_dim = rope_dim or cos_sin_cache.shape[-1]
    rows = cos_sin_cache.float()[positions.long()]
    cos, sin = rows[:, None, : rope_dim // 2], rows[:, None, rope_dim // 2: rope_dim]
    q.copy_(_rms_rope(q, q_weight, cos, sin, eps, is_neox, rope_dim))
    k.copy_(_rms_rope(k, k_weight, cos, sin, eps, is_neox, rope_dim))
    return None


PATHS = {f.__name__: f for f in (fuse_scale_shift_kernel, fused_norm_scale_shift,
                                  fused_scale_residual_norm_scale_shift, fused_inplace_qknorm_rope)}


# --- group_norm_silu (HunyuanVideo VAE decoder, LTX-2 latent upsampler) -------------------------------------------


def triton_group_norm_silu(x, weight, bias, num_groups, eps=1e-5, *, out=None):
    """silu(GroupNorm(x)) as the group_norm_silu task's oracle computes it: statistics (mean, biased variance per
    (batch, group)) and the affine and SiLU in fp32, rounded once to x's dtype; the output contiguous whatever x's
    layout, as the kernels' is. (The wheel's own fallback, `activation(norm(x))`, rounds twice: after the norm and
    after the SiLU.) Writes `out` when given."""
    xf = x.float()
    y = F.silu(F.group_norm(xf, int(num_groups), None if weight is None else weight.float(),
                            None if bias is None else bias.float(), float(eps)))
    y = y.to(x.dtype).contiguous()
    if out is None:
        return y
    out.copy_(y)
    return out


def apply_group_norm_silu(x, norm, activation, *, out=None):
    """sglang.jit_kernel.diffusion.group_norm_silu.apply_group_norm_silu(x, norm: nn.GroupNorm, activation: nn.SiLU):
    the fused path's arguments (norm.weight, norm.bias, norm.num_groups, norm.eps), on the PyTorch path above."""
    affine = getattr(norm, "affine", True)
    return triton_group_norm_silu(x, norm.weight if affine else None, norm.bias if affine else None,
                                  norm.num_groups, norm.eps, out=out)


PATHS.update({f.__name__: f for f in (triton_group_norm_silu, apply_group_norm_silu)})
