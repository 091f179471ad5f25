"""Where a group_norm_silu held-kernel call spends its time, from global-timer stamps every CTA takes, on a GPU.

Builds the candidate's extension again with KDA_GN_TRACE defined (a module of its own: the default build is not
touched), runs a row's call back to back, and reads the last call's stamps (csrc/gn_resident.h, HeldTrace): for each
point, the earliest, median and latest CTA in microseconds from the earliest CTA's start. Stamping costs a few
registers and stores, so the times are close to the kernel's, not its exact times: `kda bench` times the kernel.

    python3 diffusion/kernels/group_norm_silu/tools/held_trace.py --rows hyvae_c512_t9_128x128_contig --out trace.json
"""
import argparse
import json
import os
import statistics
import sys

import torch

_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [_HERE, os.path.join(_HERE, "..", "..", "..", "..", "scripts")]  # this folder; the campaign's scripts/
from layout_sweep import row_case  # noqa: E402  (scripts/)

from kda.definition.task import Task  # noqa: E402

# HeldTrace of csrc/gn_resident.h, in its order
EVENTS = ("start", "ready", "ring_issued", "first_stats", "first_published", "first_exchanged", "first_coef",
          "first_applied", "last_copy", "last_published", "last_exchanged", "apply_done")


def summarize(stamps, ctas: int) -> dict:
    """{event: (earliest, median, latest)} in microseconds from the earliest start, over the first `ctas` rows of
    `stamps` (nanoseconds, [ctas][events]); an event no CTA stamped after the call began is left out (its stamps are
    an earlier call's)."""
    rows = [list(map(int, r)) for r in stamps[:ctas]]
    t0 = min(r[0] for r in rows)
    out = {}
    for i, name in enumerate(EVENTS):
        vals = [(r[i] - t0) / 1e3 for r in rows if r[i] >= t0]
        if len(vals) == len(rows):
            out[name] = (min(vals), statistics.median(vals), max(vals))
    return out


def apply_sets(module, items) -> None:
    """Each 'NAME=INT' of `items` set on `module` (a knob it has); a clear error for anything else."""
    for item in items:
        name, _, value = item.partition("=")
        if not hasattr(module, name) or not value.lstrip("-").isdigit():
            raise SystemExit(f"--set {item}: expected NAME=INT with NAME a knob of {module.__name__}")
        setattr(module, name, int(value))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", required=True, help="comma-separated row ids of group_norm_silu")
    ap.add_argument("--calls", type=int, default=5, help="back-to-back calls; the last one's stamps are read")
    ap.add_argument("--set", action="append", default=[], metavar="NAME=INT",
                    help="set an integer knob of the candidate's module first (e.g. _HELD_PREFETCH_BYTES=0); repeatable")
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    torch.set_grad_enabled(False)
    task = Task.load("group_norm_silu")
    sol, ad = task.load_solution(), task.adapter
    impl = sys.modules[sol.__name__ + ".group_norm_silu"]
    apply_sets(impl, args.set)
    impl._EXT = impl._EXT.with_defines("KDA_GN_TRACE")
    ext = impl._EXT.load()
    results = []
    for rid in args.rows.split(","):
        row, inp, ref, specs, out = row_case(task, rid)
        impl._plans.clear()
        ad.call_candidate(sol, row, inp, out)
        plan = next((p for p in impl._plans.values() if p and p[0] == "held"), None)
        if plan is None:
            raise SystemExit(f"{rid}: the candidate does not take the held kernel on this row and GPU")
        torch.cuda.synchronize()
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        for _ in range(args.calls):
            ad.call_candidate(sol, row, inp, out)
        b.record()
        torch.cuda.synchronize()
        ctas = plan[1][0]
        summary = summarize(ext.held_trace().tolist(), ctas)
        per_call = a.elapsed_time(b) * 1e3 / args.calls
        print(f"{rid}: plan {tuple(plan[1])}, {per_call:.1f} us a call back to back", flush=True)
        for name, (lo, med, hi) in summary.items():
            print(f"  {name:16s} {lo:8.2f} {med:8.2f} {hi:8.2f} us", flush=True)
        results.append({"row": rid, "plan": list(plan[1]), "set": args.set, "call_us": per_call, "events": summary})
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"gpu": torch.cuda.get_device_name(), "rows": results}, f, indent=1)


if __name__ == "__main__":
    main()
