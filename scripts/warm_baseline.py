"""Fill the on-disk compile caches of a task before `kda bench` times it (GPU machine, repository root).

A benchmark row pays for compilation that has nothing to do with what it times, one row after another:
- a baseline compiled at run time (tvm-ffi JIT CUDA: qknorm_rope) builds one module per template signature, tens of
  seconds each, landing in .kda-cache/tvm-ffi;
- the torch.compile peer is compiled afresh for every row (peers.peer_call resets dynamo per row). On
  group_norm_silu that is most of the benchmark's time: 92 s for the A/A run (no peers) against 429 s with them
  (H200, results/h200*.jsonl.gz).
This makes each build once, every row in its own process, N at a time, so the builds land in the caches together
(the baseline's own, and Inductor's FX-graph and Triton caches for the peer) and the benchmark finds them there.
The peer is compiled exactly as the worker compiles it (peers.peer_call on the oracle's peer math, autograd off):
a cache hit is the same code, so nothing about what is timed changes.
With --sweep N [--sweep-seed S] it warms the rows of that generalisation sweep instead (kda.definition.sweep: the
same draw `kda bench TASK --sweep N` makes), whose peers are otherwise compiled one after another inside the bench:
most of a 64-row sweep's time.
Usage: python3 scripts/warm_baseline.py TASK [--jobs N] [--peer] [--sweep N [--sweep-seed S]]
"""
import argparse
import multiprocessing as mp
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def _rows(task, sweep: tuple[int, int | None] | None):
    """The rows to warm: the task's production and test rows, or the sweep's drawn rows (drawn again in each child:
    the draw depends only on the seed)."""
    if sweep is None:
        return task.select()
    from kda.definition.sweep import build

    return build(task, sweep[0], sweep[1]).parsed()


def warm_inputs(row, device: str) -> dict:
    """The row's inputs with values, as the worker fills them: left as allocated, an index input (positions) holds
    garbage, and on 2026-11-28 (H200) qknorm_rope's compiled peer tripped a device-side assert on one, which poisons
    the CUDA context and failed every later build of that worker process (15 of 38 built)."""
    from kda.definition.workloads import build_inputs, refill_inputs

    inputs = build_inputs(row, device)
    refill_inputs(row, inputs, row.seed)
    return inputs


def _warm(task_name: str, row_id: str, peer: bool,
          sweep: tuple[int, int | None] | None = None) -> tuple[str, float, str]:
    import torch
    from kda.harness.peers import peer_call, peer_math
    from kda.definition.task import Task
    from kda.vendor import load_entry_points, vendor_task

    torch.set_grad_enabled(False)  # as the worker runs every arm
    t0 = time.time()
    task = Task.load(task_name)
    try:
        row = next(r for r in _rows(task, sweep) if r.id == row_id)
        inputs = warm_inputs(row, "cuda")
        specs = task.adapter.output_specs(row, inputs)
        if peer:
            peer_call(peer_math(task.oracle), row, inputs, {k: dt for k, (_, dt) in specs.items()}, "compile")()
        else:
            upstream = load_entry_points(task.cfg, vendor_task(task.cfg, allow_download=False))
            out = {k: torch.empty(shape, dtype=dt, device="cuda") for k, (shape, dt) in specs.items()}
            task.adapter.call_baseline(upstream, row, inputs, out)
        torch.cuda.synchronize()
        return row_id, time.time() - t0, "ok"
    except Exception as e:  # reported, not raised: the benchmark will show the same failure with its row
        return row_id, time.time() - t0, f"{type(e).__name__}: {e}"


def builds(task, peer: bool, sweep: tuple[int, int | None] | None = None) -> dict:
    """One row per distinct build: the peer compiles per row; the baseline per adapter.build_key(row) if defined."""
    key = (lambda row: row.id) if peer else getattr(task.adapter, "build_key", lambda row: row.id)
    first = {}
    for row in _rows(task, sweep):
        first.setdefault(key(row), row.id)
    return first


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("task")
    ap.add_argument("--jobs", type=int, default=12)
    ap.add_argument("--peer", action="store_true", help="warm the torch.compile peer instead of the baseline")
    ap.add_argument("--sweep", type=int, metavar="N", help="the rows of `kda bench TASK --sweep N` instead")
    ap.add_argument("--sweep-seed", type=int, metavar="S", help="its seed (default: the task's bench.seed)")
    args = ap.parse_args()
    if args.sweep_seed is not None and args.sweep is None:
        ap.error("--sweep-seed needs --sweep N")
    from kda.definition.task import Task
    task = Task.load(args.task)
    sweep = None if args.sweep is None else (args.sweep, args.sweep_seed)
    first = builds(task, args.peer, sweep)
    what = "torch.compile peer" if args.peer else "baseline"
    over = f"{args.sweep} sweep rows" if sweep else f"{len(task.select())} rows"
    print(f"{args.task}: {len(first)} distinct {what} builds over {over}", flush=True)
    t0 = time.time()
    with mp.get_context("spawn").Pool(min(args.jobs, len(first))) as pool:
        results = pool.starmap(_warm, [(args.task, rid, args.peer, sweep) for rid in first.values()])
    failed = [(rid, status) for rid, _, status in results if status != "ok"]
    print(f"  {len(results) - len(failed)}/{len(results)} built in {time.time() - t0:.0f} s, "
          f"slowest {max(s for _, s, _ in results):.1f} s")
    for rid, status in failed:
        print(f"  {rid}: {status}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
