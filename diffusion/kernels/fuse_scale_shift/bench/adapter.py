"""How the harness calls each arm of fuse_scale_shift with the inputs a row declares.

Three upstream functions share the task; `row.function` picks one. The baseline is upstream's public function,
called exactly as SGLang calls it (it allocates its outputs): `fuse_scale_shift_kernel(x, scale, shift,
scale_constant)`, and the select01 gate variants as Qwen-Image's FusedLayerNormScaleShiftGateSelect01 /
FusedResidualLayerNormScaleShiftGateSelect01.forward_cuda call them (x positional, the rest by keyword). The
candidate gets the same arguments plus the harness's preallocated, poisoned buffers (`out=`, and `gate_out=`,
`residual_out=` for the variants) and must write them.
"""
import torch

FUSE = "fuse_scale_shift_kernel"
SEL_LN = "fuse_layernorm_scale_shift_gate_select01_kernel"
SEL_RES = "fuse_residual_layernorm_scale_shift_gate_select01_kernel"
_MODS = ("scale0", "shift0", "gate0", "scale1", "shift1", "gate1", "index")


def output_specs(row, inputs):
    """Named in upstream's return order (the candidate returns its buffers in this order)."""
    x = inputs["x"]
    spec = (tuple(x.shape), x.dtype)
    if row.function == FUSE:
        return {"y": spec}
    if row.function == SEL_LN:
        return {"y": spec, "gate": spec}
    if row.function == SEL_RES:
        return {"y": spec, "residual_out": spec, "gate": spec}
    raise ValueError(f"unknown function {row.function!r}")


def _args(row, inputs):
    return inputs["x"], inputs["scale"], inputs["shift"], float(row.scalars["scale_constant"])


def _select01_kwargs(row, inputs):
    kw = {k: inputs[k] for k in ("weight", "bias", *_MODS)}
    if row.function == SEL_RES:
        kw["residual"], kw["residual_gate"] = inputs["residual"], inputs["residual_gate"]
    kw["eps"] = float(row.scalars["eps"])
    return kw


def call_baseline(upstream, row, inputs, out):
    if row.function == FUSE:
        return {"y": upstream[FUSE](*_args(row, inputs))}
    res = upstream[row.function](inputs["x"], **_select01_kwargs(row, inputs))
    return dict(zip(output_specs(row, inputs), res))


def call_candidate(solution, row, inputs, out):
    if row.function == FUSE:
        return solution.fuse_scale_shift_kernel(*_args(row, inputs), out=out["y"])
    kw = _select01_kwargs(row, inputs)
    if row.function == SEL_RES:
        kw["residual_out"] = out["residual_out"]
    return getattr(solution, row.function)(inputs["x"], **kw, out=out["y"], gate_out=out["gate"])


def bytes_moved(row):
    """Each input element read once (broadcast dimensions count once), each output written once; for the select01
    variants both modulation sets count in full although a token reads only one (they are [B, C], a rounding error
    next to x)."""
    t = row.tensors
    x = t["x"]
    n_out = {FUSE: 1, SEL_LN: 2, SEL_RES: 3}[row.function]
    inputs = sum(spec.nbytes for spec in t.values() if spec is not None)
    return inputs + n_out * x.numel * torch.empty((), dtype=x.torch_dtype).element_size()
