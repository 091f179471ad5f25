"""Does a candidate give the right answer when a CUDA graph of one call is replayed on new input values?

Inference servers capture a model's calls once and replay them with new values in the same buffers. A kernel that
keeps state between calls in device memory (tags, counters, epochs) can pass every eager check and still read its
last replay's state there. For each row: capture one candidate call, then three times write new values into the
inputs (scaled and shifted, so the statistics change), replay, and compare the output with the oracle on those
values (the task's tolerance; above 1 fails).

    python3 scripts/graph_replay_check.py group_norm_silu --rows a,b --out replay.json
"""
import argparse
import json
import sys

import torch

from kda.definition.task import Task

sys.path.insert(0, "scripts")
from layout_sweep import row_case, worst_norm_err  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("task")
    ap.add_argument("--rows", required=True)
    ap.add_argument("--out")
    ap.add_argument("--zero", help="a dict of device tensors in the task's main module to zero before each replay: "
                                   "the state a graph would replay with if the candidate kept none on the device "
                                   "(group_norm_silu: _epochs, the held kernel before it kept an epoch)")
    a = ap.parse_args()
    task = Task.load(a.task)
    sol = task.load_solution()
    tol = task.cfg["check"]["tolerance"]
    mod = sys.modules[sol.__name__ + "." + a.task] if a.zero else None
    res, failed = {}, False
    for rid in a.rows.split(","):
        row, inp, _, specs, out = row_case(task, rid)
        call = lambda: task.adapter.call_candidate(sol, row, inp, out)  # noqa: E731
        call()  # eager warm-up (plans, builds, persistent buffers) before capture, as a server would
        torch.cuda.synchronize()
        g = torch.cuda.CUDAGraph()
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            call()
        torch.cuda.current_stream().wait_stream(s)
        with torch.cuda.graph(g):
            call()
        errs = []
        for k, (scale, shift) in enumerate(((3.0, 2.0), (0.25, -1.0), (1.0, 0.5))):
            for t in inp.values():
                if isinstance(t, torch.Tensor) and t.is_floating_point() and t.numel() > 1024:
                    t.mul_(scale).add_(shift)
            if mod is not None:
                for buf in getattr(mod, a.zero).values():
                    buf.zero_()
            g.replay()
            torch.cuda.synchronize()
            errs.append(worst_norm_err(out, task.oracle.reference(row, inp), specs, tol))
        res[rid] = errs
        failed |= max(errs) > 1
        print(f"{rid}: worst normalised error per replay {[round(e, 3) for e in errs]}"
              f" {'FAIL' if max(errs) > 1 else 'ok'}", flush=True)
    if a.out:
        with open(a.out, "w") as f:
            json.dump({"task": a.task, "gpu": torch.cuda.get_device_name(), "rows": res}, f, indent=1)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
