"""GPU timing of a block's arms: eager_us, graph_us and a profiler inventory per arm, written to a results file.

NOT YET RUN ON A GPU. Written to the contract of the issue (33) and docs/e2e.md, checked on the CPU only as far as
importing it goes; expect the first GPU run to need fixes. Until one has run, no figure comes from here.

Per workload, every arm is checked first (kda.e2e.check's comparison against the fp32 path at production size),
then timed in trials whose arm order is shuffled per trial:
    eager_us   CUDA events around N back-to-back block calls, one untimed call ahead (as the harness's device_us)
    graph_us   one replay of the N calls captured in a CUDA graph (the `compile` arm: mode="max-autotune-no-cudagraphs"
               would be needed to capture it ourselves; it is captured as any other arm here)
and once per arm, a torch.profiler inventory: every CUDA kernel the block launched, with calls and device time.
The speedup of an arm over another is the median of per-trial ratios, as for tasks (kda.harness.stats).
"""
from __future__ import annotations

import random
from datetime import datetime, timezone
from pathlib import Path

import torch

from kda.core.errors import KdaError
from kda.core.gpu import gpu_slug
from kda.e2e.block import BlockDef, Workload
from kda.e2e.check import _run_arm, build, fresh, upcast
from kda.e2e import inventory
from kda.e2e.kernels import KernelSet, arms as all_arms, kernel_set
from kda.harness.stats import paired_speedup
from kda.harness import results_file
from kda.harness.provenance import git_state

TRIALS = 15
TARGET_SAMPLE_US = 20000.0  # one sample: enough block calls for about this long


def _calls(fn, n: int):
    for _ in range(n):
        fn()


def _eager_us(fn, n: int) -> float:
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    fn()  # the stamp finds the stream busy: a sample is n calls in steady state
    start.record()
    _calls(fn, n)
    torch.cuda.synchronize()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) * 1000.0 / n


def _graph(fn, n: int):
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        fn()  # warm-up on the side stream, as capture requires
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        _calls(fn, n)
    return graph


def _graph_us(graph, n: int) -> float:
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    graph.replay()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) * 1000.0 / n


def _inventory(block: BlockDef, arm: str, model, args: dict) -> dict:
    """One block call profiled, each site inside a range naming its task (kda.e2e.inventory); the compile arm's
    sites are traced into its graph, so its kernels are told apart by name only."""
    k = kernel_set(block, arm)
    if arm != "compile":
        k = KernelSet(arm, inventory.labelled(k._fns, {s.name: s.task for s in block.sites}), k.sources)
    return inventory.summarize(inventory.profile_events(lambda: model(k, **args)))


def time_workload(block: BlockDef, w: Workload, arms: list[str], trials: int = TRIALS) -> dict:
    model, ref_model, inputs = build(block, w.dims, "cuda")
    with torch.no_grad():
        ref = ref_model(kernel_set(block, "eager"), **upcast(inputs))
        fns, checks, models = {}, {}, {}
        for arm in arms:
            checks[arm] = _run_arm(block, w.dims, model, arm, inputs, ref)
            if not checks[arm].passed:
                continue
            k, m = kernel_set(block, arm), (torch.compile(model) if arm == "compile" else model)
            args = fresh(inputs)
            fns[arm] = lambda m=m, k=k, args=args: m(k, **args)
            models[arm] = (m, args)
        del ref
        n = _inner_count(fns.get("upstream") or next(iter(fns.values())))
        graphs = {a: _graph(f, n) for a, f in fns.items()}
        samples = {a: {"eager_us": [], "graph_us": []} for a in fns}
        order_rng = random.Random(block.data["block"]["seed"])
        for _ in range(trials):
            order = list(fns)
            order_rng.shuffle(order)
            for a in order:
                samples[a]["eager_us"].append(_eager_us(fns[a], n))
                samples[a]["graph_us"].append(_graph_us(graphs[a], n))
        inventories = {a: _inventory(block, a, *models[a]) for a in fns}
    return {"type": "row", "id": w.id, "dims": w.dims, "inner": n,
            "catalog_rows": {k: {"task": r.task, "id": r.id, "file": r.file} for k, r in w.rows.items()},
            "arms": {a: {"passed": c.passed, "errors": c.errors, "problems": c.problems,
                         **samples.get(a, {}), "inventory": inventories.get(a)} for a, c in checks.items()},
            "speedup": speedups(samples, block.data["block"]["seed"])}


RESAMPLES = 2000
# What each speedup compares: (numerator arm, denominator arm); the candidate over what a user runs today and over
# what they could pick instead, and each one-task arm over upstream (what that task alone buys).
PAIRS = (("upstream", "candidate"), ("compile", "candidate"), ("eager", "candidate"))


def speedups(samples: dict, seed: int) -> dict:
    """Median paired per-trial ratios with bootstrap intervals (kda.harness.stats), per metric and pair."""
    pairs = list(PAIRS) + [("upstream", a) for a in samples if a.startswith("only-")]
    out = {}
    for base, arm in pairs:
        if base in samples and arm in samples:
            out[f"{arm}/{base}"] = {m: paired_speedup(samples[base][m], samples[arm][m], RESAMPLES, seed)
                                    for m in ("eager_us", "graph_us")}
    return out


def _inner_count(fn) -> int:
    one = _eager_us(fn, 1)
    return max(1, min(64, int(TARGET_SAMPLE_US / max(one, 1.0))))


def bench(block: BlockDef, arms: list[str] | None = None) -> Path:
    if not torch.cuda.is_available():
        raise KdaError(f"{block.label}: timing needs a GPU; on the CPU run `kda e2e {block.name} --cpu`")
    arms = arms or all_arms(block)
    name = torch.cuda.get_device_name(0)
    slug = gpu_slug(name)
    records = [{"type": "provenance", "block": block.name, "gpu": name, "gpu_slug": slug, "arms": arms,
                **git_state(), "torch": torch.__version__,
                "time_utc": datetime.now(timezone.utc).isoformat(timespec="seconds"),
                "wheel": block.data["wheel"], "follows": str(block.follows), "not_yet_validated": True}]
    rows = [time_workload(block, w, arms) for w in block.workloads()]
    for row in rows:
        row["predicted"] = predicted(row, slug)
    records += rows
    records.append({"type": "summary", "rows": len(rows)})
    return results_file.write(block.path / "results" / results_file.file_name(slug), records)


def predicted(row: dict, slug: str) -> dict | None:
    """The candidate arm's gain over upstream that the task results files predict for this workload (Amdahl over
    the upstream arm's inventory, kda.e2e.inventory), beside what was measured; None without an upstream inventory."""
    inv = (row["arms"].get("upstream") or {}).get("inventory")
    if not inv:
        return None
    sites = {name: (r["task"], r["id"]) for name, r in row["catalog_rows"].items()}
    for task in inv["tasks"]:
        sites.setdefault(f"task:{task}", (task, ""))
    speeds = inventory.task_speedups(sites, lambda t, r: _task_row_speedup(t, r, slug), lambda t: _task_geomean(t, slug))
    return {"task_speedups": speeds, "task_share": {t: us / inv["total_us"] for t, us in inv["tasks"].items()},
            "graph_us": inventory.amdahl(inv["total_us"], inv["tasks"], speeds)}


def _task_results(task: str, slug: str) -> tuple[list[dict], dict] | None:
    """(rows, summary) of the task's results file for this GPU, or None (the encoding: kda.harness.results_file)."""
    from kda.definition.task import Task

    path = results_file.find(Task.load(task).results_dir(), slug)
    if path is None:
        return None
    records = results_file.read_records(path)
    return [r for r in records if r.get("type") == "row"], records[-1]


def _task_row_speedup(task: str, row_id: str, slug: str) -> float | None:
    found = _task_results(task, slug)
    row = next((r for r in found[0] if r["id"] == row_id), None) if found else None
    e = ((row or {}).get("speedup") or {}).get("graph_us", {}).get("vs_baseline")
    return (e or {}).get("median")


def _task_geomean(task: str, slug: str) -> float | None:
    found = _task_results(task, slug)
    return ((found[1].get("metrics") or {}).get("graph_us", {}).get("vs_baseline") or {}).get("geomean") if found else None
