"""kda/runtime/lean_launch.py: host-side integer helpers, launch plans, and the interpreter fallback."""
import types

import pytest
import torch
import triton
import triton.language as tl

from kda.runtime.lean_launch import LaunchCache, Plan, cdiv, next_pow2


def test_cdiv_matches_triton():
    for a in range(0, 200):
        for b in range(1, 33):
            assert cdiv(a, b) == triton.cdiv(a, b)


def test_next_pow2_matches_triton():
    for n in range(1, 5000):
        assert next_pow2(n) == triton.next_power_of_2(n)
    assert next_pow2(0) == 1


def test_plan_key_separates_integer_specialisations():
    base = Plan((4, 1, 1), (torch.float16,), (32, 7), (64,), 4)
    assert base.key == Plan((9, 1, 1), (torch.float16,), (48, 5), (64,), 4).key  # same divisibility classes
    assert base.key != Plan((4, 1, 1), (torch.float16,), (1, 7), (64,), 4).key   # 1 is specialised apart
    assert base.key != Plan((4, 1, 1), (torch.float16,), (32, 16), (64,), 4).key  # divisible by 16
    assert base.key != Plan((4, 1, 1), (torch.float32,), (32, 7), (64,), 4).key
    assert base.key != Plan((4, 1, 1), (torch.float16,), (32, 7), (128,), 4).key
    assert base.key != Plan((4, 1, 1), (torch.float16,), (32, 2**31), (64,), 4).key  # 64-bit index


def test_plan_key_separates_launch_options():
    """A launch option (a cooperative grid, say) is a compile option too: it needs its own binary."""
    base = Plan((4, 1, 1), (torch.float16,), (32, 7), (64,), 4)
    coop = Plan((4, 1, 1), (torch.float16,), (32, 7), (64,), 4, (("launch_cooperative_grid", True),))
    assert base.options == () and coop.options == (("launch_cooperative_grid", True),)
    assert base.key != coop.key
    assert coop.key == Plan((8, 1, 1), (torch.float16,), (48, 5), (64,), 4, (("launch_cooperative_grid", True),)).key


_INTERPRETED = """
import torch, triton, triton.language as tl
from kda.runtime.lean_launch import LaunchCache, cdiv

@triton.jit
def axpb(x_ptr, y_ptr, n, a, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=m) * a + 1.0, mask=m)

cache = LaunchCache(axpb)
x = torch.arange(10, dtype=torch.float32)
y = torch.empty_like(x)
cache((cdiv(10, 8), 1, 1), (x, y), (10,), (2.0,), (8,), 1)
assert torch.equal(y, x * 2 + 1), y
assert cache.compiled == {}, "the interpreter returns no CompiledKernel: nothing may be cached"
print("ok")
"""


def test_interpreter_path_launches_and_caches_nothing():
    """Under TRITON_INTERPRET=1 every call takes Triton's own path (it must be set before triton is imported,
    hence the subprocess)."""
    import os
    import subprocess
    import sys
    env = dict(os.environ, TRITON_INTERPRET="1")
    r = subprocess.run([sys.executable, "-c", _INTERPRETED], env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr[-2000:]


class _FakeDriver:
    """Stands in for libcuda's occupancy calculator: records its arguments, writes `blocks`, returns `rc`."""

    def __init__(self, blocks, rc=0):
        self.blocks, self.rc, self.calls = blocks, rc, []

    def cuOccupancyMaxActiveBlocksPerMultiprocessor(self, out, function, threads, shared):
        self.calls.append((function.value, threads.value, shared.value))
        out._obj.value = self.blocks
        return self.rc


class _FakeCompiled:
    def __init__(self):
        self.loaded = False
        self.function = 0xF00
        self.metadata = types.SimpleNamespace(shared=1056)

    @property
    def run(self):
        self.loaded = True  # Triton loads the binary (and sets `function`) on first access
        return None


def test_resident_blocks_asks_the_driver_for_the_kernel_at_its_block_size(monkeypatch):
    import kda.runtime.lean_launch as ll
    fake, kernel = _FakeDriver(5), _FakeCompiled()
    monkeypatch.setattr(ll, "_libcuda", fake)
    assert ll.resident_blocks(kernel, 8) == 5
    assert kernel.loaded and fake.calls == [(0xF00, 256, 1056)]


def test_resident_blocks_raises_on_a_driver_error(monkeypatch):
    import kda.runtime.lean_launch as ll
    monkeypatch.setattr(ll, "_libcuda", _FakeDriver(0, rc=98))
    with pytest.raises(RuntimeError, match="CUresult 98"):
        ll.resident_blocks(_FakeCompiled(), 4)


class _CompiledStub:
    """What Triton's JIT returns on a GPU: a launcher (`run`), the loaded function and its packed metadata."""
    function, packed_metadata = 0xF00, ()

    def run(self, *args):
        raise AssertionError("not called in this test")


class _KernelStub:
    def __getitem__(self, grid):
        return lambda *args, **kwargs: _CompiledStub()


def test_the_cache_of_compiled_launches_is_bounded_oldest_out(monkeypatch):
    """Issue 37's production rule: no cache grows without bound. Every distinct plan (a new shape) adds an entry
    until MAX_ENTRIES, then the oldest leaves; the newest stays. (Plans differ here by a constexpr: the integers'
    key is their specialisation, not their value.)"""
    from kda.runtime import lean_launch

    monkeypatch.setattr(lean_launch, "_hooks_set", lambda: False)
    monkeypatch.setattr(LaunchCache, "MAX_ENTRIES", 4)
    cache = LaunchCache(_KernelStub())
    x = torch.empty(8)
    for n in range(10):
        cache.run(Plan((1, 1, 1), (x.dtype,), (), (n,), 1), (x,), ())
    assert len(cache.compiled) == 4
    assert [k[0][2] for k in cache.compiled] == [(6,), (7,), (8,), (9,)]  # the plan key's constexprs: the last four


class _OnDevice:
    """A tensor's face to LaunchCache.run: its device index and pointer (a CUDA tensor, without a GPU)."""

    def __init__(self, device):
        self.device, self.dtype = device, torch.float32

    def get_device(self):
        return self.device

    def data_ptr(self):
        return 4096


def test_a_launch_runs_on_the_tensors_device_whatever_the_callers_current_device(monkeypatch):
    """Issue 37: upstream launches under torch.cuda.device(x.device); a caller on GPU 0 with tensors on GPU 1 must
    not launch there (Triton's first launch compiles and runs on the current device). The switch happens only when
    the devices differ, and is undone after the call."""
    from kda.runtime import lean_launch

    current = [0]
    seen = []

    class _Device:  # torch.cuda.device(i) as a context manager over `current`
        def __init__(self, index):
            self.index = index

        def __enter__(self):
            self.prev, current[0] = current[0], self.index

        def __exit__(self, *exc):
            current[0] = self.prev

    class _Kernel:
        def __getitem__(self, grid):
            return lambda *args, **kwargs: seen.append(current[0]) or _CompiledStub()

    monkeypatch.setattr(lean_launch, "_hooks_set", lambda: True)  # Triton's own path, every call
    monkeypatch.setattr(torch._C, "_cuda_getDevice", lambda: current[0], raising=False)
    monkeypatch.setattr(torch.cuda, "device", _Device)
    cache = LaunchCache(_Kernel())
    plan = Plan((1, 1, 1), (torch.float32,), (), (), 1)
    cache.run(plan, (_OnDevice(1),), ())
    cache.run(plan, (_OnDevice(0),), ())
    assert seen == [1, 0] and current == [0]
