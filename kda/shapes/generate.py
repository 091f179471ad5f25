"""`kda shapes [--check]`: run every task's bench/make_workloads.py in memory, then write or compare workloads.json.

Generators call `kda.definition.workloads.write_or_check`; while one runs here that name is swapped for a function that
validates the rows and hands them over instead of touching the file, so the comparison can name the task and row.
"""
from __future__ import annotations

import json
import runpy
import sys
from dataclasses import dataclass
from pathlib import Path

from kda.definition import workloads
from kda.core.errors import KdaError


@dataclass
class Generated:
    task: str
    path: Path
    rows: list[dict]

    @property
    def text(self) -> str:
        return json.dumps(self.rows, indent=1) + "\n"


def run_generator(task_dir: Path) -> Generated:
    gen = task_dir / "bench" / "make_workloads.py"
    if not gen.is_file():
        raise KdaError(f"{task_dir.name}: no generator at {gen}")
    captured: list[tuple[Path, list[dict]]] = []

    def capture(path, rows, argv):
        workloads.parse_rows(rows, f"{path} (generated)")
        captured.append((Path(path), rows))

    saved_argv, saved = sys.argv, workloads.write_or_check
    workloads.write_or_check = capture  # the generator imports the name while run_path executes it
    sys.argv = [str(gen)]
    try:
        runpy.run_path(str(gen), run_name="__main__")
    except SystemExit as e:
        raise KdaError(f"{task_dir.name}: {gen} exited: {e.code}") from None
    finally:
        sys.argv, workloads.write_or_check = saved_argv, saved
    if len(captured) != 1:
        raise KdaError(f"{task_dir.name}: {gen} produced {len(captured)} workloads files; expected exactly one")
    path, rows = captured[0]
    return Generated(task_dir.name, path, rows)


def differences(gen: Generated) -> list[str]:
    """Why the committed file differs from the generated rows: one line per row, naming the task and the row."""
    if not gen.path.is_file():
        return [f"{gen.task}: {gen.path} does not exist"]
    try:
        committed = json.loads(gen.path.read_text())
    except ValueError as e:
        return [f"{gen.task}: {gen.path} is not valid JSON: {e}"]
    if not isinstance(committed, list):
        return [f"{gen.task}: {gen.path} is not a JSON list of rows"]
    old = {r.get("id"): r for r in committed if isinstance(r, dict)}
    new = {r["id"]: r for r in gen.rows}
    out = []
    for rid, row in new.items():
        if rid not in old:
            out.append(f"{gen.task}: row {rid!r} is generated but missing from {gen.path.name}")
        elif old[rid] != row:
            keys = sorted(k for k in set(row) | set(old[rid]) if row.get(k) != old[rid].get(k))
            out.append(f"{gen.task}: row {rid!r} differs in {', '.join(keys)}")
    out += [f"{gen.task}: row {rid!r} is in {gen.path.name} but no longer generated" for rid in old if rid not in new]
    if not out and gen.path.read_text() != gen.text:
        out.append(f"{gen.task}: {gen.path.name} holds the same rows but differs in order or formatting")
    return out


def sync(task_dirs: list[Path], check: bool) -> tuple[list[str], list[str]]:
    """(messages, problems): with check, problems lists every drift; without, out-of-date files are rewritten."""
    messages, problems = [], []
    for task_dir in task_dirs:
        gen = run_generator(task_dir)
        diff = differences(gen)
        if not diff:
            messages.append(f"{gen.task}: {len(gen.rows)} rows, up to date")
        elif check:
            problems += diff
        else:
            gen.path.write_text(gen.text)
            messages.append(f"{gen.task}: wrote {len(gen.rows)} rows to {gen.path} ({len(diff)} change(s))")
    return messages, problems
