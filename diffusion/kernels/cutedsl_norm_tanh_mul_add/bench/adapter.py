"""How the harness calls each arm of cutedsl_norm_tanh_mul_add with the inputs a row declares.

Two upstream functions share the task; `row.function` picks one. The baseline is called exactly as SGLang 0.5.15
calls it (positionally, through the registered torch custom op, which allocates its outputs):
    layers/layernorm.py apply_rmsnorm_tanh_mul_add
        -> fused_norm_tanh_mul_add(x, weight, None, gate, residual, "rms", eps)
    models/dits/zimage.py (modulated block, attention half)
        -> fused_norm_tanh_mul_add_norm_scale(attn_out, w, None, gate_msa, x, w2, None, scale_mlp, "rms", eps)
The callers' `.contiguous()` happens before the entry point; rows declare the tensors as they arrive there. The
candidate gets the same arguments plus the harness's preallocated, poisoned buffers (`out=` for y, `out2=` for y2)
and must write them.
"""
import torch

TMA, TMAN = "fused_norm_tanh_mul_add", "fused_norm_tanh_mul_add_norm_scale"


def output_specs(row, inputs):
    x = inputs["x"]
    specs = {"y": (tuple(x.shape), x.dtype)}
    if row.function == TMAN:
        specs["y2"] = (tuple(x.shape), x.dtype)
    return specs


def _args(row, inputs):
    i, s = inputs, row.scalars
    head = (i["x"], i["weight"], i["bias"], i["scale"], i["shift"])
    if row.function == TMAN:
        head += (i["weight2"], i["bias2"], i["scale2"])
    return head + (str(s["norm_type"]), float(s["eps"]))


def call_baseline(upstream, row, inputs, out):
    if row.function == TMA:
        return {"y": upstream[TMA](*_args(row, inputs))}
    y, y2 = upstream[TMAN](*_args(row, inputs))
    return {"y": y, "y2": y2}


def call_candidate(solution, row, inputs, out):
    if row.function == TMA:
        return solution.fused_norm_tanh_mul_add(*_args(row, inputs), out=out["y"])
    return solution.fused_norm_tanh_mul_add_norm_scale(*_args(row, inputs), out=out["y"], out2=out["y2"])


def bytes_moved(row):
    """Every input read once (broadcast modulation counts once), y (and y2) written once in x's dtype."""
    t = row.tensors
    x = t["x"]
    outs = 2 if row.function == TMAN else 1
    return sum(spec.nbytes for spec in t.values() if spec is not None) + \
        outs * x.numel * torch.empty((), dtype=x.torch_dtype).element_size()
