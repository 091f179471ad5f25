"""A lean launch path for Triton kernels, shared by the candidates of every task.

Triton's JITFunction.run binds and specialises every argument on every call: about 20 us of Python for a
20-argument kernel. On small production rows that host path, not the GPU, sets the time. `LaunchCache` sends the
first call of each specialisation through Triton, keeps the CompiledKernel, and launches it directly afterwards.

The key holds everything Triton 3.x specialises on, and more: each tensor's dtype and 16-byte alignment, for each
integer whether it equals 1, is divisible by 16 and fits in 32 bits, the constexprs, the launch options and the
device. Anything we cannot key (the interpreter, launch hooks a profiler installed) takes Triton's own path, so
Nsight Compute and the CPU interpreter see ordinary launches.

`resident_blocks` asks the driver how many blocks of a compiled kernel an SM holds, for candidates whose programs
wait for each other (a persistent grid must be resident whole).

The module lives in the harness package, not in a task's solution/, so that one reviewed copy serves every
candidate and an agent working on one task cannot change the launch path of another.
"""
import ctypes

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


def cdiv(a: int, b: int) -> int:
    """Host-side ceil division. triton.cdiv is a @jit function: calling it from Python costs microseconds."""
    return -(-a // b)


def next_pow2(n: int) -> int:
    """Host-side next power of two (1 for n <= 1), without triton.next_power_of_2's @jit call overhead."""
    return 1 << (n - 1).bit_length() if n > 1 else 1


def _int_key(v: int):
    return (v == 1, v % 16 == 0, -(2**31) <= v < 2**31)


class Plan:
    """One launch whose grid, integers, constexprs and warps are fixed: a candidate builds it once per input
    signature (shapes, strides, dtypes) and replays it, so a call costs a dict lookup, the tensors' alignment and
    the launch itself. The integers' specialisation key is computed here, once."""

    __slots__ = ("grid", "ints", "constexprs", "num_warps", "options", "key")

    def __init__(self, grid, dtypes, ints, constexprs, num_warps, options=()):
        """`options`: (name, value) pairs of Triton launch options beyond num_warps (launch_pdl, say); they are
        compile options too, so each set has its own binary and its own key."""
        self.grid, self.ints, self.constexprs, self.num_warps = tuple(grid), tuple(ints), tuple(constexprs), num_warps
        self.options = tuple(options)
        self.key = (tuple(dtypes), tuple(_int_key(v) for v in ints), self.constexprs, num_warps, self.options)


class LaunchCache:
    """`cache(grid, tensors, ints, floats, constexprs, num_warps)` launches `kernel` whose parameters are, in this
    order, the tensors, the integers, the floats and the constexprs. `grid` is a 3-tuple. `cache.run(plan,
    tensors, floats)` does the same from a prebuilt `Plan`."""

    # Compiled launches kept per kernel. A plan key holds the specialised integers, so a caller sweeping shapes adds
    # entries for ever (issue 37: bounded caches in production); past this many the oldest goes (insertion order: a
    # hit costs nothing extra, and an evicted plan is only Triton's own launch path once more).
    MAX_ENTRIES = 256

    def __init__(self, kernel):
        self.kernel = kernel
        self.compiled = {}

    def __call__(self, grid, tensors, ints, floats, constexprs, num_warps):
        self.run(Plan(grid, [t.dtype for t in tensors], ints, constexprs, num_warps), tensors, floats)

    def run(self, plan: Plan, tensors, floats):
        device = tensors[0].get_device()
        if device >= 0 and device != torch._C._cuda_getDevice():
            # A caller whose current device is another GPU (issue 37): Triton's first launch compiles and launches on
            # the current device, and a kernel launched there would read this tensor's memory from the wrong GPU.
            # Upstream enters torch.cuda.device(x.device) on every call; one comparison here costs far less.
            with torch.cuda.device(device):
                return self.run(plan, tensors, floats)
        key = (plan.key, tuple([t.data_ptr() % 16 == 0 for t in tensors]), device)
        k = self.compiled.get(key)
        hooks = _hooks_set()
        if k is None or hooks:
            k = self.kernel[plan.grid](*tensors, *plan.ints, *floats, *plan.constexprs, num_warps=plan.num_warps,
                                       **dict(plan.options))
            # Under the interpreter the JIT returns no CompiledKernel; `run` is a property that loads the binary.
            if not hooks and getattr(k, "run", None) is not None and getattr(k, "function", None) is not None:
                if len(self.compiled) >= self.MAX_ENTRIES:
                    del self.compiled[next(iter(self.compiled))]
                self.compiled[key] = (k.run, k.function, k.packed_metadata)
            return
        run, function, packed = k
        g = plan.grid
        run(g[0], g[1], g[2], torch._C._cuda_getCurrentRawStream(key[-1]), function, packed, None, None, None,
            *tensors, *plan.ints, *floats, *plan.constexprs)


_libcuda = None


def resident_blocks(kernel, num_warps: int) -> int:
    """How many blocks of a compiled Triton kernel one SM holds at once (the driver's occupancy calculator, for its
    registers and shared memory at `num_warps` warps). A kernel whose programs wait for each other (a persistent
    grid with a software barrier) must not launch more than SMs x this: Triton has no cooperative launch, and a
    program that never becomes resident leaves the others waiting for ever."""
    global _libcuda
    if _libcuda is None:
        _libcuda = ctypes.CDLL("libcuda.so.1")
    kernel.run  # noqa: B018 -- loads the binary: `function` exists from here on (a property in Triton 3.x)
    n = ctypes.c_int(0)
    rc = _libcuda.cuOccupancyMaxActiveBlocksPerMultiprocessor(
        ctypes.byref(n), ctypes.c_void_p(kernel.function), ctypes.c_int(32 * num_warps),
        ctypes.c_size_t(kernel.metadata.shared))
    if rc != 0:
        raise RuntimeError(f"cuOccupancyMaxActiveBlocksPerMultiprocessor failed with CUresult {rc}")
    return n.value
