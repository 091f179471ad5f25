"""Target process of `kda profile`: one arm of one row, warmed up, then exactly one call inside a profiler range.

Nsight Compute runs with --profile-from-start off, so only kernels launched between cudaProfilerStart and
cudaProfilerStop (the arm's one call) are captured.
"""
from __future__ import annotations

import argparse

import torch

from kda.task import Task
from kda.vendor import load_entry_points, vendor_task
from kda.workloads import build_tensor, fill_, make_generator, trial_seed


def main(argv=None) -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--task", required=True)
    ap.add_argument("--row", required=True)
    ap.add_argument("--arm", choices=("baseline", "candidate", "compile", "eager"), required=True)
    ap.add_argument("--warmup", type=int, default=5)
    args = ap.parse_args(argv)
    task = Task.load(args.task)
    row = task.select([args.row])[0]
    upstream = load_entry_points(task.cfg, vendor_task(task.cfg, allow_download=False))
    dev = torch.device("cuda")
    inputs = {k: (None if s is None else build_tensor(s, dev)) for k, s in row.tensors.items()}
    gen = make_generator(dev, trial_seed(row.seed, 0, 0, 0))
    for k, s in row.tensors.items():
        if s is not None:
            fill_(inputs[k], s, gen)
    ad = task.adapter
    out = {k: torch.empty(shape, dtype=dt, device=dev) for k, (shape, dt) in ad.output_specs(row, inputs).items()}
    if args.arm == "baseline":
        call = lambda: ad.call_baseline(upstream, row, inputs, out)  # noqa: E731
    elif args.arm == "candidate":
        solution = task.load_solution()
        call = lambda: ad.call_candidate(solution, row, inputs, out)  # noqa: E731
    else:
        names = [k for k, v in inputs.items() if v is not None]

        def peer(*tensors):
            ref = task.oracle.reference(row, {**{k: None for k in inputs}, **dict(zip(names, tensors))})
            return {k: ref[k].to(out[k].dtype) for k in out}

        fn = torch.compile(peer, dynamic=False) if args.arm == "compile" else peer
        call = lambda: fn(*[inputs[k] for k in names])  # noqa: E731
    for _ in range(args.warmup):
        call()
    torch.cuda.synchronize()
    torch.cuda.cudart().cudaProfilerStart()
    call()
    torch.cuda.synchronize()
    torch.cuda.cudart().cudaProfilerStop()


if __name__ == "__main__":
    main()
