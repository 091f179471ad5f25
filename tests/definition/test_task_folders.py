"""What every task folder must satisfy, checked for each one: the frozen rows match their generator, production rows
say where they come from and regression rows say why they exist, and the solution keeps the static rules."""
import subprocess
import sys

import pytest

from kda.harness.guards import static_violations
from kda.core.paths import all_task_dirs
from kda.definition.task import Task

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


@pytest.mark.parametrize("name", TASKS)
def test_every_ledger_reference_names_the_results_file_it_read(name):
    """A ledger entry's results_ref (path, lines, sha256) must still find those bytes: in the work tree, or, for a
    superseded file, in git at the commit the reference names. A results file overwritten or removed without its
    reference following would leave the entry citing numbers nobody can read back."""
    from kda.core.errors import KdaError
    from kda.evidence import ledger
    from kda.harness.results_file import ref_bytes

    task_dir = Task.load(name).path
    for e in ledger.read(task_dir):
        ref = e["results_ref"]
        if ref is None:
            continue
        if ref.get("commit") and _shallow():
            continue  # a shallow clone lacks the commits that hold superseded files
        try:
            data = ref_bytes(task_dir, ref)  # the decompressed bytes, sha256 checked
        except KdaError as err:
            pytest.fail(f"{name} {e['id']}: {err}")
        assert data.count(b"\n") == ref["lines"], f"{name} {e['id']}: {ref['path']} line count"


def _shallow() -> bool:
    from kda.core.paths import repo_root

    out = subprocess.run(["git", "rev-parse", "--is-shallow-repository"], cwd=repo_root(), capture_output=True,
                         text=True).stdout
    return out.strip() != "false"


def test_no_results_history_folder_is_left():
    """Superseded results files live in git history, reached through the ledger (kda.evidence.archive), not in a
    results/history/ folder of the tree."""
    assert not [p for p in all_task_dirs() if (p / "results" / "history").exists()]


@pytest.mark.parametrize("name", TASKS)
def test_every_kept_results_file_is_cited_by_the_ledger(name):
    """The other direction: each results file in results/ is some entry's results_ref, or named in an
    entry's text (decisions taken from a bench whose own measurement line was not kept name their file), so every
    committed run can be traced to the entry that reports it."""
    from kda.evidence import ledger
    from kda.harness.results_file import list_files

    task_dir = Task.load(name).path
    entries = ledger.read(task_dir)
    cited = {e["results_ref"]["path"] for e in entries if e["results_ref"]}
    text = " ".join(e[k] for e in entries for k in ("hypothesis", "change", "reason"))
    kept = {p.relative_to(task_dir).as_posix() for p in list_files(task_dir / "results")}
    # texts written before the history was compressed name a file without its .gz
    orphans = sorted(p for p in kept - cited if p.rsplit("/", 1)[-1].removesuffix(".gz") not in text)
    assert not orphans, f"{name}: results files no ledger entry cites: {orphans}"
