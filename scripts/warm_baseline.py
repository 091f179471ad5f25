"""Build a task's JIT-compiled baseline variants in parallel before timing (GPU machine, repository root).

A baseline compiled at run time (tvm-ffi JIT CUDA: qknorm_rope) builds one module per template signature, tens of
seconds each, and `kda bench` would build them one after another inside its row time limit. This calls the
baseline once per distinct signature, each in its own process, so the builds land in the on-disk cache
(.kda-cache/tvm-ffi) together. The signature is `adapter.build_key(row)` when the adapter defines it, else the row.
Usage: python3 scripts/warm_baseline.py TASK [--jobs N]
"""
import argparse
import multiprocessing as mp
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def _warm(task_name: str, row_id: str) -> tuple[str, float, str]:
    import torch
    from kda.task import Task
    from kda.vendor import load_entry_points, vendor_task
    from kda.workloads import build_inputs

    t0 = time.time()
    task = Task.load(task_name)
    try:
        upstream = load_entry_points(task.cfg, vendor_task(task.cfg, allow_download=False))
        row = task.select([row_id])[0]
        inputs = build_inputs(row, "cuda")
        out = {k: torch.empty(shape, dtype=dt, device="cuda")
               for k, (shape, dt) in task.adapter.output_specs(row, inputs).items()}
        task.adapter.call_baseline(upstream, row, inputs, out)
        torch.cuda.synchronize()
        return row_id, time.time() - t0, "ok"
    except Exception as e:  # reported, not raised: the benchmark will show the same failure with its row
        return row_id, time.time() - t0, f"{type(e).__name__}: {e}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("task")
    ap.add_argument("--jobs", type=int, default=12)
    args = ap.parse_args()
    from kda.task import Task
    task = Task.load(args.task)
    key = getattr(task.adapter, "build_key", lambda row: row.id)
    first = {}
    for row in task.select():
        first.setdefault(key(row), row.id)
    print(f"{args.task}: {len(first)} distinct baseline builds over {len(task.select())} rows")
    with mp.get_context("spawn").Pool(min(args.jobs, len(first))) as pool:
        results = pool.starmap(_warm, [(args.task, rid) for rid in first.values()])
    for rid, secs, status in results:
        print(f"  {rid}: {secs:.1f} s, {status}")
    return 0 if all(s == "ok" for _, _, s in results) else 1


if __name__ == "__main__":
    sys.exit(main())
