"""How the harness calls each arm of cutedsl_norm_scale_shift with the inputs a row declares.

Two upstream functions share the task; `row.function` picks one. The baseline is called exactly as SGLang 0.5.15's
layers call it (`layers/layernorm.py`), positionally and through the registered torch custom op, which allocates
its outputs:
    _NormScaleShift.forward_cuda -> fused_norm_scale_shift(x, weight, bias, scale, shift, norm_type, eps)
    _ScaleResidualNormScaleShift.forward_cuda
        -> fused_scale_residual_norm_scale_shift(residual, x, gate, weight, bias, scale, shift, norm_type, eps)
The layers' `.contiguous()` calls happen before the entry point; rows declare the tensors as they arrive there.
The candidate gets the same arguments plus the harness's preallocated, poisoned buffers (`out=` for y,
`residual_out=` for r) and must write them.
"""
import torch

NSS, SRN = "fused_norm_scale_shift", "fused_scale_residual_norm_scale_shift"


def output_specs(row, inputs):
    x = inputs["x"]
    specs = {"y": (tuple(x.shape), x.dtype)}
    if row.function == SRN:
        specs["residual_out"] = (tuple(x.shape), x.dtype)
    return specs


def _tail(row, inputs):
    s = row.scalars
    return (inputs["weight"], inputs["bias"], inputs["scale"], inputs["shift"], str(s["norm_type"]), float(s["eps"]))


def call_baseline(upstream, row, inputs, out):
    if row.function == NSS:
        return {"y": upstream[NSS](inputs["x"], *_tail(row, inputs))}
    y, r = upstream[SRN](inputs["residual"], inputs["x"], inputs["gate"], *_tail(row, inputs))
    return {"y": y, "residual_out": r}


def call_candidate(solution, row, inputs, out):
    if row.function == NSS:
        return solution.fused_norm_scale_shift(inputs["x"], *_tail(row, inputs), out=out["y"])
    return solution.fused_scale_residual_norm_scale_shift(inputs["residual"], inputs["x"], inputs["gate"],
                                                          *_tail(row, inputs), out=out["y"],
                                                          residual_out=out["residual_out"])


def bytes_moved(row):
    """Every input read once (broadcast modulation counts once), y (and r) written once in x's dtype."""
    t = row.tensors
    x = t["x"]
    outs = 2 if row.function == SRN else 1
    return sum(spec.nbytes for spec in t.values() if spec is not None) + \
        outs * x.numel * torch.empty((), dtype=x.torch_dtype).element_size()
