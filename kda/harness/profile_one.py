"""Target process of `kda profile`: one arm of one row, warmed up, then exactly one call inside a profiler range.

Nsight Compute runs with --profile-from-start off, so only kernels launched between cudaProfilerStart and
cudaProfilerStop (the arm's one call) are captured.
"""
from __future__ import annotations

import argparse

import torch

from kda.definition.task import Task
from kda.vendor import load_entry_points, vendor_task
from kda.harness.peers import peer_call, peer_math
from kda.definition.workloads import build_inputs, refill_inputs, trial_seed


def main(argv=None) -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--task", required=True)
    ap.add_argument("--row", required=True)
    ap.add_argument("--arm", choices=("baseline", "candidate", "compile", "eager"), required=True)
    ap.add_argument("--warmup", type=int, default=5)
    args = ap.parse_args(argv)
    task = Task.load(args.task)
    row = task.select([args.row])[0]
    # Only the baseline arm imports upstream: the other arms of a CuTe DSL task profile where the DSL is not installed.
    upstream = load_entry_points(task.cfg, vendor_task(task.cfg, allow_download=False)) if args.arm == "baseline" else None
    dev = torch.device("cuda")
    inputs = build_inputs(row, dev)
    refill_inputs(row, inputs, trial_seed(row.seed, 0, 0, 0))
    ad = task.adapter
    out = {k: torch.empty(shape, dtype=dt, device=dev) for k, (shape, dt) in ad.output_specs(row, inputs).items()}
    if args.arm == "baseline":
        call = lambda: ad.call_baseline(upstream, row, inputs, out)  # noqa: E731
    elif args.arm == "candidate":
        solution = task.load_solution()
        call = lambda: ad.call_candidate(solution, row, inputs, out)  # noqa: E731
    else:
        call = peer_call(peer_math(task.oracle), row, inputs, {k: t.dtype for k, t in out.items()}, args.arm)
    for _ in range(args.warmup):
        call()
    torch.cuda.synchronize()
    torch.cuda.cudart().cudaProfilerStart()
    call()
    torch.cuda.synchronize()
    torch.cuda.cudart().cudaProfilerStop()


if __name__ == "__main__":
    main()
