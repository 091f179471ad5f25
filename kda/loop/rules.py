"""Production rules a promoted solution must keep (issue 37), checked without a GPU. The first of them: it compiles
for every architecture SGLang supports, so an exported kernel never fails to build where SGLang itself runs.

- Triton: every launch each candidate plans for its production rows, lowered for the architecture with the Triton
  wheel's own ptxas (kda.harness.aot.compile_task, as `kda compile --arch` does);
- CUDA: every `.cu` file under the solution's `csrc/`, compiled by nvcc for that architecture's SASS, against
  torch's headers (`torch.utils.cpp_extension.include_paths()`), as torch's extension loader would build it there.

A source that needs a newer architecture must guard what it uses (`__CUDA_ARCH__`) and its Python planner must fall
back to another path there; this check cannot see the fallback, only that the build would fail.

The second: torch.compile can trace it. Checked by behaviour, not by name: the candidate is called through its
adapter on fake CUDA tensors (FakeTensorMode, as dynamo propagates shapes; no GPU needed) for each production row;
a custom op with a fake implementation returns fake outputs, a raw Triton or CUDA launch cannot run on them.

The third: bounded caches. Read from the source (`cache_check`): a module-level dict (or `functools.cache`, an
`lru_cache` without a maxsize) that a function writes is a cache; it is bounded when the module evicts from it
(`.pop`, `.popitem`, `.clear`, `del`) or checks its `len`, or when its line says why it cannot grow (a comment
`# bounded: ...`, which the page shows for a reviewer to judge). kda.runtime.lean_launch.LaunchCache bounds itself.
"""
from __future__ import annotations

import ast
import os
import re
import shutil
import subprocess
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

# The architectures SGLang supports that the issue names: Ampere, Ada, Hopper, Blackwell (compute capability x 10).
ARCHS = (80, 89, 90, 100)
NVCC_FLAGS = ("-std=c++17", "-O3")


@dataclass(frozen=True)
class Result:
    task: str
    arch: int
    kind: str      # "triton" or "cuda"
    what: str      # the launches counted, or the .cu file's name
    ok: bool
    detail: str    # the first error line, or what compiled

    def line(self) -> str:
        where = f" sm_{self.arch}" if self.arch else ""  # the trace rule has no architecture
        return f"{self.task}{where} {self.kind} {self.what}: " + ("ok" if self.ok else f"FAIL {self.detail}")


def cuda_sources(task_dir: Path) -> list[Path]:
    return sorted((task_dir / "solution" / "csrc").glob("*.cu"))


def _first_error(text: str) -> str:
    """The first error line from "error" on: what precedes it names nvcc's temporary files, which differ per run and
    per machine (a committed page must not carry them)."""
    lines = [ln.strip() for ln in text.splitlines() if "error" in ln.lower()] or [ln.strip() for ln in
                                                                                 text.splitlines() if ln.strip()]
    if not lines:
        return "no output"
    return re.sub(r"^.*?\berror\b\s*:?\s*", "error: ", lines[0], count=1, flags=re.IGNORECASE)[:200]


def nvcc_check(src: Path, arch: int, nvcc: str, includes: list[str], timeout: float = 900.0) -> Result:
    task = src.parents[2].name
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [nvcc, *NVCC_FLAGS, f"-arch=sm_{arch}", "-c", str(src), "-o", str(Path(tmp) / "out.o"),
               *(f"-I{p}" for p in includes)]
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            return Result(task, arch, "cuda", src.name, False, f"nvcc ran past {timeout:.0f} s")
    if proc.returncode == 0:
        return Result(task, arch, "cuda", src.name, True, "compiled")
    return Result(task, arch, "cuda", src.name, False, _first_error(proc.stderr + proc.stdout))


def triton_check(task, arch: int) -> Result:
    from kda.harness.aot import compile_task

    rep = compile_task(task, arch, with_usage=False)
    fails = [f"{k} (first planned for {r}): {(e or '').splitlines()[0] if e else e}"
             for k, r, e in rep["compile_failures"]]
    fails += [f"row {r}: not traced: {e}" for r, e in rep["trace_failures"].items()]
    what = f"{rep['launches']} launches"
    return Result(task.name, arch, "triton", what, not fails, fails[0][:200] if fails else f"{rep['compiled']} compiled")


def check(task_dirs: list[Path], archs=ARCHS, jobs: int | None = None, nvcc: str | None = None,
          progress=None) -> list[Result]:
    """Every task at every architecture: Triton in this process (one after the other: Triton's compile is not
    thread-safe across architectures), CUDA sources through nvcc in parallel. No nvcc on PATH with CUDA sources to
    build is a failure of the check, never a pass."""
    from kda.definition.task import Task

    out: list[Result] = []
    sources = [(src, arch) for d in task_dirs for src in cuda_sources(d) for arch in archs]
    nvcc = nvcc or shutil.which("nvcc")
    with ThreadPoolExecutor(max_workers=jobs or max(1, (os.cpu_count() or 2) // 2)) as pool:
        if sources and nvcc is None:
            out += [Result(src.parents[2].name, arch, "cuda", src.name, False, "nvcc not found on PATH")
                    for src, arch in sources]
            pending = []
        else:
            from torch.utils.cpp_extension import include_paths

            includes = include_paths()
            pending = [pool.submit(nvcc_check, src, arch, nvcc, includes) for src, arch in sources]
        for d in task_dirs:
            task = Task.load(d)
            for arch in archs:
                out.append(triton_check(task, arch))
                if progress:
                    progress(out[-1])
            out.append(traceable_check(task))
            if progress:
                progress(out[-1])
            out.append(cache_check(d))
            if progress:
                progress(out[-1])
        for f in pending:
            out.append(f.result())
            if progress:
                progress(out[-1])
    return sorted(out, key=lambda r: (r.task, r.arch, r.kind, r.what))


def traceable_check(task) -> Result:
    """The candidate on fake CUDA tensors for each production row (the first failure reported)."""
    from torch._subclasses.fake_tensor import FakeTensorMode
    import torch

    from kda.definition.workloads import build_inputs

    rows = [r for r in task.rows if r.production]
    solution, adapter = task.load_solution(), task.adapter
    for row in rows:
        try:
            meta = build_inputs(row, "meta")
            with FakeTensorMode(), torch.no_grad():
                fake = {k: torch.empty_strided(v.shape, v.stride(), dtype=v.dtype, device="cuda")
                        if isinstance(v, torch.Tensor) else v for k, v in meta.items()}
                specs = adapter.output_specs(row, fake)
                out = {k: torch.empty(s[0], dtype=s[1], device="cuda") for k, s in specs.items()}
                adapter.call_candidate(solution, row, fake, out)
        except Exception as e:  # noqa: BLE001 - what the tracer would meet, reported with its row
            first = (str(e).splitlines() or [""])[0]
            return Result(task.name, 0, "trace", f"{len(rows)} rows", False,
                          f"row {row.id}: {type(e).__name__}: {first}"[:200])
    return Result(task.name, 0, "trace", f"{len(rows)} rows", True, "traced on fake tensors")


_DICT_CALLS = {"dict", "OrderedDict", "defaultdict"}
_EVICT = {"pop", "popitem", "clear"}


def _is_dict(node) -> bool:
    if isinstance(node, ast.Dict):
        return True
    if isinstance(node, ast.Call):
        f = node.func
        return (isinstance(f, ast.Name) and f.id in _DICT_CALLS) or (isinstance(f, ast.Attribute)
                                                                   and f.attr in _DICT_CALLS)
    return False


def unbounded_caches(source: str, filename: str = "<solution>") -> tuple[list[str], list[str]]:
    """(unbounded, declared) in one module: each `file:line name` of a cache that grows without bound, and each
    cache whose line declares its bound (`# bounded: why`), with the reason."""
    tree = ast.parse(source, filename)
    lines = source.splitlines()
    dicts = {}
    for node in tree.body:
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) \
            else []
        value = getattr(node, "value", None)
        if value is not None and _is_dict(value):
            for t in targets:
                if isinstance(t, ast.Name):
                    dicts[t.id] = node.lineno
    written, bounded = set(), set()
    bad = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for dec in node.decorator_list:  # functools.cache / lru_cache(maxsize=None): unbounded by construction
                name = dec.func if isinstance(dec, ast.Call) else dec
                attr = name.attr if isinstance(name, ast.Attribute) else getattr(name, "id", "")
                unbounded = attr == "cache" or (attr == "lru_cache" and isinstance(dec, ast.Call) and any(
                    k.arg == "maxsize" and isinstance(k.value, ast.Constant) and k.value.value is None
                    for k in dec.keywords))
                if unbounded:
                    bad.append(f"{filename}:{dec.lineno} {node.name} (@{attr} without a maxsize)")
        if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) and node.value.id in dicts:
            if isinstance(node.ctx, ast.Store):
                written.add(node.value.id)
            elif isinstance(node.ctx, ast.Del):
                bounded.add(node.value.id)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
                isinstance(node.func.value, ast.Name) and node.func.value.id in dicts:
            if node.func.attr in ("setdefault", "update", "__setitem__"):
                written.add(node.func.value.id)
            elif node.func.attr in _EVICT:
                bounded.add(node.func.value.id)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "len" and \
                node.args and isinstance(node.args[0], ast.Name) and node.args[0].id in dicts:
            bounded.add(node.args[0].id)
        elif isinstance(node, ast.Call):  # handed to a function, which may write it: counted as written
            for a in [*node.args, *(k.value for k in node.keywords)]:
                if isinstance(a, ast.Name) and a.id in dicts:
                    written.add(a.id)
    declared = []
    for name in sorted(written - bounded, key=dicts.get):
        line = lines[dicts[name] - 1]
        why = re.search(r"#\s*bounded:\s*(.+)$", line)
        if why:
            declared.append(f"{filename}:{dicts[name]} {name} ({why.group(1).strip()})")
        else:
            bad.append(f"{filename}:{dicts[name]} {name}")
    return bad, declared


def cache_check(task_dir: Path) -> Result:
    """Every Python file of the solution: a cache that grows without bound fails the rule (all of them named)."""
    sol = Path(task_dir) / "solution"
    files = sorted(sol.rglob("*.py"))
    bad, declared = [], []
    for f in files:
        b, d = unbounded_caches(f.read_text(), f.relative_to(sol).as_posix())
        bad += b
        declared += d
    what = f"{len(files)} files"
    if bad:
        return Result(Path(task_dir).name, 0, "caches", what, False, "unbounded: " + ", ".join(bad))
    return Result(Path(task_dir).name, 0, "caches", what, True,
                  ("declared bounded: " + ", ".join(declared)) if declared else "no unbounded cache")


def markdown(results: list[Result], archs, commit: str) -> str:
    """The matrix as a page: one row per task, one column per architecture."""
    tasks = sorted({r.task for r in results})
    out = ["# Production rules checked without a GPU", "",
           f"Generated by `kda rules` at commit `{commit[:12]}` (the rules: docs/task-contract.md, \"Production "
           "rules\"). A failure names the first error.", "",
           "Compiles for every architecture SGLang supports: each candidate's Triton launches for its production "
           "rows (the Triton wheel's ptxas) and its CUDA sources (nvcc, torch's headers), per architecture.", "",
           "| task | " + " | ".join(f"sm_{a}" for a in archs) + " |", "|---|" + "---|" * len(archs)]
    for t in tasks:
        cells = []
        for a in archs:
            mine = [r for r in results if r.task == t and r.arch == a]
            bad = [r for r in mine if not r.ok]
            cells.append("ok" if mine and not bad else "; ".join(f"{r.kind} {r.what}: {r.detail}" for r in bad)
                         if bad else "-")
        out.append(f"| {t} | " + " | ".join(cells) + " |")
    traced = [r for r in results if r.kind == "trace"]
    if traced:
        out += ["", "Traceable by torch.compile (a custom op with a fake implementation): the candidate called through "
                "its adapter on fake CUDA tensors for every production row.", "", "| task | traced | first failure |",
                "|---|---|---|"]
        out += [f"| {r.task} | {'yes' if r.ok else '**no**'} | {'-' if r.ok else r.detail} |" for r in traced]
    caches = [r for r in results if r.kind == "caches"]
    if caches:
        out += ["", "Bounded caches, read from the source: a module-level dict a function writes must be evicted from "
                "or size-checked, or say on its line why it cannot grow (`# bounded: ...`, shown here for the "
                "reviewer); `functools.cache` and `lru_cache(maxsize=None)` never are.", "",
                "| task | bounded | what |", "|---|---|---|"]
        out += [f"| {r.task} | {'yes' if r.ok else '**no**'} | {r.detail} |" for r in caches]
    return "\n".join(out) + "\n"
