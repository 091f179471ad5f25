"""HunyuanVideo's single-stream block, in plain PyTorch, following SGLang 0.5.15's
`sglang/multimodal_gen/runtime/models/dits/hunyuanvideo.py` class `MMSingleStreamBlock` (forward, lines 418-488),
call by call, on the CUDA dispatch of each layer it uses (`CustomOp.forward_cuda`).

Kernel call sites go through `k.<site>` (block.toml maps each to a task entry point and the wheel lines it mirrors):
the AdaLN norm on the joint [image, text] sequence (LayerNormScaleShift), the per-head QK RMSNorms (RMSNorm(head_dim):
head_dim <= 128, so forward_cuda calls triton_one_pass_rms_norm on [B*S*H, head_dim]), the RoPE of the image part of
q and k (`_apply_rotary_emb(..., is_neox_style=False)` -> apply_rotary_embedding) and the gated residual add
(MulAdd). GEMMs are F.linear (linear1: MergedColumnParallelLinear, QKV and MLP-in fused; linear2:
MixedRowParallelLinear, attention-out and MLP-out fused; TP 1), attention is F.scaled_dot_product_attention over
[image, text] (UlyssesAttention with the text as its replicated QKV), the modulation's SiLU and GELU(tanh) are
F.silu / F.gelu: no task covers those kernels.

What this block fixes that the wheel leaves to the call:
- batch 1 (embedded guidance, no CFG batch; apply_rotary_embedding views the sliced image part of q as
  [B*S_img, H, hd], which only batch 1 allows);
- txt_is_sharded False (sequence parallel degree 1), tensor parallel degree 1, quant_config None, no teacache;
- cos/sin have the captured shape and dtype ([S_img, head_dim / 2] fp32) from 1-D positions and rope_theta 256,
  not get_rotary_pos_embed's 3-axis frequencies: the same work, other angles.
"""
from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F

from kda.e2e.weights import linear as _linear, near_one as _near_one


class Block(nn.Module):
    def __init__(self, dims: dict):
        super().__init__()
        D, H, hd = int(dims["hidden"]), int(dims["heads"]), int(dims["head_dim"])
        self.dim, self.heads, self.head_dim, self.eps = D, H, hd, float(dims["eps"])
        self.mlp_hidden_dim = int(dims["ffn"])
        self.txt_len = int(dims["text"])  # the wheel's forward argument txt_len: here a size of the workload
        # MMSingleStreamBlock.__init__: linear1 (D -> 3D + mlp), linear2 (D + mlp -> D), q_norm/k_norm
        # (RMSNorm(head_dim), eps 1e-6), input_norm_scale_shift (no affine), modulation (factor 3)
        self.linear1 = _linear(D, 3 * D + self.mlp_hidden_dim)
        self.linear2 = _linear(D + self.mlp_hidden_dim, D)
        self.q_norm, self.k_norm = nn.Parameter(_near_one(hd)), nn.Parameter(_near_one(hd))
        self.modulation = _linear(D, 3 * D)

    def forward(self, k, x, vec, freqs_cos, freqs_sin):
        """MMSingleStreamBlock.forward (txt_is_sharded False), txt_len the text tail of x; returns (x,)."""
        txt_len = self.txt_len
        mod_shift, mod_scale, mod_gate = self.modulation(F.silu(vec)).chunk(3, dim=-1)  # ModulateProjection

        # input_norm_scale_shift -> LayerNormScaleShift.forward_cuda (x, weight, bias, scale, shift, ...)
        x_mod = k.norm(x.contiguous(), None, None, mod_scale.contiguous(), mod_shift.contiguous(), "layer", self.eps)
        linear1_out = self.linear1(x_mod)
        qkv, mlp = torch.split(linear1_out, [3 * self.heads * self.head_dim, self.mlp_hidden_dim], dim=-1)
        batch_size, seq_len = qkv.shape[0], qkv.shape[1]
        qkv = qkv.view(batch_size, seq_len, 3, self.heads, -1)
        q, key, v = qkv[:, :, 0], qkv[:, :, 1], qkv[:, :, 2]

        # q_norm / k_norm -> RMSNorm.forward_cuda: reshape(-1, head_dim), triton_one_pass_rms_norm, view back
        q = q.contiguous()
        q = k.q_norm(q.reshape(-1, self.head_dim), self.q_norm, self.eps).view(q.shape).to(v.dtype)
        key = key.contiguous()
        key = k.k_norm(key.reshape(-1, self.head_dim), self.k_norm, self.eps).view(key.shape).to(v.dtype)

        img_q, txt_q = q[:, :-txt_len], q[:, -txt_len:]
        img_k, txt_k = key[:, :-txt_len], key[:, -txt_len:]
        img_v, txt_v = v[:, :-txt_len], v[:, -txt_len:]
        # _apply_rotary_emb(..., is_neox_style=False) -> apply_rotary_embedding(x, cos, sin, interleaved=False)
        img_q = k.q_rope(img_q, freqs_cos, freqs_sin, False)
        img_k = k.k_rope(img_k, freqs_cos, freqs_sin, False)

        # UlyssesAttention(img_q, img_k, img_v, txt_q, txt_k, txt_v), outputs concatenated [image, text]
        jq = torch.cat([img_q, txt_q], dim=1).transpose(1, 2)
        jk = torch.cat([img_k, txt_k], dim=1).transpose(1, 2)
        jv = torch.cat([img_v, txt_v], dim=1).transpose(1, 2)
        attn_output = F.scaled_dot_product_attention(jq, jk, jv).transpose(1, 2)
        attn_output = attn_output.reshape(batch_size, seq_len, -1)
        mlp_output = F.gelu(mlp, approximate="tanh")  # mlp_act
        output = self.linear2(torch.cat((attn_output, mlp_output), dim=-1))
        # output_residual -> MulAdd.forward_cuda: output * (0 + gate) + x
        return (k.mul_add(output, mod_gate, x, scale_constant=0),)


def rope_cos_sin(seq: int, head_dim: int, theta: float = 256.0) -> tuple[torch.Tensor, torch.Tensor]:
    """[seq, head_dim / 2] fp32 cos and sin (the captured shapes) from 1-D positions (HunyuanVideo's rope_theta)."""
    inv = 1.0 / theta ** (torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim)
    ang = torch.outer(torch.arange(seq, dtype=torch.float32), inv)
    return ang.cos().contiguous(), ang.sin().contiguous()


def make_inputs(dims: dict, dtype: torch.dtype, generator: torch.Generator) -> dict:
    B, D, S = int(dims["batch"]), int(dims["hidden"]), int(dims["tokens"])

    def randn(*shape):
        return torch.randn(*shape, generator=generator).to(dtype)

    cos, sin = rope_cos_sin(S - int(dims["text"]), int(dims["head_dim"]))
    return {"x": randn(B, S, D), "vec": randn(B, D), "freqs_cos": cos, "freqs_sin": sin}


def output_shapes(dims: dict) -> tuple:
    return ((int(dims["batch"]), int(dims["tokens"]), int(dims["hidden"])),)


def check_dims(dims: dict) -> str | None:
    """The sizes at which the wheel's layers take the kernels this block calls, not their native fallbacks."""
    D, hd = int(dims["hidden"]), int(dims["head_dim"])
    if "ffn" not in dims:
        return "no 'ffn': the block needs the MLP width (workload key 'dims')"
    if D % 256 != 0 and D <= 8192:
        return f"hidden {D}: _NormScaleShift.forward_cuda falls back to forward_native unless D % 256 == 0"
    if hd > 128:
        return f"head_dim {hd}: RMSNorm.forward_cuda sends x.shape[-1] > 128 to sgl_kernel rmsnorm, not the Triton one"
    if hd % 2:
        return f"head_dim {hd}: RoPE rotates pairs"
    if int(dims["heads"]) * hd != D:
        return f"heads {dims['heads']} x head_dim {hd} != hidden {D}"
    if int(dims["batch"]) != 1:
        return f"batch {dims['batch']}: the block follows the wheel at batch 1 only (UlyssesAttention, RoPE view)"
    if not 0 < int(dims["text"]) < int(dims["tokens"]):
        return f"text {dims['text']}: the joint sequence of {dims['tokens']} tokens must hold image and text"
    return None
