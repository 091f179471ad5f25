"""How the harness calls each arm of fuse_scale_shift with the inputs a row declares.

The baseline is upstream's public function, called exactly as SGLang calls it (it allocates its output).
The candidate gets the same arguments plus the harness's preallocated, poisoned `out=` buffer and must write it.
"""
import torch


def output_specs(row, inputs):
    x = inputs["x"]
    return {"y": (tuple(x.shape), x.dtype)}


def _args(row, inputs):
    return inputs["x"], inputs["scale"], inputs["shift"], float(row.scalars["scale_constant"])


def call_baseline(upstream, row, inputs, out):
    return {"y": upstream["fuse_scale_shift_kernel"](*_args(row, inputs))}


def call_candidate(solution, row, inputs, out):
    return solution.fuse_scale_shift_kernel(*_args(row, inputs), out=out["y"])


def bytes_moved(row):
    """Each input element read once (broadcast dimensions count once), the output written once."""
    t = row.tensors
    x = t["x"]
    return t["x"].nbytes + t["scale"].nbytes + t["shift"].nbytes + x.numel * torch.empty((), dtype=x.torch_dtype).element_size()
