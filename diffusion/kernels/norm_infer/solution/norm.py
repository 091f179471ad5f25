"""Candidate v1 for norm_infer: one Triton kernel for both entry points (row LayerNorm / RMSNorm, fp32 statistics).

A program normalises BLOCK_M whole rows held in registers: rows are read once, the mean and the centred variance
come from the registers (two passes over registers, one over memory), and y is written once. Narrow rows (the
D = 128 QK norm) pack many rows per program so each thread still moves 16-byte vectors; wide rows (Helios 5120)
are held as unpadded chunks (see _row_norm_chunked_kernel). Statistics and the normalisation are fp32; 1/sqrt is correctly rounded for
fp32 rows and rsqrt for 16-bit ones (as upstream), and tiles that need no mask (M a multiple of the rows per
program, N a power of two) carry none.
Any strides of x are handled in the kernel (upstream copies a non-contiguous x first; torch ops are not allowed on
this path anyway). Upstream's limit is kept: a row wider than 64 KB of x raises.
"""
import torch
import triton
import triton.language as tl

from kda.runtime.lean_launch import LaunchCache, Plan, cdiv, next_pow2


@triton.jit
def _rstd(var, eps, FAST: tl.constexpr):
    # 16-bit rows round far above rsqrt.approx's error (upstream uses it); fp32 rows take the correctly rounded one.
    if FAST:
        return tl.math.rsqrt(var + eps)
    return tl.math.div_rn(1.0, tl.math.sqrt_rn(var + eps))


@triton.jit
def _row_norm_kernel(
    x_ptr, w_ptr, b_ptr, y_ptr,
    M, N, D1, D2,
    sx0, sx1, sx2, sxn,
    sym, syn,
    eps,
    IS_RMS: tl.constexpr, HAS_W: tl.constexpr, HAS_B: tl.constexpr, FLAT: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, HINT: tl.constexpr, EVEN: tl.constexpr, FAST: tl.constexpr,
):
    rows = tl.program_id(0).to(tl.int64) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.arange(0, BLOCK_N)
    if EVEN:  # M % BLOCK_M == 0 and N == BLOCK_N: nothing to mask
        rmask = tl.full([BLOCK_M], 1, tl.int1)
        cmask = tl.full([BLOCK_N], 1, tl.int1)
    else:
        rmask = rows < M
        cmask = cols < N
    mask = rmask[:, None] & cmask[None, :]
    if FLAT:
        xrow = rows * sx0
    else:
        # x [D0, D1, D2, N] with any strides: row r = (i0 * D1 + i1) * D2 + i2
        i2 = rows % D2
        i01 = rows // D2
        xrow = (i01 // D1) * sx0 + (i01 % D1) * sx1 + i2 * sx2
    x = tl.load(x_ptr + xrow[:, None] + cols[None, :] * sxn, mask=mask, other=0.0,
                eviction_policy="evict_first" if HINT else "").to(tl.float32)

    if IS_RMS:
        xc = x
    else:
        mean = tl.sum(x, axis=1) / N
        xc = tl.where(mask, x - mean[:, None], 0.0)
    var = tl.sum(xc * xc, axis=1) / N
    rstd = _rstd(var, eps, FAST)
    y = xc * rstd[:, None]
    if HAS_W:
        w = tl.load(w_ptr + cols, mask=cmask, other=0.0).to(tl.float32)
        y = y * w[None, :]
    if HAS_B:
        b = tl.load(b_ptr + cols, mask=cmask, other=0.0).to(tl.float32)
        y = y + b[None, :]
    tl.store(y_ptr + rows[:, None] * sym + cols[None, :] * syn, y.to(y_ptr.dtype.element_ty), mask=mask,
             eviction_policy="evict_first" if HINT else "")


@triton.jit
def _ld(xo, sxn, j: tl.constexpr, N, C: tl.constexpr, MASKED: tl.constexpr):
    cols = j * C + tl.arange(0, C)
    if MASKED:
        return tl.load(xo + cols * sxn, mask=cols < N, other=0.0).to(tl.float32)
    return tl.load(xo + cols * sxn).to(tl.float32)


@triton.jit
def _sub(v, mean, CEN: tl.constexpr):
    # x - mean with the mean held in CEN. For fp32 rows an fp32 mean is off by up to half its ulp (8e-6 near 140),
    # and x_hat * weight carries that error times weight / std: with a Cauchy-tailed weight near 3000 that is a
    # tenth of the fp32 tolerance on outputs near 0 (reg_ln_fp32_m16_n5120_large failed the 2x-baseline rule, H200).
    if CEN == tl.float32:
        return v - mean
    return (v.to(CEN) - mean).to(tl.float32)


@triton.jit
def _centred(v, mean, j: tl.constexpr, N, C: tl.constexpr, MASKED: tl.constexpr, CEN: tl.constexpr):
    if MASKED:
        cols = j * C + tl.arange(0, C)
        return tl.where(cols < N, _sub(v, mean, CEN), 0.0)
    return _sub(v, mean, CEN)


@triton.jit
def _st(yo, v, mean, rstd, w_ptr, b_ptr, syn, j: tl.constexpr, N, C: tl.constexpr, MASKED: tl.constexpr,
        HAS_W: tl.constexpr, HAS_B: tl.constexpr, CEN: tl.constexpr):
    cols = j * C + tl.arange(0, C)
    y = _sub(v, mean, CEN) * rstd
    if MASKED:
        cmask = cols < N
        if HAS_W:
            y = y * tl.load(w_ptr + cols, mask=cmask, other=0.0).to(tl.float32)
        if HAS_B:
            y = y + tl.load(b_ptr + cols, mask=cmask, other=0.0).to(tl.float32)
        tl.store(yo + cols * syn, y.to(yo.dtype.element_ty), mask=cmask)
    else:
        if HAS_W:
            y = y * tl.load(w_ptr + cols).to(tl.float32)
        if HAS_B:
            y = y + tl.load(b_ptr + cols).to(tl.float32)
        tl.store(yo + cols * syn, y.to(yo.dtype.element_ty))


@triton.jit
def _row_norm_chunked_kernel(
    x_ptr, w_ptr, b_ptr, y_ptr,
    N, sx0, sxn, sym, syn,
    eps,
    IS_RMS: tl.constexpr, HAS_W: tl.constexpr, HAS_B: tl.constexpr,
    C: tl.constexpr, K: tl.constexpr, TAIL: tl.constexpr, FAST: tl.constexpr,
):
    """One wide row per program, held in registers as K <= 5 chunks of C lanes (5120 = 5 x 1024) instead of one
    power-of-two block (8192 lanes for 5120, 37.5% of them masked): fewer registers per thread, so more rows in
    flight per SM. Only the last chunk can be masked (TAIL)."""
    M0: tl.constexpr = TAIL and K == 1
    M1: tl.constexpr = TAIL and K == 2
    M2: tl.constexpr = TAIL and K == 3
    M3: tl.constexpr = TAIL and K == 4
    M4: tl.constexpr = TAIL and K == 5
    row = tl.program_id(0).to(tl.int64)
    xo = x_ptr + row * sx0
    yo = y_ptr + row * sym
    v0 = _ld(xo, sxn, 0, N, C, M0)
    if K > 1:
        v1 = _ld(xo, sxn, 1, N, C, M1)
    if K > 2:
        v2 = _ld(xo, sxn, 2, N, C, M2)
    if K > 3:
        v3 = _ld(xo, sxn, 3, N, C, M3)
    if K > 4:
        v4 = _ld(xo, sxn, 4, N, C, M4)
    # fp32 rows (judged at 1e-5 against an fp64 oracle) take their sums in fp64, rounded once: summed in fp32, the
    # mean of a row near 1e4 drifted enough to fail the 2x-baseline error rule (reg_ln_fp32_m16_n5120_large).
    ACC: tl.constexpr = tl.float32 if FAST else tl.float64
    CEN: tl.constexpr = tl.float32 if FAST or IS_RMS else tl.float64  # the mean's precision (see _sub)
    mean = 0.0
    if not IS_RMS:
        t = v0.to(ACC)
        if K > 1:
            t += v1.to(ACC)
        if K > 2:
            t += v2.to(ACC)
        if K > 3:
            t += v3.to(ACC)
        if K > 4:
            t += v4.to(ACC)
        mean = tl.sum(t, axis=0) / N
    c = _centred(v0, mean, 0, N, C, M0, CEN)
    q = (c * c).to(ACC)
    if K > 1:
        c = _centred(v1, mean, 1, N, C, M1, CEN)
        q += (c * c).to(ACC)
    if K > 2:
        c = _centred(v2, mean, 2, N, C, M2, CEN)
        q += (c * c).to(ACC)
    if K > 3:
        c = _centred(v3, mean, 3, N, C, M3, CEN)
        q += (c * c).to(ACC)
    if K > 4:
        c = _centred(v4, mean, 4, N, C, M4, CEN)
        q += (c * c).to(ACC)
    rstd = _rstd((tl.sum(q, axis=0) / N).to(tl.float32), eps, FAST)
    _st(yo, v0, mean, rstd, w_ptr, b_ptr, syn, 0, N, C, M0, HAS_W, HAS_B, CEN)
    if K > 1:
        _st(yo, v1, mean, rstd, w_ptr, b_ptr, syn, 1, N, C, M1, HAS_W, HAS_B, CEN)
    if K > 2:
        _st(yo, v2, mean, rstd, w_ptr, b_ptr, syn, 2, N, C, M2, HAS_W, HAS_B, CEN)
    if K > 3:
        _st(yo, v3, mean, rstd, w_ptr, b_ptr, syn, 3, N, C, M3, HAS_W, HAS_B, CEN)
    if K > 4:
        _st(yo, v4, mean, rstd, w_ptr, b_ptr, syn, 4, N, C, M4, HAS_W, HAS_B, CEN)


def _chunks(N: int):
    """(C, K): K <= 5 chunks of C lanes (a power of two, 256 or more) covering N with the least padding."""
    best = None
    c = 256
    while c <= 16384:
        k = cdiv(N, c)
        if k <= 5 and (best is None or (k * c - N, -c) < best[0]):
            best = ((k * c - N, -c), c, k)
        c *= 2
    return best[1], best[2]


def _row_layout(x: torch.Tensor):
    """(rows, D1, D2, sx0, sx1, sx2, flat) for x [..., N]: the leading dims as at most three strided dims."""
    lead = [(n, s) for n, s in zip(x.shape[:-1], x.stride()[:-1]) if n != 1]
    rows = 1
    for n, _ in lead:
        rows *= n
    # Merge neighbours whose strides nest (stride[i] == stride[i+1] * size[i+1]).
    merged = []
    for n, s in lead:
        if merged and merged[-1][1] == s * n:
            merged[-1] = (merged[-1][0] * n, s)
        else:
            merged.append((n, s))
    if len(merged) <= 1:
        s = merged[0][1] if merged else 0
        return rows, 1, 1, s, 0, 0, True
    if len(merged) > 3:
        raise ValueError(f"x of shape {tuple(x.shape)} and strides {x.stride()} has more than three independent "
                         f"leading dimensions; pass a tensor whose leading dimensions merge into at most three")
    while len(merged) < 3:
        merged.insert(0, (1, 0))
    (_, s0), (d1, s1), (d2, s2) = merged
    return rows, d1, d2, s0, s1, s2, False


def _plan(x, w, b, y2d_strides, is_rms):
    N = x.shape[-1]
    if N > 65536 // x.element_size():
        raise RuntimeError("This layer norm doesn't support feature dim >= 64KB.")
    rows, d1, d2, s0, s1, s2, flat = _row_layout(x)
    if rows == 0 or N == 0:
        return None
    block_n = next_pow2(N)
    block_m, num_warps, hint, chunked = _layout(rows, N, block_n)
    dtypes = (x.dtype, (w if w is not None else x).dtype, (b if b is not None else x).dtype) + (x.dtype,)
    fast = x.dtype != torch.float32
    if chunked and flat:
        C, K = _chunks(N)
        return Plan((rows, 1, 1), dtypes, (N, s0, x.stride(-1), y2d_strides[0], y2d_strides[1]),
                    (bool(is_rms), w is not None, b is not None, C, K, K * C != N, fast), num_warps), _launch_chunked
    even = rows % block_m == 0 and N == block_n
    return Plan((cdiv(rows, block_m), 1, 1), dtypes,
                (rows, N, d1, d2, s0, s1, s2, x.stride(-1), y2d_strides[0], y2d_strides[1]),
                (bool(is_rms), w is not None, b is not None, flat, block_m, block_n, hint, even, fast),
                num_warps), _launch


def _layout(rows: int, N: int, block_n: int):
    """(rows per program, warps, streaming hints, chunked: 1 for one row in K chunks of C lanes, 0 for a
    power-of-two tile of rows)."""
    if block_n >= 4096:
        # Wide rows (Helios, 5120 fp32): one row per program in unpadded chunks (see _row_norm_chunked_kernel).
        return 1, 8, False, 1
    # Narrow rows (QK norm, D = 128) pack rows into a program of at most 2K elements (16 rows x 128, as upstream's
    # one-pass kernel does: 4K-element tiles halved occupancy and lost 3% on the 648720-row QK norm), and never so
    # many that fewer than about 512 programs remain: small calls are latency-bound and want every SM busy.
    block_m = max(1, min(2048 // block_n, next_pow2(cdiv(rows, 512))))
    tile = block_m * block_n
    return block_m, 4 if tile <= 4096 else (8 if tile <= 8192 else 16), False, 0


# Launch plans by input signature: a repeated call (the production case) skips the layout analysis. At most
# _PLANS_MAX, first in first out: a server meets a few signatures, a sweep many (kda rules: bounded caches).
_plans = {}
_PLANS_MAX = 256


def _norm(x, w, b, y2d_strides, y, eps, is_rms):
    key = (x.shape, x.stride(), x.dtype, None if w is None else w.dtype, None if b is None else b.dtype,
           y2d_strides, is_rms)
    plan = _plans.get(key, False)
    if plan is False:
        if len(_plans) >= _PLANS_MAX:
            del _plans[next(iter(_plans))]
        plan = _plans[key] = _plan(x, w, b, y2d_strides, is_rms)
    if plan is not None:
        plan[1].run(plan[0], (x, w if w is not None else x, b if b is not None else x, y), (float(eps),))


def _check_vector(t, N, name):
    if t is not None and (tuple(t.shape) != (N,) or (N > 1 and t.stride(0) != 1)):
        raise ValueError(f"{name} must be a contiguous [{N}] vector, got shape {tuple(t.shape)} stride {t.stride()}")


def norm_infer(x, weight, bias, eps, is_rms_norm=False, out=None):
    """Drop-in for sglang's norm_infer: LayerNorm (or RMSNorm) over the rows of x [M, N]; out optional."""
    if x.dim() != 2:
        raise ValueError(f"x must be [M, N], got shape {tuple(x.shape)}")
    M, N = x.shape
    _check_vector(weight, N, "weight")
    _check_vector(bias, N, "bias")
    if out is None:
        out = torch.empty((M, N), dtype=x.dtype, device=x.device)
    elif tuple(out.shape) != (M, N) or out.dtype != x.dtype:
        raise ValueError("out must have x's shape and dtype")
    _norm(x, weight, bias, (out.stride(0), out.stride(1)), out, eps, is_rms_norm)
    return out


def triton_one_pass_rms_norm(x, w, eps=1e-6, *, out=None):
    """Drop-in for sglang's triton_one_pass_rms_norm: x * rsqrt(mean(x^2) + eps) * w over the last dim; out optional."""
    D = x.shape[-1]
    _check_vector(w, D, "w")
    if out is None:
        out = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    elif tuple(out.shape) != tuple(x.shape) or out.dtype != x.dtype or not out.is_contiguous():
        raise ValueError("out must be a contiguous tensor with x's shape and dtype")
    _norm(x, w, None, (D, 1), out, eps, True)
    return out


_launch = LaunchCache(_row_norm_kernel)
_launch_chunked = LaunchCache(_row_norm_chunked_kernel)
