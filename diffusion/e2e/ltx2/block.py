"""LTX-2's audio-video transformer block, in plain PyTorch, following SGLang 0.5.15's
`sglang/multimodal_gen/runtime/models/dits/ltx_2.py` class `LTX2TransformerBlock` (forward, get_ada_values) and
`LTX2Attention.forward`, call by call, on the dispatch an SM90 GPU (H100, H200) takes.

Kernel call sites go through `k.<site>`: the split RoPE of q and of k in each of the four attentions that take
positions (video self, audio self, audio-to-video, video-to-audio), `apply_split_rotary_emb` ->
`apply_ltx2_split_rotary_emb` (x [B, T, H*D] bf16, cos/sin [B, H, T, D/2] bf16, the swapaxes view
LTX2AudioVideoRotaryPosEmbed.forward returns). The prompt cross-attentions (attn2, audio_attn2) take no positions.
GEMMs are F.linear (ColumnParallelLinear / RowParallelLinear at TP 1, with bias), attention is
F.scaled_dot_product_attention (USPAttention / LocalAttention, TORCH_SDPA, no sequence parallelism).

Calls the wheel makes to kernels no task covers run as torch ops in every arm:
- `_ltx2_residual_gate_add` -> `residual_gate_add_cuda` (a JIT CUDA kernel): written as its fallback
  residual + update * gate;
- q_norm / k_norm (torch.nn.RMSNorm over all heads) and RMSNormNoWeight (F.rms_norm on CUDA too): torch's own ops;
- on SM100 and newer GPUs the wheel fuses QK norm and split RoPE (`_ltx2_try_fused_qknorm_split_rope` ->
  `ltx2_qknorm_split_rope_cuda`) and never calls the split RoPE kernel; this block follows the SM90 path;
- `_ltx2_try_fused_ada_values9` applies only to 9-row scale-shift tables (cross_attention_adaln, LTX-2.3): LTX-2's
  6-row tables take get_ada_values, written here.

What this block fixes that the wheel leaves to the call (LTX-2, not LTX-2.3):
- cross_attention_adaln False (6-row tables, plain prompt cross-attention), apply_gated_attention False, rope_type
  "split" (the catalog's LTX-2 config), quant_config None, tensor and sequence parallel degree 1;
- one timestep per sample (temb [B, 1, 6 x dim]), no masks, no perturbation (STG) and no skipped attention;
- prompt context widths equal the stream widths (cross_attention_dim 4096, audio_cross_attention_dim 2048) and the
  prompt is `prompt_tokens` long (1024: configs/pipeline_configs/ltx_2.py, tokenizer max_length), the same for
  both streams;
- RoPE from LTX2AudioVideoRotaryPosEmbed's forward (theta 10000, max positions (20, 2048, 2048) and (20,), fps 24,
  fp32 frequencies) on prepare_video_coords / prepare_audio_coords grids: `video_tokens` laid out as
  (frames, rows, columns) with 16 latent frames and rows:columns near 2:3 where the count allows (6144 = 16 x 16 x
  24, the captured 121 frames at 768x512).
"""
from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F

from kda.e2e.weights import linear as _linear

NORM_EPS = 1e-6  # configs/models/dits/ltx_2.py: norm_eps
PROMPT_TOKENS = 1024  # configs/pipeline_configs/ltx_2.py: tokenizer max_length
ROPE_THETA = 10000.0  # configs/models/dits/ltx_2.py: positional_embedding_theta
VIDEO_MAX_POS = (20, 2048, 2048)  # positional_embedding_max_pos
AUDIO_MAX_POS = (20,)  # audio_positional_embedding_max_pos
VIDEO_SCALE = (8, 32, 32)  # LTX2VideoTransformer3DModel.video_scale_factors
AUDIO_SCALE = 4  # audio_scale_factors
FPS = 24.0


class Attention(nn.Module):
    """LTX2Attention: to_q/k/v, q_norm/k_norm (torch.nn.RMSNorm(inner_dim)), split RoPE, SDPA, to_out[0]."""

    def __init__(self, query_dim: int, context_dim: int, heads: int, dim_head: int, eps: float,
                 q_site: str | None = None, k_site: str | None = None):
        super().__init__()
        inner = heads * dim_head
        self.heads, self.dim_head, self.eps = heads, dim_head, eps
        self.to_q, self.to_k, self.to_v = _linear(query_dim, inner), _linear(context_dim, inner), _linear(context_dim,
                                                                                                         inner)
        self.q_norm = nn.Parameter(1.0 + 0.1 * torch.randn(inner))
        self.k_norm = nn.Parameter(1.0 + 0.1 * torch.randn(inner))
        self.to_out = _linear(inner, query_dim)
        self.q_site, self.k_site = q_site, k_site

    def forward(self, k, x, context=None, pe=None, k_pe=None):
        context_ = x if context is None else context
        v = self.to_v(context_)
        q = self.to_q(x)
        key = self.to_k(context_)
        q = F.rms_norm(q, (q.shape[-1],), self.q_norm, self.eps)
        key = F.rms_norm(key, (key.shape[-1],), self.k_norm, self.eps)
        if pe is not None:
            cos, sin = pe
            k_cos, k_sin = pe if k_pe is None else k_pe
            q = getattr(k, self.q_site)(q, cos, sin)  # apply_split_rotary_emb(q, (cos, sin)), kernel branch
            key = getattr(k, self.k_site)(key, k_cos, k_sin)
        H, D = self.heads, self.dim_head
        v = v.view(*v.shape[:-1], H, D)
        q = q.view(*q.shape[:-1], H, D)
        key = key.view(*key.shape[:-1], H, D)
        out = F.scaled_dot_product_attention(q.transpose(1, 2), key.transpose(1, 2), v.transpose(1, 2)).transpose(1, 2)
        return self.to_out(out.flatten(2))


class FeedForward(nn.Module):
    """LTX2FeedForward: proj_in (mult 4), GELU(tanh), proj_out."""

    def __init__(self, dim: int):
        super().__init__()
        self.proj_in, self.proj_out = _linear(dim, 4 * dim), _linear(4 * dim, dim)

    def forward(self, x):
        return self.proj_out(F.gelu(self.proj_in(x), approximate="tanh"))


def _dims(dims: dict):
    vh, vd = int(dims["video_heads"]), int(dims["video_head_dim"])
    ah, ad = int(dims["audio_heads"]), int(dims["audio_head_dim"])
    return vh, vd, vh * vd, ah, ad, ah * ad


class Block(nn.Module):
    def __init__(self, dims: dict):
        super().__init__()
        vh, vd, dim, ah, ad, adim = _dims(dims)
        eps = self.eps = float(dims.get("eps", NORM_EPS))
        self.attn1 = Attention(dim, dim, vh, vd, eps, "video_q_rope", "video_k_rope")
        self.audio_attn1 = Attention(adim, adim, ah, ad, eps, "audio_q_rope", "audio_k_rope")
        self.attn2 = Attention(dim, dim, vh, vd, eps)  # context: cross_attention_dim (4096)
        self.audio_attn2 = Attention(adim, adim, ah, ad, eps)  # context: audio_cross_attention_dim (2048)
        self.audio_to_video_attn = Attention(dim, adim, ah, ad, eps, "a2v_q_rope", "a2v_k_rope")
        self.video_to_audio_attn = Attention(adim, dim, ah, ad, eps, "v2a_q_rope", "v2a_k_rope")
        self.ff, self.audio_ff = FeedForward(dim), FeedForward(adim)
        # LTX2TransformerBlock.__init__'s initialisations (6 base rows: cross_attention_adaln False)
        self.scale_shift_table = nn.Parameter(torch.randn(6, dim) / dim ** 0.5)
        self.audio_scale_shift_table = nn.Parameter(torch.randn(6, adim) / adim ** 0.5)
        self.video_a2v_cross_attn_scale_shift_table = nn.Parameter(torch.randn(5, dim))
        self.audio_a2v_cross_attn_scale_shift_table = nn.Parameter(torch.randn(5, adim))

    def _rms(self, x):
        """RMSNormNoWeight.forward_cuda -> forward_native."""
        return F.rms_norm(x, normalized_shape=(x.shape[-1],), eps=self.eps)

    @staticmethod
    def get_ada_values(table, batch_size, timestep, indices):
        n = int(table.shape[0])
        ada = (table[indices].unsqueeze(0).unsqueeze(0).to(device=timestep.device, dtype=timestep.dtype)
               + timestep.reshape(batch_size, timestep.shape[1], n, -1)[:, :, indices, :]).unbind(dim=2)
        return [t.squeeze(2) for t in ada]

    @staticmethod
    def _ca_values(table, temb_scale_shift, temb_gate, batch_size):
        """The combined a2v / v2a modulation of LTX2TransformerBlock.forward (scale-shift rows 0..3, gate row 4)."""
        ss = (table[:4, :][None, None, :, :].to(dtype=temb_scale_shift.dtype)
              + temb_scale_shift.reshape(batch_size, temb_scale_shift.shape[1], 4, -1)).unbind(dim=2)
        gate = (table[4:, :][None, None, :, :].to(dtype=temb_gate.dtype)
                + temb_gate.reshape(batch_size, temb_gate.shape[1], 1, -1)).unbind(dim=2)
        return [t.squeeze(2) for t in ss], gate[0].squeeze(2)

    def forward(self, k, hidden_states, audio_hidden_states, encoder_hidden_states, audio_encoder_hidden_states,
                temb, temb_audio, temb_ca_scale_shift, temb_ca_audio_scale_shift, temb_ca_gate, temb_ca_audio_gate,
                video_cos, video_sin, audio_cos, audio_sin, ca_video_cos, ca_video_sin, ca_audio_cos, ca_audio_sin):
        """LTX2TransformerBlock.forward; returns (hidden_states, audio_hidden_states) as the wheel does."""
        B = hidden_states.size(0)
        video_pe, audio_pe = (video_cos, video_sin), (audio_cos, audio_sin)
        ca_video_pe, ca_audio_pe = (ca_video_cos, ca_video_sin), (ca_audio_cos, ca_audio_sin)

        # 1. video and audio self-attention (_ltx2_residual_gate_add: residual + update * gate)
        vshift_msa, vscale_msa, vgate_msa = self.get_ada_values(self.scale_shift_table, B, temb, slice(0, 3))
        norm_hidden_states = self._rms(hidden_states) * (1 + vscale_msa) + vshift_msa
        attn_hidden_states = self.attn1(k, norm_hidden_states, pe=video_pe)
        hidden_states = hidden_states + attn_hidden_states * vgate_msa

        ashift_msa, ascale_msa, agate_msa = self.get_ada_values(self.audio_scale_shift_table, B, temb_audio,
                                                                slice(0, 3))
        norm_audio_hidden_states = self._rms(audio_hidden_states) * (1 + ascale_msa) + ashift_msa
        attn_audio_hidden_states = self.audio_attn1(k, norm_audio_hidden_states, pe=audio_pe)
        audio_hidden_states = audio_hidden_states + attn_audio_hidden_states * agate_msa

        # 2. prompt cross-attention (cross_attention_adaln False)
        hidden_states = hidden_states + self.attn2(k, self._rms(hidden_states), context=encoder_hidden_states)
        audio_hidden_states = audio_hidden_states + self.audio_attn2(k, self._rms(audio_hidden_states),
                                                                     context=audio_encoder_hidden_states)

        # 3. audio-to-video and video-to-audio cross-attention
        norm_hidden_states = self._rms(hidden_states)
        norm_audio_hidden_states = self._rms(audio_hidden_states)
        (video_a2v_scale, video_a2v_shift, video_v2a_scale, video_v2a_shift), a2v_gate = self._ca_values(
            self.video_a2v_cross_attn_scale_shift_table, temb_ca_scale_shift, temb_ca_gate, B)
        (audio_a2v_scale, audio_a2v_shift, audio_v2a_scale, audio_v2a_shift), v2a_gate = self._ca_values(
            self.audio_a2v_cross_attn_scale_shift_table, temb_ca_audio_scale_shift, temb_ca_audio_gate, B)

        mod_norm_hidden_states = norm_hidden_states * (1 + video_a2v_scale) + video_a2v_shift
        mod_norm_audio_hidden_states = norm_audio_hidden_states * (1 + audio_a2v_scale) + audio_a2v_shift
        a2v = self.audio_to_video_attn(k, mod_norm_hidden_states, context=mod_norm_audio_hidden_states,
                                       pe=ca_video_pe, k_pe=ca_audio_pe)
        hidden_states = hidden_states + a2v * a2v_gate

        mod_norm_hidden_states = norm_hidden_states * (1 + video_v2a_scale) + video_v2a_shift
        mod_norm_audio_hidden_states = norm_audio_hidden_states * (1 + audio_v2a_scale) + audio_v2a_shift
        v2a = self.video_to_audio_attn(k, mod_norm_audio_hidden_states, context=mod_norm_hidden_states,
                                       pe=ca_audio_pe, k_pe=ca_video_pe)
        audio_hidden_states = audio_hidden_states + v2a * v2a_gate

        # 4. feed-forward
        vshift_mlp, vscale_mlp, vgate_mlp = self.get_ada_values(self.scale_shift_table, B, temb, slice(3, 6))
        norm_hidden_states = self._rms(hidden_states) * (1 + vscale_mlp) + vshift_mlp
        hidden_states = hidden_states + self.ff(norm_hidden_states) * vgate_mlp

        ashift_mlp, ascale_mlp, agate_mlp = self.get_ada_values(self.audio_scale_shift_table, B, temb_audio,
                                                                slice(3, 6))
        norm_audio_hidden_states = self._rms(audio_hidden_states) * (1 + ascale_mlp) + ashift_mlp
        audio_hidden_states = audio_hidden_states + self.audio_ff(norm_audio_hidden_states) * agate_mlp
        return hidden_states, audio_hidden_states


# -- RoPE inputs: LTX2AudioVideoRotaryPosEmbed (prepare_video_coords, prepare_audio_coords, forward, rope_type split) --

def video_grid(tokens: int) -> tuple[int, int, int]:
    """(frames, rows, columns) of `tokens` latent tokens: 16 frames where the count allows, rows:columns near 2:3."""
    frames = 16 if tokens % 16 == 0 else (2 if tokens % 2 == 0 else 1)
    rest = tokens // frames
    rows = max(r for r in range(1, rest + 1) if rest % r == 0 and r * r * 3 <= rest * 2 + 2) if rest > 1 else 1
    return frames, rows, rest // rows


def video_coords(batch: int, tokens: int) -> torch.Tensor:
    """prepare_video_coords (patch 1, causal_offset 1): [B, 3, T, 2] pixel-space (start, end), time in seconds."""
    f, h, w = video_grid(tokens)
    grid = torch.stack(torch.meshgrid(torch.arange(f, dtype=torch.float32), torch.arange(h, dtype=torch.float32),
                                      torch.arange(w, dtype=torch.float32), indexing="ij"), dim=0)
    ends = grid + torch.ones(3, 1, 1, 1)
    coords = torch.stack([grid, ends], dim=-1).flatten(1, 3).unsqueeze(0).repeat(batch, 1, 1, 1)
    pixel = coords * torch.tensor(VIDEO_SCALE).view(1, -1, 1, 1)
    pixel[:, 0, ...] = (pixel[:, 0, ...] + 1 - VIDEO_SCALE[0]).clamp(min=0) / FPS
    return pixel


def audio_coords(batch: int, tokens: int) -> torch.Tensor:
    """prepare_audio_coords (sampling rate 16000, hop 160, scale 4, causal_offset 1): [B, 1, T, 2] seconds."""
    g = torch.arange(tokens, dtype=torch.float32)
    start = ((g * AUDIO_SCALE) + 1 - AUDIO_SCALE).clip(min=0) * 160 / 16000
    end = (((g + 1) * AUDIO_SCALE) + 1 - AUDIO_SCALE).clip(min=0) * 160 / 16000
    return torch.stack([start, end], dim=-1).unsqueeze(0).expand(batch, -1, -1).unsqueeze(1)


def split_rope(coords: torch.Tensor, dim: int, heads: int, max_pos: tuple, dtype) -> tuple[torch.Tensor, ...]:
    """LTX2AudioVideoRotaryPosEmbed.forward, rope_type split: cos/sin [B, heads, T, dim / heads / 2] in `dtype`,
    the swapaxes view (not contiguous), as the model passes it to every block."""
    n_axes = coords.shape[1]
    start, end = coords.chunk(2, dim=-1)
    mid = ((start + end) / 2.0).squeeze(-1)
    grid = torch.stack([mid[:, i] / max_pos[i] for i in range(n_axes)], dim=-1)
    pow_indices = torch.pow(ROPE_THETA, torch.linspace(0.0, 1.0, dim // (2 * n_axes), dtype=torch.float32))
    freqs = (pow_indices * torch.pi / 2.0).to(torch.float32)
    freqs = ((grid.unsqueeze(-1) * 2 - 1) * freqs).transpose(-1, -2).flatten(2)
    cos, sin = freqs.cos(), freqs.sin()
    pad = dim // 2 - freqs.shape[-1]
    if pad:
        cos = torch.cat([torch.ones_like(cos[:, :, :pad]), cos], dim=-1)
        sin = torch.cat([torch.zeros_like(sin[:, :, :pad]), sin], dim=-1)
    b, t = cos.shape[0], cos.shape[1]
    return (torch.swapaxes(cos.reshape(b, t, heads, -1), 1, 2).to(dtype),
            torch.swapaxes(sin.reshape(b, t, heads, -1), 1, 2).to(dtype))


def make_inputs(dims: dict, dtype: torch.dtype, generator: torch.Generator) -> dict:
    vh, vd, dim, ah, ad, adim = _dims(dims)
    B, Sv, Sa = int(dims["batch"]), int(dims["video_tokens"]), int(dims["audio_tokens"])
    L = int(dims.get("prompt_tokens", PROMPT_TOKENS))

    def randn(*shape):
        return torch.randn(*shape, generator=generator).to(dtype)

    vc, ac = video_coords(B, Sv), audio_coords(B, Sa)
    video_cos, video_sin = split_rope(vc, dim, vh, VIDEO_MAX_POS, dtype)
    audio_cos, audio_sin = split_rope(ac, adim, ah, AUDIO_MAX_POS, dtype)
    # cross_attn_rope / cross_attn_audio_rope: width audio_cross_attention_dim, the time axis alone, max position
    # max(20, 20); both built with the video head count (cross_attn_rope) and the audio head count
    ca_video_cos, ca_video_sin = split_rope(vc[:, 0:1], adim, vh, (max(VIDEO_MAX_POS[0], AUDIO_MAX_POS[0]),), dtype)
    ca_audio_cos, ca_audio_sin = split_rope(ac[:, 0:1], adim, ah, (max(VIDEO_MAX_POS[0], AUDIO_MAX_POS[0]),), dtype)
    return {
        "hidden_states": randn(B, Sv, dim),
        "audio_hidden_states": randn(B, Sa, adim),
        "encoder_hidden_states": randn(B, L, dim),
        "audio_encoder_hidden_states": randn(B, L, adim),
        # adaln_single outputs, viewed [B, 1, n x width] (one timestep per sample)
        "temb": randn(B, 1, 6 * dim),
        "temb_audio": randn(B, 1, 6 * adim),
        "temb_ca_scale_shift": randn(B, 1, 4 * dim),
        "temb_ca_audio_scale_shift": randn(B, 1, 4 * adim),
        "temb_ca_gate": randn(B, 1, dim),
        "temb_ca_audio_gate": randn(B, 1, adim),
        "video_cos": video_cos, "video_sin": video_sin, "audio_cos": audio_cos, "audio_sin": audio_sin,
        "ca_video_cos": ca_video_cos, "ca_video_sin": ca_video_sin,
        "ca_audio_cos": ca_audio_cos, "ca_audio_sin": ca_audio_sin,
    }


def output_shapes(dims: dict) -> tuple:
    _, _, dim, _, _, adim = _dims(dims)
    B = int(dims["batch"])
    return (B, int(dims["video_tokens"]), dim), (B, int(dims["audio_tokens"]), adim)


def check_dims(dims: dict) -> str | None:
    """The sizes at which the wheel's layers take the split RoPE kernel and the block's shapes agree."""
    vh, vd, dim, ah, ad, adim = _dims(dims)
    if vd % 2 or ad % 2:
        return f"head dims {vd}, {ad}: split RoPE rotates halves (even head_dim)"
    if vh != ah:
        return (f"video_heads {vh} != audio_heads {ah}: cross_attn_rope is built with the video head count and "
                "applied in audio_to_video_attn, which has the audio head count")
    return None
