"""A lean launch path for a Triton kernel whose specialisation we can key ourselves.

Triton's JITFunction.run binds and specialises every argument on every call (about 20 us of Python for a 20-argument
kernel). On small rows that host path, not the GPU, sets the time. Here the first call of each specialisation goes
through Triton normally and keeps the CompiledKernel; later calls with the same key launch it directly.

The key holds everything Triton 3.x specialises on, and more: each tensor's dtype and 16-byte alignment, and for
each integer whether it equals 1, is divisible by 16 and fits in 32 bits; plus the constexprs and launch options.
Anything we cannot key (the interpreter, launch hooks set by a profiler) takes Triton's own path.
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
