"""Candidate v0 for store_cache: one Triton kernel, one program per token, copying the token's k row into
k_cache[indices[t]] and its v row into v_cache[indices[t]] (rows of R = H_kv * D elements).

A program loads the token's slot index once, then moves the k row and the v row in BLOCK-wide tiles (BLOCK the next
power of two of R, 16-byte vectors per thread; unmasked when R is a power of two). Loads and stores are in the
caches' dtype with no arithmetic, so the copy is bit for bit (NaN payloads included). Offsets are 64-bit: a cache
row index times its stride can pass 2^31 elements on large pools.

As upstream: k and v [B, R] with unit stride along R and any row stride, k_cache and v_cache [S, R] with one shared
row stride and unit stride along R, one dtype, indices [B] int32 or int64 of any stride. Unlike upstream, R * element
size need not be a multiple of 4, and `size_limit` is not checked on the device (upstream asserts each index is
below it); `row_bytes` and `num_split` (upstream's template width and warp split) are accepted and ignored.
Duplicate indices are undefined, as upstream's.
"""
import torch
import triton
import triton.language as tl

from kda.runtime.lean_launch import LaunchCache, Plan, next_pow2


@triton.jit
def _store_cache_kernel(k_ptr, v_ptr, kc_ptr, vc_ptr, idx_ptr, R, stride_k, stride_v, stride_c, stride_i,
                        BLOCK: tl.constexpr, EVEN: tl.constexpr):
    t = tl.program_id(0).to(tl.int64)
    slot = tl.load(idx_ptr + t * stride_i).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    k_src = k_ptr + t * stride_k + cols
    v_src = v_ptr + t * stride_v + cols
    k_dst = kc_ptr + slot * stride_c + cols
    v_dst = vc_ptr + slot * stride_c + cols
    if EVEN:
        kr = tl.load(k_src)
        vr = tl.load(v_src)
        tl.store(k_dst, kr)
        tl.store(v_dst, vr)
    else:
        mask = cols < R
        kr = tl.load(k_src, mask=mask)
        vr = tl.load(v_src, mask=mask)
        tl.store(k_dst, kr, mask=mask)
        tl.store(v_dst, vr, mask=mask)


_launch = LaunchCache(_store_cache_kernel)

# Launch plans by input signature (a repeated call, the production case, skips the layout arithmetic).
_plans = {}
_MAX_PLANS = 256


def _plan(B, R, sk, sv, sc, si, dtype, idx_dtype, esize) -> Plan:
    block = next_pow2(R)
    vec = max(1, 16 // esize)  # elements per thread for 16-byte accesses
    num_warps = max(1, min(8, block // (vec * 32)))
    return Plan((B, 1, 1), (dtype, dtype, dtype, dtype, idx_dtype), (R, sk, sv, sc, si), (block, block == R),
                num_warps)


def store_cache(k, v, k_cache, v_cache, indices, *, row_bytes=0, num_split=0, size_limit=0):
    """Drop-in for sglang.jit_kernel.kvcache.store_cache: k_cache[indices[b]] = k[b], v_cache[indices[b]] = v[b]."""
    if k.dim() != 2 or v.dim() != 2 or k_cache.dim() != 2 or v_cache.dim() != 2 or indices.dim() != 1:
        raise ValueError("store_cache: k, v [B, R], k_cache, v_cache [S, R] and indices [B] expected, got "
                         f"{tuple(k.shape)}, {tuple(v.shape)}, {tuple(k_cache.shape)}, {tuple(v_cache.shape)}, "
                         f"{tuple(indices.shape)}")
    B, R = k.shape
    if tuple(v.shape) != (B, R) or k_cache.shape[1] != R or v_cache.shape[1] != R or indices.shape[0] != B:
        raise ValueError("store_cache: shapes disagree")
    dtype = k.dtype
    if v.dtype != dtype or k_cache.dtype != dtype or v_cache.dtype != dtype:
        raise ValueError("store_cache: k, v, k_cache and v_cache must share one dtype")
    if indices.dtype not in (torch.int32, torch.int64):
        raise ValueError(f"store_cache: indices must be int32 or int64, got {indices.dtype}")
    if R > 1 and (k.stride(1) != 1 or v.stride(1) != 1 or k_cache.stride(1) != 1 or v_cache.stride(1) != 1):
        raise ValueError("store_cache: unit stride along R required (as upstream)")
    if k_cache.stride(0) != v_cache.stride(0):
        raise ValueError("store_cache: k_cache and v_cache must share one row stride (as upstream)")
    if B == 0 or R == 0:
        return None
    sk, sv, sc, si = k.stride(0), v.stride(0), k_cache.stride(0), indices.stride(0)
    key = (B, R, sk, sv, sc, si, dtype, indices.dtype)
    plan = _plans.get(key)
    if plan is None:
        if len(_plans) >= _MAX_PLANS:
            _plans.pop(next(iter(_plans)))
        plan = _plans[key] = _plan(B, R, sk, sv, sc, si, dtype, indices.dtype, k.element_size())
    _launch.run(plan, (k, v, k_cache, v_cache, indices), ())
    return None
