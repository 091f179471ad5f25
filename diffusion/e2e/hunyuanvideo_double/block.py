"""HunyuanVideo's double-stream block, in plain PyTorch, following SGLang 0.5.15's
`sglang/multimodal_gen/runtime/models/dits/hunyuanvideo.py` class `MMDoubleStreamBlock` (forward, lines 224-330),
call by call, on the CUDA dispatch of each layer it uses (`CustomOp.forward_cuda`).

Kernel call sites go through `k.<site>` (block.toml maps each to a task entry point and the wheel lines it mirrors):
per stream, the AdaLN norm (LayerNormScaleShift), the per-head QK RMSNorms (RMSNorm(head_dim): head_dim <= 128, so
RMSNorm.forward_cuda calls triton_one_pass_rms_norm on [B*S*H, head_dim]), the residual norm
(ScaleResidualLayerNormScaleShift) and the gated MLP add (MulAdd); on the image stream, the RoPE of q and k
(`_apply_rotary_emb(..., is_neox_style=False)` -> apply_rotary_embedding). GEMMs are F.linear
(MergedColumnParallelLinear / RowParallelLinear / ColumnParallelLinear at TP 1), attention is
F.scaled_dot_product_attention over [image, text] (UlyssesAttention with the text as its replicated QKV, no sequence
parallelism), the modulation's SiLU and the MLP's GELU(tanh) are F.silu / F.gelu: no task covers those kernels.

What this block fixes that the wheel leaves to the call:
- batch 1 (HunyuanVideo runs embedded guidance, no CFG batch; UlyssesAttention stacks QKV along dim 0, and the
  [B, D] modulation broadcasts as the wheel's native paths do only at B 1);
- txt_is_sharded False (sequence parallel degree 1), tensor parallel degree 1, quant_config None, no teacache;
- cos/sin have the captured shape and dtype ([S_img, head_dim / 2] fp32) from 1-D positions and rope_theta 256,
  not get_rotary_pos_embed's 3-axis (frame, height, width) frequencies: the same work, other angles.
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
        mlp = int(dims["ffn"])
        # MMDoubleStreamBlock.__init__, per stream: *_mod (ModulateProjection, factor 6), *_attn_qkv, q/k RMSNorm
        # (head_dim, eps 1e-6), *_attn_proj, *_mlp (MLP fc_in, fc_out); the norms have no affine
        self.img_mod, self.txt_mod = _linear(D, 6 * D), _linear(D, 6 * D)
        self.img_attn_qkv, self.txt_attn_qkv = _linear(D, 3 * D), _linear(D, 3 * D)
        self.img_attn_q_norm, self.img_attn_k_norm = nn.Parameter(_near_one(hd)), nn.Parameter(_near_one(hd))
        self.txt_attn_q_norm, self.txt_attn_k_norm = nn.Parameter(_near_one(hd)), nn.Parameter(_near_one(hd))
        self.img_attn_proj, self.txt_attn_proj = _linear(D, D), _linear(D, D)
        self.img_fc_in, self.img_fc_out = _linear(D, mlp), _linear(mlp, D)
        self.txt_fc_in, self.txt_fc_out = _linear(D, mlp), _linear(mlp, D)

    def _qkv(self, k, stream, x, q_w, k_w):
        """*_attn_qkv, view [B, S, 3, H, hd], then RMSNorm.forward_cuda on each of q and k (reshape(-1, hd))."""
        qkv = getattr(self, f"{stream}_attn_qkv")(x)
        B, S = qkv.shape[0], qkv.shape[1]
        qkv = qkv.view(B, S, 3, self.heads, -1)
        q, key, v = qkv[:, :, 0], qkv[:, :, 1], qkv[:, :, 2]
        q = q.contiguous()
        q = getattr(k, f"{stream}_q_norm")(q.reshape(-1, self.head_dim), q_w, self.eps).view(q.shape).to(v.dtype)
        key = key.contiguous()
        key = getattr(k, f"{stream}_k_norm")(key.reshape(-1, self.head_dim), k_w, self.eps).view(key.shape).to(v.dtype)
        return q, key, v

    def forward(self, k, img, txt, vec, freqs_cos, freqs_sin):
        """MMDoubleStreamBlock.forward (txt_is_sharded False); returns (img, txt) as the wheel does."""
        vec_silu = F.silu(vec)  # ModulateProjection: act, then linear
        (img_attn_shift, img_attn_scale, img_attn_gate,
         img_mlp_shift, img_mlp_scale, img_mlp_gate) = torch.chunk(self.img_mod(vec_silu), 6, dim=-1)
        (txt_attn_shift, txt_attn_scale, txt_attn_gate,
         txt_mlp_shift, txt_mlp_scale, txt_mlp_gate) = torch.chunk(self.txt_mod(vec_silu), 6, dim=-1)

        # img_attn_norm -> LayerNormScaleShift.forward_cuda (x, weight, bias, scale, shift, ...)
        img_attn_input = k.img_norm(img.contiguous(), None, None, img_attn_scale.contiguous(),
                                    img_attn_shift.contiguous(), "layer", self.eps)
        img_q, img_k, img_v = self._qkv(k, "img", img_attn_input, self.img_attn_q_norm, self.img_attn_k_norm)
        image_seq_len = img_q.shape[1]
        # _apply_rotary_emb(..., is_neox_style=False) -> apply_rotary_embedding(x, cos, sin, interleaved=False)
        img_q = k.img_q_rope(img_q, freqs_cos, freqs_sin, False)
        img_k = k.img_k_rope(img_k, freqs_cos, freqs_sin, False)

        txt_attn_input = k.txt_norm(txt.contiguous(), None, None, txt_attn_scale.contiguous(),
                                    txt_attn_shift.contiguous(), "layer", self.eps)
        txt_q, txt_k, txt_v = self._qkv(k, "txt", txt_attn_input, self.txt_attn_q_norm, self.txt_attn_k_norm)
        text_seq_len = txt_q.shape[1]

        # UlyssesAttention(img_q, img_k, img_v, txt_q, txt_k, txt_v): [image, text] along the sequence, SDPA
        q = torch.cat([img_q, txt_q], dim=1).transpose(1, 2)
        key = torch.cat([img_k, txt_k], dim=1).transpose(1, 2)
        v = torch.cat([img_v, txt_v], dim=1).transpose(1, 2)
        attn = F.scaled_dot_product_attention(q, key, v).transpose(1, 2)
        img_attn, txt_attn = attn[:, :image_seq_len], attn[:, image_seq_len:]
        batch_size = img.shape[0]

        img_attn_out = self.img_attn_proj(img_attn.reshape(batch_size, image_seq_len, -1))
        # img_attn_residual_mlp_norm -> ScaleResidualLayerNormScaleShift.forward_cuda
        # (residual, x, gate, weight, bias, scale, shift, ...)
        img_mlp_input, img_residual = k.img_res_norm(
            img.contiguous(), img_attn_out.contiguous(), img_attn_gate.contiguous(), None, None,
            img_mlp_scale.contiguous(), img_mlp_shift.contiguous(), "layer", self.eps)
        img_mlp_out = self.img_fc_out(F.gelu(self.img_fc_in(img_mlp_input), approximate="tanh"))
        img = k.img_mul_add(img_mlp_out, img_mlp_gate, img_residual, scale_constant=0)  # MulAdd, k = 0

        txt_attn_out = self.txt_attn_proj(txt_attn.reshape(batch_size, text_seq_len, -1))
        txt_mlp_input, txt_residual = k.txt_res_norm(
            txt.contiguous(), txt_attn_out.contiguous(), txt_attn_gate.contiguous(), None, None,
            txt_mlp_scale.contiguous(), txt_mlp_shift.contiguous(), "layer", self.eps)
        txt_mlp_out = self.txt_fc_out(F.gelu(self.txt_fc_in(txt_mlp_input), approximate="tanh"))
        txt = k.txt_mul_add(txt_mlp_out, txt_mlp_gate, txt_residual, scale_constant=0)
        return img, txt


def rope_cos_sin(seq: int, head_dim: int, theta: float = 256.0) -> tuple[torch.Tensor, torch.Tensor]:
    """[seq, head_dim / 2] fp32 cos and sin (the captured shapes) from 1-D positions (HunyuanVideo's rope_theta)."""
    inv = 1.0 / theta ** (torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim)
    ang = torch.outer(torch.arange(seq, dtype=torch.float32), inv)
    return ang.cos().contiguous(), ang.sin().contiguous()


def make_inputs(dims: dict, dtype: torch.dtype, generator: torch.Generator) -> dict:
    B, D = int(dims["batch"]), int(dims["hidden"])
    S_img, S_txt = int(dims["img_tokens"]), int(dims["txt_tokens"])

    def randn(*shape):
        return torch.randn(*shape, generator=generator).to(dtype)

    cos, sin = rope_cos_sin(S_img, int(dims["head_dim"]))
    return {"img": randn(B, S_img, D), "txt": randn(B, S_txt, D), "vec": randn(B, D),
            "freqs_cos": cos, "freqs_sin": sin}


def output_shapes(dims: dict) -> tuple:
    B, D = int(dims["batch"]), int(dims["hidden"])
    return (B, int(dims["img_tokens"]), D), (B, int(dims["txt_tokens"]), D)


def check_dims(dims: dict) -> str | None:
    """The sizes at which the wheel's layers take the kernels this block calls, not their native fallbacks."""
    D, hd = int(dims["hidden"]), int(dims["head_dim"])
    if "ffn" not in dims:
        return "no 'ffn': the block needs the MLP width (workload key 'dims')"
    if D % 256 != 0 and D <= 8192:
        return (f"hidden {D}: _NormScaleShift / _ScaleResidualNormScaleShift.forward_cuda fall back to "
                "forward_native unless D % 256 == 0")
    if hd > 128:
        return f"head_dim {hd}: RMSNorm.forward_cuda sends x.shape[-1] > 128 to sgl_kernel rmsnorm, not the Triton one"
    if hd % 2:
        return f"head_dim {hd}: RoPE rotates pairs"
    if int(dims["heads"]) * hd != D:
        return f"heads {dims['heads']} x head_dim {hd} != hidden {D}"
    if int(dims["batch"]) != 1:
        return f"batch {dims['batch']}: the block follows the wheel at batch 1 only (UlyssesAttention, [B, D] modulation)"
    return None
