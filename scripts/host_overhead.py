"""Where a small row's time goes on the host: per-call cost of each layer of one arm, and a cProfile of the candidate.

Usage (GPU machine, repository root): python3 scripts/host_overhead.py TASK ROW
"""
import cProfile
import pstats
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a file from anywhere in the checkout

from kda.definition.task import Task
from kda.vendor import load_entry_points, vendor_task
from kda.definition.workloads import build_inputs, refill_inputs


def per_call_us(fn, n=2000):
    for _ in range(50):
        fn()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(n):
        fn()
    host = (time.perf_counter() - t0) / n * 1e6
    torch.cuda.synchronize()
    return host


def main():
    task = Task.load(sys.argv[1])
    row = task.select([sys.argv[2]])[0]
    up = load_entry_points(task.cfg, vendor_task(task.cfg, allow_download=False))
    sol = task.load_solution()
    dev = torch.device("cuda")
    inputs = build_inputs(row, dev)
    refill_inputs(row, inputs, 1)
    ad = task.adapter
    out = {k: torch.empty(shape, dtype=dt, device=dev) for k, (shape, dt) in ad.output_specs(row, inputs).items()}
    x = inputs["x"]
    rows = [
        ("python no-op", lambda: None),
        ("torch.empty_like(x)", lambda: torch.empty_like(x)),
        ("x.add_(0) (one aten launch)", lambda: x.add_(0)),
        ("baseline via adapter", lambda: ad.call_baseline(up, row, inputs, out)),
        ("candidate via adapter", lambda: ad.call_candidate(sol, row, inputs, out)),
    ]
    for label, fn in rows:
        print(f"{label:32s} {per_call_us(fn):8.2f} us/call (host, back-to-back)")
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(2000):
        ad.call_candidate(sol, row, inputs, out)
    prof.disable()
    torch.cuda.synchronize()
    import io

    text = io.StringIO()
    pstats.Stats(prof, stream=text).sort_stats("tottime").print_stats(12)
    print(text.getvalue().replace(str(Path(__file__).resolve().parents[1]) + "/", "./"))  # no machine paths


if __name__ == "__main__":
    main()
