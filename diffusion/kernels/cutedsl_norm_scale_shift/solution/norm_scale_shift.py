"""Candidate v1 for cutedsl_norm_scale_shift: one Triton kernel for both entry points.

A program owns BLOCK_M whole token rows held in registers (one row for D >= 2048, several for narrow rows so each
thread still moves 16-byte vectors). It reads x (and residual, gate) once, forms r = residual + gate * x in fp32,
writes r, takes fp32 statistics from the registers (centred variance for LayerNorm), and writes
y = norm(r) * (1 + scale) + shift once. Unlike upstream it does not round r or the normalised value to x's dtype
before the modulation: only the stored outputs are rounded.

Modulation tensors (scale, shift, gate) are reduced on the host to (batch stride, token stride, frame length), which
covers every form upstream accepts: [1] and [D] (strides 0), [1|B, D], [1|B, 1|S, D] and per-frame [B, F, 1, D]
(token s reads frame s // (S / F)); no broadcast copy is ever made. The host path only reads shapes and strides and
launches the cached compiled kernel (kda.lean_launch), because on the small rows (Qwen text, 19-55 tokens) the
launch path is the cost.
"""
import torch
import triton
import triton.language as tl

from kda.lean_launch import LaunchCache, cdiv, next_pow2

_DTYPES = (torch.float16, torch.bfloat16, torch.float32)


@triton.jit
def _nss_kernel(
    y_ptr, ro_ptr, x_ptr, r_ptr, g_ptr, w_ptr, b_ptr, sc_ptr, sh_ptr,
    M, S, D,
    sxb, sxs, srb, srs, syb, sys_, sob, sos,
    gb, gs, gf, scb, scs, scf, shb, shs, shf,
    eps,
    IS_LN: tl.constexpr, HAS_RES: tl.constexpr, G_KIND: tl.constexpr, SC_KIND: tl.constexpr,
    SH_KIND: tl.constexpr, HAS_W: tl.constexpr, HAS_B: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_D: tl.constexpr,
):
    rows = tl.program_id(0).to(tl.int64) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.arange(0, BLOCK_D)
    rmask = rows < M
    cmask = cols < D
    mask = rmask[:, None] & cmask[None, :]
    bi = rows // S
    si = rows % S
    v = tl.load(x_ptr + (bi * sxb + si * sxs)[:, None] + cols[None, :], mask=mask, other=0.0).to(tl.float32)
    if HAS_RES:
        if G_KIND == 1:
            g = tl.load(g_ptr + (bi * gb + (si // gf) * gs), mask=rmask, other=0.0).to(tl.float32)
            v = v * g[:, None]
        elif G_KIND == 2:
            g = tl.load(g_ptr + (bi * gb + (si // gf) * gs)[:, None] + cols[None, :], mask=mask, other=0.0)
            v = v * g.to(tl.float32)
        res = tl.load(r_ptr + (bi * srb + si * srs)[:, None] + cols[None, :], mask=mask, other=0.0)
        v = v + res.to(tl.float32)
        tl.store(ro_ptr + (bi * sob + si * sos)[:, None] + cols[None, :], v.to(ro_ptr.dtype.element_ty), mask=mask)

    if IS_LN:
        # The centred values' own sum corrects the mean's rounding error: fp32 rows with a large common offset
        # otherwise came out at 2x the baseline's error (H200, results of 76c2aeb).
        mean = tl.sum(v, axis=1) / D
        mean += tl.sum(tl.where(mask, v - mean[:, None], 0.0), axis=1) / D
        v = tl.where(mask, v - mean[:, None], 0.0)
    rstd = tl.math.div_rn(1.0, tl.math.sqrt_rn(tl.sum(v * v, axis=1) / D + eps))
    n = v * rstd[:, None]
    if HAS_W:
        n = n * tl.load(w_ptr + cols, mask=cmask, other=0.0).to(tl.float32)[None, :]
    if HAS_B:
        n = n + tl.load(b_ptr + cols, mask=cmask, other=0.0).to(tl.float32)[None, :]

    if SC_KIND == 1:
        sc = tl.load(sc_ptr + (bi * scb + (si // scf) * scs), mask=rmask, other=0.0).to(tl.float32)[:, None]
    else:
        sc = tl.load(sc_ptr + (bi * scb + (si // scf) * scs)[:, None] + cols[None, :], mask=mask, other=0.0)
        sc = sc.to(tl.float32)
    if SH_KIND == 1:
        sh = tl.load(sh_ptr + (bi * shb + (si // shf) * shs), mask=rmask, other=0.0).to(tl.float32)[:, None]
    else:
        sh = tl.load(sh_ptr + (bi * shb + (si // shf) * shs)[:, None] + cols[None, :], mask=mask, other=0.0)
        sh = sh.to(tl.float32)
    y = n * (1.0 + sc) + sh
    tl.store(y_ptr + (bi * syb + si * sys_)[:, None] + cols[None, :], y.to(y_ptr.dtype.element_ty), mask=mask)


_launch = LaunchCache(_nss_kernel)


def _check_float(t, what):
    if t.dtype not in _DTYPES:
        raise ValueError(f"{what}: unsupported dtype {t.dtype}")
    if t.stride(-1) != 1:
        raise ValueError(f"{what}: not contiguous on dim D")


def _modulation(t, B, S, D, what):
    """(tensor, batch stride, token stride, frame length, kind) with kind 1 = one value, 2 = a row of D values."""
    _check_float(t, what)
    shape, st = t.shape, t.stride()
    nd = len(shape)
    if nd == 1 and shape[0] in (1, D):
        return t, 0, 0, 1, (1 if shape[0] == 1 else 2)
    if nd == 2 and shape[0] in (1, B) and shape[1] == D:
        return t, (st[0] if shape[0] > 1 else 0), 0, 1, 2
    if nd == 3 and shape[0] in (1, B) and shape[1] in (1, S) and shape[2] == D:
        return t, (st[0] if shape[0] > 1 else 0), (st[1] if shape[1] > 1 else 0), 1, 2
    if nd == 4 and shape[0] == B and shape[2] == 1 and shape[3] == D:
        if S % shape[1] != 0:
            raise ValueError(f"{what}: S ({S}) must be divisible by F ({shape[1]})")
        return t, (st[0] if B > 1 else 0), st[1], S // shape[1], 2
    raise ValueError(f"{what}: unsupported tensor shape {tuple(shape)}")


def _vector(t, D, what):
    if t is None:
        return None
    _check_float(t, what)
    if tuple(t.shape) != (D,):
        raise ValueError(f"{what}: unsupported tensor shape {tuple(t.shape)}")
    return t


def _run(x, residual, gate, weight, bias, scale, shift, norm_type, eps, out, residual_out):
    if norm_type not in ("layer", "rms"):
        raise ValueError('norm_type must be one of "layer" and "rms"')
    if x.dim() != 3:
        raise ValueError(f"x: unsupported tensor shape {tuple(x.shape)}")
    B, S, D = x.shape
    _check_float(x, "x")
    if D % 256 != 0 or D > 8192:
        raise ValueError(f"D={D} not supported, must be multiple of 256 and <= 8192")
    weight, bias = _vector(weight, D, "weight"), _vector(bias, D, "bias")
    sc = _modulation(scale, B, S, D, "scale")
    sh = _modulation(shift, B, S, D, "shift")
    if out is None:
        out = torch.empty_like(x)
    tensors_res = (x, x, 0, 0, 0, 0)
    g = (x, 0, 0, 1, 0)
    if residual is not None:
        _check_float(residual, "residual")
        if tuple(residual.shape) != (B, S, D):
            raise ValueError(f"residual: unsupported tensor shape {tuple(residual.shape)}")
        if residual_out is None:
            residual_out = torch.empty_like(x)
        tensors_res = (residual, residual_out, residual.stride(0), residual.stride(1), residual_out.stride(0),
                       residual_out.stride(1))
        if gate is not None:
            g = _modulation(gate, B, S, D, "gate")
    M = B * S
    if M == 0:
        return out, residual_out
    is_ln = norm_type == "layer"
    # Upstream's LayerNorm applies its affine only when both weight and bias are given; its RMS path has no bias.
    has_w = weight is not None and (bias is not None or not is_ln)
    has_b = is_ln and weight is not None and bias is not None
    block_d = next_pow2(D)
    block_m = max(1, 2048 // block_d)
    # 8 warps for a padded 8K row (D 5120), as norm_infer's LayerNorm streams Helios rows at 3.9 TB/s; 16 warps (v1)
    # reached 2.4 TB/s on the Wan and MOVA rows, 0.89x of upstream by graph_us (H200, results of 76c2aeb).
    tile = block_m * block_d
    num_warps = 4 if tile <= 4096 else (8 if tile <= 8192 else 16)
    res, ro = tensors_res[0], tensors_res[1]
    _launch(
        (cdiv(M, block_m), 1, 1),
        (out, ro, x, res, g[0], weight if has_w else x, bias if has_b else x, sc[0], sh[0]),
        (M, S, D, x.stride(0), x.stride(1), tensors_res[2], tensors_res[3], out.stride(0), out.stride(1),
         tensors_res[4], tensors_res[5], g[1], g[2], g[3], sc[1], sc[2], sc[3], sh[1], sh[2], sh[3]),
        (float(eps),),
        (is_ln, residual is not None, g[4], sc[4], sh[4], has_w, has_b, block_m, block_d),
        num_warps,
    )
    return out, residual_out


def fused_norm_scale_shift(x, weight, bias, scale, shift, norm_type, eps=1e-5, *, out=None):
    """norm(x) * (1 + scale) + shift; upstream's signature plus `out=`."""
    return _run(x, None, None, weight, bias, scale, shift, norm_type, eps, out, None)[0]


def fused_scale_residual_norm_scale_shift(residual, x, gate, weight, bias, scale, shift, norm_type, eps=1e-5, *,
                                          out=None, residual_out=None):
    """r = residual + gate * x (gate None: 1); y = norm(r) * (1 + scale) + shift; returns (y, r)."""
    return _run(x, residual, gate, weight, bias, scale, shift, norm_type, eps, out, residual_out)
