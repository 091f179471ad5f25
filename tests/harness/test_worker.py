"""kda/harness/worker.py: the kernel-origin check runs in every mode on a GPU (a memset on the candidate's path failed
group_norm_silu's benchmark after `kda check` had passed it) and flags PyTorch's kernels, memsets included."""
import ast
import inspect
import textwrap
from types import SimpleNamespace

from kda.harness import worker


def _runner(kernels, aa=False):
    r = object.__new__(worker.RowRunner)
    r.args = SimpleNamespace(aa=aa)
    r.candidate_kernels = lambda: kernels
    return r


def test_kernel_origin_flags_pytorch_kernels_and_memsets():
    result = {"notes": []}
    _runner(["Memset (Device)", "gn_resident_kernel", "void at::native::fill_kernel"]).kernel_origin(result)
    assert result["kernels"][1] == "gn_resident_kernel"
    assert result["torch_kernels"] == ["Memset (Device)", "void at::native::fill_kernel"]


def test_kernel_origin_is_not_judged_in_aa_runs_and_notes_a_missing_profiler():
    result = {"notes": []}
    _runner(["Memset (Device)"], aa=True).kernel_origin(result)
    assert result["torch_kernels"] == []

    def broken():
        raise RuntimeError("CUPTI unavailable")

    r = _runner([])
    r.candidate_kernels = broken
    result = {"notes": []}
    r.kernel_origin(result)
    assert "torch_kernels" not in result and "kernel-origin check skipped" in result["notes"][0]


def test_run_calls_the_kernel_origin_check_outside_the_bench_branch():
    """`kda check` and `kda bench` both reach it: the call sits under `if self.gpu`, not under `if bench`."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(worker.RowRunner.run)))
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and getattr(n.func, "attr", "") == "kernel_origin"]
    assert len(calls) == 1
    parents = {id(c): p for p in ast.walk(tree) for c in ast.iter_child_nodes(p)}
    node, guards = calls[0], []
    while id(node) in parents:
        node = parents[id(node)]
        if isinstance(node, ast.If):
            guards.append(ast.unparse(node.test))
    assert guards == ["self.gpu"], guards



def test_the_interpreter_shim_answers_torch_cpu_for_the_current_device_module(monkeypatch):
    # Upstream norm.py asks torch.get_device_module().current_device() at import; under the interpreter that must be
    # torch.cpu with inert stand-ins, whichever module this torch answers without a GPU (2.14: torch.cuda)
    import torch

    from kda.harness import worker

    monkeypatch.setattr(torch, "get_device_module", torch.get_device_module)
    for name in ("get_device_properties", "device"):
        if hasattr(torch.cpu, name):
            monkeypatch.setattr(torch.cpu, name, getattr(torch.cpu, name))
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    worker._interpreter_device_module()
    mod = torch.get_device_module()
    assert mod is torch.cpu
    assert mod.get_device_properties(mod.current_device()).warp_size == 32
    with mod.device("cpu"):
        pass
    assert torch.get_device_module("cpu") is torch.cpu  # a named device still goes to torch
    shim = torch.get_device_module
    worker._interpreter_device_module()
    assert torch.get_device_module is shim  # not wrapped twice
