"""Candidate v2 for fuse_scale_shift: one streaming pass, fp32 math, any broadcast form through strides.

v1 (why it beats upstream on large rows): upstream tiles 128 x 128 elements over (L, C) per batch with 196 registers
per thread and 11% occupancy; here a tile covers whole 16-byte vectors along C, rows are flattened over B*L, and x,
shift and y are marked evict-first so broadcast modulation stays in L2 (63 registers, 41% occupancy, 4.1 TB/s on the
largest Wan row under Nsight Compute).
v2: loading broadcast modulation straight into the 2-D tile layout (to avoid v1's layout-conversion barrier) made
the largest row slower (561 -> 599 us under Nsight Compute): reverted. Kept: the launch skips Triton's per-call
argument binding once a specialisation is compiled (then solution/launch.py, now kda/runtime/lean_launch.py).
v3: the production forms (x contiguous; each of scale and shift one dense channel vector, a scalar, or laid out
like x) go through a flat 1-D kernel shaped like torch.compile's (1 K elements per program, 4 warps, C a
compile-time constant so the channel index is a multiply-shift), which streamed faster than v1 on every large row
in the same run; other forms keep the 2-D kernel.
v4: the lean launch path never engaged before: Triton 3.6 keeps launch hooks in HookChain objects that are never
None, so every call took Triton's full run(). The cache now tests for installed hooks, and keeps the launcher, the
loaded function and the packed metadata.
v5: the launch cache moved to kda/runtime/lean_launch.py (shared by every task's candidate), and the host code computes
grid sizes with plain integer arithmetic: triton.cdiv and triton.next_power_of_2 are @jit functions whose Python
call path costs microseconds each.
"""
import torch
import triton
import triton.language as tl

from kda.runtime.lean_launch import LaunchCache, cdiv, next_pow2


@triton.jit
def _scale_shift_kernel(
    x_ptr, scale_ptr, shift_ptr, y_ptr,
    n_rows, L, C,
    sc_b, sc_l, sc_c, sc_frame,
    sh_b, sh_l, sh_c, sh_frame,
    scale_constant,
    SCALE_PER_ROW: tl.constexpr, SHIFT_PER_ROW: tl.constexpr, EVEN_C: tl.constexpr,
    BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr,
):
    rows = tl.program_id(0) * BLOCK_R + tl.arange(0, BLOCK_R)
    cols = tl.program_id(1) * BLOCK_C + tl.arange(0, BLOCK_C)
    rmask = rows < n_rows
    if EVEN_C:
        mask = rmask[:, None]
    else:
        mask = rmask[:, None] & (cols < C)[None, :]
    rows64 = rows.to(tl.int64)
    offs = rows64[:, None] * C + cols[None, :]
    x = tl.load(x_ptr + offs, mask=mask, other=0.0, eviction_policy="evict_first").to(tl.float32)

    b = rows64 // L
    l_idx = rows64 % L
    cmask = cols < C
    if SCALE_PER_ROW:
        s_row = b * sc_b + (l_idx // sc_frame) * sc_l
        s = tl.load(scale_ptr + s_row[:, None] + cols[None, :] * sc_c, mask=mask, other=0.0).to(tl.float32)
    else:
        s = tl.load(scale_ptr + cols * sc_c, mask=cmask, other=0.0).to(tl.float32)[None, :]
    if SHIFT_PER_ROW:
        h_row = b * sh_b + (l_idx // sh_frame) * sh_l
        h = tl.load(shift_ptr + h_row[:, None] + cols[None, :] * sh_c, mask=mask, other=0.0,
                    eviction_policy="evict_first").to(tl.float32)
    else:
        h = tl.load(shift_ptr + cols * sh_c, mask=cmask, other=0.0).to(tl.float32)[None, :]

    y = x * (scale_constant + s) + h
    tl.store(y_ptr + offs, y.to(y_ptr.dtype.element_ty), mask=mask, eviction_policy="evict_first")


@triton.jit
def _operand(ptr, offs, col, rs, mask, MODE: tl.constexpr, C: tl.constexpr, HINT: tl.constexpr):
    """One modulation operand of the flat kernel, as fp32 (see _flat_mode for the MODEs)."""
    if MODE == 0:
        v = tl.load(ptr + col, mask=mask, other=0.0)
    elif MODE == 1:
        v = tl.load(ptr + offs, mask=mask, other=0.0, eviction_policy="evict_first" if HINT else "")
    elif MODE == 3:
        v = tl.load(ptr + (offs // C) * rs + col, mask=mask, other=0.0,
                    eviction_policy="evict_first" if HINT else "")
    else:
        v = tl.load(ptr)
    return v.to(tl.float32)


@triton.jit
def _scale_shift_flat_kernel(
    x_ptr, scale_ptr, shift_ptr, y_ptr, numel, scale_rs, shift_rs, scale_constant,
    C: tl.constexpr, SCALE_MODE: tl.constexpr, SHIFT_MODE: tl.constexpr, WIDE: tl.constexpr, BLOCK: tl.constexpr,
    HINT: tl.constexpr, EVEN: tl.constexpr,
):
    """x contiguous; each operand is one channel vector (MODE 0), laid out like x (1), a scalar (2) or one dense
    row of C per token row at a row stride (3: a chunk of a wider [rows, k*C] tensor)."""
    start = tl.program_id(0).to(tl.int64) * BLOCK if WIDE else tl.program_id(0) * BLOCK
    offs = start + tl.arange(0, BLOCK)
    if EVEN:  # numel a multiple of BLOCK: no masks, as torch.compile's kernels when they divide evenly
        mask = tl.full([BLOCK], 1, tl.int1)
    else:
        mask = offs < numel
    col = offs % C  # C is a compile-time constant: a multiply-shift, not a division
    x = tl.load(x_ptr + offs, mask=mask, other=0.0, eviction_policy="evict_first" if HINT else "").to(tl.float32)
    s = _operand(scale_ptr, offs, col, scale_rs, mask, SCALE_MODE, C, HINT)
    h = _operand(shift_ptr, offs, col, shift_rs, mask, SHIFT_MODE, C, HINT)
    y = x * (scale_constant + s) + h
    tl.store(y_ptr + offs, y.to(y_ptr.dtype.element_ty), mask=mask, eviction_policy="evict_first" if HINT else "")


def _flat_mode(t: torch.Tensor, layout, B: int, L: int, C: int):
    """(mode, row stride): 0 one dense channel vector for every row; 1 dense and laid out like x; 2 scalar; 3 a
    dense channel row per token row at a row stride (Wan's scale/shift chunks of one [L, 2C] tensor); None: the
    2-D kernel."""
    sb, sl, sc, sf = layout
    if t.dim() == 0 or (t.dim() == 1 and t.numel() == 1):
        return 2, 0
    rows_vary = (sb != 0 and B > 1) or (sl != 0 and L > 1)
    if not rows_vary and sc == 1:
        return 0, 0
    if sc == 1 and sf == 1 and (L == 1 or sl == C) and (B == 1 or sb == L * C):
        return 1, C  # element (b, l, c) sits at b*L*C + l*C + c, exactly where x's does
    if sc == 1 and sf == 1 and L > 1 and sl > 0 and (B == 1 or sb == L * sl):
        return 3, sl  # element (b, l, c) at (b*L + l) * sl + c
    return None, 0


def _flat_config(numel: int):
    """(elements per program, warps, streaming hints) of the flat kernel. Calls under 1M elements (Qwen text and
    HunyuanVideo's 55-token rows, L2-resident) take 4 elements per thread: 1.6-1.7 against 1.8-1.9 us
    (layout-sweep/d96a417.json). Larger ones take 8 per thread and no eviction hints: timed as `kda bench` times
    them, interleaved with the other arms (graph-placement/b8f561c.json), evict-first x and y cost 3-6% on every
    large row (wan_t2v_s37800 279 against 267 us, torch.compile 267), though back-to-back sweeps of one variant had
    ranked them even."""
    if numel < 1 << 20:
        return 1024, 8, False
    return 1024, 4, False


def _modulation_layout(t: torch.Tensor, B: int, L: int, C: int, name: str):
    """(batch stride, token-row stride, channel stride, tokens per row of t) with 0 for broadcast dimensions."""
    d = t.dim()
    if d == 0 or (d == 1 and t.numel() == 1):
        return 0, 0, 0, 1
    shape, st = t.shape, t.stride()
    if d == 2 and shape[0] in (1, B) and shape[1] == C:
        return (st[0] if shape[0] > 1 else 0), 0, st[1], 1
    if d == 3 and shape[0] in (1, B) and shape[1] in (1, L) and shape[2] == C:
        return (st[0] if shape[0] > 1 else 0), (st[1] if shape[1] > 1 else 0), st[2], 1
    if d == 4 and shape[0] in (1, B) and shape[2] == 1 and shape[3] == C and shape[1] > 0 and L % shape[1] == 0:
        return (st[0] if shape[0] > 1 else 0), st[1], st[3], L // shape[1]
    raise ValueError(f"{name} of shape {tuple(shape)} does not broadcast to x [{B}, {L}, {C}] "
                     f"(accepted: scalar, [B, C], [B|1, L|1, C], [B|1, F, 1, C] with F dividing L)")


def _launch_config(n_rows: int, C: int):
    block_c = min(next_pow2(C), 1024)
    # About 8K elements per program on large rows (32 per thread at 8 warps: four 16-byte loads in flight per
    # tensor); smaller tiles when there are too few rows to give every SM a program.
    per_program = 8192 if n_rows * C >= 8192 * 132 * 2 else 2048
    block_r = max(1, min(next_pow2(n_rows), per_program // block_c))
    num_warps = 8 if block_r * block_c >= 8192 else 4
    return block_r, block_c, num_warps


def fuse_scale_shift_kernel(x, scale, shift, scale_constant=1.0, block_l=128, block_c=128, *, out=None):
    """Drop-in for sglang's fuse_scale_shift_kernel (block_l/block_c are accepted and ignored); `out` is optional."""
    if x.dim() != 3:
        raise ValueError(f"x must be [B, L, C], got shape {tuple(x.shape)}")
    if not x.is_contiguous():
        raise ValueError("x must be contiguous (upstream requires it too)")
    B, L, C = x.shape
    if out is None:
        out = torch.empty_like(x)
    elif out.shape != x.shape or out.dtype != x.dtype or not out.is_contiguous():
        raise ValueError("out must be a contiguous tensor with x's shape and dtype")
    n_rows = B * L
    if n_rows == 0 or C == 0:
        return out
    s_layout = _modulation_layout(scale, B, L, C, "scale")
    h_layout = _modulation_layout(shift, B, L, C, "shift")
    (s_mode, s_rs), (h_mode, h_rs) = _flat_mode(scale, s_layout, B, L, C), _flat_mode(shift, h_layout, B, L, C)
    if s_mode is not None and h_mode is not None:
        # The common production forms: one flat stream, as torch.compile lays it out.
        numel = n_rows * C
        block, warps, hint = _flat_config(numel)
        wide = max(numel, n_rows * s_rs, n_rows * h_rs) >= 2**31 - block  # int64 offsets past 2^31
        _launch_flat((cdiv(numel, block), 1, 1), (x, scale, shift, out), (numel, s_rs, h_rs),
                     (float(scale_constant),), (C, s_mode, h_mode, wide, block, hint, numel % block == 0), warps)
        return out
    sb, sl, sc, sf = s_layout
    hb, hl, hc, hf = h_layout
    block_r, block_cols, num_warps = _launch_config(n_rows, C)
    grid = (cdiv(n_rows, block_r), cdiv(C, block_cols), 1)
    constexprs = ((sb != 0 and B > 1) or (sl != 0 and L > 1), (hb != 0 and B > 1) or (hl != 0 and L > 1),
                  C % block_cols == 0, block_r, block_cols)
    _launch(grid, (x, scale, shift, out), (n_rows, L, C, sb, sl, sc, sf, hb, hl, hc, hf), (float(scale_constant),),
            constexprs, num_warps)
    return out


_launch = LaunchCache(_scale_shift_kernel)
_launch_flat = LaunchCache(_scale_shift_flat_kernel)
