"""Shared helpers of the exploit-zoo fakes; not a candidate itself (loaded by path from each fake).

`real_kernel` runs the task's real candidate (the solution/ package) loaded under a private package name,
so a fake can produce correct numbers and differ from a good candidate only in its trick. `torch_math` is the
same math written with torch ops (a re-implementation: the oracle itself is off limits to a candidate).
"""
import importlib.util
import sys
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parents[2]


def real_module(task: str = "fuse_scale_shift"):
    """The task's solution/__init__.py as a package (its relative imports work), under a name of our own."""
    name = f"kda_zoo_real_solution_{task}"
    mod = sys.modules.get(name)
    if mod is None:
        solution = REPO / "diffusion/kernels" / task / "solution"
        spec = importlib.util.spec_from_file_location(name, solution / "__init__.py",
                                                      submodule_search_locations=[str(solution)])
        mod = importlib.util.module_from_spec(spec)
        sys.modules[name] = mod
        spec.loader.exec_module(mod)
    return mod


def real_kernel(x, scale, shift, scale_constant, out):
    """The real candidate kernel: writes y = x * (scale_constant + scale) + shift into out, returns out."""
    return real_module().fuse_scale_shift_kernel(x, scale, shift, scale_constant, out=out)


def as_blc(t: torch.Tensor, B: int, L: int, C: int) -> torch.Tensor:
    """scalar / [B, C] / [B|1, L|1, C] / [B|1, F, 1, C] modulation as a tensor broadcastable to [B, L, C]."""
    if t.dim() == 0 or (t.dim() == 1 and t.numel() == 1):
        return t.reshape(1, 1, 1)
    if t.dim() == 2:
        return t[:, None, :]
    if t.dim() == 3:
        return t
    frames = t.shape[1]
    return t.expand(t.shape[0], frames, L // frames, C).reshape(t.shape[0], L, C)


def torch_math(x, scale, shift, scale_constant, compute_dtype=torch.float32):
    """y in compute_dtype (not yet cast to x's dtype)."""
    B, L, C = x.shape
    s = as_blc(scale, B, L, C).to(compute_dtype)
    h = as_blc(shift, B, L, C).to(compute_dtype)
    return x.to(compute_dtype) * (scale_constant + s) + h


def double_compiled_launchers(mod) -> None:
    """Wrap, in place, the launcher of every kernel `mod` (an upstream module) has compiled, so each launch runs twice:
    the quiet slowdown of slows_baseline_quietly.py and slows_latest_quietly.py. It replaces no name, only the `_run`
    of each CompiledKernel in its JIT functions' caches, objects that legitimately change as kernels compile."""
    def twice_of(run):
        def twice(*args, **kwargs):
            run(*args, **kwargs)
            return run(*args, **kwargs)

        twice.kda_twice = True
        return twice

    for value in list(vars(mod).values()) if mod is not None else ():
        # the JIT function itself, or the one an autotuner or heuristics object wraps (a JIT function's own `fn` is
        # the Python function)
        jit = value if hasattr(value, "device_caches") else getattr(value, "fn", None)
        for entry in list(getattr(jit, "device_caches", {}).values()):
            for compiled in list(entry[0].values()):
                run = vars(compiled).get("_run")
                if run is not None and not getattr(run, "kda_twice", False):
                    compiled._run = twice_of(run)
