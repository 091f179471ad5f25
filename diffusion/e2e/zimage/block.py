"""Z-Image's single-stream transformer block, in plain PyTorch, following SGLang 0.5.15's
`sglang/multimodal_gen/runtime/models/dits/zimage.py` class `ZImageTransformerBlock` (forward, modulation=True: the
30 main `layers` on the unified [image, caption] sequence and the 2 `noise_refiner` layers on image tokens) and
`ZImageAttention.forward`, call by call, on the CUDA dispatch of each layer it uses (`CustomOp.forward_cuda`).

Kernel call sites go through `k.<site>` (block.toml maps each to a task entry point and the wheel lines it mirrors):
    qk_norm_rope       ZImageAttention.forward -> apply_qk_norm_with_optional_rope -> apply_qk_norm_rope, fused branch
    attn_norm2_ffn_in  the block's own call of fused_norm_tanh_mul_add_norm_scale (attention_norm2 + ffn_norm1)
    ffn_norm2          apply_rmsnorm_tanh_mul_add -> fused_norm_tanh_mul_add
GEMMs are F.linear (MergedColumnParallelLinear / RowParallelLinear / ReplicatedLinear at TP 1, no bias), attention
is F.scaled_dot_product_attention (USPAttention's TORCH_SDPA backend, no sequence parallelism).

Calls the wheel makes to kernels no task covers run as torch ops in every arm: attention_norm1
(RMSNorm.forward_cuda -> sgl_kernel `rmsnorm` at D > 128, written as RMSNorm.forward_native) and the SwiGLU
(SiluAndMul.forward_cuda -> sgl_kernel `silu_and_mul`, written as SiluAndMul.forward_native).

What this block fixes that the wheel leaves to the call:
- modulation=True (the context_refiner's modulation=False branch has no kernel call site besides qknorm_rope);
- quant_config is None (no Nunchaku FeedForward), tensor and sequence parallel degree 1 (num_replicated_suffix
  has no effect without SP);
- the RoPE cos/sin are RopeEmbedder's (theta 256, axes (32, 48, 48)) over positions laid out as the unified
  sequence: `tokens - caption` image tokens on a (frame, row, column) grid starting at frame caption + 1, then the
  caption at frames 1..caption (configs/pipeline_configs/zimage.py get_freqs_cis). For the noise refiner's
  image-only sequence the wheel gives every token image positions: the same shapes, dtype and kernel work, other
  angle values on the last `caption` tokens.
"""
from __future__ import annotations

import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from kda.e2e.weights import linear as _linear, near_one as _rms_weight

ADALN_EMBED_DIM = 256  # zimage.py: ADALN_EMBED_DIM
ROPE_THETA = 256.0  # configs/models/dits/zimage.py: rope_theta
AXES_DIMS = (32, 48, 48)  # configs/models/dits/zimage.py: axes_dims (sum = head_dim 128)


class Block(nn.Module):
    def __init__(self, dims: dict):
        super().__init__()
        D, H, hd = int(dims["hidden"]), int(dims["heads"]), int(dims["head_dim"])
        self.dim, self.heads, self.head_dim, self.eps = D, H, hd, float(dims["eps"])
        # ZImageAttention (n_kv_heads == n_heads): to_qkv (fused, no bias), norm_q/norm_k RMSNorm(head_dim, 1e-5),
        # to_out[0] (no bias). The model builds the attention with eps=1e-5, the norms with norm_eps (1e-5 too).
        self.to_qkv = _linear(D, 3 * H * hd, bias=False)
        self.norm_q, self.norm_k = nn.Parameter(_rms_weight(hd)), nn.Parameter(_rms_weight(hd))
        self.to_out = _linear(H * hd, D, bias=False)
        # FeedForward: w13 (MergedColumnParallelLinear to 2 x hidden_dim, no bias), SiluAndMul, w2 (no bias)
        hidden_dim = int(D / 3 * 8)
        self.w13, self.w2 = _linear(D, 2 * hidden_dim, bias=False), _linear(hidden_dim, D, bias=False)
        # attention_norm1, ffn_norm1, attention_norm2, ffn_norm2: RMSNorm(dim, norm_eps)
        self.attention_norm1, self.ffn_norm1 = nn.Parameter(_rms_weight(D)), nn.Parameter(_rms_weight(D))
        self.attention_norm2, self.ffn_norm2 = nn.Parameter(_rms_weight(D)), nn.Parameter(_rms_weight(D))
        # adaLN_modulation[0]: ReplicatedLinear(min(dim, 256), 4 * dim, bias=True)
        self.adaLN_modulation = _linear(min(D, ADALN_EMBED_DIM), 4 * D, bias=True)

    def _rms_native(self, x, weight):
        """RMSNorm.forward_native (layernorm.py): fp32 statistics, x * rsqrt(var + eps) * weight, back to x's dtype.
        attention_norm1 only: the wheel sends it to sgl_kernel's rmsnorm, which no task covers."""
        xf = x.float()
        xf = xf * torch.rsqrt(xf.pow(2).mean(dim=-1, keepdim=True) + self.eps)
        return (xf * weight).to(x.dtype)

    def _attention(self, k, hidden_states, freqs_cis):
        """ZImageAttention.forward, fused QKV, the _is_cuda and q.shape == k.shape branch with qk_norm."""
        H, hd = self.heads, self.head_dim
        qkv = self.to_qkv(hidden_states)
        q, key, v = qkv.split([H * hd, H * hd, H * hd], dim=-1)
        q, key, v = q.contiguous(), key.contiguous(), v.contiguous()
        q = q.view(*q.shape[:-1], H, hd)
        key = key.view(*key.shape[:-1], H, hd)
        v = v.view(*v.shape[:-1], H, hd)
        cos, sin = freqs_cis
        cos_sin_cache = torch.cat([cos.to(dtype=torch.float32).contiguous(),
                                   sin.to(dtype=torch.float32).contiguous()], dim=-1)
        # apply_qk_norm_with_optional_rope -> apply_qk_norm_rope (layernorm.py): positions 0..S-1 per batch
        batch, seq = q.shape[0], q.shape[1]
        pos = torch.arange(0, seq, device=q.device, dtype=torch.int64)
        positions = pos if batch == 1 else pos.repeat(batch)
        k.qk_norm_rope(q=q.reshape(-1, q.shape[-2], hd), k=key.reshape(-1, key.shape[-2], hd), q_weight=self.norm_q,
                       k_weight=self.norm_k, cos_sin_cache=cos_sin_cache, positions=positions, is_neox=False,
                       eps=self.eps, head_dim=hd, rope_dim=cos_sin_cache.size(-1))
        # USPAttention, TORCH_SDPA backend: [B, S, H, D] -> [B, H, S, D] and back
        out = F.scaled_dot_product_attention(q.transpose(1, 2), key.transpose(1, 2), v.transpose(1, 2)).transpose(1, 2)
        return self.to_out(out.flatten(2))

    def forward(self, k, x, cos, sin, adaln_input):
        """ZImageTransformerBlock.forward with modulation; returns (x,)."""
        scale_msa_gate = self.adaLN_modulation(adaln_input)
        scale_msa, gate_msa, scale_mlp, gate_mlp = scale_msa_gate.unsqueeze(1).chunk(4, dim=2)
        scale_msa = 1.0 + scale_msa

        attn_out = self._attention(k, self._rms_native(x, self.attention_norm1) * scale_msa, (cos, sin))
        # the fused branch (D % 256 == 0, D <= 8192, attention_norm2 eps == ffn_norm1 eps: check_dims)
        x, ffn_in = k.attn_norm2_ffn_in(attn_out.contiguous(), self.attention_norm2.contiguous(), None,
                                        gate_msa.contiguous(), x.contiguous(), self.ffn_norm1.contiguous(), None,
                                        scale_mlp.contiguous(), "rms", self.eps)
        # FeedForward: w13, SiluAndMul, w2
        x13 = self.w13(ffn_in)
        d = x13.shape[-1] // 2
        ffn_out = self.w2(F.silu(x13[..., :d]) * x13[..., d:])
        # apply_rmsnorm_tanh_mul_add(ffn_out, gate_mlp, x, self.ffn_norm2), fused branch
        x = k.ffn_norm2(ffn_out.contiguous(), self.ffn_norm2.contiguous(), None, gate_mlp.contiguous(),
                        x.contiguous(), "rms", self.eps)
        return (x,)


def rope_cos_sin(tokens: int, caption: int) -> tuple[torch.Tensor, torch.Tensor]:
    """RopeEmbedder (zimage.py) over the unified layout: image tokens on a (frame, row, column) grid at frame
    caption + 1, then the caption at frames 1..caption; cos and sin [tokens, head_dim // 2] fp32."""
    n_img, n_cap = tokens - caption, caption
    width = max(1, math.isqrt(max(n_img, 1)))
    i = torch.arange(n_img)
    img_ids = torch.stack([torch.full_like(i, n_cap + 1), i // width, i % width], dim=-1)
    c = torch.arange(n_cap)
    cap_ids = torch.stack([1 + c, torch.zeros_like(c), torch.zeros_like(c)], dim=-1)
    ids = torch.cat([img_ids, cap_ids])
    cos, sin = [], []
    for axis, d in enumerate(AXES_DIMS):
        freqs = 1.0 / ROPE_THETA ** (torch.arange(0, d, 2, dtype=torch.float64) / d)
        ang = torch.outer(ids[:, axis].double(), freqs).float()
        cos.append(ang.cos())
        sin.append(ang.sin())
    return torch.cat(cos, dim=-1).contiguous(), torch.cat(sin, dim=-1).contiguous()


def make_inputs(dims: dict, dtype: torch.dtype, generator: torch.Generator) -> dict:
    B, D, S = int(dims["batch"]), int(dims["hidden"]), int(dims["tokens"])
    cos, sin = rope_cos_sin(S, int(dims["caption"]))
    return {
        "x": torch.randn(B, S, D, generator=generator).to(dtype),
        "cos": cos,
        "sin": sin,
        # t_embedder's output (RowParallelLinear, no activation after it), cast to x's dtype by the model
        "adaln_input": torch.randn(B, min(D, ADALN_EMBED_DIM), generator=generator).to(dtype),
    }


def output_shapes(dims: dict) -> tuple:
    return ((int(dims["batch"]), int(dims["tokens"]), int(dims["hidden"])),)


def check_dims(dims: dict) -> str | None:
    """The sizes at which the wheel's layers take the kernels this block calls, not their native fallbacks."""
    D, H, hd = int(dims["hidden"]), int(dims["heads"]), int(dims["head_dim"])
    if D % 256 != 0 or D > 8192:
        return (f"hidden {D}: ZImageTransformerBlock.forward and apply_rmsnorm_tanh_mul_add take the fused kernels "
                "only when D % 256 == 0 and D <= 8192")
    if hd not in (64, 128, 256):
        return f"head_dim {hd}: can_use_fused_inplace_qknorm_rope refuses it (64, 128 or 256)"
    if hd != sum(AXES_DIMS):
        return f"head_dim {hd}: the model asserts head_dim == sum(axes_dims) = {sum(AXES_DIMS)}"
    if H * hd != D:
        return f"heads {H} x head_dim {hd} != hidden {D}"
    if int(dims["tokens"]) <= int(dims["caption"]):
        return f"tokens {dims['tokens']} <= caption {dims['caption']}: no image tokens"
    return None
