"""Candidate v0 for rope: one Triton program per token rotates every head of q and of k in place, fp32 math.

A program reads positions[token] once, loads that cache row (cos = cache[p, :R/2], sin = cache[p, R/2:R], fp32),
and walks the q heads, then the k heads, BLOCK_H heads at a time: each tile is [BLOCK_H, R/2] pairs (x, y), rotated
as out_x = x cos - y sin, out_y = x sin + y cos in fp32 and stored back in q's dtype.
  NeoX (is_neox=True):   x = head[:R/2], y = head[R/2:R]          (two contiguous half loads)
  interleaved (GPT-J):   x = head[0::2], y = head[1::2]           (one contiguous load of R, split into pairs)

As upstream (csrc/elementwise/rope.cuh, FusedRopeKernel::run): q [T, Hq, R] and k [T, Hk, R] with unit stride along
R and token strides of their own (fused-QKV slices, MLA's q_pe / k_pe views), R = rope_dim or the cache width,
cos_sin_cache [max_pos, R] fp32, positions [T] int32 or int64. Unlike upstream, q and k may have different head
strides. The fused KV-cache store form (`fused_args`) is not implemented: no production row passes it, and a call
that does raises.
"""
import torch
import triton
import triton.language as tl

from kda.runtime.lean_launch import LaunchCache, Plan, next_pow2


@triton.jit
def _rotate_heads(base, n_heads, s_h, c, s, hh, half, HALF: tl.constexpr, R: tl.constexpr, IS_NEOX: tl.constexpr,
                  BLOCK_H: tl.constexpr, BLOCK_HALF: tl.constexpr):
    hmask = half < HALF
    for h0 in range(0, n_heads, BLOCK_H):
        heads = h0 + hh
        mask = (heads < n_heads)[:, None] & hmask[None, :]
        row = base + heads.to(tl.int64)[:, None] * s_h
        if IS_NEOX:
            px = row + half[None, :]
            py = px + HALF
        else:
            px = row + 2 * half[None, :]
            py = px + 1
        x = tl.load(px, mask=mask, other=0.0).to(tl.float32)
        y = tl.load(py, mask=mask, other=0.0).to(tl.float32)
        ox = x * c[None, :] - y * s[None, :]
        oy = x * s[None, :] + y * c[None, :]
        tl.store(px, ox.to(base.dtype.element_ty), mask=mask)
        tl.store(py, oy.to(base.dtype.element_ty), mask=mask)


@triton.jit
def _rope_kernel(q_ptr, k_ptr, cache_ptr, pos_ptr, Hq, Hk, sq_t, sq_h, sk_t, sk_h, sc_p,
                 R: tl.constexpr, IS_NEOX: tl.constexpr, BLOCK_H: tl.constexpr, BLOCK_HALF: tl.constexpr):
    t = tl.program_id(0).to(tl.int64)
    p = tl.load(pos_ptr + t).to(tl.int64)
    HALF: tl.constexpr = R // 2
    half = tl.arange(0, BLOCK_HALF)
    hmask = half < HALF
    crow = cache_ptr + p * sc_p
    c = tl.load(crow + half, mask=hmask, other=0.0)
    s = tl.load(crow + HALF + half, mask=hmask, other=0.0)
    hh = tl.arange(0, BLOCK_H)
    _rotate_heads(q_ptr + t * sq_t, Hq, sq_h, c, s, hh, half, HALF, R, IS_NEOX, BLOCK_H, BLOCK_HALF)
    _rotate_heads(k_ptr + t * sk_t, Hk, sk_h, c, s, hh, half, HALF, R, IS_NEOX, BLOCK_H, BLOCK_HALF)


_launch = LaunchCache(_rope_kernel)

# Launch plans by input signature (a repeated call, the production case, skips the layout arithmetic).
_plans = {}
_MAX_PLANS = 256


def _plan(T, Hq, Hk, R, strides, dtypes, is_neox):
    block_half = next_pow2(R // 2)
    block_h = max(1, min(next_pow2(max(Hq, Hk)), 2048 // block_half))
    num_warps = 4 if block_h * block_half <= 1024 else 8
    return Plan((T, 1, 1), dtypes, (Hq, Hk) + strides, (R, bool(is_neox), block_h, block_half), num_warps)


def apply_rope_with_cos_sin_cache_inplace(q, k, cos_sin_cache, positions, *, is_neox, rope_dim=0, fused_args=None):
    """Drop-in for sglang.jit_kernel.rope.apply_rope_with_cos_sin_cache_inplace: rotates q [T, Hq, R] and
    k [T, Hk, R] in place by cos_sin_cache[positions] (NeoX halves or interleaved pairs); returns None."""
    if fused_args is not None:
        raise NotImplementedError("apply_rope_with_cos_sin_cache_inplace: the fused KV-cache store form (fused_args) "
                                  "is not implemented by this candidate")
    R = rope_dim or cos_sin_cache.size(-1)
    if q.dim() != 3 or k.dim() != 3 or q.shape[-1] != R or k.shape[-1] != R or k.shape[0] != q.shape[0]:
        raise ValueError(f"rope: q [T, Hq, {R}] and k [T, Hk, {R}] expected, got {tuple(q.shape)} and {tuple(k.shape)}")
    if R % 2 or q.stride(-1) != 1 or k.stride(-1) != 1 or q.dtype != k.dtype:
        raise ValueError("rope: an even rope_dim, unit stride along it and one dtype for q and k are required")
    if cos_sin_cache.dtype != torch.float32 or cos_sin_cache.dim() != 2 or cos_sin_cache.size(-1) != R \
            or cos_sin_cache.stride(-1) != 1:
        raise ValueError(f"rope: cos_sin_cache must be fp32 [max_pos, {R}] with unit stride along R")
    if positions.dtype not in (torch.int32, torch.int64) or tuple(positions.shape) != (q.shape[0],):
        raise ValueError("rope: positions must be int32 or int64 [T]")
    T, Hq, Hk = q.shape[0], q.shape[1], k.shape[1]
    if T == 0:
        return None
    strides = (q.stride(0), q.stride(1), k.stride(0), k.stride(1), cos_sin_cache.stride(0))
    key = (T, Hq, Hk, R, strides, q.dtype, positions.dtype, bool(is_neox))
    plan = _plans.get(key)
    if plan is None:
        if len(_plans) >= _MAX_PLANS:
            _plans.pop(next(iter(_plans)))
        plan = _plans[key] = _plan(T, Hq, Hk, R, strides, (q.dtype, k.dtype, torch.float32, positions.dtype),
                                   is_neox)
    _launch.run(plan, (q, k, cos_sin_cache, positions), ())
    return None
