"""qknorm_rope v1 (Triton), the general path of candidate v2 (qknorm_rope.py): one program per token does every head of q and then of k, in place.

Why this shape: a token's cos/sin row and position are loaded once and shared by all Hq + Hk heads (upstream gives
each warp one head and reloads them per head), and each head is a contiguous run of D elements, so a [heads, D] tile
is read and written with whole 16-byte vectors. The RMS statistics are per head (a reduction along D inside the
tile); the weight is loaded once per program.

- Interleaved pairs: the tile is split into (even, odd) columns in registers (reshape + split), rotated, joined back.
- NeoX halves: the rotated part is read as two tiles, columns [0, R/2) and [R/2, R), so both halves sit in the same
  registers without a cross-lane shuffle; the columns past R (partial rotary) are a third tile that is only
  normalised.
Partial interleaved rotary pads cos with 1 and sin with 0 past R/2, which leaves those pairs normalised only.

The host path is kept short (the baseline is CUDA with a C++ launcher): one LaunchCache (kda/runtime/lean_launch.py) per
kernel variant sends the first call of each specialisation through Triton and launches the compiled kernel directly
afterwards.
"""
import triton
import triton.language as tl

from kda.runtime.lean_launch import LaunchCache, cdiv, next_pow2


@triton.jit
def _interleaved_heads(x_ptr, tok_off, H, s_h, w_ptr, c, s, eps,
                       D: tl.constexpr, BLOCK_H: tl.constexpr):
    heads = tl.arange(0, BLOCK_H)
    cols = tl.arange(0, D)
    hmask = heads < H
    ptrs = x_ptr + tok_off + heads[:, None].to(tl.int64) * s_h + cols[None, :]
    x = tl.load(ptrs, mask=hmask[:, None], other=0.0).to(tl.float32)
    w = tl.load(w_ptr + cols).to(tl.float32)
    rstd = tl.rsqrt(tl.sum(x * x, axis=1) / D + eps)
    y = x * (rstd[:, None] * w[None, :])
    ye, yo = tl.split(tl.reshape(y, [BLOCK_H, D // 2, 2]))
    oe = ye * c[None, :] - yo * s[None, :]
    oo = yo * c[None, :] + ye * s[None, :]
    o = tl.reshape(tl.join(oe, oo), [BLOCK_H, D])
    tl.store(ptrs, o.to(x_ptr.dtype.element_ty), mask=hmask[:, None])


@triton.jit
def _neox_heads(x_ptr, tok_off, H, s_h, w_ptr, c, s, eps,
                D: tl.constexpr, R: tl.constexpr, BLOCK_H: tl.constexpr, BLOCK_REST: tl.constexpr):
    HALF: tl.constexpr = R // 2
    heads = tl.arange(0, BLOCK_H)
    hmask = heads[:, None] < H
    base = x_ptr + tok_off + heads[:, None].to(tl.int64) * s_h
    i = tl.arange(0, HALF)
    a = tl.load(base + i[None, :], mask=hmask, other=0.0).to(tl.float32)
    b = tl.load(base + HALF + i[None, :], mask=hmask, other=0.0).to(tl.float32)
    ssq = tl.sum(a * a, axis=1) + tl.sum(b * b, axis=1)
    if BLOCK_REST > 0:
        j = tl.arange(0, BLOCK_REST)
        rmask = hmask & (j[None, :] < D - R)
        rest = tl.load(base + R + j[None, :], mask=rmask, other=0.0).to(tl.float32)
        ssq += tl.sum(rest * rest, axis=1)
    rstd = tl.rsqrt(ssq / D + eps)[:, None]
    a = a * (rstd * tl.load(w_ptr + i).to(tl.float32)[None, :])
    b = b * (rstd * tl.load(w_ptr + HALF + i).to(tl.float32)[None, :])
    ty = x_ptr.dtype.element_ty
    tl.store(base + i[None, :], (a * c[None, :] - b * s[None, :]).to(ty), mask=hmask)
    tl.store(base + HALF + i[None, :], (b * c[None, :] + a * s[None, :]).to(ty), mask=hmask)
    if BLOCK_REST > 0:
        wr = tl.load(w_ptr + R + j, mask=j < D - R, other=0.0).to(tl.float32)
        tl.store(base + R + j[None, :], (rest * (rstd * wr[None, :])).to(ty), mask=rmask)


@triton.jit
def _qknorm_rope_kernel(
    q_ptr, k_ptr, qw_ptr, kw_ptr, cache_ptr, pos_ptr,
    Hq, Hk, sq_t, sq_h, sk_t, sk_h, sc_p,
    eps,
    D: tl.constexpr, R: tl.constexpr, IS_NEOX: tl.constexpr,
    BLOCK_HQ: tl.constexpr, BLOCK_HK: tl.constexpr, BLOCK_REST: tl.constexpr,
):
    tok = tl.program_id(0).to(tl.int64)
    row = cache_ptr + tl.load(pos_ptr + tok).to(tl.int64) * sc_p
    if IS_NEOX:
        i = tl.arange(0, R // 2)
        c = tl.load(row + i)
        s = tl.load(row + R // 2 + i)
        _neox_heads(q_ptr, tok * sq_t, Hq, sq_h, qw_ptr, c, s, eps, D, R, BLOCK_HQ, BLOCK_REST)
        _neox_heads(k_ptr, tok * sk_t, Hk, sk_h, kw_ptr, c, s, eps, D, R, BLOCK_HK, BLOCK_REST)
    else:
        i = tl.arange(0, D // 2)
        rot = i < R // 2
        c = tl.load(row + i, mask=rot, other=1.0)
        s = tl.load(row + R // 2 + i, mask=rot, other=0.0)
        _interleaved_heads(q_ptr, tok * sq_t, Hq, sq_h, qw_ptr, c, s, eps, D, BLOCK_HQ)
        _interleaved_heads(k_ptr, tok * sk_t, Hk, sk_h, kw_ptr, c, s, eps, D, BLOCK_HK)


_launch = LaunchCache(_qknorm_rope_kernel)


def _num_warps(block_h: int, d: int) -> int:
    # About 32 fp32 values per thread for the larger of the q/k tiles: whole 16-byte vectors, no spills.
    return max(1, min(8, block_h * d // 1024))


def fused_inplace_qknorm_rope(q, k, q_weight, k_weight, cos_sin_cache, positions, *, is_neox, eps=1e-6,
                              head_dim=0, rope_dim=0):
    """Drop-in for sglang's fused_inplace_qknorm_rope: per-head RMSNorm of q [N, Hq, D] and k [N, Hk, D] with
    q_weight / k_weight [D], then RoPE of the first rope_dim dims from cos_sin_cache [max_pos, rope_dim] (cos half,
    then sin half) at positions [N]; in place, returns None. Token and head strides are free; D must be contiguous."""
    head_dim = head_dim or q.shape[-1]
    rope_dim = rope_dim or cos_sin_cache.shape[-1]
    n, hq, d = q.shape
    hk = k.shape[1]
    if d != head_dim or k.shape[0] != n or k.shape[2] != d or head_dim not in (64, 128, 256):
        raise ValueError(f"q {tuple(q.shape)} / k {tuple(k.shape)} must be [N, H, head_dim] with head_dim in "
                         f"(64, 128, 256), got head_dim={head_dim}")
    if rope_dim <= 0 or rope_dim > head_dim or rope_dim % 2 or cos_sin_cache.shape[-1] != rope_dim or \
            (is_neox and rope_dim & (rope_dim - 1)):
        raise ValueError(f"rope_dim {rope_dim} must be even (a power of two for NeoX), <= head_dim and equal to the "
                         f"cache width {cos_sin_cache.shape[-1]}")
    if q.stride(2) != 1 or k.stride(2) != 1 or cos_sin_cache.stride(1) != 1:
        raise ValueError("q, k and cos_sin_cache need unit stride along their last dimension")
    if n == 0:
        return None
    block_hq = next_pow2(hq)
    block_hk = next_pow2(hk)
    rest = next_pow2(d - rope_dim) if (is_neox and d > rope_dim) else 0
    _launch((n, 1, 1), (q, k, q_weight, k_weight, cos_sin_cache, positions),
            (hq, hk, q.stride(0), q.stride(1), k.stride(0), k.stride(1), cos_sin_cache.stride(0)), (float(eps),),
            (d, rope_dim, bool(is_neox), block_hq, block_hk, rest), _num_warps(max(block_hq, block_hk), d))
    return None
