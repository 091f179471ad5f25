"""Candidate v4 for cutedsl_norm_tanh_mul_add: one Triton kernel for both entry points.

A program owns BLOCK_M whole token rows in registers (one row for D >= 2048, several for narrow rows so each thread
still moves 16-byte vectors). It reads x once, takes fp32 statistics from the registers, writes
y = norm(x) * tanh(scale) + shift and, for the _norm_scale form, normalises y again from the same registers and
writes y2 = norm(y) * (1 + scale2): x is read once and each output written once. The second norm works on the fp32 y,
not on y rounded to x's dtype as upstream does.

tanh comes from exp of a non-positive argument, t = exp(-2|z|), tanh(z) = sign(z) (1 - t) / (1 + t): it never
overflows. 16-bit rows take it in fp32; fp32 rows (judged at 1e-5 against an fp64 oracle) take it in fp64 (v3).
scale, shift and scale2 are [1|B, 1|S, D]; their broadcast dimensions become zero strides on the host, so nothing is
expanded or copied. The host path reads shapes and strides only and launches the cached compiled kernel
(kda.runtime.lean_launch).

v4: the loads carry L2 eviction policies by form (`_EVICTION`): evict_last on the _norm_scale form, evict_first on the
plain one.
"""
import torch
import triton
import triton.language as tl

from kda.runtime.lean_launch import LaunchCache, cdiv, next_pow2

_DTYPES = (torch.float16, torch.bfloat16, torch.float32)


@triton.jit
def _norm_rows(v, w_ptr, b_ptr, cols, mask, cmask, D, eps, IS_LN: tl.constexpr, HAS_W: tl.constexpr,
               HAS_B: tl.constexpr):
    if IS_LN:
        # The centred values' own sum corrects the mean's rounding error: rows with a large common offset (an fp32
        # y fed to the second norm) otherwise came out at 2x the baseline's error (H200, results of 76c2aeb).
        mean = tl.sum(v, axis=1) / D
        mean += tl.sum(tl.where(mask, v - mean[:, None], 0.0), axis=1) / D
        v = tl.where(mask, v - mean[:, None], 0.0)
    rstd = tl.math.div_rn(1.0, tl.math.sqrt_rn(tl.sum(v * v, axis=1) / D + eps))
    n = v * rstd[:, None]
    if HAS_W:
        n = n * tl.load(w_ptr + cols, mask=cmask, other=0.0).to(tl.float32)[None, :]
    if HAS_B:
        n = n + tl.load(b_ptr + cols, mask=cmask, other=0.0).to(tl.float32)[None, :]
    return n


@triton.jit
def _ntma_kernel(
    y_ptr, y2_ptr, x_ptr, w_ptr, b_ptr, sc_ptr, sh_ptr, w2_ptr, b2_ptr, sc2_ptr,
    M, S, D,
    sxb, sxs, syb, sys_, s2b, s2s, scb, scs, shb, shs, c2b, c2s,
    eps,
    IS_LN: tl.constexpr, HAS_W: tl.constexpr, HAS_B: tl.constexpr, NORM2: tl.constexpr, HAS_W2: tl.constexpr,
    HAS_B2: tl.constexpr, PRECISE: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_D: tl.constexpr,
    EARLY: tl.constexpr, EV_X: tl.constexpr, EV_MOD: tl.constexpr,
):
    rows = tl.program_id(0).to(tl.int64) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.arange(0, BLOCK_D)
    rmask = rows < M
    cmask = cols < D
    mask = rmask[:, None] & cmask[None, :]
    bi = rows // S
    si = rows % S
    x = tl.load(x_ptr + (bi * sxb + si * sxs)[:, None] + cols[None, :], mask=mask, other=0.0,
                eviction_policy=EV_X).to(tl.float32)
    if EARLY:
        # scale and shift issued with x, ahead of the first reduction: one DRAM round trip before the row's first
        # store instead of two (ncu, zimage rows on the H100: long_scoreboard is the top stall, at 47% occupancy)
        z = tl.load(sc_ptr + (bi * scb + si * scs)[:, None] + cols[None, :], mask=mask, other=0.0,
                    eviction_policy=EV_MOD)
        sh_raw = tl.load(sh_ptr + (bi * shb + si * shs)[:, None] + cols[None, :], mask=mask, other=0.0,
                         eviction_policy=EV_MOD)
    n = _norm_rows(x, w_ptr, b_ptr, cols, mask, cmask, D, eps, IS_LN, HAS_W, HAS_B)
    if not EARLY:
        z = tl.load(sc_ptr + (bi * scb + si * scs)[:, None] + cols[None, :], mask=mask, other=0.0,
                    eviction_policy=EV_MOD)
    if PRECISE:
        # fp64 exp (libdevice on the GPU): near z = 0, 1 - t cancels, and an fp32 ex2.approx left tanh several ulps
        # off, which the second norm amplifies in y2 (reg_tman_fp32_layer_affine, H200 ca2f94a).
        z = z.to(tl.float64)
    else:
        z = z.to(tl.float32)
    t = tl.exp(-2.0 * tl.abs(z))
    th = (1.0 - t) / (1.0 + t)
    th = tl.where(z < 0, -th, th).to(tl.float32)
    if not EARLY:
        sh_raw = tl.load(sh_ptr + (bi * shb + si * shs)[:, None] + cols[None, :], mask=mask, other=0.0,
                         eviction_policy=EV_MOD)
    y = n * th + sh_raw.to(tl.float32)
    tl.store(y_ptr + (bi * syb + si * sys_)[:, None] + cols[None, :], y.to(y_ptr.dtype.element_ty), mask=mask)
    if NORM2:
        y = tl.where(mask, y, 0.0)
        n2 = _norm_rows(y, w2_ptr, b2_ptr, cols, mask, cmask, D, eps, IS_LN, HAS_W2, HAS_B2)
        c2 = tl.load(sc2_ptr + (bi * c2b + si * c2s)[:, None] + cols[None, :], mask=mask, other=0.0,
                     eviction_policy=EV_MOD)
        y2 = n2 * (1.0 + c2.to(tl.float32))
        tl.store(y2_ptr + (bi * s2b + si * s2s)[:, None] + cols[None, :], y2.to(y2_ptr.dtype.element_ty), mask=mask)


_launch = LaunchCache(_ntma_kernel)


def _check_float(t, what):
    if t.dtype not in _DTYPES:
        raise ValueError(f"{what}: unsupported dtype {t.dtype}")
    if t.stride(-1) != 1:
        raise ValueError(f"{what}: not contiguous on dim D")


def _bsd(t, B, S, D, what):
    """(batch stride, token stride) of a [1|B, 1|S, D] tensor, zero along its broadcast dimensions."""
    _check_float(t, what)
    shape = t.shape
    if len(shape) != 3 or shape[0] not in (1, B) or shape[1] not in (1, S) or shape[2] != D:
        raise ValueError(f"{what}: unsupported 3d-tensor: {tuple(shape)}")
    return (t.stride(0) if shape[0] > 1 else 0), (t.stride(1) if shape[1] > 1 else 0)


def _vector(t, D, what):
    if t is not None:
        _check_float(t, what)
        if tuple(t.shape) != (D,):
            raise ValueError(f"{what}: unsupported tensor shape {tuple(t.shape)}")
    return t


def _affine(weight, bias, is_ln):
    """Upstream's LayerNorm applies its affine only when both weight and bias are given; its RMS path has no bias."""
    if is_ln:
        both = weight is not None and bias is not None
        return both, both
    return weight is not None, False


_EARLY_LOADS = False  # scale and shift loaded with x (an untimed variant: scripts/layout_sweep.py `early_*`)
# v4: L2 eviction policies of the loads of x and of the modulation tensors, by form (the _norm_scale form or not).
# After cutedsl_norm_scale_shift's v10 (evict_last loads, 1-3%). H200, two sweeps with kernel times
# (docs/profile/h200/layout-sweep/1e14757-evict-1.json, -2.json): evict_last on every load took the _norm_scale rows'
# kernel from 46.3-46.4 to 45.6-45.8 us (s4096) and 47.1-47.3 to 46.6-46.7 (s4128); on the plain rows evict_first on
# every load took 30.3-30.5 to 29.7-30.0 (s4096) and 30.4-30.6 to 29.8-29.9 (s4128), where evict_last moved nothing,
# and evict_first cost the _norm_scale rows 4-5%.
_EVICTION = {True: ("evict_last", "evict_last"), False: ("evict_first", "evict_first")}


def _layout(block_d):
    """(rows per program, warps): whole rows of at least 2K lanes per program, 4 lanes per thread (4 to 16 warps)."""
    block_m = max(1, 2048 // block_d)
    return block_m, max(4, min(16, block_m * block_d // 512))


def _run(x, weight, bias, scale, shift, weight2, bias2, scale2, norm_type, eps, out, out2, norm2):
    if norm_type not in ("layer", "rms"):
        raise ValueError('norm_type must be one of "layer" and "rms"')
    if x.dim() != 3:
        raise ValueError(f"x: unsupported 3d-tensor: {tuple(x.shape)}")
    B, S, D = x.shape
    _check_float(x, "x")
    if D % 256 != 0 or D > 8192:
        raise ValueError(f"D={D} not supported, must be multiple of 256 and <= 8192")
    weight, bias = _vector(weight, D, "weight"), _vector(bias, D, "bias")
    sc, sh = _bsd(scale, B, S, D, "scale"), _bsd(shift, B, S, D, "shift")
    is_ln = norm_type == "layer"
    has_w, has_b = _affine(weight, bias, is_ln)
    if out is None:
        out = torch.empty_like(x)
    if norm2:
        weight2, bias2 = _vector(weight2, D, "weight2"), _vector(bias2, D, "bias2")
        c2 = _bsd(scale2, B, S, D, "scale2")
        has_w2, has_b2 = _affine(weight2, bias2, is_ln)
        if out2 is None:
            out2 = torch.empty_like(x)
        o2 = out2
    else:
        c2, has_w2, has_b2, o2 = (0, 0), False, False, out
    M = B * S
    if M == 0:
        return out, out2
    block_d = next_pow2(D)
    block_m, num_warps = _layout(block_d)
    _launch(
        (cdiv(M, block_m), 1, 1),
        (out, o2, x, weight if has_w else x, bias if has_b else x, scale, shift,
         weight2 if has_w2 else x, bias2 if has_b2 else x, scale2 if norm2 else x),
        (M, S, D, x.stride(0), x.stride(1), out.stride(0), out.stride(1), o2.stride(0), o2.stride(1),
         sc[0], sc[1], sh[0], sh[1], c2[0], c2[1]),
        (float(eps),),
        (is_ln, has_w, has_b, norm2, has_w2, has_b2, x.dtype == torch.float32, block_m, block_d, _EARLY_LOADS,
         *_EVICTION[bool(norm2)]),
        num_warps,
    )
    return out, out2


def fused_norm_tanh_mul_add(x, weight, bias, scale, shift, norm_type, eps=1e-5, *, out=None):
    """norm(x) * tanh(scale) + shift; upstream's signature plus `out=`."""
    return _run(x, weight, bias, scale, shift, None, None, None, norm_type, eps, out, None, False)[0]


def fused_norm_tanh_mul_add_norm_scale(x, weight, bias, scale, shift, weight2, bias2, scale2, norm_type, eps=1e-5, *,
                                       out=None, out2=None):
    """y = norm(x) * tanh(scale) + shift, y2 = norm(y; weight2, bias2) * (1 + scale2); returns (y, y2)."""
    return _run(x, weight, bias, scale, shift, weight2, bias2, scale2, norm_type, eps, out, out2, True)
