"""A task folder: config, workloads, and the adapter, oracle and solution modules it holds."""
from __future__ import annotations

import importlib.util
import sys
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from types import ModuleType

from kda.definition.config import TaskConfig, load_config
from kda.core.errors import KdaError
from kda.core.paths import resolve_task
from kda.definition.workloads import Row, load_rows

ADAPTER_API = ("output_specs", "call_baseline", "call_candidate", "bytes_moved")


def load_module(path: Path, name: str) -> ModuleType:
    if not path.is_file():
        raise KdaError(f"{path}: no such file")
    spec = importlib.util.spec_from_file_location(name, path,
                                                  submodule_search_locations=[str(path.parent)] if path.name == "__init__.py" else None)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


SOLUTION_SUFFIXES = (".py", ".cu", ".cuh", ".cpp", ".h")


@dataclass
class Task:
    path: Path
    cfg: TaskConfig
    rows: list[Row]

    @classmethod
    def load(cls, ref: str | Path) -> "Task":
        path = resolve_task(str(ref))
        cfg = load_config(path / "config.toml")
        rows = load_rows(path / "bench" / "workloads.json")
        return cls(path, cfg, rows)

    @property
    def name(self) -> str:
        return self.cfg["task"]["name"]

    def select(self, ids: list[str] | None = None, *, cpu_only: bool = False) -> list[Row]:
        rows = self.rows
        if ids:
            known = {r.id for r in rows}
            unknown = [i for i in ids if i not in known]
            if unknown:
                raise KdaError(f"{self.path / 'bench/workloads.json'}: no row with id {unknown[0]!r}")
            rows = [r for r in rows if r.id in ids]
        if cpu_only:
            rows = [r for r in rows if r.cpu]
        return rows

    # Modules live in the task folder, not in a package: load them by path under private names.
    @cached_property
    def adapter(self) -> ModuleType:
        mod = load_module(self.path / "bench" / "adapter.py", f"kda_task_{self.name}_adapter")
        missing = [n for n in ADAPTER_API if not hasattr(mod, n)]
        if missing:
            raise KdaError(f"{self.path / 'bench/adapter.py'}: missing {', '.join(missing)} (the adapter API is {', '.join(ADAPTER_API)})")
        return mod

    @cached_property
    def oracle(self) -> ModuleType:
        mod = load_module(self.path / "oracle.py", f"kda_task_{self.name}_oracle")
        if not hasattr(mod, "reference"):
            raise KdaError(f"{self.path / 'oracle.py'}: must define reference(row, inputs) -> dict of fp32/fp64 outputs")
        return mod

    def load_solution(self, override: Path | None = None) -> ModuleType:
        path = override or self.path / "solution" / "__init__.py"
        mod = load_module(path, f"kda_task_{self.name}_solution")
        entry = self.cfg["task"]["candidate_entry"]
        if not callable(getattr(mod, entry, None)):
            raise KdaError(f"{path}: must export {entry}() with the upstream signature plus out=")
        return mod

    def solution_files(self, override: Path | None = None) -> list[Path]:
        if override is not None:
            return [override]
        return sorted(p for p in (self.path / "solution").rglob("*") if p.is_file() and p.suffix in SOLUTION_SUFFIXES)

    def static_files(self, override: Path | None = None) -> list[Path]:
        """Every file the static rules read: the `--candidate` file first (when it is a package's __init__.py, its
        whole package: it can import the rest), then every file of solution/, whatever the override names."""
        own = self.solution_files()
        if override is None:
            return own
        override = Path(override)
        first = [override]
        if override.name == "__init__.py":
            first = [override] + sorted(p for p in override.parent.rglob("*")
                                        if p.is_file() and p.suffix in SOLUTION_SUFFIXES and p != override)
        seen = {p.resolve() for p in first}
        return first + [p for p in own if p.resolve() not in seen]

    def results_dir(self) -> Path:
        return self.path / "results"
