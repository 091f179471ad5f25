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
from kda.e2e.kernels import arms as all_arms, kernel_set
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


def _inventory(fn) -> list[dict]:
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    rows = [{"kernel": e.key, "calls": e.count, "device_us": e.device_time_total}
            for e in prof.key_averages() if e.device_time_total > 0]
    return sorted(rows, key=lambda r: -r["device_us"])


def time_workload(block: BlockDef, w: Workload, arms: list[str], trials: int = TRIALS) -> dict:
    model, ref_model, inputs = build(block, w.dims, "cuda")
    with torch.no_grad():
        ref = ref_model(kernel_set(block, "eager"), **upcast(inputs))
        fns, checks = {}, {}
        for arm in arms:
            checks[arm] = _run_arm(block, w.dims, model, arm, inputs, ref)
            if not checks[arm].passed:
                continue
            k, m = kernel_set(block, arm), (torch.compile(model) if arm == "compile" else model)
            args = fresh(inputs)
            fns[arm] = lambda m=m, k=k, args=args: m(k, **args)
        del ref
        n = _inner_count(fns.get("upstream") or next(iter(fns.values())))
        graphs = {a: _graph(f, n) for a, f in fns.items()}
        samples = {a: {"eager_us": [], "graph_us": []} for a in fns}
        for _ in range(trials):
            order = list(fns)
            random.shuffle(order)
            for a in order:
                samples[a]["eager_us"].append(_eager_us(fns[a], n))
                samples[a]["graph_us"].append(_graph_us(graphs[a], n))
        inventory = {a: _inventory(f) for a, f in fns.items()}
    return {"kind": "row", "id": w.id, "dims": w.dims, "inner": n,
            "catalog_rows": {k: f"{r.file}:{r.id}" for k, r in w.rows.items()},
            "arms": {a: {"passed": c.passed, "errors": c.errors, "problems": c.problems,
                         **samples.get(a, {}), "inventory": inventory.get(a, [])} for a, c in checks.items()}}


def _inner_count(fn) -> int:
    one = _eager_us(fn, 1)
    return max(1, min(64, int(TARGET_SAMPLE_US / max(one, 1.0))))


def bench(block: BlockDef, arms: list[str] | None = None) -> Path:
    if not torch.cuda.is_available():
        raise KdaError(f"{block.label}: timing needs a GPU; on the CPU run `kda e2e {block.name} --cpu`")
    arms = arms or all_arms(block)
    name = torch.cuda.get_device_name(0)
    records = [{"kind": "provenance", "block": block.name, "gpu": name, "arms": arms, "git": git_state(),
                "torch": torch.__version__, "when": datetime.now(timezone.utc).isoformat(timespec="seconds"),
                "wheel": block.data["wheel"], "follows": str(block.follows), "not_yet_validated": True}]
    records += [time_workload(block, w, arms) for w in block.workloads()]
    return results_file.write(block.path / "results" / results_file.file_name(gpu_slug(name)), records)
