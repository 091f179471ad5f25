"""`kda export [TASK...]`: the tasks' solutions as one pip-installable package, `kda_diffusion_kernels`.

A solution imports the launch helpers as `kda.runtime.*`; a user of the kernels should not need the campaign tool,
so the package carries its own copy of kda/runtime/ and every such import is rewritten to
`kda_diffusion_kernels.runtime.*`. An import of anything else from kda would drag the harness along: the export
fails instead, naming the file and line. `install()` / `uninstall()` (kda/loop/export_files/_patch.py, copied
verbatim) swap SGLang's entry points, listed per task from config.toml, for the package's kernels.

The wheel is built by pip from the written source tree (setuptools, no build isolation: nothing is downloaded).
What is not done yet from issue 37 is in docs/export.md.
"""
from __future__ import annotations

import ast
import os
import pprint
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from kda.core.errors import KdaError
from kda.core.gitutil import git
from kda.core.paths import repo_root
from kda.definition.config import load_config
from kda.definition.task import SOLUTION_SUFFIXES

PACKAGE = "kda_diffusion_kernels"
CAMPAIGN = "diffusion"
BASE_VERSION = "0.1.0"
RUNTIME_FILES = ("lean_launch.py", "cuda_ext.py")
PATCH_FILE = Path(__file__).resolve().parent / "export_files" / "_patch.py"
# `kda.runtime` as a whole word: `kda.runtime.lean_launch`, `from kda.runtime import cuda_ext`.
RUNTIME_IMPORT = re.compile(r"\bkda\.runtime\b")

# cuda_ext builds into the repository's .kda-cache by default, found from its own path; installed in site-packages
# that path would point into the Python installation, so the exported copy builds under the user's cache instead.
# The line is matched exactly: if kda/runtime/cuda_ext.py changes it, the export stops rather than guessing.
CUDA_EXT_REPO_DIR = 'Path(__file__).resolve().parents[2] / ".kda-cache" / "torch-ext"'
CUDA_EXT_USER_DIR = f'Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "{PACKAGE}" / "torch-ext"'


@dataclass(frozen=True)
class ExportTask:
    name: str
    solution: Path  # the task's solution/ folder
    entry_points: list[str]  # `module:function`, from config.toml
    upstream: str  # `package==version` the entry points belong to


@dataclass(frozen=True)
class Export:
    source: Path  # the written source tree
    wheel: Path
    version: str
    tasks: list[ExportTask]


def known_tasks() -> dict[str, Path]:
    """Every task folder of the diffusion campaign, by name."""
    kernels = repo_root() / CAMPAIGN / "kernels"
    return {p.parent.name: p.parent for p in sorted(kernels.glob("*/config.toml"))}


def load_tasks(names: list[str] | None) -> list[ExportTask]:
    known = known_tasks()
    names = names or list(known)
    unknown = [n for n in names if n not in known]
    if unknown:
        raise KdaError(f"kda export: no task named {', '.join(map(repr, unknown))} under {CAMPAIGN}/kernels; "
                       f"known tasks: {', '.join(known) or 'none'}")
    out = []
    for name in dict.fromkeys(names):  # a task named twice is exported once
        path = known[name]
        if not name.isidentifier() or name == "runtime":
            raise KdaError(f"kda export: task {name!r} cannot be a subpackage of {PACKAGE} (not an identifier, or "
                           f"the name of the runtime)")
        if not (path / "solution" / "__init__.py").is_file():
            raise KdaError(f"kda export: {path / 'solution'} has no __init__.py: the exported package imports each "
                           f"task's solution as a package exporting the entry points' functions")
        cfg = load_config(path / "config.toml")
        up = cfg["upstream"]
        out.append(ExportTask(name, path / "solution", list(cfg["task"]["entry_points"]),
                              f"{up['package']}=={up['version']}"))
    pins = sorted({t.upstream for t in out})
    if len(pins) != 1:  # install() patches one SGLang release; mixed pins would patch a layout that is not there
        raise KdaError(f"kda export: the tasks pin different upstream releases ({', '.join(pins)}); export them apart")
    return out


def kda_imports(source: str, filename: str) -> list[tuple[int, str]]:
    """(line, module) of every import of `kda` or `kda.*` in the source, at any depth, including
    importlib.import_module / __import__ with a literal name."""
    found = []
    for node in ast.walk(ast.parse(source, filename)):
        names = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            names = [node.module or ""]
        elif isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant) and \
                isinstance(node.args[0].value, str):
            func = node.func
            called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if called in ("import_module", "__import__"):
                names = [node.args[0].value]
        found += [(node.lineno, n) for n in names if n == "kda" or n.startswith("kda.")]
    return found


def check_no_kda(source: str, written: Path, origin: Path) -> None:
    """Fail naming the origin file and line when the rewritten source still imports kda."""
    left = kda_imports(source, str(written))
    if left:
        where = "; ".join(f"{origin}:{line} imports {mod}" for line, mod in left)
        raise KdaError(f"kda export: {where}: an exported file may import only kda.runtime from kda (the package "
                       f"carries its own copy); anything else would need the whole campaign tool installed")


def copy_runtime(dest: Path) -> list[Path]:
    """kda/runtime's launch helpers into PACKAGE/runtime, with cuda_ext's build folder moved to the user's cache."""
    src_dir = repo_root() / "kda" / "runtime"
    dest.mkdir(parents=True)
    (dest / "__init__.py").write_text(f'"""The launch helpers the kernels import: copies of kda/runtime/ (kda export)."""\n')
    written = [dest / "__init__.py"]
    for name in RUNTIME_FILES:
        text = (src_dir / name).read_text()
        if name == "cuda_ext.py":
            if text.count(CUDA_EXT_REPO_DIR) != 1:
                raise KdaError(f"kda export: {src_dir / name} no longer builds into {CUDA_EXT_REPO_DIR}; update "
                               f"CUDA_EXT_REPO_DIR in kda/loop/export.py to move its build folder out of site-packages")
            text = text.replace(CUDA_EXT_REPO_DIR, CUDA_EXT_USER_DIR)
        text = RUNTIME_IMPORT.sub(f"{PACKAGE}.runtime", text)
        check_no_kda(text, dest / name, src_dir / name)
        note = f"# Copied from kda/runtime/{name} by kda export"
        if name == "cuda_ext.py":
            note += f"; here builds default to $XDG_CACHE_HOME or ~/.cache, under {PACKAGE}/torch-ext, not the repository"
        (dest / name).write_text(note + ".\n" + text)
        written.append(dest / name)
    return written


def solution_files(solution: Path) -> list[Path]:
    """The solution's sources (Python, CUDA, C++), no __pycache__ or other build output."""
    return sorted(p for p in solution.rglob("*")
                  if p.is_file() and p.suffix in SOLUTION_SUFFIXES and "__pycache__" not in p.parts)


def copy_solution(task: ExportTask, dest: Path) -> list[Path]:
    """The task's solution/ as PACKAGE/<task>/, kda.runtime imports rewritten, every .py checked for kda imports."""
    written = []
    for src in solution_files(task.solution):
        out = dest / src.relative_to(task.solution)
        out.parent.mkdir(parents=True, exist_ok=True)
        if src.suffix == ".py":
            text = RUNTIME_IMPORT.sub(f"{PACKAGE}.runtime", src.read_text())
            check_no_kda(text, out, src)
            out.write_text(text)
        else:
            shutil.copyfile(src, out)
        written.append(out)
    return written


def default_version() -> str:
    """0.1.0+g<short commit>, with `.dirty` when the exported sources differ from that commit."""
    root = repo_root()
    try:
        short = git("rev-parse", "--short", "HEAD", cwd=root)
    except KdaError as e:
        raise KdaError(f"kda export: cannot name the commit for the version ({e}); pass --version") from None
    dirty = git("status", "--porcelain", "--", f"{CAMPAIGN}/kernels", "kda/runtime", "kda/loop/export_files",
                cwd=root, check=False)
    return f"{BASE_VERSION}+g{short}" + (".dirty" if dirty.strip() else "")


def check_version(version: str) -> str:
    """The version as pip will spell it (PEP 440 normalised); an invalid one is an error before any file is written."""
    try:
        from packaging.version import InvalidVersion, Version
    except ImportError:  # setuptools depends on packaging, but keep going without it: pip will judge
        return version
    try:
        return str(Version(version))
    except InvalidVersion:
        raise KdaError(f"kda export: --version {version!r} is not a PEP 440 version (for example 0.2.0 or "
                       f"0.1.0+g1234abc)") from None


def tasks_module(tasks: list[ExportTask]) -> str:
    table = {t.name: t.entry_points for t in tasks}
    return ('"""Generated by kda export from each task\'s config.toml: the SGLang entry points each task replaces."""\n'
            f"SGLANG_VERSION = {tasks[0].upstream.split('==')[1]!r}\n\n"
            f"TASKS = {pprint.pformat(table, width=116, sort_dicts=False)}\n")


def init_module(version: str) -> str:
    return (f'"""Diffusion kernels from kda, as drop-in replacements for SGLang\'s entry points.\n\n'
            f"`install()` patches them in, `uninstall()` restores SGLang's own; `TASKS` lists what each task replaces.\n"
            f'"""\n'
            f"from ._patch import install, installed, uninstall\n"
            f"from ._tasks import SGLANG_VERSION, TASKS\n\n"
            f"__version__ = {version!r}\n"
            f'__all__ = ["install", "uninstall", "installed", "TASKS", "SGLANG_VERSION"]\n')


def pyproject(version: str, packages: list[str], data: dict[str, list[str]]) -> str:
    lines = ["[build-system]", 'requires = ["setuptools>=64"]', 'build-backend = "setuptools.build_meta"', "",
             "[project]", f'name = "{PACKAGE}"', f'version = "{version}"',
             'description = "Diffusion kernels from kda: drop-in replacements for SGLang entry points"',
             'readme = "README.md"', 'requires-python = ">=3.10"', 'dependencies = ["torch", "triton"]', "",
             "[tool.setuptools]", f"packages = {_toml_list(packages)}", "",
             "[tool.setuptools.package-data]"]
    lines += [f'"{pkg}" = {_toml_list(files)}' for pkg, files in data.items()]
    return "\n".join(lines) + "\n"


def _toml_list(items) -> str:
    return "[" + ", ".join(f'"{i}"' for i in items) + "]"


def package_readme(tasks: list[ExportTask], version: str, commit: str) -> str:
    sglang = tasks[0].upstream
    rows = "\n".join(f"| `{t.name}` | " + "<br>".join(f"`{e}`" for e in t.entry_points) + " |" for t in tasks)
    native = [t.name for t in tasks if any(p.suffix != ".py" for p in solution_files(t.solution))]
    cuda = (f"The CUDA sources of {', '.join(native)} are compiled at first use, on the machine that runs them "
            f"(torch.utils.cpp_extension: nvcc, a host compiler and ninja must be there; builds are kept under "
            f"$TORCH_EXTENSIONS_DIR, else $XDG_CACHE_HOME or ~/.cache, under {PACKAGE}/torch-ext). "
            if native else "")
    return f"""# {PACKAGE} {version}

The diffusion kernels of a kda campaign, each task's solution as of commit `{commit}` (built by `kda export`),
packaged so that they run without kda: each task's kernels are a subpackage, and `{PACKAGE}.runtime` holds the launch helpers they use.
It depends on torch and triton only. {cuda}Triton kernels compile at first use, as any Triton kernel does.

`install()` replaces the entry points of **{sglang}** listed below with this package's kernels of the same names:
the function in its SGLang module and every reference to it in already-imported `sglang.*` modules (model layers
import kernels by name). `uninstall()` puts back exactly what `install()` replaced. Both take a list of task names;
none means all of them. SGLang itself must be installed: `install()` imports each entry module and raises
ImportError naming the one it cannot import.

```python
import {PACKAGE} as kernels

kernels.install()                    # or kernels.install(["norm_infer"])
...                                  # run SGLang as usual
kernels.uninstall()
```

| task | SGLang entry points replaced |
|---|---|
{rows}

Status: a first export (kda issue 37). The production rules (compiled for every architecture SGLang supports,
launch on the tensor's device, custom ops with fake implementations for torch.compile, safe concurrent calls,
bounded caches) are not checked yet, and calls SGLang makes through `torch.ops.sglang.*` are not redirected.
"""


def write_source_tree(tasks: list[ExportTask], dest: Path, version: str, progress: Callable[[str], None]) -> Path:
    """The package's source tree in `dest` (removed first), ready for `pip wheel`."""
    if dest.exists():
        shutil.rmtree(dest)
    pkg = dest / PACKAGE
    copy_runtime(pkg / "runtime")
    packages, data = [PACKAGE, f"{PACKAGE}.runtime"], {}
    for task in tasks:
        files = copy_solution(task, pkg / task.name)
        py_dirs = sorted({f.parent for f in files if f.suffix == ".py"})
        packages += [".".join(d.relative_to(dest).parts) for d in py_dirs]
        native = [f.relative_to(pkg / task.name).as_posix() for f in files if f.suffix != ".py"]
        if native:  # CUDA and C++ sources beside the package: cuda_ext compiles them at first use
            data[f"{PACKAGE}.{task.name}"] = native
        progress(f"{task.name}: {len(files)} file(s) ({len(native)} native), "
                 f"{len(task.entry_points)} entry point(s)")
    shutil.copyfile(PATCH_FILE, pkg / "_patch.py")
    check_no_kda((pkg / "_patch.py").read_text(), pkg / "_patch.py", PATCH_FILE)
    (pkg / "_tasks.py").write_text(tasks_module(tasks))
    (pkg / "__init__.py").write_text(init_module(version))
    (dest / "pyproject.toml").write_text(pyproject(version, packages, data))
    commit = git("rev-parse", "--short", "HEAD", cwd=repo_root(), check=False) or "unknown"
    (dest / "README.md").write_text(package_readme(tasks, version, commit))
    return dest


def build_wheel(source: Path, out: Path, version: str) -> Path:
    """`pip wheel` of the source tree into `out`: setuptools from this environment, no index, no dependencies."""
    out.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index", "-q",
           "-w", str(out), str(source)]
    env = {**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
    wheels = sorted(out.glob(f"{PACKAGE}-{version}-*.whl"))
    if proc.returncode != 0 or not wheels:
        raise KdaError(f"kda export: `{' '.join(cmd)}` failed (exit {proc.returncode}):\n"
                       f"{(proc.stderr or proc.stdout).strip()[-3000:]}")
    return wheels[0]


def export(names: list[str] | None, out: Path | None = None, version: str | None = None,
           progress: Callable[[str], None] = print) -> Export:
    """Write the package's source tree under `out` (default dist/) and build its wheel there."""
    tasks = load_tasks(names)
    version = check_version(version or default_version())
    out = Path(out) if out is not None else repo_root() / "dist"
    progress(f"kda export: {PACKAGE} {version}, {len(tasks)} task(s), entry points of {tasks[0].upstream}")
    source = write_source_tree(tasks, out.resolve() / f"{PACKAGE}-{version}", version,
                               lambda line: progress(f"  {line}"))
    progress(f"kda export: wrote the source tree {source}; building the wheel (pip wheel) ...")
    wheel = build_wheel(source, out.resolve(), version)
    return Export(source, wheel, version, tasks)
