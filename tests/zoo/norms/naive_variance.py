"""Exploit (issue 34, attack 4): a LayerNorm whose variance is E[x^2] - mean^2, summed in one pass over x.

One read of x for both statistics instead of a centred second pass: honest-looking, and exact enough on every
zero-mean workload (randn, uniform, "large"), so it passed every row of the task before the rows with a mean far
above the spread (workloads `dist: "offset"`) existed. There E[x^2] and mean^2 agree in their leading digits and
their difference keeps few: the fake lands 6-13x over the fp32 tolerance. Defence: the offset rows and the tolerance
against the oracle (MISMATCH), applied whether or not the baseline meets its own tolerance there.

norm_infer's entry points, for norm_infer (tests/harness/test_precision_rows.py runs it).
"""
import torch
import triton
import triton.language as tl


@triton.jit
def _ln_one_pass(x_ptr, y_ptr, w_ptr, b_ptr, N, sxm, sxn, sym, eps, HAS_W: tl.constexpr, HAS_B: tl.constexpr,
                 RMS: tl.constexpr, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < N
    x = tl.load(x_ptr + row * sxm + cols * sxn, mask=mask, other=0.0).to(tl.float32)
    mean = tl.sum(x, axis=0) / N
    meansq = tl.sum(x * x, axis=0) / N
    if RMS:
        y = x / tl.sqrt(meansq + eps)
    else:
        y = (x - mean) / tl.sqrt(meansq - mean * mean + eps)  # the cut: no centred pass
    if HAS_W:
        y = y * tl.load(w_ptr + cols, mask=mask, other=1.0).to(tl.float32)
    if HAS_B:
        y = y + tl.load(b_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    tl.store(y_ptr + row * sym + cols, y.to(y_ptr.dtype.element_ty), mask=mask)


def norm_infer(x, weight, bias, eps, is_rms_norm=False, out=None):
    M, N = x.shape
    if out is None:
        out = torch.empty_like(x)
    _ln_one_pass[(M,)](x, out, weight if weight is not None else x, bias if bias is not None else x, N,
                       x.stride(0), x.stride(1), out.stride(0), eps, HAS_W=weight is not None,
                       HAS_B=bias is not None, RMS=bool(is_rms_norm), BLOCK=triton.next_power_of_2(N))
    return out


def triton_one_pass_rms_norm(x, w, eps=1e-6, out=None):
    shape = x.shape
    x2 = x.reshape(-1, shape[-1])
    if out is None:
        out = torch.empty_like(x)
    norm_infer(x2, w, None, eps, is_rms_norm=True, out=out.view(-1, shape[-1]))
    return out
