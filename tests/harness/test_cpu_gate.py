"""The CPU correctness gate of every task whose candidate is Triton, through Triton's interpreter (what CI can check).

A baseline that is not Triton (CUDA, CuTe DSL) cannot run there: its arm is skipped, every row says so, and the
candidate is held to the oracle alone. Spawns one worker per task (TRITON_INTERPRET=1). The default run checks each
task's covering sample of CPU rows (kda/definition/sample.py: every entry point, dtype, layout and distribution of
the grid); `pytest -m slow` checks every CPU row. The tasks' workers run a few at a time, as the exploit zoo's do:
each is a single-threaded interpreter in a process of its own.
"""
import os
from concurrent.futures import ThreadPoolExecutor

import pytest

from kda.definition.sample import representative
from kda.harness.runner import RunOptions, run_task
from kda.core.paths import all_task_dirs
from kda.definition.task import Task

TRITON_TASKS = [p.name for p in all_task_dirs() if Task.load(p).cfg["task"]["candidate_language"] == "triton"]


def _picked(task: Task, full: bool):
    rows = task.select(cpu_only=True)
    return rows if full else representative(rows, 4)


@pytest.fixture(scope="module")
def gate_runs(full_grid) -> dict:
    """task name -> run_task output (or the exception it raised), every task's gate started up front."""

    def one(name):
        task = Task.load(name)
        try:
            return name, run_task(task, RunOptions(mode="check", device="cpu", write=False, quiet=True, salt=7,
                                                   rows=[r.id for r in _picked(task, full_grid)]))
        except Exception as e:  # noqa: BLE001 - reported by the test of that task
            return name, e

    with ThreadPoolExecutor(max_workers=max(1, min(4, os.cpu_count() or 1))) as pool:
        return dict(pool.map(one, TRITON_TASKS))


@pytest.mark.slow(inside=True)
@pytest.mark.parametrize("name", TRITON_TASKS)
def test_cpu_gate_passes_every_cpu_row(name, full_grid, gate_runs):
    task = Task.load(name)
    picked = _picked(task, full_grid)
    out = gate_runs[name]
    if isinstance(out, BaseException):
        raise out
    failed = {r["id"]: r["details"] for r in out["rows"] if r["status"] != "PASS"}
    assert not failed, failed
    assert out["summary"]["rows_total"] == len(picked) > 0
    # Every checked row compared the candidate against the oracle at least twice per trial.
    assert all(r["checks"]["candidate"]["checks"] >= 2 * task.cfg["check"]["trials"] for r in out["rows"])
    assert "path" not in out  # the CPU gate never writes a results file: no timing was taken
    assert out["provenance"]["device_us_start"] == "lead call"  # every run names its device_us protocol
    if task.cfg["task"]["language"] != "triton":
        # The baseline was skipped, not silently missing: no baseline check ran and every row says why.
        assert not any("baseline" in r["checks"] for r in out["rows"])
        assert all(any(n.startswith("baseline not run") for n in r["notes"]) for r in out["rows"])
