"""The PyTorch path of each task entry point a block calls: plain torch ops with the entry point's signature.

These are what SGLang's layers run when the fused kernel is off (their `forward_native`: FP32LayerNorm, RMSNorm,
MulAdd, the native residual-gate form), with the kernel inside `forward_native` (fuse_scale_shift_kernel) written
out as the torch ops it stands for. They serve three arms: `eager` (the block's dtype), `compile` (the same under
torch.compile) and the fp32 reference (the same code on fp32 tensors). In-place entry points stay in place.

They are also the chain a `bitexact` candidate must equal bit for bit (issue 40, `check.contract`: the harness's
worker compares each candidate's first checked call with the chain of its row's function), hence their place among
the task definitions rather than in kda/e2e.
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
    shift) applies per frame of x [B, F*L, C]; a [B, C] one per batch entry, as the kernel reads it (the layers pass
    [B, 1, C] views; the kernel's own callers may pass the 2-D form)."""
    if x.dim() == 3:
        scale = scale.unsqueeze(1) if scale.dim() == 2 else scale
        shift = shift.unsqueeze(1) if shift.dim() == 2 else shift
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
    y = _norm(x, w, None, "rms", eps).float()
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


# -- Added for the Z-Image and LTX-2 blocks (diffusion/e2e/zimage, diffusion/e2e/ltx2) -------------------------------

def fused_norm_tanh_mul_add(x, weight, bias, scale, shift, norm_type, eps=1e-5):
    """_NormTanhMulAdd.forward_native / apply_rmsnorm_tanh_mul_add's fallback (layernorm.py):
    norm(x) * tanh(scale) + shift, the norm's result in x's dtype (RMSNorm.forward_native), then x's dtype."""
    return (_norm(x, weight, bias, norm_type, eps) * torch.tanh(scale) + shift).to(x.dtype)


def fused_norm_tanh_mul_add_norm_scale(x, weight, bias, scale, shift, weight2, bias2, scale2, norm_type, eps=1e-5):
    """ZImageTransformerBlock.forward's unfused branch (zimage.py): y = norm(x) * tanh(scale) + shift (as above),
    then y2 = norm(y; weight2, bias2) * (1 + scale2); returns (y, y2)."""
    y = fused_norm_tanh_mul_add(x, weight, bias, scale, shift, norm_type, eps)
    return y, (_norm(y, weight2, bias2, norm_type, eps) * (1.0 + scale2)).to(x.dtype)


def apply_ltx2_split_rotary_emb(x, cos, sin):
    """apply_split_rotary_emb's fallback (dits/ltx_2.py): x [B, T, H*D], cos/sin [B, H, T, D/2]; each head's first
    half x1 and second half x2 become (x1 cos - x2 sin, x2 cos + x1 sin), in the arithmetic of x and cos (bf16 in
    the block, fp32 for the reference), returned in x's dtype."""
    x_dtype = x.dtype
    b = x.shape[0]
    _, h, t, _ = cos.shape
    x = x.reshape(b, t, h, -1).swapaxes(1, 2)
    last = x.shape[-1]
    r = last // 2
    split_x = x.reshape(*x.shape[:-1], 2, r)
    first_x, second_x = split_x[..., :1, :], split_x[..., 1:, :]
    cos_u, sin_u = cos.unsqueeze(-2), sin.unsqueeze(-2)
    out = split_x * cos_u
    out[..., :1, :].addcmul_(-sin_u, second_x)
    out[..., 1:, :].addcmul_(sin_u, first_x)
    out = out.reshape(*out.shape[:-2], last)
    return out.swapaxes(1, 2).reshape(b, t, -1).to(dtype=x_dtype)


PATHS.update({f.__name__: f for f in (fused_norm_tanh_mul_add, fused_norm_tanh_mul_add_norm_scale,
                                      apply_ltx2_split_rotary_emb)})


# -- Wan / HunyuanVideo blocks: the RoPE and per-head QK RMSNorm kernels HunyuanVideo's layers call ----------------

def apply_rotary_embedding(x, cos, sin, interleaved=False):
    """What `_apply_rotary_emb(x, cos, sin, is_neox_style=False)` (rotary_embedding/utils.py) runs off CUDA: adjacent
    pairs (2i, 2i+1) rotated in fp32 by cos/sin [T, D/2] indexed by token (full-width [T, D] with interleaved: every
    other column), the result in x's dtype; x [B, T, H, D] or [T, H, D]."""
    D = x.shape[-1]
    if interleaved and cos.shape[-1] == D:
        cos, sin = cos[..., ::2], sin[..., ::2]
    T = x.shape[-3]
    c, s = cos[:T].float()[:, None, :], sin[:T].float()[:, None, :]
    x1, x2 = x[..., 0::2].float(), x[..., 1::2].float()
    return torch.stack((x1 * c - x2 * s, x2 * c + x1 * s), dim=-1).flatten(-2).to(x.dtype)


def triton_one_pass_rms_norm(x, w, eps=1e-6):
    """RMSNorm.forward_native (layernorm.py): fp32 statistics, times the weight, back in x's dtype; x [N, D]."""
    return _norm(x, w, None, "rms", eps)


PATHS.update({f.__name__: f for f in (apply_rotary_embedding, triton_one_pass_rms_norm)})


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
