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
"""
from __future__ import annotations

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
    return "\n".join(out) + "\n"
