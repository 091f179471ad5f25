"""Where device_us's excess over graph_us goes on rows timed one call per sample.

On rows whose baseline takes milliseconds the harness times one call per device_us sample (inner = 1), and there the
candidate's device_us came out 10-30% above its wall_us and graph_us (e.g. H200 v7, hyvae_c256_t17_256x256_cl3d:
896 / 752 / 739 us). Each timer below changes one thing, so the table shows which one carries the excess:

- idle_start: device_us as the harness took it up to 2026-11-25 (start stamp on an idle GPU), right after another
  arm ran
- warm: the same, right after a call of the same arm
- after_touch: the same, right after writing a buffer of --touch-gb GB (evicts the L2 and the address translations)
- blocked: warm, with a sleep kernel ahead of the start stamp, so the host has queued the call before the stamp
- blocked_nosync: blocked, with the end stamp recorded right after the call instead of after a host synchronize
- harness: timing.device_us as the harness takes it now (one untimed lead call ahead of the start stamp), right
  after another arm ran
- graph: a one-call CUDA graph replayed right after another arm ran (timing.GraphArm, n = 1)

Usage (GPU machine, repository root):
  python3 scripts/first_call.py TASK ROW[,ROW...] [--reps 11] [--json FILE]
Anywhere: python3 scripts/first_call.py --render FILE.json   (writes FILE.md beside it: the tables docs cite)
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a file from anywhere in the checkout

from kda.harness import timing
from kda.harness.provenance import git_state, now
from kda.harness.peers import peer_call, peer_math
from kda.definition.task import Task
from kda.vendor import load_entry_points, vendor_task
from kda.definition.workloads import build_inputs, refill_inputs

TIMERS = ("idle_start", "warm", "after_touch", "blocked", "blocked_nosync", "harness", "graph")


def sleep_cycles(us: float) -> int:
    """Clock cycles for a sleep kernel of about `us` at the device's maximum SM clock."""
    khz = getattr(torch.cuda.get_device_properties(0), "clock_rate", 0) or 2_000_000  # absent before some torch releases
    return int(us * khz / 1000)


def one_call_us(call, cycles: int = 0, sync_before_end: bool = True) -> float:
    """One call between two events. With the defaults, as timing.device_us took it before its lead call (start
    stamp on an idle GPU); `cycles` puts a sleep kernel ahead of the start stamp, so the host queues the call first."""
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda.synchronize()
    if cycles:
        torch.cuda._sleep(cycles)
    start.record()
    call()
    if sync_before_end:
        torch.cuda.synchronize()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) * 1000.0


def arms_for(task, row, upstream, solution):
    dev = torch.device("cuda")
    inputs = build_inputs(row, dev)
    refill_inputs(row, inputs, 1)
    ad = task.adapter
    specs = ad.output_specs(row, inputs)
    out = {k: torch.empty(shape, dtype=dt, device=dev) for k, (shape, dt) in specs.items()}
    out_b = {k: torch.empty(shape, dtype=dt, device=dev) for k, (shape, dt) in specs.items()}
    arms = {
        "baseline": lambda: ad.call_baseline(upstream, row, inputs, out_b),
        "candidate": lambda: ad.call_candidate(solution, row, inputs, out),
        "compile": peer_call(peer_math(task.oracle), row, inputs, {k: dt for k, (_, dt) in specs.items()}, "compile"),
    }
    for call in arms.values():  # compile, JIT and allocator warm-up
        for _ in range(3):
            call()
    torch.cuda.synchronize()
    return arms


def measure(arms, reps: int, touch_gb: float, slept_us: float) -> dict:
    flush = timing.Flusher(False, 0)
    touch = torch.empty(int(touch_gb * (1 << 30)), dtype=torch.uint8, device="cuda")
    names = list(arms)
    graphs = {n: timing.GraphArm(arms[n], 1) for n in names}
    cycles = sleep_cycles(slept_us)
    samples = {n: {t: [] for t in TIMERS} for n in names}
    for rep in range(reps):
        for i, n in enumerate(names):
            # another arm, never this one, in turn
            other = arms[names[(i + 1 + rep % (len(names) - 1)) % len(names)] if len(names) > 1 else n]
            call, s = arms[n], samples[n]
            other(); s["idle_start"].append(one_call_us(call))
            call(); s["warm"].append(one_call_us(call))
            touch.fill_(rep % 251); s["after_touch"].append(one_call_us(call))
            call(); s["blocked"].append(one_call_us(call, cycles))
            call(); s["blocked_nosync"].append(one_call_us(call, cycles, sync_before_end=False))
            other(); s["harness"].append(timing.device_us(call, 1, flush))
            other(); s["graph"].append(graphs[n].sample_us(flush))
    return {n: {t: statistics.median(v) for t, v in s.items() if v[0] is not None} for n, s in samples.items()}


def render(report: dict) -> str:
    """The medians of a --json file as markdown, one table per row, with each timer's excess over blocked_nosync
    (the call's device time with neither the launch path nor the end synchronize in it)."""
    timers = report["timers"]
    out = [f"<!-- generated by `python3 scripts/first_call.py --render`; do not edit -->",
           f"# Where device_us goes on rows timed one call per sample: {report['task']} ({report['gpu']})", "",
           f"Commit `{(report.get('commit') or '?')[:12]}`, {report.get('time_utc', '?')}; medians of {report['reps']} "
           f"samples per timer, us. Timers as in `scripts/first_call.py`; in brackets, the excess over "
           f"`blocked_nosync`.", ""]
    for row, arms in report["rows"].items():
        out += [f"## {row}", "", "| arm | " + " | ".join(timers) + " |", "|---|" + "---|" * len(timers)]
        for arm, med in arms.items():
            ref = med.get("blocked_nosync")
            cells = [f"{med[t]:.1f}" + (f" ({med[t] - ref:+.1f})" if ref is not None and t != "blocked_nosync" else "")
                     if t in med else "-" for t in timers]
            out.append(f"| {arm} | " + " | ".join(cells) + " |")
        out.append("")
    return "\n".join(out)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("task", nargs="?")
    p.add_argument("rows", nargs="?", help="comma-separated row ids")
    p.add_argument("--render", type=Path, metavar="JSON", help="write the markdown tables of a --json file beside it")
    p.add_argument("--reps", type=int, default=11)
    p.add_argument("--touch-gb", type=float, default=4.0)
    p.add_argument("--sleep-us", type=float, default=2000.0, help="sleep kernel ahead of a blocked start stamp")
    p.add_argument("--json", type=Path, help="write the medians here")
    a = p.parse_args()
    if a.render:
        md = a.render.with_suffix(".md")
        md.write_text(render(json.loads(a.render.read_text())) + "\n")
        print(f"wrote {md}")
        return 0
    if not (a.task and a.rows):
        p.error("TASK and ROW[,ROW...] are required unless --render is given")
    task = Task.load(a.task)
    upstream = load_entry_points(task.cfg, vendor_task(task.cfg, allow_download=False))
    solution = task.load_solution()
    report = {"gpu": torch.cuda.get_device_name(0), "task": task.name, **git_state(), "time_utc": now(),
              "reps": a.reps, "touch_gb": a.touch_gb, "sleep_us": a.sleep_us, "timers": TIMERS, "rows": {}}
    for row in task.select(a.rows.split(",")):
        med = measure(arms_for(task, row, upstream, solution), a.reps, a.touch_gb, a.sleep_us)
        report["rows"][row.id] = med
        print(f"\n{row.id} ({report['gpu']}), medians of {a.reps}, us")
        print(f"{'arm':10s}" + "".join(f"{t:>16s}" for t in TIMERS))
        for n, m in med.items():
            print(f"{n:10s}" + "".join(f"{m.get(t, float('nan')):16.1f}" for t in TIMERS))
        torch.cuda.empty_cache()
    if a.json:
        a.json.parent.mkdir(parents=True, exist_ok=True)
        a.json.write_text(json.dumps(report, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
