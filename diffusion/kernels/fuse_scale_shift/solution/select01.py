"""Candidate s3 for the select01 gate variants (Qwen-Image-Edit-2511's image stream): LayerNorm, then each token
takes scale/shift/gate from set 0 or set 1 by its index, in one pass over memory.

Rows of 1K elements and more (the production rows are 3072 wide) run the row kernel: one row per program, 4 warps as
upstream, the set chosen by one scalar load of the index and a select of base pointers and strides, so each
modulation tensor is a single load; row offsets are 32-bit within the row; the gate, a pure copy, is loaded and
stored before the reduction so its bytes are in flight with x's. Narrow rows pack several per program
(_ln_select01_kernel) and pick each row's set by two predicated loads (only the chosen set's bytes move).
x / residual / residual_gate are read once with evict-first hints and every output is written once. Statistics are
fp32 with a correctly rounded 1/sqrt; the residual form normalises the unrounded fp32 sum as upstream does.
Modulation tensors and the index may have any strides (upstream copies them to contiguous first); x, residual and
residual_gate must be contiguous, as upstream requires.
"""
import torch
import triton
import triton.language as tl

from kda.runtime.lean_launch import LaunchCache, cdiv, next_pow2


@triton.jit
def _ln_select01_kernel(
    x_ptr, res_ptr, rg_ptr, w_ptr, b_ptr,
    s0_ptr, h0_ptr, g0_ptr, s1_ptr, h1_ptr, g1_ptr, idx_ptr,
    y_ptr, r_out_ptr, g_out_ptr,
    n_rows, L, C,
    s0_b, s0_c, h0_b, h0_c, g0_b, g0_c,
    s1_b, s1_c, h1_b, h1_c, g1_b, g1_c,
    i_b, i_l, w_c, b_c,
    eps,
    RESIDUAL: tl.constexpr, HAS_W: tl.constexpr, HAS_B: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
):
    rows = tl.program_id(0).to(tl.int64) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.arange(0, BLOCK_N)
    rmask = rows < n_rows
    cmask = cols < C
    mask = rmask[:, None] & cmask[None, :]
    offs = rows[:, None] * C + cols[None, :]

    v = tl.load(x_ptr + offs, mask=mask, other=0.0, eviction_policy="evict_first").to(tl.float32)
    if RESIDUAL:
        res = tl.load(res_ptr + offs, mask=mask, other=0.0, eviction_policy="evict_first").to(tl.float32)
        rg = tl.load(rg_ptr + offs, mask=mask, other=0.0, eviction_policy="evict_first").to(tl.float32)
        v = res + rg * v
        tl.store(r_out_ptr + offs, v.to(r_out_ptr.dtype.element_ty), mask=mask, eviction_policy="evict_first")

    mean = tl.sum(v, axis=1) / C
    vc = tl.where(mask, v - mean[:, None], 0.0)
    var = tl.sum(vc * vc, axis=1) / C
    rstd = tl.math.div_rn(1.0, tl.math.sqrt_rn(var + eps))
    n = vc * rstd[:, None]
    if HAS_W:
        n = n * tl.load(w_ptr + cols * w_c, mask=cmask, other=0.0).to(tl.float32)[None, :]
    if HAS_B:
        n = n + tl.load(b_ptr + cols * b_c, mask=cmask, other=0.0).to(tl.float32)[None, :]

    bi = rows // L
    li = rows - bi * L
    pick = tl.load(idx_ptr + bi * i_b + li * i_l, mask=rmask, other=0) != 0
    m1 = mask & pick[:, None]
    m0 = mask & (pick == 0)[:, None]
    b2 = bi[:, None]
    c2 = cols[None, :]
    scale = tl.where(pick[:, None],
                     tl.load(s1_ptr + b2 * s1_b + c2 * s1_c, mask=m1, other=0.0).to(tl.float32),
                     tl.load(s0_ptr + b2 * s0_b + c2 * s0_c, mask=m0, other=0.0).to(tl.float32))
    shift = tl.where(pick[:, None],
                     tl.load(h1_ptr + b2 * h1_b + c2 * h1_c, mask=m1, other=0.0).to(tl.float32),
                     tl.load(h0_ptr + b2 * h0_b + c2 * h0_c, mask=m0, other=0.0).to(tl.float32))
    # The gate is passed through: one cast from its own dtype to the output's, as upstream's store does.
    g_ty = g_out_ptr.dtype.element_ty
    gate = tl.where(pick[:, None],
                    tl.load(g1_ptr + b2 * g1_b + c2 * g1_c, mask=m1, other=0.0).to(g_ty),
                    tl.load(g0_ptr + b2 * g0_b + c2 * g0_c, mask=m0, other=0.0).to(g_ty))
    y = n * (1.0 + scale) + shift
    tl.store(y_ptr + offs, y.to(y_ptr.dtype.element_ty), mask=mask, eviction_policy="evict_first")
    tl.store(g_out_ptr + offs, gate, mask=mask, eviction_policy="evict_first")


@triton.jit
def _ln_select01_row_kernel(
    x_ptr, res_ptr, rg_ptr, w_ptr, b_ptr,
    s0_ptr, h0_ptr, g0_ptr, s1_ptr, h1_ptr, g1_ptr, idx_ptr,
    y_ptr, r_out_ptr, g_out_ptr,
    n_rows, L, C,
    s0_b, s0_c, h0_b, h0_c, g0_b, g0_c,
    s1_b, s1_c, h1_b, h1_c, g1_b, g1_c,
    i_b, i_l, w_c, b_c,
    eps,
    RESIDUAL: tl.constexpr, HAS_W: tl.constexpr, HAS_B: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
):
    """One row per program (rows of 1K and more); the parameters are _ln_select01_kernel's, so both launch alike."""
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK_N)
    mask = cols < C
    base = row * C
    v = tl.load(x_ptr + base + cols, mask=mask, other=0.0, eviction_policy="evict_first").to(tl.float32)
    if RESIDUAL:
        res = tl.load(res_ptr + base + cols, mask=mask, other=0.0, eviction_policy="evict_first").to(tl.float32)
        rg = tl.load(rg_ptr + base + cols, mask=mask, other=0.0, eviction_policy="evict_first").to(tl.float32)
        v = res + rg * v
        tl.store(r_out_ptr + base + cols, v.to(r_out_ptr.dtype.element_ty), mask=mask, eviction_policy="evict_first")
    bi = row // L
    pick = tl.load(idx_ptr + bi * i_b + (row - bi * L) * i_l) != 0
    sp = tl.where(pick, s1_ptr + bi * s1_b, s0_ptr + bi * s0_b)
    hp = tl.where(pick, h1_ptr + bi * h1_b, h0_ptr + bi * h0_b)
    gp = tl.where(pick, g1_ptr + bi * g1_b, g0_ptr + bi * g0_b)
    # The gate is passed through: one cast from its own dtype to the output's, as upstream's store does. Issued
    # before the reduction, so its bytes are in flight with x's.
    gate = tl.load(gp + cols * tl.where(pick, g1_c, g0_c), mask=mask, other=0.0)
    tl.store(g_out_ptr + base + cols, gate.to(g_out_ptr.dtype.element_ty), mask=mask, eviction_policy="evict_first")

    mean = tl.sum(v, axis=0) / C
    vc = tl.where(mask, v - mean, 0.0)
    rstd = tl.math.div_rn(1.0, tl.math.sqrt_rn(tl.sum(vc * vc, axis=0) / C + eps))
    n = vc * rstd
    if HAS_W:
        n = n * tl.load(w_ptr + cols * w_c, mask=mask, other=0.0).to(tl.float32)
    if HAS_B:
        n = n + tl.load(b_ptr + cols * b_c, mask=mask, other=0.0).to(tl.float32)
    scale = tl.load(sp + cols * tl.where(pick, s1_c, s0_c), mask=mask, other=0.0).to(tl.float32)
    shift = tl.load(hp + cols * tl.where(pick, h1_c, h0_c), mask=mask, other=0.0).to(tl.float32)
    y = n * (1.0 + scale) + shift
    tl.store(y_ptr + base + cols, y.to(y_ptr.dtype.element_ty), mask=mask, eviction_policy="evict_first")


def _check_x(x, name="x"):
    if x.dim() != 3:
        raise ValueError(f"{name} must be [B, L, C], got shape {tuple(x.shape)}")
    if not x.is_contiguous():
        raise ValueError(f"{name} must be contiguous (upstream requires it too)")


def _check_sets(tensors, B, C):
    for name, t in tensors:
        if t.dim() != 2 or t.shape[0] != B or t.shape[1] != C:
            raise ValueError(f"{name} must be [B, C] = [{B}, {C}], got shape {tuple(t.shape)}")


def _check_vector(t, C, name):
    if t is not None and (t.dim() != 1 or t.shape[0] != C):
        raise ValueError(f"{name} must be 1-D [{C}] or None, got shape {tuple(t.shape)}")


def _out(buf, x, name):
    if buf is None:
        return torch.empty_like(x)
    if buf.shape != x.shape or buf.dtype != x.dtype or not buf.is_contiguous():
        raise ValueError(f"{name} must be a contiguous tensor with x's shape and dtype")
    return buf


def _launch_config(n_rows, C):
    block_n = next_pow2(C)
    # Narrow rows pack to about 2K elements per program. s1 packed two 3072-wide rows at 16 warps: 84 registers
    # held one CTA per SM, 24% occupancy, 1.1 TB/s, 0.46x of upstream on the Qwen-Image-Edit rows (H200 profile of
    # 76c2aeb).
    block_m = max(1, min(next_pow2(n_rows), 2048 // block_n))
    if block_m == 1:
        return block_m, block_n, _row_warps(block_n)
    return block_m, block_n, max(2, min(16, block_m * block_n // 512))


def _row_warps(block_n):
    # Rows of 1K and more, one per program (the row kernel). s2 gave a 3072-wide row 8 warps at 16 values per thread
    # and lost to upstream by graph_us (0.69x, H200 ca2f94a): 75 registers, 3 rows per SM against upstream's 7 at 4
    # warps. The row kernel needs 62-70 registers at 4 warps, 42-44 at 8 (ptxas, sm_90a).
    return max(4, min(16, block_n // 1024))


def _run(x, residual, residual_gate, weight, bias, sets, index, out, residual_out, gate_out, eps, is_residual):
    B, L, C = x.shape
    if C > 65536 // x.element_size():
        raise RuntimeError("a row wider than 64 KB is not supported (upstream's limit)")
    n_rows = B * L
    if n_rows == 0 or C == 0:
        return
    scale0, shift0, gate0, scale1, shift1, gate1 = sets
    block_m, block_n, num_warps = _launch_config(n_rows, C)
    strides = []
    for t in (scale0, shift0, gate0, scale1, shift1, gate1):
        strides += t.stride()
    w_c = weight.stride(0) if weight is not None else 0
    b_c = bias.stride(0) if bias is not None else 0
    # Absent optional tensors are replaced by x: never read (the constexpr flags turn their loads off).
    launch = _launch_row if block_m == 1 else _launch
    launch((cdiv(n_rows, block_m), 1, 1),
            (x, residual, residual_gate, weight if weight is not None else x, bias if bias is not None else x,
             scale0, shift0, gate0, scale1, shift1, gate1, index, out, residual_out, gate_out),
            (n_rows, L, C, *strides, index.stride(0), index.stride(1), w_c, b_c), (float(eps),),
            (is_residual, weight is not None, bias is not None, block_m, block_n), num_warps)


def _validate(x, weight, bias, sets, index):
    _check_x(x)
    B, L, C = x.shape
    _check_sets(zip(("scale0", "shift0", "gate0", "scale1", "shift1", "gate1"), sets), B, C)
    if index.dim() != 2 or index.shape[0] != B or index.shape[1] != L:
        raise ValueError(f"index must be [B, L] = [{B}, {L}], got shape {tuple(index.shape)}")
    _check_vector(weight, C, "weight")
    _check_vector(bias, C, "bias")


def fuse_layernorm_scale_shift_gate_select01_kernel(x, weight, bias, scale0, shift0, gate0, scale1, shift1, gate1,
                                                    index, eps, *, out=None, gate_out=None):
    """Drop-in for sglang's function of the same name; returns (output, gate_out). `out`/`gate_out` optional."""
    sets = (scale0, shift0, gate0, scale1, shift1, gate1)
    _validate(x, weight, bias, sets, index)
    out, gate_out = _out(out, x, "out"), _out(gate_out, x, "gate_out")
    # Not residual: residual/residual_gate/residual_out slots get x/out, which the kernel never touches then.
    _run(x, x, x, weight, bias, sets, index, out, out, gate_out, eps, False)
    return out, gate_out


def fuse_residual_layernorm_scale_shift_gate_select01_kernel(x, residual, residual_gate, weight, bias, scale0, shift0,
                                                             gate0, scale1, shift1, gate1, index, eps, *, out=None,
                                                             residual_out=None, gate_out=None):
    """Drop-in for sglang's function of the same name; returns (output, residual_out, gate_out), each optional."""
    sets = (scale0, shift0, gate0, scale1, shift1, gate1)
    _validate(x, weight, bias, sets, index)
    for name, t in (("residual", residual), ("residual_gate", residual_gate)):
        _check_x(t, name)
        if t.shape != x.shape:
            raise ValueError(f"{name} must have x's shape {tuple(x.shape)}, got {tuple(t.shape)}")
    out, residual_out, gate_out = _out(out, x, "out"), _out(residual_out, x, "residual_out"), _out(gate_out, x, "gate_out")
    _run(x, residual, residual_gate, weight, bias, sets, index, out, residual_out, gate_out, eps, True)
    return out, residual_out, gate_out


_launch = LaunchCache(_ln_select01_kernel)
_launch_row = LaunchCache(_ln_select01_row_kernel)
