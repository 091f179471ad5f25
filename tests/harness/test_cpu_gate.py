"""The CPU correctness gate of every task whose candidate is Triton, through Triton's interpreter (what CI can check).

A baseline that is not Triton (CUDA, CuTe DSL) cannot run there: its arm is skipped, every row says so, and the
candidate is held to the oracle alone. Spawns one worker per task (TRITON_INTERPRET=1). The default run checks each
task's covering sample of CPU rows (kda/definition/sample.py: every entry point, dtype, layout and distribution of
the grid); `pytest -m slow` checks every CPU row.
"""
import pytest

from kda.definition.sample import representative
from kda.harness.runner import RunOptions, run_task
from kda.core.paths import all_task_dirs
from kda.definition.task import Task

TRITON_TASKS = [p.name for p in all_task_dirs() if Task.load(p).cfg["task"]["candidate_language"] == "triton"]


@pytest.mark.slow(inside=True)
@pytest.mark.parametrize("name", TRITON_TASKS)
def test_cpu_gate_passes_every_cpu_row(name, full_grid):
    task = Task.load(name)
    rows = task.select(cpu_only=True)
    picked = rows if full_grid else representative(rows, 6)
    out = run_task(task, RunOptions(mode="check", device="cpu", write=False, quiet=True, salt=7,
                                    rows=[r.id for r in picked]))
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
