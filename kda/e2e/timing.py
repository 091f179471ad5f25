"""GPU timing of a block's arms: eager_us, graph_us and a profiler inventory per arm, written to a results file.

NOT YET RUN ON A GPU. Written to the contract of the issue (33) and docs/e2e.md; everything but the CUDA primitives
(the `Cuda` class below) runs on the CPU in tests/e2e/test_e2e_timing.py, with CPU stand-ins for those primitives.
Expect the first GPU run to need fixes; until one has run, no figure comes from here.

Per workload, every arm is checked first (kda.e2e.check's comparison against the fp32 path at production size),
then timed in trials whose arm order is shuffled per trial:
    eager_us   CUDA events around N back-to-back block calls, one untimed call ahead (as the harness's device_us)
    graph_us   replays of a CUDA graph of G <= N block calls (G capped so a capture's memory stays bounded), as
               many replays as make about N calls (the `compile` arm, compiled without cudagraphs, is captured as
               any other arm here)
and once per arm, a torch.profiler inventory: every CUDA kernel the block launched, with calls and device time.
The speedup of an arm over another is the median of per-trial ratios, as for tasks (kda.harness.stats).

An arm that fails (its kernels do not load, torch.compile fails, a capture or an allocation fails) is recorded in
its row with the error, and the other arms and workloads go on; the results file is rewritten after each workload,
so a run that dies part-way leaves the workloads it finished (summary `complete: false`).
"""
from __future__ import annotations

import gc
import math
import random
import sys
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable

import torch

from kda.core.errors import KdaError
from kda.core.gpu import gpu_slug
from kda.e2e.block import BlockDef, Workload
from kda.e2e.check import _run_arm, build, fresh, judge, upcast
from kda.e2e import alone, inventory
from kda.e2e.kernels import (KernelSet, UpstreamTampered, WeightPrint, after_arm, arms as all_arms, check_upstream,
                             kernel_set, latest_sources, process_state, watch_upstream)
from kda.harness.stats import paired_speedup
from kda.harness import results_file
from kda.harness.provenance import git_state

TRIALS = 15
TARGET_SAMPLE_US = 20000.0  # one sample: enough block calls for about this long
MAX_INNER = 64  # block calls per eager sample
MAX_GRAPH_CALLS = 16  # block calls captured in one CUDA graph (each call's intermediates live in the graph's pool)
GRAPH_MEMORY_SHARE = 0.5  # of the free device memory, the most a capture may take (at one call's peak per call)


def _calls(fn, n: int):
    for _ in range(n):
        fn()


class Cuda:
    """The CUDA primitives the timing uses, and only those: tests/e2e/test_e2e_timing.py swaps in CPU stand-ins for
    this object (`DEV`) and runs everything else as on a GPU."""

    device = "cuda"

    def available(self) -> bool:
        return torch.cuda.is_available()

    def name(self) -> str:
        return torch.cuda.get_device_name(0)

    def free(self) -> None:
        """Release what the last arm or workload left: the caching allocator's unused blocks go back."""
        gc.collect()
        try:
            if torch.cuda.is_initialized():
                torch.cuda.synchronize()
                torch.cuda.empty_cache()
        except Exception:  # noqa: BLE001 - after a sticky CUDA error: the next call reports it where it belongs
            pass

    def eager_us(self, fn, n: int) -> float:
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        fn()  # the stamp finds the stream busy: a sample is n calls in steady state
        start.record()
        _calls(fn, n)
        end.record()  # right after the calls: no host sync inside the timed span
        end.synchronize()
        return start.elapsed_time(end) * 1000.0 / n

    def graph_calls(self, fn, n: int) -> int:
        """How many block calls one graph holds: n, at most MAX_GRAPH_CALLS, and no more than one call's peak
        allocation fits GRAPH_MEMORY_SHARE of the free memory that many times."""
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        before = torch.cuda.memory_allocated()
        fn()
        torch.cuda.synchronize()
        peak = max(1, torch.cuda.max_memory_allocated() - before)
        free, _ = torch.cuda.mem_get_info()
        return max(1, min(n, MAX_GRAPH_CALLS, int(GRAPH_MEMORY_SHARE * free // peak)))

    def graph(self, fn, n: int):
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            fn()  # warm-up on the side stream, as capture requires
        torch.cuda.current_stream().wait_stream(stream)
        torch.cuda.synchronize()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            _calls(fn, n)
        graph.replay()  # the first replay uploads the graph: not a sample
        torch.cuda.synchronize()
        return graph

    def graph_us(self, graph, calls: int, replays: int) -> float:
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(replays):
            graph.replay()
        end.record()
        end.synchronize()
        return start.elapsed_time(end) * 1000.0 / (calls * replays)

    def synchronize(self) -> None:
        torch.cuda.synchronize()

    def profile(self, fn) -> list[dict]:
        return inventory.profile_events(fn, cuda=True)


DEV = Cuda()


def _log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def _error(e: BaseException) -> str:
    return f"{type(e).__name__}: {e}"[:2000]


def _inventory(block: BlockDef, arm: str, model, k: KernelSet, args: dict) -> dict:
    """One block call profiled, each site inside a range naming its task (kda.e2e.inventory); the compile arm's
    sites are traced into its graph, so its kernels are told apart by name only."""
    if arm != "compile":
        k = KernelSet(arm, inventory.labelled(k._fns, {s.name: s.task for s in block.sites}, DEV.synchronize),
                      k.sources)
    return inventory.summarize(DEV.profile(lambda: model(k, **args)))


def _inner_count(fn) -> int:
    one = DEV.eager_us(fn, 1)
    return max(1, min(MAX_INNER, int(TARGET_SAMPLE_US / max(one, 1.0))))


def _compiled(model):
    """The block under torch.compile for this workload alone: dynamo's caches reset (each workload's shapes
    compiled static, never as a dynamic-shape recompile of the last workload's graph, nor past the recompile
    limit into eager), no cudagraphs of its own (this runner captures the graph)."""
    torch._dynamo.reset()
    return torch.compile(model, dynamic=False)


def time_workload(block: BlockDef, w: Workload, arms: list[str], trials: int = TRIALS,
                  log: Callable[[str], None] = _log, watch=None) -> dict:
    """One row: every arm checked, timed and profiled at the workload's dims. A failing arm is recorded with
    `error` (and its stage); a graph capture that fails leaves the arm's eager_us timed (`graph_error`)."""
    t0 = time.monotonic()

    def say(msg: str) -> None:
        log(f"  [{time.monotonic() - t0:7.1f} s] {w.id}: {msg}")

    recs: dict[str, dict] = {a: {} for a in arms}
    fns, kss, models = {}, {}, {}
    row = {"type": "row", "id": w.id, "dims": w.dims,
           "catalog_rows": {k: {"task": r.task, "id": r.id, "file": str(r.file)} for k, r in w.rows.items()}}
    say("build")
    model, ref_model, inputs = build(block, w.dims, DEV.device)
    # Every arm runs the same weights and inputs: a candidate that rewrote them would change the arms after it.
    weights = (WeightPrint("the block's weights", {**dict(model.named_parameters()), **dict(model.named_buffers())}),
               WeightPrint("the block's inputs", inputs))
    with torch.no_grad():
        ref = ref_model(kernel_set(block, "eager"), **upcast(inputs))
        del ref_model
        for arm in arms:
            say(f"{arm}: check against the fp32 path")
            try:
                k = kernel_set(block, arm)
                check_upstream(watch, block, f"once the {arm} arm's kernels were loaded")
                process_state(block, f"once the {arm} arm's kernels were loaded", weights)
                m = _compiled(model) if arm == "compile" else model
                res = _run_arm(block, w.dims, model, arm, inputs, ref, fn=m, ks=k)  # the kernel set then timed
                after_arm(watch, block, arm, f"while the {arm} arm ran", weights)
            except UpstreamTampered:
                raise
            except Exception as e:  # noqa: BLE001 - one arm's failure is its row's, not the block's
                recs[arm].update(passed=False, error=_error(e), stage="check")
                say(f"{arm}: FAILED {_error(e)[:300]}")
                DEV.free()
                continue
            recs[arm].update(passed=res.passed, errors=res.errors, problems=res.problems)
            if not res.passed:
                say(f"{arm}: does not match the fp32 path, not timed: {'; '.join(res.problems)[:300]}")
                continue
            args = fresh(inputs)
            fns[arm] = lambda m=m, k=k, args=args: m(k, **args)
            kss[arm], models[arm] = k, (m, args)
        DEV.free()
        if not fns:
            say("no arm to time")
            return {**row, "inner": None, "arms": recs, "speedup": {}}
        first = "upstream" if "upstream" in fns else next(iter(fns))
        n = _inner_count(fns[first])
        say(f"{n} block call(s) per sample (one {first} call: about {TARGET_SAMPLE_US / n:.0f} us or more)")
        graphs = {}
        for a in list(fns):
            say(f"{a}: graph capture")
            try:
                g_calls = DEV.graph_calls(fns[a], n)
                graphs[a] = (DEV.graph(fns[a], g_calls), g_calls, math.ceil(n / g_calls))
                recs[a].update(graph_calls=g_calls, graph_replays=graphs[a][2])
            except Exception as e:  # noqa: BLE001
                graphs.pop(a, None)
                recs[a]["graph_error"] = _error(e)
                say(f"{a}: graph capture FAILED (eager_us only) {_error(e)[:300]}")
                DEV.free()
        samples = {a: {"eager_us": [], "graph_us": []} for a in fns}
        order_rng = random.Random(block.data["block"]["seed"])
        say(f"{trials} trials of {', '.join(fns)}")
        for t in range(trials):
            order = list(fns)
            order_rng.shuffle(order)
            for a in order:
                try:
                    samples[a]["eager_us"].append(DEV.eager_us(fns[a], n))
                    if a in graphs:
                        g, calls, replays = graphs[a]
                        samples[a]["graph_us"].append(DEV.graph_us(g, calls, replays))
                except Exception as e:  # noqa: BLE001
                    recs[a].update(error=_error(e), stage=f"trial {t}")
                    say(f"{a}: timing FAILED in trial {t}: {_error(e)[:300]}")
                    del fns[a]
                    graphs.pop(a, None)
                    DEV.free()
        del graphs
        DEV.free()
        check_upstream(watch, block, f"during the trials of {w.id}")
        process_state(block, f"during the trials of {w.id}", weights)
        # Each timed arm's output once more, from the kernel set and the arguments its timed calls used: a kernel
        # right on its checked call and not on the timed ones (tests/zoo/e2e_honest_only_when_checked.py) is
        # caught here, and its samples are not kept.
        for a in list(fns):
            after = judge(block, w.dims, a, fns[a](), ref)
            if not after.passed:
                recs[a].update(passed=False, error="after timing: " + "; ".join(after.problems), stage="post-check")
                say(f"{a}: wrong after its timed calls, samples dropped: {'; '.join(after.problems)[:300]}")
                del fns[a], samples[a]
        del ref
        process_state(block, f"after the timed calls of {w.id}", weights)
        for a in samples:
            recs[a].update(samples[a])
        for a in list(fns):
            say(f"{a}: profiler inventory")
            try:
                recs[a]["inventory"] = _inventory(block, a, models[a][0], kss[a], models[a][1])
            except Exception as e:  # noqa: BLE001
                recs[a]["inventory_error"] = _error(e)
                say(f"{a}: inventory FAILED {_error(e)[:300]}")
        del fns, models, kss, model, inputs
    check_upstream(watch, block, f"while {w.id} was profiled")
    DEV.free()
    say("done")
    return {**row, "inner": n, "arms": recs, "speedup": speedups(samples, block.data["block"]["seed"])}


LATEST_SCOPE = "per op: 0.5.23's kernel at each site whose task pins it; its fused sites are not modeled"
RESAMPLES = 2000
# What each speedup compares: (base arm, arm), written `arm/base` (base time over arm time); the candidate over what
# a user runs today and over what they could pick instead, and each one-task arm over upstream (what that task
# alone buys).
PAIRS = (("upstream", "candidate"), ("compile", "candidate"), ("eager", "candidate"), ("latest", "candidate"))
METRICS = ("eager_us", "graph_us")


def speedups(samples: dict, seed: int) -> dict:
    """Median paired per-trial ratios with bootstrap intervals (kda.harness.stats), per pair and metric; a metric
    one of the two arms has no samples of (its graph capture failed) is left out."""
    pairs = list(PAIRS) + [("upstream", a) for a in samples if a.startswith("only-")]
    out = {}
    for base, arm in pairs:
        if base in samples and arm in samples:
            got = {m: paired_speedup(samples[base][m], samples[arm][m], RESAMPLES, seed) for m in METRICS
                   if samples[base].get(m) and samples[arm].get(m)}
            got = {m: v for m, v in got.items() if v is not None}
            if got:
                out[f"{arm}/{base}"] = got
    return out


def select_arms(block: BlockDef, arms: list[str] | None = None, skip: list[str] | tuple = ()) -> list[str]:
    """The arms to run: `arms` (default: every arm of the block) less `skip`; an arm the block has not is an error
    before anything runs."""
    known = all_arms(block)
    for a in [*(arms or []), *skip]:
        if a not in known:
            raise KdaError(f"{block.label}: no arm {a!r} (arms: {', '.join(known)})")
    chosen = [a for a in (arms or known) if a not in skip]
    if not chosen:
        raise KdaError(f"{block.label}: no arm left to run")
    return chosen


def results_path(block: BlockDef, slug: str, out: Path | None = None) -> Path:
    return Path(out or block.path / "results") / results_file.file_name(slug)


def stale_task_results(block: BlockDef, slug: str) -> list[str]:
    """The block's tasks whose results file for this GPU measured another solution than the one in the tree: a
    prediction read from it would credit the block with a kernel it does not run. One line each (file, block, task,
    both solution hashes); a task without a results file for this GPU is not stale (its prediction is None)."""
    from kda.definition.task import Task
    from kda.harness.provenance import hash_of_provenance, solution_hash

    problems = []
    for name in block.tasks:
        task = Task.load(name)
        path = results_file.find(task.results_dir(), slug)
        if path is None:
            continue
        measured, now = hash_of_provenance(results_file.read_records(path)[0]), solution_hash(task.path)
        if measured != now:
            problems.append(f"{path}: block {block.name}, task {name}: measured solution {measured[:12]}, the tree "
                            f"has {now[:12]}")
    return problems


def bench(block: BlockDef, arms: list[str] | None = None, skip: list[str] | tuple = (), trials: int = TRIALS,
          out: Path | None = None, log: Callable[[str], None] = _log, predict: bool = True,
          alone_cmd: Callable[..., list[str]] = alone.command) -> Path:
    """Time every workload of the block on each arm; write (and rewrite after each workload) the results file
    `<out or block/results>/<gpu>.jsonl.gz`. Returns its path. `predict`: each row's Amdahl prediction from the
    task results files, which must have measured the solutions in the tree (else an error before anything runs).
    After the workloads, the peers are timed again in a process that never imported a candidate, and a workload
    whose peers were slower or did more beside the candidate has its speedups withheld (kda.e2e.alone; `alone_cmd`
    builds the child's command line)."""
    if not DEV.available():
        raise KdaError(f"{block.label}: timing needs a GPU; on the CPU run `kda e2e {block.name} --cpu`")
    arms = select_arms(block, arms, skip)
    workloads = block.workloads()
    name = DEV.name()
    slug = gpu_slug(name)
    stale = stale_task_results(block, slug) if predict else []
    if stale:
        raise KdaError("a task results file measured another solution than the tree's, so the block's predictions "
                       "would not be of these kernels; `kda bench TASK` first, or `kda e2e --no-predict`:\n  "
                       + "\n  ".join(stale))
    path = results_path(block, slug, out)
    prov = {"type": "provenance", "block": block.name, "gpu": name, "gpu_slug": slug, "arms": arms,
            "trials": trials, "target_sample_us": TARGET_SAMPLE_US, "max_graph_calls": MAX_GRAPH_CALLS,
            **git_state(), "torch": torch.__version__,
            "time_utc": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "wheel": block.data["wheel"], "follows": str(block.follows), "not_yet_validated": True,
            "inventory": inventory.INVENTORY_METHOD}
    peers_alone = alone.needed(arms)
    if peers_alone:  # "pending" until the child's comparison is written: a reader withholds what it has not judged
        prov["alone"] = {"arms": peers_alone, "max_ratio": alone.MAX_RATIO, "state": "pending"}
    if "latest" in arms:  # what today's-SGLang arm ran per task (kda.e2e.kernels: op by op, no fused sites)
        prov["latest"] = {"scope": LATEST_SCOPE, "tasks": latest_sources(block)}
    # Upstream's and 0.5.23's kernels load before any candidate, and their modules' state is checked after every
    # candidate load, arm, trial loop and profile: a change stops the run and keeps nothing (docs/e2e.md).
    watch = watch_upstream(block, arms, kernel_set)
    if watch is not None:
        prov["upstream_watch"] = len(watch.modules)
    t0 = time.monotonic()
    rows = []
    for i, w in enumerate(workloads, 1):
        log(f"{block.name}: workload {i}/{len(workloads)} {w.id} ({', '.join(arms)}) "
            f"[{time.monotonic() - t0:.1f} s]")
        try:
            row = time_workload(block, w, arms, trials, log, watch)
        except UpstreamTampered:
            path.unlink(missing_ok=True)  # rows written before the change was seen may be of slowed peers too
            raise
        except Exception as e:  # noqa: BLE001 - the workload's failure (build, OOM) is its row's
            log(f"{block.name}: workload {w.id} FAILED {_error(e)[:300]}")
            row = {"type": "row", "id": w.id, "dims": w.dims, "error": _error(e), "arms": {}, "speedup": {}}
            DEV.free()
        DEV.free()
        try:
            row["predicted"] = predicted(row, slug) if predict else None
        except Exception as e:  # noqa: BLE001 - a task results file that does not read is no reason to lose the row
            row["predicted"], row["predicted_error"] = None, _error(e)
        rows.append(row)
        results_file.write(path, [prov, *rows, _summary(rows, len(workloads))])
    log(f"{block.name}: {len(rows)} workloads in {time.monotonic() - t0:.1f} s")
    if peers_alone:
        log(f"{block.name}: {', '.join(peers_alone)} again, alone in a process without a candidate")
        try:
            got, why = alone.run_child(block.name, peers_alone, trials, log, alone_cmd), ""
        except Exception as e:  # noqa: BLE001 - judged below: every row's speedups withheld, the reason kept
            got, why = None, _error(e)
        alone.judge_rows(rows, got, peers_alone, why)
        prov["alone"]["state"] = "done" if got is not None else f"failed: {why[:300]}"
        results_file.write(path, [prov, *rows, _summary(rows, len(workloads))])
        withheld = [r["id"] for r in rows if "speedup_withheld" in r]
        log(f"{block.name}: peers alone: " + (f"speedups withheld for {', '.join(withheld)}" if withheld
                                               else "no workload's peers were slower beside the candidate"))
    return path


def _summary(rows: list[dict], total: int) -> dict:
    failed = sorted({a for r in rows for a, rec in r.get("arms", {}).items() if rec.get("error")})
    return {"type": "summary", "rows": len(rows), "workloads": total, "complete": len(rows) == total,
            "rows_failed": [r["id"] for r in rows if r.get("error")], "arms_failed": failed}


def predicted(row: dict, slug: str) -> dict | None:
    """The candidate arm's gain over upstream that the task results files predict for this workload (Amdahl over
    the upstream arm's inventory, kda.e2e.inventory), beside what was measured; None without an upstream inventory
    that holds device time."""
    inv = (row.get("arms", {}).get("upstream") or {}).get("inventory")
    if not inv or not inv.get("total_us"):
        return None
    inv = inventory.clean(inv)
    sites = {name: (r["task"], r["id"]) for name, r in row.get("catalog_rows", {}).items()}
    for task in inv["tasks"]:
        sites.setdefault(f"task:{task}", (task, ""))
    speeds = inventory.task_speedups(sites, lambda t, r: _task_row_speedup(t, r, slug), lambda t: _task_geomean(t, slug))
    return {"task_speedups": speeds, "task_share": {t: us / inv["total_us"] for t, us in inv["tasks"].items()},
            "graph_us": inventory.prediction(inv, speeds)}


def _task_results(task: str, slug: str) -> tuple[list[dict], dict] | None:
    """(rows, summary) of the task's results file for this GPU, or None (the encoding: kda.harness.results_file)."""
    from kda.definition.task import Task

    path = results_file.find(Task.load(task).results_dir(), slug)
    if path is None:
        return None
    records = results_file.read_records(path)
    summary = next((r for r in reversed(records) if r.get("type") == "summary"), {})
    return [r for r in records if r.get("type") == "row"], summary


def _task_row_speedup(task: str, row_id: str, slug: str) -> float | None:
    found = _task_results(task, slug)
    row = next((r for r in found[0] if r.get("id") == row_id), None) if found else None
    e = (((row or {}).get("speedup") or {}).get("graph_us") or {}).get("vs_baseline")
    return (e or {}).get("median")


def _task_geomean(task: str, slug: str) -> float | None:
    found = _task_results(task, slug)
    return (((found[1].get("metrics") or {}).get("graph_us") or {}).get("vs_baseline") or {}).get("geomean") \
        if found else None
