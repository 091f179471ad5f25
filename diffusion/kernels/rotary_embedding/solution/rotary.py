"""Candidate v1 for rotary_embedding: one streaming pass per call, fp32 math, whole 16-byte vectors.

Both kernels flatten the work into rows, one row per (batch, token, head) holding that head's D elements, and give
each program BLOCK_R rows x the whole head (about 4K elements).

- Interleaved pairs (apply_rotary_embedding): a row is loaded as one contiguous [D] vector (upstream loads the even
  and the odd elements with two stride-2 gathers), split into (even, odd) pairs in registers with reshape + split,
  rotated, joined back and stored as one contiguous vector. cos/sin are gathered per row at token = (row // H) % T
  with their own strides, so non-contiguous or full-width interleaved cos/sin need no host-side copy.
- Split halves (apply_ltx2_split_rotary_emb): the two halves of a row are two contiguous loads; cos/sin are read
  through their [B, H, S, D/2] strides (the production swapaxes view included). The cosine product is rounded to
  bf16 before the sine product is added, as LTX-2's reference does (see oracle.py); the rounding is done with
  integer ops (round to nearest even) so that it is exact on the GPU and under Triton's interpreter alike.
"""
import torch
import triton
import triton.language as tl

from kda.runtime.lean_launch import LaunchCache, Plan, cdiv, next_pow2


@triton.jit
def _round_bf16(v):
    """fp32 -> nearest-even bf16 value, kept in fp32 (NaN passes through)."""
    u = v.to(tl.uint32, bitcast=True)
    u = (u + 0x7FFF + ((u >> 16) & 1)) & 0xFFFF0000
    return tl.where(v != v, v, u.to(tl.float32, bitcast=True))


@triton.jit
def _round(v, HW: tl.constexpr):
    """fp32 -> bf16 -> fp32, nearest even: the GPU's conversion instruction, or integer ops under the interpreter
    (whose bf16 conversion truncates)."""
    if HW:
        return v.to(tl.bfloat16).to(tl.float32)
    return _round_bf16(v)


@triton.jit
def _rope_pairs_kernel(
    x_ptr, cos_ptr, sin_ptr, out_ptr,
    n_rows, H, T,
    sx_b, sx_t, sx_h,
    sc_t, sc_i, ss_t, ss_i,
    D: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_R: tl.constexpr, X_FLAT: tl.constexpr,
):
    rows = tl.program_id(0) * BLOCK_R + tl.arange(0, BLOCK_R)
    rmask = rows < n_rows
    bt = rows // H
    tok = bt % T
    rows64 = rows.to(tl.int64)
    if X_FLAT:
        x_row = rows64 * D
    else:
        h = rows - bt * H
        x_row = (bt // T).to(tl.int64) * sx_b + tok.to(tl.int64) * sx_t + h.to(tl.int64) * sx_h
    cols = tl.arange(0, BLOCK_D)
    mask = rmask[:, None] & (cols < D)[None, :]
    x = tl.load(x_ptr + x_row[:, None] + cols[None, :], mask=mask, other=0.0).to(tl.float32)
    xe, xo = tl.split(tl.reshape(x, [BLOCK_R, BLOCK_D // 2, 2]))

    half = tl.arange(0, BLOCK_D // 2)
    hmask = rmask[:, None] & (half < D // 2)[None, :]
    tok64 = tok.to(tl.int64)
    c = tl.load(cos_ptr + tok64[:, None] * sc_t + half[None, :] * sc_i, mask=hmask, other=0.0).to(tl.float32)
    s = tl.load(sin_ptr + tok64[:, None] * ss_t + half[None, :] * ss_i, mask=hmask, other=0.0).to(tl.float32)

    oe = xe * c - xo * s
    oo = xo * c + xe * s
    o = tl.reshape(tl.join(oe, oo), [BLOCK_R, BLOCK_D])
    tl.store(out_ptr + rows64[:, None] * D + cols[None, :], o.to(out_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _rope_split_kernel(
    x_ptr, cos_ptr, sin_ptr, out_ptr,
    n_rows, H, S,
    sc_b, sc_h, sc_s, sc_i, ss_b, ss_h, ss_s, ss_i,
    HALF: tl.constexpr, BLOCK_HALF: tl.constexpr, BLOCK_R: tl.constexpr, HW: tl.constexpr,
):
    rows = tl.program_id(0) * BLOCK_R + tl.arange(0, BLOCK_R)
    rmask = rows < n_rows
    bs = rows // H
    h = (rows - bs * H).to(tl.int64)
    b = (bs // S).to(tl.int64)
    s_idx = (bs % S).to(tl.int64)
    i = tl.arange(0, BLOCK_HALF)
    mask = rmask[:, None] & (i < HALF)[None, :]
    x_row = rows.to(tl.int64) * (2 * HALF)
    x1_ptrs = x_ptr + x_row[:, None] + i[None, :]
    x1 = tl.load(x1_ptrs, mask=mask, other=0.0).to(tl.float32)
    x2 = tl.load(x1_ptrs + HALF, mask=mask, other=0.0).to(tl.float32)
    c_row = b * sc_b + h * sc_h + s_idx * sc_s
    s_row = b * ss_b + h * ss_h + s_idx * ss_s
    c = tl.load(cos_ptr + c_row[:, None] + i[None, :] * sc_i, mask=mask, other=0.0).to(tl.float32)
    s = tl.load(sin_ptr + s_row[:, None] + i[None, :] * ss_i, mask=mask, other=0.0).to(tl.float32)

    o1 = _round(x1 * c, HW) - x2 * s
    o2 = _round(x2 * c, HW) + x1 * s
    o1_ptrs = out_ptr + x_row[:, None] + i[None, :]
    tl.store(o1_ptrs, o1.to(out_ptr.dtype.element_ty), mask=mask)
    tl.store(o1_ptrs + HALF, o2.to(out_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _rope_split_tok_kernel(
    x_ptr, cos_ptr, sin_ptr, out_ptr,
    S, sc_b, sc_h, sc_s, sc_i, ss_b, ss_h, ss_s, ss_i,
    H: tl.constexpr, HALF: tl.constexpr, BLOCK_HALF: tl.constexpr, BLOCK_H: tl.constexpr, EVEN: tl.constexpr,
    HW: tl.constexpr,
):
    """The split rotation over a (position, block of heads, batch) grid: no division on the way to an address (the
    row grid divides every row index by H and S), which on the small L2-resident calls is the latency to beat."""
    s_idx = tl.program_id(0)
    b = tl.program_id(2)
    bs = b * S + s_idx
    heads = tl.program_id(1) * BLOCK_H + tl.arange(0, BLOCK_H)
    i = tl.arange(0, BLOCK_HALF)
    x_row = bs.to(tl.int64) * (H * 2 * HALF) + heads * (2 * HALF)
    c_row = b.to(tl.int64) * sc_b + s_idx.to(tl.int64) * sc_s + heads * sc_h
    s_row = b.to(tl.int64) * ss_b + s_idx.to(tl.int64) * ss_s + heads * ss_h
    x1_ptrs = x_ptr + x_row[:, None] + i[None, :]
    c_ptrs = cos_ptr + c_row[:, None] + i[None, :] * sc_i
    s_ptrs = sin_ptr + s_row[:, None] + i[None, :] * ss_i
    o1_ptrs = out_ptr + x_row[:, None] + i[None, :]
    if EVEN:
        x1 = tl.load(x1_ptrs).to(tl.float32)
        x2 = tl.load(x1_ptrs + HALF).to(tl.float32)
        c = tl.load(c_ptrs).to(tl.float32)
        s = tl.load(s_ptrs).to(tl.float32)
    else:
        mask = (heads < H)[:, None] & (i < HALF)[None, :]
        x1 = tl.load(x1_ptrs, mask=mask, other=0.0).to(tl.float32)
        x2 = tl.load(x1_ptrs + HALF, mask=mask, other=0.0).to(tl.float32)
        c = tl.load(c_ptrs, mask=mask, other=0.0).to(tl.float32)
        s = tl.load(s_ptrs, mask=mask, other=0.0).to(tl.float32)
    o1 = (_round(x1 * c, HW) - x2 * s).to(out_ptr.dtype.element_ty)
    o2 = (_round(x2 * c, HW) + x1 * s).to(out_ptr.dtype.element_ty)
    if EVEN:
        tl.store(o1_ptrs, o1)
        tl.store(o1_ptrs + HALF, o2)
    else:
        tl.store(o1_ptrs, o1, mask=mask)
        tl.store(o1_ptrs + HALF, o2, mask=mask)


def _block_rows(n_rows: int, row_width: int, per_program: int) -> int:
    # At most `per_program` elements, and rows split so that about 512 programs remain on small calls, which are
    # latency-bound and want every SM busy.
    return max(1, min(next_pow2(cdiv(n_rows, 512)), per_program // row_width))


def _check_out(out, x):
    if out is None:
        return torch.empty(x.shape, dtype=x.dtype, device=x.device)
    if tuple(out.shape) != tuple(x.shape) or out.dtype != x.dtype or not out.is_contiguous():
        raise ValueError("out must be a contiguous tensor with x's shape and dtype")
    return out


def _pairs_plan(x, cos, sin, interleaved):
    """Drop-in for sglang's apply_rotary_embedding: rotates adjacent pairs (2i, 2i+1) of each head by cos/sin[token, i].

    x [B, T, H, D] or [T, H, D] (unit stride along D); cos/sin [T', D/2] with T' >= T, any strides, or [T', D] with
    interleaved=True (columns 0, 2, 4, ... used). Returns the launch plan (None: nothing to do).
    """
    if x.dim() == 4:
        B, T, H, D = x.shape
        sx_b, sx_t, sx_h, sx_d = x.stride()
    elif x.dim() == 3:
        T, H, D = x.shape
        B = 1
        sx_t, sx_h, sx_d = x.stride()
        sx_b = 0
    else:
        raise ValueError(f"x must be [B, T, H, D] or [T, H, D], got shape {tuple(x.shape)}")
    if D % 2 != 0:
        raise ValueError("head_size must be divisible by 2")
    if D > 1 and sx_d != 1:
        raise ValueError("x must have unit stride along the head dimension (upstream requires it too)")
    if cos.dim() != 2 or sin.dim() != 2 or cos.shape[0] < T or sin.shape[0] < T:
        raise ValueError(f"cos/sin must be [T, D/2] (or [T, D] with interleaved), got {tuple(cos.shape)}, {tuple(sin.shape)}")
    n_rows = B * T * H
    if n_rows == 0 or D == 0:
        return None
    # Upstream takes every other column of a full-width cos/sin when interleaved, and the first D/2 columns otherwise.
    c_step = 2 if (interleaved and cos.shape[-1] == D) else 1
    s_step = 2 if (interleaved and sin.shape[-1] == D) else 1
    x_flat = sx_h == D and (T == 1 or sx_t == H * D) and (B == 1 or sx_b == T * H * D)
    block_d = max(2, next_pow2(D))
    block_r = _block_rows(n_rows, block_d, 4096)
    return Plan((cdiv(n_rows, block_r), 1, 1), (x.dtype, cos.dtype, sin.dtype, x.dtype),
                (n_rows, H, T, sx_b, sx_t, sx_h,
                 cos.stride(0), cos.stride(1) * c_step, sin.stride(0), sin.stride(1) * s_step),
                (D, block_d, block_r, x_flat), 4)


# Launch plans by input signature. Every check above depends only on shapes, strides and dtypes, so a repeated
# call (the production case: the same shapes every layer and step) costs a dict lookup before the launch. At most
# _PLANS_MAX, first in first out: a server meets a few signatures, a sweep many (kda rules: bounded caches).
_plans = {}
_PLANS_MAX = 256


def apply_rotary_embedding(x, cos, sin, interleaved=False, *, out=None):
    """Drop-in for sglang's apply_rotary_embedding (see _pairs_plan); returns `out`, allocated when not given."""
    key = (x.shape, x.stride(), x.dtype, cos.shape, cos.stride(), cos.dtype, sin.shape, sin.stride(), sin.dtype,
           bool(interleaved))
    plan = _plans.get(key, False)
    if plan is False:
        if len(_plans) >= _PLANS_MAX:
            del _plans[next(iter(_plans))]
        plan = _plans[key] = _pairs_plan(x, cos, sin, interleaved)
    out = _check_out(out, x)
    if plan is not None:
        _launch_pairs.run(plan, (x, cos, sin, out), ())
    return out


def _split_plan(x, cos, sin):
    """Drop-in for sglang's apply_ltx2_split_rotary_emb: per head, rotates (x[i], x[i + D/2]) by cos/sin[b, h, s, i].

    x [B, S, H*D] contiguous; cos/sin [B, H, S, D/2] with any strides. Returns (plan, launcher), or None when there
    is nothing to do.
    """
    batch, seq_len, inner_dim = x.shape
    cos_batch, num_heads, cos_seq_len, half_dim = cos.shape
    if (cos_batch != batch or cos_seq_len != seq_len or inner_dim != num_heads * half_dim * 2
            or tuple(sin.shape) != tuple(cos.shape)):
        raise ValueError("LTX2 split RoPE shape mismatch: "
                         f"x={tuple(x.shape)}, cos={tuple(cos.shape)}, sin={tuple(sin.shape)}")
    if not x.is_contiguous():
        raise ValueError("x must be contiguous (upstream requires it too)")
    n_rows = batch * seq_len * num_heads
    if n_rows == 0 or half_dim == 0:
        return None
    block_half = next_pow2(half_dim)
    dtypes = (x.dtype, cos.dtype, sin.dtype, x.dtype)
    hw = x.is_cuda
    layout = _split_layout(batch * seq_len, num_heads, block_half)
    if layout is not None:
        block_h, warps = layout
        return Plan((seq_len, cdiv(num_heads, block_h), batch), dtypes, (seq_len, *cos.stride(), *sin.stride()),
                    (num_heads, half_dim, block_half, block_h, num_heads % block_h == 0 and half_dim == block_half,
                     hw), warps), _launch_split_tok
    # 2K-element tiles over 8 warps, as upstream's LTX-2 kernel (16 heads x 128): with 4K over 4 warps v1 was 10%
    # slower on the 1536-token rows (H200, results/h200.jsonl of 2b1068b).
    block_r = _block_rows(n_rows, 2 * block_half, 2048)
    tile = block_r * 2 * block_half
    return Plan((cdiv(n_rows, block_r), 1, 1), dtypes,
                (n_rows, num_heads, seq_len, *cos.stride(), *sin.stride()), (half_dim, block_half, block_r, hw),
                8 if tile >= 2048 else 4), _launch_split


def _split_layout(tokens: int, H: int, block_half: int):
    """(heads per program, warps) of the (token, head block) grid, or None for the flat row grid."""
    if tokens * H * block_half > 1 << 22:
        return None
    block_h = min(32, next_pow2(H))
    # 16 values per thread: one 16-byte vector of each bf16 half
    return block_h, max(1, min(8, block_h * block_half // 256))


def apply_ltx2_split_rotary_emb(x, cos, sin, *, out=None):
    """Drop-in for sglang's apply_ltx2_split_rotary_emb (see _split_plan); returns `out`, allocated when not given."""
    key = (x.shape, x.stride(), x.dtype, cos.shape, cos.stride(), cos.dtype, sin.shape, sin.stride(), sin.dtype)
    plan = _plans.get(key, False)
    if plan is False:
        if len(_plans) >= _PLANS_MAX:
            del _plans[next(iter(_plans))]
        plan = _plans[key] = _split_plan(x, cos, sin)
    out = _check_out(out, x)
    if plan is not None:
        plan[1].run(plan[0], (x, cos, sin, out), ())
    return out


_launch_pairs = LaunchCache(_rope_pairs_kernel)
_launch_split = LaunchCache(_rope_split_kernel)
_launch_split_tok = LaunchCache(_rope_split_tok_kernel)
