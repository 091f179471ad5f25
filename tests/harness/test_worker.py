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


def test_the_clean_worker_judges_no_candidate_and_its_candidate_arm_is_the_baseline_again():
    """--clean imports no candidate: as in an A/A run, its 'candidate' arm calls the baseline, and nothing of the
    candidate's checks (poison, tracing, kernel origin, the repeat check) applies to it."""
    calls = []
    r = object.__new__(worker.RowRunner)
    r.args = SimpleNamespace(aa=False, clean=True)
    r.task = SimpleNamespace(adapter=SimpleNamespace(
        call_baseline=lambda up, row, inputs, out: calls.append(("baseline", out)),
        call_candidate=lambda sol, row, inputs, out: calls.append(("candidate", out))))
    r.row, r.upstream, r.solution, r.latest = "row", "upstream", None, None
    assert not r.judged and not r.destination_arm("candidate")
    arms = r._calls({}, "out_b", "out_c")
    arms["candidate"]()
    assert calls == [("baseline", "out_c")]
    r.args = SimpleNamespace(aa=False, clean=False)
    assert r.judged and r.destination_arm("candidate")


def test_the_baseline_alone_is_timed_by_the_same_trial_loop_as_beside_the_candidate():
    """run_clean takes its samples from run() (the candidate worker's inner count, `samples` trials): a tight loop of
    the baseline alone ran host-bound rows of honest candidates up to 3.9x faster (H200, 2026-11-28)."""
    seen = {}

    def fake_run(row, mode, hand_over=None, trials=None, inner=None):
        seen.update(row=row, mode=mode, trials=trials, inner=inner)
        return {"inner": inner, "arms": {"baseline": {"device_us": [1.0] * trials, "graph_us": [2.0] * trials,
                                                      "wall_us": [3.0] * trials, "graph_error": None},
                                         "candidate": {"device_us": [9.0] * trials}}}

    r = object.__new__(worker.RowRunner)
    r.run = fake_run
    row = SimpleNamespace(id="r1")
    out = r.run_clean(row, 12, 5)
    assert seen == {"row": row, "mode": "bench", "trials": 5, "inner": 12}
    assert out == {"type": "clean", "id": "r1", "inner": 12, "device_us": [1.0] * 5, "graph_us": [2.0] * 5,
                   "graph_error": None}
    r.run = lambda *a, **k: {"arms": {}, "arm_errors": {"baseline": "RuntimeError: boom"}}
    import pytest
    with pytest.raises(RuntimeError, match="boom"):
        r.run_clean(row, 12, 5)


def test_todays_release_is_called_as_the_baseline_is_with_its_own_entry_points():
    """The `latest` peer (issue 40): [upstream_latest]'s functions by the baseline's names, through the adapter's
    call_baseline, into the baseline's outputs; absent where the task pins no later release."""
    calls = []
    r = object.__new__(worker.RowRunner)
    r.args = SimpleNamespace(aa=False, clean=False)
    r.task = SimpleNamespace(adapter=SimpleNamespace(
        call_baseline=lambda up, row, inputs, out: calls.append((up, out)),
        call_candidate=lambda sol, row, inputs, out: calls.append(("candidate", out))))
    r.row, r.upstream, r.solution, r.latest = "row", {"f": "0.5.15"}, "solution", {"f": "0.5.23"}
    arms = r._calls({}, "out_b", "out_c")
    assert sorted(arms) == ["baseline", "candidate", "latest"]
    arms["latest"]()
    arms["baseline"]()
    assert calls == [({"f": "0.5.23"}, "out_b"), ({"f": "0.5.15"}, "out_b")]
    r.latest = None
    assert sorted(r._calls({}, "out_b", "out_c")) == ["baseline", "candidate"]


def test_a_later_release_that_does_not_load_is_a_note_and_the_bench_goes_on(monkeypatch):
    from kda.definition.task import Task

    task = Task.load("fuse_scale_shift")
    args = SimpleNamespace(aa=False, mode="bench", device="cuda")
    monkeypatch.setattr(worker, "LATEST_STATUS", {})

    def broken(*a, **k):
        raise ImportError("no module named cutlass")

    monkeypatch.setattr(worker, "vendor_task", broken)
    assert worker._load_latest(task, args, None) == (None, None)
    assert worker.LATEST_STATUS == {"version": "0.5.23", "error": "ImportError: no module named cutlass"}
    # nothing is tried where no bench compares with it
    monkeypatch.setattr(worker, "LATEST_STATUS", {})
    assert worker._load_latest(task, SimpleNamespace(aa=False, mode="check", device="cuda"), None) == (None, None)
    assert worker.LATEST_STATUS == {}
