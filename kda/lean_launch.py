"""A lean launch path for Triton kernels, shared by the candidates of every task.

Triton's JITFunction.run binds and specialises every argument on every call: about 20 us of Python for a
20-argument kernel. On small production rows that host path, not the GPU, sets the time. `LaunchCache` sends the
first call of each specialisation through Triton, keeps the CompiledKernel, and launches it directly afterwards.

The key holds everything Triton 3.x specialises on, and more: each tensor's dtype and 16-byte alignment, for each
integer whether it equals 1, is divisible by 16 and fits in 32 bits, the constexprs, the launch options and the
device. Anything we cannot key (the interpreter, launch hooks a profiler installed) takes Triton's own path, so
Nsight Compute and the CPU interpreter see ordinary launches.

The module lives in the harness package, not in a task's solution/, so that one reviewed copy serves every
candidate and an agent working on one task cannot change the launch path of another.
"""
import torch

try:
    from triton import knobs as _knobs
except ImportError:  # older Triton: no knobs module, always use the normal path
    _knobs = None


def _hooks_set() -> bool:
    """True when a profiler installed launch hooks (Triton 3.6 keeps them in HookChain objects, never None)."""
    if _knobs is None:
        return True
    for hook in (_knobs.runtime.launch_enter_hook, _knobs.runtime.launch_exit_hook):
        if hook is not None and (not hasattr(hook, "calls") or hook.calls):
            return True
    return False


def _int_key(v: int):
    return (v == 1, v % 16 == 0, -(2**31) <= v < 2**31)


class LaunchCache:
    """`cache(grid, tensors, ints, floats, constexprs, num_warps)` launches `kernel` whose parameters are, in this
    order, the tensors, the integers, the floats and the constexprs. `grid` is a 3-tuple."""

    def __init__(self, kernel):
        self.kernel = kernel
        self.compiled = {}

    def __call__(self, grid, tensors, ints, floats, constexprs, num_warps):
        key = (tuple((t.dtype, t.data_ptr() % 16 == 0) for t in tensors), tuple(_int_key(v) for v in ints),
               constexprs, num_warps, tensors[0].device.index)
        k = self.compiled.get(key)
        hooks = _hooks_set()
        if k is None or hooks:
            k = self.kernel[grid](*tensors, *ints, *floats, *constexprs, num_warps=num_warps)
            # Under the interpreter the JIT returns no CompiledKernel; `run` is a property that loads the binary.
            if not hooks and getattr(k, "run", None) is not None and getattr(k, "function", None) is not None:
                self.compiled[key] = (k.run, k.function, k.packed_metadata)
            return
        run, function, packed = k
        stream = torch._C._cuda_getCurrentRawStream(key[-1])
        run(grid[0], grid[1], grid[2], stream, function, packed, None, None, None, *tensors, *ints, *floats, *constexprs)
