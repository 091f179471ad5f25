"""Wan 2.x's DiT block, in plain PyTorch, following SGLang 0.5.15's
`sglang/multimodal_gen/runtime/models/dits/wanvideo.py` class `WanTransformerBlock` (forward, lines 488-613) and
`WanT2VCrossAttention.forward` (lines 215-245), call by call, on the CUDA dispatch of each layer it uses
(`CustomOp.forward_cuda`).

Kernel call sites go through `k.<site>` (block.toml maps each to a task entry point and the wheel lines it mirrors):
norm1 (LayerNormScaleShift), self_attn_residual_norm and cross_attn_residual_norm (ScaleResidualLayerNormScaleShift)
and mlp_residual (MulAdd). The rest runs as torch ops in every arm, because no task covers the kernel the wheel
calls there:
- the QK RMSNorms across heads (RMSNorm(dim) on [B, S, D]: D > 128, so RMSNorm.forward_cuda calls sgl_kernel's
  `rmsnorm`), written as RMSNorm.forward_native;
- the self-attention RoPE (`apply_flashinfer_rope_qk_inplace`, flashinfer's apply_rope_with_cos_sin_cache_inplace,
  GPT-J pairs), written as its rotation in fp32;
- GEMMs as F.linear (ColumnParallelLinear / RowParallelLinear at TP 1), attention as
  F.scaled_dot_product_attention (USPAttention, no sequence parallelism), the FFN's GELU(tanh) as F.gelu.

The two modulation forms of the wheel's forward are both here: temb [B, 6, D] (Wan 2.1 / 2.2 A14B: shift, scale and
gate [B, 1, D] fp32) and temb [B, S, 6, D] (Wan 2.2 TI2V-5B, `per_token_mod = 1`: per-token [B, S, D] fp32 chunks,
non-contiguous views that forward_cuda makes contiguous, except MulAdd's gate, which the kernel reads as it is).

What this block fixes that the wheel leaves to the call:
- text-to-video cross-attention (WanT2VCrossAttention: added_kv_proj_dim None, as both T2V-A14B and TI2V-5B), with
  `text_tokens` context tokens (text_len 512: every prompt is padded to it), no attention mask;
- attention_type "original" (USPAttention, not SLA), qk_norm "rms_norm_across_heads", tensor and sequence parallel
  degree 1, quant_config None, no teacache;
- cos/sin have the pipeline's shape and dtype ([S, head_dim / 2] fp32, as NDRotaryEmbedding.forward_from_grid
  gives them) from 1-D positions, not its 3-axis (frame, height, width) frequencies: the same work, other angles;
- the FP32LayerNorm affine of self_attn_residual_norm is fp32 (as the catalog's captured rows have it); the block
  keeps it as a bf16-rounded parameter and hands the kernel its fp32 copy.
"""
from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F

from kda.e2e.weights import linear as _linear, near_one as _near_one


def _rms(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """RMSNorm.forward_native (layernorm.py): what sgl_kernel's rmsnorm computes, fp32 statistics, x's dtype out."""
    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps) * weight).to(x.dtype)


def _rope_pairs(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """flashinfer's rotation with is_neox=False (pairs 2i, 2i+1) on x [B, S, H, hd], cos/sin [S, hd/2], in fp32."""
    c, s = cos.float()[None, :, None, :], sin.float()[None, :, None, :]
    x1, x2 = x[..., 0::2].float(), x[..., 1::2].float()
    return torch.stack((x1 * c - x2 * s, x2 * c + x1 * s), dim=-1).flatten(-2).to(x.dtype)


def _attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """USPAttention, TORCH_SDPA backend: [B, S, H, hd] -> [B, H, S, hd] and back."""
    out = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2))
    return out.transpose(1, 2)


class Block(nn.Module):
    def __init__(self, dims: dict):
        super().__init__()
        D, H, hd = int(dims["hidden"]), int(dims["heads"]), int(dims["head_dim"])
        self.dim, self.heads, self.head_dim, self.eps = D, H, hd, float(dims["eps"])
        ffn = int(dims["ffn"])
        # WanTransformerBlock.__init__: norm1 (LayerNormScaleShift, no affine); to_q/k/v, to_out; norm_q/norm_k
        # (RMSNorm(dim)); self_attn_residual_norm (ScaleResidualLayerNormScaleShift, elementwise_affine=True)
        self.to_q, self.to_k, self.to_v, self.to_out = _linear(D, D), _linear(D, D), _linear(D, D), _linear(D, D)
        self.norm_q, self.norm_k = nn.Parameter(_near_one(D)), nn.Parameter(_near_one(D))
        self.sa_norm_weight, self.sa_norm_bias = nn.Parameter(_near_one(D)), nn.Parameter(0.02 * torch.randn(D))
        # attn2 (WanT2VCrossAttention): to_q/k/v, to_out, norm_q/norm_k (RMSNorm(dim));
        # cross_attn_residual_norm (no affine)
        self.attn2_q, self.attn2_k, self.attn2_v, self.attn2_out = (_linear(D, D), _linear(D, D), _linear(D, D),
                                                                    _linear(D, D))
        self.attn2_norm_q, self.attn2_norm_k = nn.Parameter(_near_one(D)), nn.Parameter(_near_one(D))
        # ffn (MLP, gelu_pytorch_tanh): fc_in, fc_out; mlp_residual (MulAdd)
        self.fc_in, self.fc_out = _linear(D, ffn), _linear(ffn, D)
        self.scale_shift_table = nn.Parameter(torch.randn(1, 6, D) / D**0.5)

    def _cross_attention(self, x, context):
        """WanT2VCrossAttention.forward (tp_rmsnorm False)."""
        H, hd = self.heads, self.head_dim
        q = _rms(self.attn2_q(x), self.attn2_norm_q, self.eps).unflatten(2, (H, hd))
        k = _rms(self.attn2_k(context), self.attn2_norm_k, self.eps).unflatten(2, (H, hd))
        v = self.attn2_v(context).unflatten(2, (H, hd))
        return self.attn2_out(_attention(q, k, v).flatten(2))

    def forward(self, k, hidden_states, encoder_hidden_states, temb, freqs_cos, freqs_sin):
        """WanTransformerBlock.forward; returns (hidden_states,)."""
        orig_dtype = hidden_states.dtype
        if temb.dim() == 4:  # [B, S, 6, D] (wan2.2 ti2v): per-token chunks [B, S, D]
            mods = (self.scale_shift_table.unsqueeze(0) + temb.float()).chunk(6, dim=2)
            mods = [m.squeeze(2) for m in mods]
        else:  # [B, 6, D] (wan2.1 / wan2.2 14B): chunks [B, 1, D]
            mods = (self.scale_shift_table + temb.float()).chunk(6, dim=1)
        shift_msa, scale_msa, gate_msa, c_shift_msa, c_scale_msa, c_gate_msa = mods
        assert shift_msa.dtype == torch.float32

        # 1. Self-attention; norm1 -> LayerNormScaleShift.forward_cuda (x, weight, bias, scale, shift, ...)
        norm_hidden_states = k.norm1(hidden_states.contiguous(), None, None, scale_msa.contiguous(),
                                     shift_msa.contiguous(), "layer", self.eps)
        query, key, value = self.to_q(norm_hidden_states), self.to_k(norm_hidden_states), self.to_v(norm_hidden_states)
        query, key = _rms(query, self.norm_q, self.eps), _rms(key, self.norm_k, self.eps)
        H, hd = self.heads, self.head_dim
        query, key, value = query.unflatten(2, (H, hd)), key.unflatten(2, (H, hd)), value.unflatten(2, (H, hd))
        # _is_cuda and query.shape == key.shape: apply_flashinfer_rope_qk_inplace on cat(cos, sin) (no task: torch)
        query, key = _rope_pairs(query, freqs_cos, freqs_sin), _rope_pairs(key, freqs_cos, freqs_sin)
        attn_output = self.to_out(_attention(query, key, value).flatten(2))

        null_shift = null_scale = torch.zeros((1,), device=hidden_states.device, dtype=hidden_states.dtype)
        # self_attn_residual_norm -> ScaleResidualLayerNormScaleShift.forward_cuda
        # (residual, x, gate, weight, bias, scale, shift, ...): the fp32 affine, [1] null shift/scale
        norm_hidden_states, hidden_states = k.sa_residual_norm(
            hidden_states.contiguous(), attn_output.contiguous(), gate_msa.contiguous(),
            self.sa_norm_weight.float().contiguous(), self.sa_norm_bias.float().contiguous(),
            null_scale.contiguous(), null_shift.contiguous(), "layer", self.eps)
        norm_hidden_states, hidden_states = norm_hidden_states.to(orig_dtype), hidden_states.to(orig_dtype)

        # 2. Cross-attention; cross_attn_residual_norm with gate 1 (forward_cuda passes None), no affine
        attn_output = self._cross_attention(norm_hidden_states, encoder_hidden_states)
        norm_hidden_states, hidden_states = k.ca_residual_norm(
            hidden_states.contiguous(), attn_output.contiguous(), None, None, None,
            c_scale_msa.contiguous(), c_shift_msa.contiguous(), "layer", self.eps)
        norm_hidden_states, hidden_states = norm_hidden_states.to(orig_dtype), hidden_states.to(orig_dtype)

        # 3. Feed-forward; mlp_residual -> MulAdd.forward_cuda: ff * (0 + c_gate) + hidden_states
        ff_output = self.fc_out(F.gelu(self.fc_in(norm_hidden_states), approximate="tanh"))
        hidden_states = k.mlp_residual(ff_output, c_gate_msa, hidden_states, scale_constant=0)
        return (hidden_states.to(orig_dtype),)


def rope_cos_sin(seq: int, head_dim: int, theta: float = 10000.0) -> tuple[torch.Tensor, torch.Tensor]:
    """[seq, head_dim / 2] fp32 cos and sin (forward_from_grid's shapes) from 1-D positions."""
    inv = 1.0 / theta ** (torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim)
    ang = torch.outer(torch.arange(seq, dtype=torch.float32), inv)
    return ang.cos().contiguous(), ang.sin().contiguous()


def make_inputs(dims: dict, dtype: torch.dtype, generator: torch.Generator) -> dict:
    B, D, S = int(dims["batch"]), int(dims["hidden"]), int(dims["tokens"])

    def randn(*shape, scale=1.0):
        return (scale * torch.randn(*shape, generator=generator)).to(dtype)

    # timestep_proj: the condition embedder's time_proj output, [B, 6, D] or per token [B, S, 6, D]
    temb = randn(B, S, 6, D, scale=0.1) if int(dims.get("per_token_mod", 0)) else randn(B, 6, D, scale=0.1)
    cos, sin = rope_cos_sin(S, int(dims["head_dim"]))
    return {
        "hidden_states": randn(B, S, D),
        "encoder_hidden_states": randn(B, int(dims["text_tokens"]), D),
        "temb": temb,
        "freqs_cos": cos,
        "freqs_sin": sin,
    }


def output_shapes(dims: dict) -> tuple:
    return ((int(dims["batch"]), int(dims["tokens"]), int(dims["hidden"])),)


def check_dims(dims: dict) -> str | None:
    """The sizes at which the wheel's layers take the kernels this block calls, not their native fallbacks."""
    D, hd = int(dims["hidden"]), int(dims["head_dim"])
    for name in ("ffn", "text_tokens", "tokens"):
        if name not in dims:
            return f"no {name!r}: the block needs it (workload key 'dims' or 'tokens')"
    if D % 256 != 0 and D <= 8192:
        return (f"hidden {D}: _NormScaleShift / _ScaleResidualNormScaleShift.forward_cuda fall back to "
                "forward_native unless D % 256 == 0")
    if int(dims["heads"]) * hd != D:
        return f"heads {dims['heads']} x head_dim {hd} != hidden {D}"
    if hd % 2:
        return f"head_dim {hd}: RoPE rotates pairs"
    return None
