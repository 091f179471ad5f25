"""How the harness calls each arm of silu_and_mul with the inputs a row declares.

Three upstream functions share the task; `row.function` picks one. The baseline is called as SGLang 0.5.15 calls it:
`SiluAndMul.forward_cuda` (srt/layers/activation.py:102-107) allocates `out` [..., I] itself and calls
`silu_and_mul(x, out)`; here the harness's buffer stands in for that allocation, for both arms. The candidate gets
the same arguments, `out=` the harness's preallocated, poisoned buffer, and must write every element.
"""
import torch


def output_specs(row, inputs):
    x = inputs["x"]
    return {"out": (tuple(x.shape[:-1]) + (x.shape[-1] // 2,), x.dtype)}


def call_baseline(upstream, row, inputs, out):
    return {"out": upstream[row.function](inputs["x"], out["out"])}


def call_candidate(solution, row, inputs, out):
    fn = {"silu_and_mul": solution.silu_and_mul, "gelu_and_mul": solution.gelu_and_mul,
          "gelu_tanh_and_mul": solution.gelu_tanh_and_mul}[row.function]
    return fn(inputs["x"], out=out["out"])


def bytes_moved(row):
    """x read once (gate and up halves), out written once (half of x's elements, x's dtype)."""
    x = row.tensors["x"]
    esize = torch.empty((), dtype=x.torch_dtype).element_size()
    return x.numel * esize + (x.numel // 2) * esize
