"""kda/harness/guards.py: UpstreamWatch (upstream's state as the baseline runs it) and candidate_threads.

Issue 34, attack 3: a candidate in the worker's interpreter can slow the baseline arm by changing upstream's modules,
functions or Triton kernels, Triton's launch classes or its process-wide hooks. Each change must be named, put back
by restore(), and a state taken by accept() (after the baseline's own first calls) must be the new reference.
"""
from __future__ import annotations

import importlib.util
import sys
import textwrap
import threading
import uuid

import pytest
import triton

from kda.harness.guards import UpstreamWatch, candidate_threads

UPSTREAM = '''
import triton
import triton.language as tl

SCALE = 2.0


@triton.jit
def kernel(x_ptr, n, BLOCK: tl.constexpr):
    pass


def entry(x, scale=1.0):
    return x * SCALE * scale


def helper():
    return 1
'''


@pytest.fixture
def upstream(tmp_path):
    name = f"kda_test_upstream_{uuid.uuid4().hex[:8]}"
    path = tmp_path / f"{name}.py"
    path.write_text(textwrap.dedent(UPSTREAM))
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    yield name, mod
    sys.modules.pop(name, None)


def test_an_untouched_upstream_is_not_reported(upstream):
    name, mod = upstream
    watch = UpstreamWatch({name: mod})
    assert mod.entry(1.0) == 2.0
    assert watch.changed() == []


def test_a_replaced_global_is_named_and_put_back(upstream):
    name, mod = upstream
    watch = UpstreamWatch({name: mod})
    real = mod.kernel
    mod.kernel = object()  # a proxy in the kernel's place
    mod.SCALE = 4.0
    assert watch.changed() == [f"{name}.SCALE", f"{name}.kernel"]
    watch.restore()
    assert mod.kernel is real and mod.SCALE == 2.0 and watch.changed() == []


def test_a_global_added_or_removed_is_named(upstream):
    name, mod = upstream
    watch = UpstreamWatch({name: mod})
    mod.extra = 1
    del mod.helper
    assert watch.changed() == [f"{name}.extra", f"{name}.helper"]
    watch.restore()
    assert not hasattr(mod, "extra") and mod.helper() == 1


def test_swapped_code_or_defaults_of_a_function_are_named_and_put_back(upstream):
    name, mod = upstream
    watch = UpstreamWatch({name: mod})
    mod.helper.__code__ = (lambda: 2).__code__
    mod.entry.__defaults__ = (0.5,)
    assert watch.changed() == [f"{name}.entry (its code, defaults or globals)",
                               f"{name}.helper (its code, defaults or globals)"]
    watch.restore()
    assert mod.helper() == 1 and mod.entry(1.0) == 2.0


def test_a_hook_on_an_upstream_triton_kernel_is_named(upstream):
    name, mod = upstream
    watch = UpstreamWatch({name: mod})
    mod.kernel.run = lambda *a, **k: None  # an instance attribute shadowing the class's launch
    assert watch.changed() == [f"{name}.kernel.run"]
    watch.restore()
    assert "run" not in vars(mod.kernel)


def test_a_patched_triton_class_and_a_launch_hook_are_named(upstream):
    name, mod = upstream
    watch = UpstreamWatch({name: mod})
    from triton.runtime.jit import JITFunction

    original = JITFunction.__dict__["run"]
    chain = triton.knobs.runtime.launch_enter_hook
    before = list(getattr(chain, "calls", []))
    JITFunction.run = lambda self, *a, **k: original(self, *a, **k)
    if hasattr(chain, "add"):
        chain.add(lambda *a: None)  # Triton 3.9: hooks are HookChains, added to in place
    else:
        triton.knobs.runtime.launch_enter_hook = lambda *a: None
    try:
        assert watch.changed() == ["triton.knobs.runtime.launch_enter_hook", "triton.runtime.jit.JITFunction.run"]
        watch.restore()
        assert JITFunction.__dict__["run"] is original
        assert triton.knobs.runtime.launch_enter_hook is chain
        assert list(getattr(chain, "calls", [])) == before and watch.changed() == []
    finally:
        JITFunction.run = original
        triton.knobs.runtime.launch_enter_hook = chain
        if hasattr(chain, "calls"):
            chain.calls[:] = before


def test_accept_takes_the_state_after_the_baselines_own_calls(upstream):
    name, mod = upstream
    watch = UpstreamWatch({name: mod})
    mod.cache = {}  # what a first call may build lazily
    watch.accept()
    assert watch.changed() == []
    mod.cache = {"other": 1}
    assert watch.changed() == [f"{name}.cache"]


def test_candidate_threads_names_threads_running_the_candidates_code(tmp_path):
    path = tmp_path / "cand.py"
    path.write_text("def idle(ev):\n    ev.wait()\n")
    spec = importlib.util.spec_from_file_location(f"kda_test_cand_{uuid.uuid4().hex[:8]}", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    ev = threading.Event()
    mine = threading.Thread(target=mod.idle, args=(ev,), name="cand-idle", daemon=True)
    other = threading.Thread(target=ev.wait, name="harness-idle", daemon=True)
    mine.start()
    other.start()
    try:
        found = candidate_threads((str(tmp_path),))
        assert found == ["thread 'cand-idle' started by the candidate (running idle from cand.py)"]
        assert candidate_threads(("/nonexistent-root",)) == []
    finally:
        ev.set()
        mine.join()
        other.join()


def test_copyregs_slot_name_cache_on_a_triton_class_is_not_a_change(upstream):
    """Copying or pickling a JIT function (torch.compile, the profiler) makes copyreg cache `__slotnames__` on its
    class: seen on an H100 on every row of the first bench run with the watch, and no change to any launch."""
    import copy

    name, mod = upstream
    watch = UpstreamWatch({name: mod})
    from triton.runtime.jit import JITFunction

    had = "__slotnames__" in vars(JITFunction)
    copy.copy(mod.kernel)
    assert had or "__slotnames__" in vars(JITFunction)
    assert watch.changed() == []
