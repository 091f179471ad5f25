"""Correctness checks: poison, compare against the oracle, NaN/Inf positions, error ratio, input integrity.

Functions here measure; `verdict` in the parent decides. Reason codes are stable strings the exploit-zoo tests
assert on.
"""
from __future__ import annotations

import math

import torch

from kda.definition.workloads import storage_of

INT_POISON = -17
# NaN payloads no arithmetic produces (canonical NaNs differ), so "unwritten" is told from "computed a NaN".
POISON_BITS = {torch.float32: (torch.int32, 0x7FC0DEAD), torch.float16: (torch.int16, 0x7E5A),
               torch.bfloat16: (torch.int16, 0x7FDA), torch.float64: (torch.int64, 0x7FF8DEADBEEF0000)}

# Reason codes (a row fails with one or more of these).
UNWRITTEN = "UNWRITTEN"          # output still holds the poison where the oracle has a finite value
MISMATCH = "MISMATCH"            # |cand - oracle| > atol + rtol*|oracle| somewhere
SPECIALS = "NAN_INF_POSITIONS"   # NaN / Inf not exactly where the oracle has them
PRECISION = "PRECISION"          # error more than k times the baseline's
LAYOUT = "LAYOUT"                # shape, dtype or strides of an output differ from what was expected
INPUT_MUTATED = "INPUT_MUTATED"  # an input not declared in place changed (or an in-place one outside its view)
RETURN = "RETURN"                # the candidate returned something other than its out buffers
FORBIDDEN_CALL = "FORBIDDEN_CALL"
TORCH_KERNEL = "TORCH_KERNEL"
TAMPER = "TAMPER"
STATIC = "STATIC"
CRASH = "CRASH"
TIMEOUT = "TIMEOUT"
INVALID = "INVALID"              # faster than the datasheet memory bandwidth allows
STALE_REPEAT = "STALE_REPEAT"  # called again on unchanged inputs, the candidate did not rewrite an output element the
                              # harness had changed in between (a kernel that skips work it thinks is already done)
UPSTREAM_TAMPERED = "UPSTREAM_TAMPERED"  # upstream's modules, functions, Triton kernels or Triton's launch hooks changed
                                        # after the candidate was imported (guards.UpstreamWatch): the baseline arm
                                        # would not run what SGLang runs
BASELINE_SLOWED = "BASELINE_SLOWED"  # the baseline timed in a process that never imported the candidate ran faster,
                                     # beyond bench.clean_baseline_max_ratio, than beside the candidate
NOT_BITEXACT = "NOT_BITEXACT"  # a `bitexact` candidate's output differs from SGLang's eager chain in some bit
PEER_SLOWED = "PEER_SLOWED"  # the same for today's release (the peer `latest`): timed alone, faster beyond the ratio,
                             # so the candidate's figures over it (best peer, over today's SGLang) were inflated
FORGED = "FORGED"                # a result line the worker did not write or that answers another request (its tag,
                                 # row, sequence number or nonce does not match: the row fails, the worker is replaced),
                                 # or a worker report the parent's own check of the outputs contradicts (recheck.py)


def poison_(t: torch.Tensor, finite: torch.Generator | None = None) -> None:
    """NaN with a private payload (or the integer sentinel); with `finite`, plausible-looking random values instead,
    so a candidate cannot recognise a checked call by its poisoned output."""
    if finite is not None and t.dtype.is_floating_point:
        t.copy_(torch.randn(t.shape, generator=finite, device=t.device) * 1e3)
    elif t.dtype in POISON_BITS:
        int_dt, bits = POISON_BITS[t.dtype]
        t.view(int_dt).fill_(bits)
    elif t.dtype.is_floating_point or t.dtype.is_complex:
        t.fill_(float("nan"))
    elif t.dtype == torch.bool:
        t.fill_(True)
    else:
        t.fill_(INT_POISON)


def unwritten_mask(out: torch.Tensor) -> torch.Tensor | None:
    if out.dtype in POISON_BITS:
        int_dt, bits = POISON_BITS[out.dtype]
        return out.contiguous().view(int_dt) == bits
    if not out.dtype.is_floating_point and out.dtype != torch.bool:
        return out == INT_POISON
    return None


def snapshot_inputs(inputs: dict[str, torch.Tensor | None]) -> dict[str, torch.Tensor]:
    """Bitwise copies of each input's whole storage (gaps included)."""
    return {k: storage_of(t).clone() for k, t in inputs.items() if t is not None}


SHIFT_SCALE, SHIFT_OFFSET = 1.5, 0.25  # the replay check's inputs: other statistics than the workload's (phase 3)


def shift_floats_(inputs: dict[str, torch.Tensor | None]) -> None:
    """Scale and shift every floating-point input in place (x <- 1.5 x + 0.25): values in the same buffers whose
    statistics differ from the workload's, so a result computed from a previous call's state shows. Integer inputs
    (indices, positions) keep their values. A broadcast input (a stride of 0) is shifted once per memory location."""
    for t in inputs.values():
        if t is not None and t.is_floating_point():
            _memory_once(t).mul_(SHIFT_SCALE).add_(SHIFT_OFFSET)


def _memory_once(t: torch.Tensor) -> torch.Tensor:
    """A view of t's memory that names each location once, which in-place ops require: its broadcast dimensions
    (stride 0) narrowed to one element. No other dimensions overlap: workloads refuse such layouts
    (workloads._layout_problem)."""
    for d in range(t.dim()):
        if t.stride(d) == 0 and t.size(d) > 1:
            t = t.narrow(d, 0, 1)
    return t


def restore_views(inputs: dict[str, torch.Tensor | None], snaps: dict[str, torch.Tensor]) -> dict[str, torch.Tensor | None]:
    """The same views as `inputs`, but over the snapshot copies."""
    return {k: (None if t is None else snaps[k].as_strided(t.shape, t.stride(), t.storage_offset()))
            for k, t in inputs.items()}


def mutated_inputs(inputs: dict[str, torch.Tensor | None], snaps: dict[str, torch.Tensor], allowed: list[str]) -> list[str]:
    changed = []
    for k, t in inputs.items():
        if t is None or k in allowed:
            continue
        now = storage_of(t)
        if now.numel() != snaps[k].numel() or not torch.equal(now.view(torch.uint8), snaps[k].view(torch.uint8)):
            changed.append(k)
    return changed


def written_outside_views(inputs: dict[str, torch.Tensor | None], snaps: dict[str, torch.Tensor], names: list[str]) -> list[str]:
    """In-place inputs whose storage changed outside their view (the gaps of a strided view, the offset prefix):
    an in-place op may write its tensor's elements and nothing else."""
    changed = []
    for k in names:
        t = inputs.get(k)
        if t is None:
            continue
        now = storage_of(t).clone()
        # Put the view's own elements back to their snapshot values; whatever still differs lies outside the view.
        now.as_strided(t.shape, t.stride(), t.storage_offset()).copy_(
            snaps[k].as_strided(t.shape, t.stride(), t.storage_offset()))
        if not torch.equal(now.view(torch.uint8), snaps[k].view(torch.uint8)):
            changed.append(f"{k} (outside its view)")
    return changed


def restore_inputs_(inputs: dict[str, torch.Tensor | None], snaps: dict[str, torch.Tensor]) -> None:
    """Copy the snapshots back into the inputs' storages: after an in-place call, the next arm sees the original
    values, not what this call made of them."""
    for k, t in inputs.items():
        if t is not None:
            storage_of(t).copy_(snaps[k])


def compare(out: torch.Tensor, ref: torch.Tensor, expected_shape, expected_dtype, atol: float, rtol: float) -> dict:
    """Error statistics of one output against the oracle. All values are plain floats/ints/bools."""
    res = {"layout_ok": True, "unwritten": 0, "specials_mismatch": 0, "bad": 0,
           "max_norm_err": 0.0, "mean_abs_err": 0.0, "max_abs_err": 0.0, "numel": int(ref.numel())}
    if not isinstance(out, torch.Tensor) or type(out) is not torch.Tensor:
        res["layout_ok"] = False
        res["why"] = f"output is {type(out).__name__}, not a plain torch.Tensor"
        return res
    if tuple(out.shape) != tuple(expected_shape) or out.dtype != expected_dtype:
        res["layout_ok"] = False
        res["why"] = f"output {tuple(out.shape)}:{out.dtype} != expected {tuple(expected_shape)}:{expected_dtype}"
        return res
    if ref.numel() == 0:
        return res
    if not ref.dtype.is_floating_point:
        ref = ref.double()
    unwritten = unwritten_mask(out)
    if unwritten is None:
        unwritten = torch.zeros(out.shape, dtype=torch.bool, device=out.device)
    res["unwritten"] = int(unwritten.sum())
    o = out.to(ref.dtype)
    ref_nan, out_nan = torch.isnan(ref), torch.isnan(o)
    ref_inf, out_inf = torch.isinf(ref), torch.isinf(o)
    specials = (ref_nan != out_nan) | (ref_inf != out_inf) | (ref_inf & out_inf & (torch.sign(ref) != torch.sign(o)))
    res["specials_mismatch"] = int((specials & ~unwritten).sum())
    finite = torch.isfinite(ref) & torch.isfinite(o) & ~unwritten
    if bool(finite.any()):
        diff = (o - ref).abs()[finite]
        r = ref.abs()[finite]
        norm = diff / (atol + rtol * r)
        res["bad"] = int((norm > 1).sum())
        res["max_norm_err"] = float(norm.max())
        res["mean_abs_err"] = float(diff.mean())
        res["max_abs_err"] = float(diff.max())
    return res


def error_ratio_problem(cand: dict, base: dict | None, k: float, floor: float, atol: float) -> str | None:
    """The candidate's error may be at most k times the baseline's (FlashAttention's rule), above a small floor.

    Applied to the worst tolerance-normalised error and to the mean absolute error. Skipped when the baseline
    itself is outside tolerance (then it is no yardstick; the row notes it).
    """
    if base is None or not base["layout_ok"] or base["bad"] or base["specials_mismatch"] or base["unwritten"]:
        return None
    if cand["max_norm_err"] > k * max(base["max_norm_err"], floor):
        return f"worst normalised error {cand['max_norm_err']:.3g} > {k:g} x baseline {base['max_norm_err']:.3g}"
    if cand["mean_abs_err"] > k * max(base["mean_abs_err"], floor * atol):
        return f"mean abs error {cand['mean_abs_err']:.3g} > {k:g} x baseline {base['mean_abs_err']:.3g}"
    return None


def check_reasons(stats: dict) -> list[str]:
    """Reason codes from one compare() result (no baseline rule)."""
    if not stats["layout_ok"]:
        return [LAYOUT]
    reasons = []
    if stats["unwritten"]:
        reasons.append(UNWRITTEN)
    if stats["specials_mismatch"]:
        reasons.append(SPECIALS)
    if stats["bad"]:
        reasons.append(MISMATCH)
    return reasons


def finite_or_none(v: float) -> float | None:
    return v if v is not None and math.isfinite(v) else None


def bits_differ(out, chain) -> int | None:
    """How many bytes of `out` differ from the eager chain's output, NaN payloads included (an exact kernel writes the
    same bits); None where the two cannot be compared (another shape or dtype, not a tensor)."""
    if not (isinstance(out, torch.Tensor) and isinstance(chain, torch.Tensor)) or out.shape != chain.shape \
            or out.dtype != chain.dtype:
        return None
    a = out.detach().contiguous().view(torch.uint8)
    b = chain.detach().to(out.device).contiguous().view(torch.uint8)
    return int((a != b).sum())
