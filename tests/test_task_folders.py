"""What every task folder must satisfy, checked for each one: the frozen rows match their generator, production rows
say where they come from and regression rows say why they exist, and the solution keeps the static rules."""
import subprocess
import sys

import pytest

from kda.harness.guards import static_violations
from kda.paths import all_task_dirs
from kda.task import Task

TASKS = [p.name for p in all_task_dirs()]


@pytest.mark.parametrize("name", TASKS)
def test_workloads_match_their_generator(name):
    gen = Task.load(name).path / "bench" / "make_workloads.py"
    proc = subprocess.run([sys.executable, str(gen), "--check"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr


@pytest.mark.parametrize("name", TASKS)
def test_rows_carry_provenance(name):
    task = Task.load(name)
    prod = [r for r in task.rows if r.production]
    assert prod and all(r.source.startswith(("captured:", "derived:")) for r in prod)
    assert all(r.source.startswith("regression:") for r in task.rows if not r.production)
    assert not any(r.cpu for r in prod)  # production rows are GPU-sized


@pytest.mark.parametrize("name", TASKS)
def test_solution_keeps_the_static_rules(name):
    task = Task.load(name)
    assert task.solution_files() and static_violations(task.solution_files()) == []
