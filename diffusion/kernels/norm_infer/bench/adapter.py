"""How the harness calls each arm of norm_infer with the inputs a row declares.

Two upstream functions share the task; `row.function` picks one. The baseline is called exactly as SGLang 0.5.15
calls it (it allocates its output): `LayerNorm.forward_cuda` calls `norm_infer(x2d, weight, bias, eps=...,
is_rms_norm=False)`, `RMSNorm.forward_cuda` calls `triton_one_pass_rms_norm(x2d, weight, eps)`. The candidate gets
the same arguments plus the harness's preallocated, poisoned `out=` buffer and must write it.
"""
import torch


def output_specs(row, inputs):
    x = inputs["x"]
    return {"y": (tuple(x.shape), x.dtype)}


def call_baseline(upstream, row, inputs, out):
    s = row.scalars
    if row.function == "norm_infer":
        y = upstream["norm_infer"](inputs["x"], inputs["weight"], inputs["bias"], eps=float(s["eps"]),
                                   is_rms_norm=bool(s["is_rms_norm"]))
    else:
        y = upstream["triton_one_pass_rms_norm"](inputs["x"], inputs["w"], float(s["eps"]))
    return {"y": y}


def call_candidate(solution, row, inputs, out):
    s = row.scalars
    if row.function == "norm_infer":
        return solution.norm_infer(inputs["x"], inputs["weight"], inputs["bias"], eps=float(s["eps"]),
                                   is_rms_norm=bool(s["is_rms_norm"]), out=out["y"])
    return solution.triton_one_pass_rms_norm(inputs["x"], inputs["w"], float(s["eps"]), out=out["y"])


def bytes_moved(row):
    """x read once, y written once (x's dtype), weight and bias read once each."""
    t = row.tensors
    x = t["x"]
    out = x.numel * torch.empty((), dtype=x.torch_dtype).element_size()
    return out + sum(spec.nbytes for spec in t.values() if spec is not None)
