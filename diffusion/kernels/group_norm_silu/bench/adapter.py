"""How the harness calls each arm of group_norm_silu with the inputs a row declares.

Rows name one of two upstream entry points: `triton_group_norm_silu(x, weight, bias, num_groups, eps)` or
`apply_group_norm_silu(x, norm, activation)`, the helper the HunyuanVideo VAE calls with its nn.GroupNorm and nn.SiLU
modules. For the latter the adapter builds those modules once per row around the row's own weight and bias tensors
(nn.Parameter shares their storage, so the harness's in-place refills reach them).

Both arms run under torch.no_grad(), as SGLang's inference does: upstream takes its Triton path only when
`not torch.is_grad_enabled()` and falls back to F.group_norm + F.silu otherwise. The baseline allocates its output
(contiguous, whatever x's layout: upstream calls x.contiguous()); the candidate writes the harness's preallocated,
poisoned contiguous `out=` buffer.

CPU mode (TRITON_INTERPRET=1): upstream's wrappers send a CPU tensor to PyTorch's own group_norm (`x.is_cuda` is part
of their Triton-path test), which would leave the vendored Triton kernels untested. On CPU only, the baseline arm
therefore takes the dispatch of `_triton_group_norm_silu_cuda` itself: `x.contiguous()`, then the vendored
`_launch_chunked` for groups of at least `_LARGE_GROUP_THRESHOLD` elements, else `_launch_one_pass` (the
`torch.cuda.device` guard around them is a no-op for the math). On a GPU the public entry points are called as is.

Interpreter workaround (TRITON_INTERPRET=1 only, applied when this module is imported): Triton 3.6's interpreter keeps
kernel scalars as one-element 1-D numpy arrays and converts them with `int(array)` in `tensor.__index__`, which
NumPy >= 2.4 refuses ("only 0-dimensional arrays can be converted to Python scalars"). Every kernel loop over a
runtime bound (`for off in range(0, group_size, BLOCK)`, upstream's and the candidate's alike) then fails under the
interpreter. `_interpreter_index_fix` wraps the interpreter's `_patch_lang_tensor` so `__index__` reads the single
element instead; nothing changes on a GPU. (It belongs in the harness's CPU mode, next to `_interpreter_autotune`.)
"""
import importlib
import math
import os

import torch
from torch import nn

UPSTREAM_TRITON = "sglang.jit_kernel.diffusion.triton.group_norm_silu"
_modules = {}  # (row id, weight/bias pointers) -> (nn.GroupNorm, nn.SiLU); the Parameters keep the storage alive


def _interpreter_index_fix() -> None:
    if os.environ.get("TRITON_INTERPRET") != "1":
        return
    from triton.runtime import interpreter

    original = getattr(interpreter, "_patch_lang_tensor", None)
    if original is None or getattr(original, "kda_index_fix", False):
        return

    def patch_lang_tensor(tensor, scope):
        original(tensor, scope)
        scope.set_attr(tensor, "__index__", lambda self: int(self.handle.data.reshape(-1)[0]))

    patch_lang_tensor.kda_index_fix = True
    interpreter._patch_lang_tensor = patch_lang_tensor


_interpreter_index_fix()


def output_specs(row, inputs):
    x = inputs["x"]
    return {"y": (tuple(x.shape), x.dtype)}


def _norm_modules(row, inputs):
    w, b = inputs["weight"], inputs["bias"]
    key = (row.id, w.data_ptr(), b.data_ptr(), tuple(inputs["x"].shape))
    mods = _modules.get(key)
    if mods is None:
        if len(_modules) > 64:
            _modules.clear()
        norm = nn.GroupNorm(int(row.scalars["num_groups"]), w.shape[0], eps=float(row.scalars["eps"]), affine=True,
                            device="meta")
        norm.weight = nn.Parameter(w, requires_grad=False)
        norm.bias = nn.Parameter(b, requires_grad=False)
        mods = _modules[key] = (norm, nn.SiLU())
    return mods


def _upstream_on_cpu(row, inputs):
    mod = importlib.import_module(UPSTREAM_TRITON)
    x, w, b = inputs["x"], inputs["weight"], inputs["bias"]
    groups, eps = int(row.scalars["num_groups"]), float(row.scalars["eps"])
    xc = x.contiguous()
    spatial = math.prod(xc.shape[2:]) if xc.ndim > 2 else 1
    if (xc.shape[1] // groups) * spatial >= mod._LARGE_GROUP_THRESHOLD:
        return mod._launch_chunked(xc, w, b, groups, eps)
    return mod._launch_one_pass(xc, w, b, groups, eps)


def call_baseline(upstream, row, inputs, out):
    with torch.no_grad():
        if not inputs["x"].is_cuda:
            return {"y": _upstream_on_cpu(row, inputs)}
        if row.function == "apply_group_norm_silu":
            norm, act = _norm_modules(row, inputs)
            return {"y": upstream["apply_group_norm_silu"](inputs["x"], norm, act)}
        return {"y": upstream["triton_group_norm_silu"](inputs["x"], inputs["weight"], inputs["bias"],
                                                         int(row.scalars["num_groups"]), float(row.scalars["eps"]))}


def call_candidate(solution, row, inputs, out):
    with torch.no_grad():
        if row.function == "apply_group_norm_silu":
            norm, act = _norm_modules(row, inputs)
            return solution.apply_group_norm_silu(inputs["x"], norm, act, out=out["y"])
        return solution.triton_group_norm_silu(inputs["x"], inputs["weight"], inputs["bias"],
                                               int(row.scalars["num_groups"]), float(row.scalars["eps"]),
                                               out=out["y"])


def bytes_moved(row):
    """x read once, y written once (x's dtype), weight and bias read once. (Upstream reads x twice and, for a
    non-contiguous x, copies it first; the floor counts what the op must move.)"""
    t = row.tensors
    x = t["x"]
    return 2 * x.nbytes + t["weight"].nbytes + t["bias"].nbytes
