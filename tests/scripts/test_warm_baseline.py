"""scripts/warm_baseline.py on a CPU: which rows it builds (the warm-up itself needs a GPU)."""

from kda.definition.task import Task
from script_support import load_script


WARM = load_script("warm_baseline")


def test_baseline_builds_one_row_per_adapter_build_key():
    task = Task.load("qknorm_rope")
    rows = task.select()
    first = WARM.builds(task, peer=False)
    keys = {task.adapter.build_key(r) for r in rows}
    assert set(first) == keys
    assert len(first) < len(rows)  # rows share signatures: that is what the key saves
    by_id = {r.id: r for r in rows}
    assert all(task.adapter.build_key(by_id[rid]) == key for key, rid in first.items())


def test_peer_builds_every_row_because_the_worker_compiles_the_peer_per_row():
    task = Task.load("qknorm_rope")
    first = WARM.builds(task, peer=True)
    assert sorted(first.values()) == sorted(r.id for r in task.select())


def test_a_task_without_build_key_builds_every_row():
    task = Task.load("group_norm_silu")
    assert not hasattr(task.adapter, "build_key")
    assert len(WARM.builds(task, peer=False)) == len(task.select())


def test_a_sweep_warms_the_rows_the_sweep_bench_draws():
    from kda.definition.sweep import build

    task = Task.load("norm_infer")
    first = WARM.builds(task, peer=True, sweep=(5, 7))
    assert list(first.values()) == [r["id"] for r in build(task, 5, 7).rows]
    assert not set(first.values()) & {r.id for r in task.select()}


def test_warm_inputs_hold_values_the_row_declares_not_whatever_was_allocated():
    """Left as allocated, qknorm_rope's positions held garbage and the compiled peer's gather tripped a device-side
    assert on the H200 (2026-11-28): the warm-up fills every input as the worker does."""
    import torch

    task = Task.load("qknorm_rope")
    row = next(r for r in task.select(cpu_only=True) if r.tensors.get("positions") is not None)
    inputs = WARM.warm_inputs(row, "cpu")
    pos, cache = inputs["positions"], inputs["cos_sin_cache"]
    assert torch.equal(pos, torch.arange(pos.numel())) and pos.numel() <= cache.shape[0]  # dist "arange"
    assert torch.isfinite(inputs["q"]).all() and float(inputs["q"].float().abs().max()) > 0
