"""Where a block's GPU time goes, per arm, and the gain the task results predict for it (issue 33).

The inventory of one block call: every CUDA kernel's device time, grouped into families. Kernels run by a call site
are the site's task's, without guessing from kernel names (which differ between Triton, CuTe DSL and CUDA builds):
in the profiled call each site runs inside a profiler range `kda.site:<site>:<task>`, the device synchronized just
before the range opens and before it closes, so every kernel it launched runs inside that range's time window and
no other kernel does.
The window, not the profiler's link from a kernel to the CPU op that launched it: on the first GPU run (H200,
2026-11-28) Triton's launches had no such link, and every Triton kernel, upstream's and the candidates', was missing
from the inventories. The rest are told apart by name: GEMM, attention, copies, other elementwise.

The prediction is Amdahl's law over the upstream arm's inventory: the block's time with each task's share divided
by that task's measured speedup on the same rows (the task results files: graph_us over upstream, the rows the
block's workload was read from), everything else unchanged.
"""
from __future__ import annotations

import math
import re
from typing import Callable

SITE_PREFIX = "kda.site:"
# Recorded in each results file's provenance: how its inventories told a site's kernels apart. No prediction or
# inventory plot is read from a file of an earlier method; FLAWED says why, for the page that leaves them out.
INVENTORY_METHOD = "site windows, opened after a synchronize, ranges not kernels"
# Files of an earlier method whose inventories can be set right from what they hold: read through `clean`.
REPAIRED = {
    # the third GPU run (2026-11-28, H200, 2c8a4b3): the profile reports each record_function range a second time
    # as a device-side annotation, and those entries were summed as kernels of the site's task (its time twice;
    # a site named "attn_..." even counted as attention by name). Each such entry is named by its range, so it is
    # left out on reading.
    "site windows, opened after a synchronize": "listed each site's profiler range as a kernel of its task, "
                                                "counting the site's time twice; read with those entries left out",
}
FLAWED = {
    # the first GPU run (2026-11-28, H200): attribution by the profiler's link to the launching CPU op
    None: "attributed kernels by the profiler's link to a CPU op, which every Triton kernel lacks",
    # the second (2026-11-28, H200, 32a64c9): the range opened before the entry synchronize, so the window held the
    # tail of everything queued before the site: wan's 75,600-token attention counted as a norm site's
    "site windows": "opened each site's window before synchronizing, so kernels still running from before the "
                    "site (attention, GEMMs) counted as the site's",
}
FAMILIES = ("gemm", "attention", "copy", "other")
_PATTERNS = (
    ("attention", re.compile(r"flash|fmha|attention|attn|sdpa|softmax", re.I)),
    ("gemm", re.compile(r"gemm|cutlass|xmma|nvjet|cublas|matmul|sm\d\d_.*(?:tensorop|hmma)|wgmma", re.I)),
    ("copy", re.compile(r"memcpy|memset|copy|cat_|fill", re.I)),
)


def family(kernel: str) -> str:
    """The family of a kernel not launched from a call site, by its name."""
    for name, pattern in _PATTERNS:
        if pattern.search(kernel):
            return name
    return "other"


def site_range(site: str, task: str) -> str:
    return f"{SITE_PREFIX}{site}:{task}"


def labelled(fns: dict[str, Callable], tasks: dict[str, str],
             sync: Callable[[], None] = lambda: None) -> dict[str, Callable]:
    """Each site's function wrapped in a profiler range naming the site and its task, `sync` (the device's
    synchronize, for the profiled call only: never in a timed one) called before the range opens and before it
    closes."""
    from torch.profiler import record_function

    def wrap(site: str, fn: Callable) -> Callable:
        label = site_range(site, tasks[site])

        def call(*args, **kwargs):
            # Outside the range: what was queued before the site finishes before its window opens. Inside it, the
            # window would hold the tail of that work (the second GPU run counted attention as a norm site's).
            sync()
            with record_function(label):
                out = fn(*args, **kwargs)
                sync()  # the site's own kernels finish inside its window
                return out

        return call

    return {site: wrap(site, fn) for site, fn in fns.items()}


def readable(method: str | None) -> bool:
    """Whether a results file's inventories (its provenance's `inventory`) may be read, through `clean`."""
    return method == INVENTORY_METHOD or method in REPAIRED


def clean(inv: dict) -> dict:
    """An inventory without the entries that are profiler ranges, not kernels (named `kda.site:...`), its totals
    summed again from the kernels left; the same inventory for a file of the current method."""
    if "kernels" not in inv:  # nothing to sum again from (a summary written by hand, as the tests' are)
        return inv
    kernels = [k for k in inv["kernels"] if not str(k["kernel"]).startswith(SITE_PREFIX)]
    tasks: dict[str, float] = {}
    fams = dict.fromkeys(FAMILIES, 0.0)
    for k in kernels:
        if k["owner"] in fams:
            fams[k["owner"]] += float(k["us"])
        else:
            tasks[k["owner"]] = tasks.get(k["owner"], 0.0) + float(k["us"])
    out = {"total_us": sum(float(k["us"]) for k in kernels), "tasks": tasks, "families": fams, "kernels": kernels}
    if "task_calls" in inv:  # counted from events, never from a range: nothing to set right
        out["task_calls"] = inv["task_calls"]
    return out


def prediction(upstream_inv: dict | None, speedups: dict[str, float | None] | None) -> float | None:
    """The block's predicted graph_us gain from the upstream arm's inventory (cleaned) and each task's measured
    speedup (as a row's `predicted.task_speedups` recorded them)."""
    if not upstream_inv or speedups is None:
        return None
    inv = clean(upstream_inv)
    return amdahl(inv["total_us"], inv["tasks"], speedups)


def summarize(events: list[dict]) -> dict:
    """From profiler events ({"name", "device_us", "ranges": the enclosing range names}) to the inventory:
    {"total_us", "tasks": {task: us}, "task_calls": {task: launches}, "families": {family: us}, "kernels":
    [{"kernel", "us", "owner"}]}; a kernel inside a site range belongs to that site's task."""
    tasks: dict[str, float] = {}
    task_calls: dict[str, int] = {}  # launches at each task's sites: compared exactly with the peers alone
    fams = {f: 0.0 for f in FAMILIES}
    kernels: dict[tuple[str, str], float] = {}
    total = 0.0
    for e in events:
        us = float(e["device_us"])
        total += us
        owner = next((r[len(SITE_PREFIX):].split(":", 1)[1] for r in e.get("ranges", ())
                      if r.startswith(SITE_PREFIX)), None)
        if owner is not None:
            tasks[owner] = tasks.get(owner, 0.0) + us
            task_calls[owner] = task_calls.get(owner, 0) + 1
        else:
            owner = family(e["name"])
            fams[owner] += us
        kernels[(e["name"], owner)] = kernels.get((e["name"], owner), 0.0) + us
    rows = sorted(({"kernel": k, "owner": o, "us": us} for (k, o), us in kernels.items()), key=lambda r: -r["us"])
    return {"total_us": total, "tasks": tasks, "task_calls": task_calls, "families": fams, "kernels": rows}


def profile_events(fn: Callable, cuda: bool = True) -> list[dict]:
    """Run fn once under torch.profiler (CUDA activity) and return its kernels with their enclosing range names;
    the attribution follows each kernel to the CPU op (or range) that launched it and up its parents. `cuda=False`
    (the CPU tests) profiles CPU activity only: no kernels, an empty list."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    from torch.autograd import DeviceType

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    with profile(activities=activities) as prof:
        fn()
        if cuda:
            torch.cuda.synchronize()
    windows, kernels = [], []
    for evt in prof.events():
        span = (evt.time_range.start, evt.time_range.end)
        if evt.device_type == DeviceType.CPU and evt.name.startswith(SITE_PREFIX):
            windows.append((*span, evt.name))
        elif evt.device_type == DeviceType.CUDA and not (getattr(evt, "is_user_annotation", False)
                                                         or evt.name.startswith(SITE_PREFIX)):
            # kernels, memcpys and memsets, linked to a CPU op or not; not a range's device-side annotation (the
            # profile reports each record_function range there too: summed, it counted a site's time twice)
            kernels.append({"name": evt.name, "start_us": span[0], "end_us": span[1]})
    return attribute(kernels, windows)


def attribute(kernels: list[dict], windows: list[tuple[float, float, str]]) -> list[dict]:
    """Each device event ({"name", "start_us", "end_us"}, on the profiler's one timeline) with its device time and
    the site range whose window holds its midpoint (`ranges`, empty outside every site): the form `summarize`
    reads. The midpoint, since the clocks of host and device agree to a microsecond or so and a synchronized window
    starts after everything before it has finished."""
    out = []
    for k in kernels:
        mid = (k["start_us"] + k["end_us"]) / 2
        ranges = [name for start, end, name in windows if start <= mid <= end]
        out.append({"name": k["name"], "device_us": k["end_us"] - k["start_us"], "ranges": ranges[-1:]})
    return out


def amdahl(total_us: float, task_us: dict[str, float], speedups: dict[str, float | None]) -> float | None:
    """The block's predicted speedup: each task's time divided by its speedup, the rest unchanged. None when the
    inventory is empty or a task with time in it has no measured speedup."""
    if total_us <= 0:
        return None
    new = total_us
    for task, us in task_us.items():
        s = speedups.get(task)
        if s is None or s <= 0:
            return None
        new -= us - us / s
    return total_us / new


def task_speedups(rows_by_site: dict[str, tuple[str, str]], lookup: Callable[[str, str], float | None],
                  fallback: Callable[[str], float | None]) -> dict[str, float | None]:
    """Per task, the geometric mean of its measured speedups on the rows the block's sites were read from
    (rows_by_site: site -> (task, row id); lookup(task, row) -> graph_us median over upstream or None), the task's
    production geomean (fallback(task)) where no such row was measured."""
    logs: dict[str, list[float]] = {}
    for task, row in rows_by_site.values():
        s = lookup(task, row)
        if s is not None and s > 0:
            logs.setdefault(task, []).append(math.log(s))
    tasks = {task for task, _ in rows_by_site.values()}
    return {t: (math.exp(sum(logs[t]) / len(logs[t])) if logs.get(t) else fallback(t)) for t in sorted(tasks)}
