"""A second pinned release beside the baseline (issue 40): kda/vendor/importer.py's alias finder loads the later
release's vendored files under `<top>_<version>` with the package's imports renamed, so both releases run in one
process; and the real thing, SGLang 0.5.23's fuse_scale_shift next to 0.5.15's, through Triton's interpreter."""
import importlib
import os
import subprocess
import sys
import textwrap
import uuid

import pytest

from kda.core.errors import KdaError
from kda.core.paths import repo_root
from kda.definition.task import Task
from kda.vendor.fetch import vendor_task
from kda.vendor.importer import AliasedUpstreamFinder, GuardedUpstreamFinder, alias_name, install_alias_finder, \
    install_finder


def _release(root, top, value):
    """One release of a fake package: a kernel module that imports the rest in every way vendored code does."""
    pkg = root / top / "ops"
    pkg.mkdir(parents=True)
    (root / top / "numerics.py").write_text(f"VALUE = {value}\n")
    (pkg / "kernel.py").write_text(textwrap.dedent(f"""\
        import importlib
        import {top}.numerics
        from {top}.numerics import VALUE
        from {top} import numerics as direct

        def entry():
            late = importlib.import_module("{top}.numerics")  # a string naming the package, as platform.py has
            return VALUE, {top}.numerics.VALUE, direct.VALUE, late.VALUE, __name__
        """))
    return [f"{top}/numerics.py", f"{top}/ops/kernel.py"]


def test_two_releases_of_one_package_load_side_by_side_each_importing_its_own_files(tmp_path):
    top = f"fakepkg_{uuid.uuid4().hex[:8]}"
    old_files, new_files = _release(tmp_path / "old", top, 1), _release(tmp_path / "new", top, 2)
    alias = alias_name(top, "9.1")
    try:
        install_finder(top, tmp_path / "old", old_files, [])
        finder = install_alias_finder(top, "9.1", tmp_path / "new", new_files, [])
        assert finder.alias == alias == f"{top}_9_1"
        old = importlib.import_module(f"{top}.ops.kernel").entry()
        new = importlib.import_module(f"{alias}.ops.kernel").entry()
        assert old == (1, 1, 1, 1, f"{top}.ops.kernel")
        assert new == (2, 2, 2, 2, f"{alias}.ops.kernel")  # every way of importing stayed inside the later release
        assert install_alias_finder(top, "9.1", tmp_path / "new", new_files, []) is finder  # once per alias
        with pytest.raises(ImportError, match="upstream_latest"):
            importlib.import_module(f"{alias}.not_vendored")
    finally:
        sys.meta_path[:] = [f for f in sys.meta_path if not (
            isinstance(f, GuardedUpstreamFinder) and f.top == top or isinstance(f, AliasedUpstreamFinder)
            and f.alias == alias)]
        for name in [n for n in sys.modules if n.startswith(top)]:
            del sys.modules[name]


def test_two_tasks_of_one_process_share_the_alias_and_each_imports_its_own_files(tmp_path):
    """kda e2e loads every task's later release in one process: the second task's files must join the alias's
    finder, not be dropped because a finder for the alias exists (the H200 run of 2026-11-28)."""
    top = f"fakepkg_{uuid.uuid4().hex[:8]}"
    first = _release(tmp_path / "a", top, 1)
    other = tmp_path / "b" / top / "other"
    other.mkdir(parents=True)
    (other / "kernel2.py").write_text(f"from {top}.numerics import VALUE\n\ndef entry():\n    return VALUE + 10\n")
    alias = alias_name(top, "9.1")
    try:
        finder = install_alias_finder(top, "9.1", tmp_path / "a", first, [])
        assert importlib.import_module(f"{alias}.ops.kernel").entry()[0] == 1
        assert install_alias_finder(top, "9.1", tmp_path / "b", [f"{top}/other/kernel2.py"], []) is finder
        assert importlib.import_module(f"{alias}.other.kernel2").entry() == 11  # the second task's own file
    finally:
        sys.meta_path[:] = [f for f in sys.meta_path if not (isinstance(f, AliasedUpstreamFinder)
                                                             and f.alias == alias)]
        for name in [n for n in sys.modules if n.startswith(top)]:
            del sys.modules[name]


def test_a_task_without_a_later_release_says_so():
    with pytest.raises(KdaError, match="upstream_latest.version is empty"):
        vendor_task(Task.load("group_norm_silu").cfg, section="upstream_latest")


CHECK = textwrap.dedent("""\
    import torch
    from kda.definition.task import Task
    from kda.vendor.fetch import vendor_task
    from kda.vendor.importer import load_entry_points, load_latest_entry_points
    t = Task.load("fuse_scale_shift")
    old = load_entry_points(t.cfg, vendor_task(t.cfg))
    new = load_latest_entry_points(t.cfg, vendor_task(t.cfg, section="upstream_latest"))
    assert sorted(old) == sorted(new)
    assert new["fuse_scale_shift_kernel"].__module__.startswith("sglang_0_5_23.kernels.ops.diffusion")
    g = torch.Generator().manual_seed(0)
    x, sc, sh = (torch.randn(*s, generator=g) for s in ((2, 64, 256), (2, 1, 256), (2, 1, 256)))
    a, b = old["fuse_scale_shift_kernel"](x, sc, sh), new["fuse_scale_shift_kernel"](x, sc, sh)
    print((a - b).abs().max().item(), (b - (x * (1 + sc) + sh)).abs().max().item())
    """)


def test_sglang_0_5_23_fuse_scale_shift_runs_beside_0_5_15_and_agrees_with_it():
    """The same kernel body under a new launch (docs/sglang-0.5.23.md): equal outputs on a broadcast row. -O as the
    CPU worker runs upstream (its wrappers assert CUDA tensors); the interpreter runs the Triton kernels."""
    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": str(repo_root())}
    proc = subprocess.run([sys.executable, "-O", "-c", CHECK], cwd=repo_root(), env=env, capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    old_vs_new, new_vs_math = map(float, proc.stdout.split()[-2:])
    assert old_vs_new == 0.0 and new_vs_math < 1e-5


AGREE = textwrap.dedent("""\
    import sys
    import torch
    from kda.definition.task import Task
    from kda.definition.workloads import build_inputs, refill_inputs
    from kda.vendor.fetch import vendor_task
    from kda.vendor.importer import load_entry_points, load_latest_entry_points
    from kda.harness.worker import _interpreter_autotune, _interpreter_device_module
    _interpreter_autotune(); _interpreter_device_module()  # as the CPU worker runs upstream
    t = Task.load(sys.argv[1])
    old = load_entry_points(t.cfg, vendor_task(t.cfg))
    new = load_latest_entry_points(t.cfg, vendor_task(t.cfg, section="upstream_latest"))
    assert sorted(old) == sorted(new), (sorted(old), sorted(new))
    assert all(f.__module__.startswith("sglang_0_5_23.") for f in new.values())
    rows = {}
    for r in t.select(cpu_only=True):  # each function's CPU-sized rows
        rows.setdefault(r.function, r)
    assert rows, "no CPU row"
    for fn, row in sorted(rows.items()):
        inputs = build_inputs(row, torch.device("cpu"))
        refill_inputs(row, inputs, row.seed)  # values as a trial draws them
        a = t.adapter.call_baseline(old, row, inputs, {})
        b = t.adapter.call_baseline(new, row, inputs, {})
        for k in a:  # bytes that differ: bit for bit, NaN included (the interpreter leaves some in LTX-2's rows)
            print(fn, k, (a[k].contiguous().view(torch.uint8) != b[k].contiguous().view(torch.uint8)).sum().item())
    """)


@pytest.mark.parametrize("task", ["norm_infer", "rotary_embedding"])
def test_sglang_0_5_23_runs_the_same_kernels_as_0_5_15_bit_for_bit(task):
    """docs/sglang-0.5.23.md: these tasks' 0.5.23 files differ from 0.5.15's only in imports and fallback binding
    (rotary's LTX-2 file is byte-identical). Through the adapter, on each function's first CPU row, through Triton's
    interpreter: the later release's outputs equal the baseline's exactly. A wrong pin, a file that falls back to
    torch or an entry point bound to the wrong function would show as a difference or a failed import."""
    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": str(repo_root())}
    proc = subprocess.run([sys.executable, "-O", "-c", AGREE, task], cwd=repo_root(), env=env, capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = [ln.split() for ln in proc.stdout.splitlines()]
    pinned = {e.rsplit(":", 1)[1] for e in Task.load(task).cfg["upstream_latest"]["entry_points"]}
    assert {ln[0] for ln in lines} == pinned  # every pinned entry point ran on a row
    assert all(int(ln[2]) == 0 for ln in lines), proc.stdout


CALLS_LATEST = textwrap.dedent("""\
    import torch
    from kda.definition.task import Task
    from kda.harness.guards import CallTracer
    from kda.harness.worker import _latest_roots
    from kda.vendor.fetch import vendor_task
    from kda.vendor.importer import load_latest_entry_points
    t = Task.load("fuse_scale_shift")
    new = load_latest_entry_points(t.cfg, vendor_task(t.cfg, section="upstream_latest"))
    x, sc, sh = torch.randn(1, 8, 64), torch.randn(1, 1, 64), torch.randn(1, 1, 64)
    with CallTracer(set(), _latest_roots(t)) as tracer:  # the worker's forbidden prefixes include these
        new["fuse_scale_shift_kernel"](x, sc, sh)
    print(len(tracer.hits), tracer.hits[0] if tracer.hits else "")
    """)


def test_a_candidate_calling_todays_release_is_a_forbidden_call():
    """tests/zoo/calls_latest.py's defence on the CPU: a call into 0.5.23's vendored files, its Python wrapper and
    its Triton kernel's launch, is a hit of the call tracer under the prefixes the worker forbids (kda.harness.worker
    ._latest_roots); a task pinning no later release forbids nothing more."""
    from kda.harness.worker import _latest_roots

    assert _latest_roots(Task.load("group_norm_silu")) == ()
    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": str(repo_root())}
    proc = subprocess.run([sys.executable, "-O", "-c", CALLS_LATEST], cwd=repo_root(), env=env, capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    hits, _, first = proc.stdout.strip().partition(" ")
    assert int(hits) > 0 and "sglang-0.5.23" in first, proc.stdout


def test_both_releases_register_their_custom_op_under_one_name_without_a_clash(tmp_path):
    """SGLang 0.5.15 and 0.5.23 both register `sglang::fused_norm_scale_shift` (torch.library); torch refuses the
    second registration of a name, so the later release's ops go into the alias's namespace."""
    import torch

    top = f"fakeop_{uuid.uuid4().hex[:8]}"
    alias = alias_name(top, "9.1")
    files = []
    for root, value in ((tmp_path / "old", 1.0), (tmp_path / "new", 2.0)):
        (root / top).mkdir(parents=True)
        (root / top / "op.py").write_text(textwrap.dedent(f"""\
            import torch

            @torch.library.custom_op("{top}::scaled", mutates_args=())
            def scaled(x: torch.Tensor) -> torch.Tensor:
                return x * {value}
            """))
        files = [f"{top}/op.py"]
    try:
        install_finder(top, tmp_path / "old", files, [])
        install_alias_finder(top, "9.1", tmp_path / "new", files, [])
        old = importlib.import_module(f"{top}.op").scaled
        new = importlib.import_module(f"{alias}.op").scaled
        x = torch.ones(2)
        assert float(old(x)[0]) == 1.0 and float(new(x)[0]) == 2.0
        assert hasattr(getattr(torch.ops, top), "scaled") and hasattr(getattr(torch.ops, alias), "scaled")
    finally:
        sys.meta_path[:] = [f for f in sys.meta_path if not (
            isinstance(f, GuardedUpstreamFinder) and f.top == top or isinstance(f, AliasedUpstreamFinder)
            and f.alias == alias)]
        for name in [n for n in sys.modules if n.startswith(top)]:
            del sys.modules[name]


CUTE_BOTH = textwrap.dedent("""\
    import sys
    from unittest import mock
    import torch
    # No CuTe DSL wheel for this Python on the CPU machine (the GPU machine carries one): stand-ins, enough to run
    # the modules' top level, so what is checked is the import closure and the registrations, not the kernels.
    for name in ("cutlass", "cutlass.cute", "cuda", "cuda.bindings", "cuda.bindings.driver", "einops"):
        sys.modules.setdefault(name, mock.MagicMock(name=name))
    from kda.definition.task import Task
    from kda.vendor.fetch import vendor_task
    from kda.vendor.importer import load_entry_points, load_latest_entry_points
    t = Task.load("cutedsl_norm_scale_shift")
    old = load_entry_points(t.cfg, vendor_task(t.cfg))
    new = load_latest_entry_points(t.cfg, vendor_task(t.cfg, section="upstream_latest"))
    assert sorted(old) == sorted(new), (sorted(old), sorted(new))
    # torch.library custom ops (CustomOpDef): each release's under its own namespace
    assert {getattr(f, "_namespace", None) for f in new.values()} == {"sglang_0_5_23"}
    assert {getattr(f, "_namespace", None) for f in old.values()} == {"sglang"}
    for fn in sorted(new):
        assert hasattr(torch.ops.sglang, fn) and hasattr(torch.ops.sglang_0_5_23, fn), fn
    import importlib
    native = importlib.import_module("sglang_0_5_23.kernels.kda_kernels.norm_scale_shift_jit")
    x = torch.zeros(1, 4, 3072, dtype=torch.bfloat16)
    assert native.try_fused_norm_scale_shift(x, None, None, x[0, 0], x[0, 0], "layer", 1e-6) is None
    try:  # what the module would build on a Blackwell GPU: the shim refuses, naming why
        native.load_jit("norm_scale_shift_native", cuda_files=[])
    except RuntimeError as e:
        print("native:", "Blackwell-only" in str(e))
    # a DiT block (kda e2e wan) loads another task's 0.5.23 kernels into the same alias after these
    f = Task.load("fuse_scale_shift")
    assert load_latest_entry_points(f.cfg, vendor_task(f.cfg, section="upstream_latest"))
    print("ok", " ".join(sorted(new)))
    """)


def test_sglang_0_5_23_cute_norm_loads_beside_0_5_15_each_op_in_its_own_namespace():
    """cutedsl_norm_scale_shift's [upstream_latest]: 0.5.23's rewrite registers the same custom-op names as 0.5.15's
    kernel; both load in one process, 0.5.23's under `sglang_0_5_23::`. Its Blackwell-only native path imports the
    JIT shim and declines a tensor off CUDA (on Hopper it declines before building), so the CuTe DSL kernel is what
    the facade runs there."""
    env = {**os.environ, "PYTHONPATH": str(repo_root())}
    proc = subprocess.run([sys.executable, "-c", CUTE_BOTH], cwd=repo_root(), env=env, capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "ok fused_norm_scale_shift fused_scale_residual_norm_scale_shift" in proc.stdout
    assert "native: True" in proc.stdout


LATEST_SIDE_BY_SIDE = textwrap.dedent("""\
    import sys
    from kda.harness.worker import _interpreter_autotune, _interpreter_device_module
    _interpreter_autotune(); _interpreter_device_module()
    from kda.definition.task import Task
    from kda.vendor.fetch import vendor_task
    from kda.vendor.importer import load_latest_entry_points
    names = []
    for t in sys.argv[1:]:
        task = Task.load(t)
        names += sorted(load_latest_entry_points(task.cfg, vendor_task(task.cfg, section="upstream_latest")))
    print(" ".join(names))
    """)


@pytest.mark.parametrize("tasks", [("norm_infer", "fuse_scale_shift"), ("fuse_scale_shift", "norm_infer")])
def test_todays_release_of_two_tasks_loads_in_one_process_in_either_order(tasks):
    """The HunyuanVideo blocks' `latest` arm (H200, 2026-11-28): fuse_scale_shift's 0.5.23 files want the shim
    `sglang.srt.utils`, norm_infer's the shim `sglang.srt.utils.custom_op` below it; whichever loaded first, the
    second failed to import."""
    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": str(repo_root())}
    proc = subprocess.run([sys.executable, "-O", "-c", LATEST_SIDE_BY_SIDE, *tasks], cwd=repo_root(), env=env,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert {"fuse_scale_shift_kernel", "norm_infer"} <= set(proc.stdout.split()), proc.stdout
