"""Experiment (group_norm_silu v18): each CTA's publish time per unit in the held kernel, to see whether some SMs
are always last (the grid waits for its slowest CTA every unit). Prints per-unit spreads and the CTAs most often last."""
import json
import sys

import torch

from kda.task import Task

sys.path.insert(0, "scripts")
from layout_sweep import row_case  # noqa: E402

task = Task.load("group_norm_silu")
sol = task.load_solution()
m = sys.modules[sol.__name__ + ".group_norm_silu"]
out_path = sys.argv[2]
res = {}
for rid in sys.argv[1].split(","):
    row, inp, ref, specs, out = row_case(task, rid)
    task.adapter.call_candidate(sol, row, inp, out)  # plans and builds
    plan = next(p for p in m._plans.values() if p and p[0] == "held")
    ctas, units = plan[1][0], None
    x = inp["x"]
    units = x.shape[0] * row.scalars["num_groups"]
    m._plans.clear()
    trace = torch.zeros((units, ctas), dtype=torch.int64, device="cuda")
    m._HELD_TRACE = trace
    runs = []
    for _ in range(5):
        task.adapter.call_candidate(sol, row, inp, out)
        torch.cuda.synchronize()
        t = trace.cpu().double()
        t = (t - t.min()) / 1e3  # us from the first publish
        runs.append(t)
    m._HELD_TRACE = None
    m._plans.clear()
    t = torch.stack(runs).median(0).values
    spread = (t.max(1).values - t.min(1).values)
    step = (t.median(1).values[1:] - t.median(1).values[:-1])
    last = torch.bincount(t.argmax(1), minlength=ctas)
    rank = t.argsort(1).argsort(1).double().mean(0)  # each CTA's mean rank (0 first)
    res[rid] = {"plan": list(plan[1]), "unit_spread_us": spread.tolist(), "unit_step_us": step.tolist(),
                "last_counts": last.tolist(), "mean_rank": rank.tolist()}
    print(rid, "plan", plan[1], f"median spread {spread.median():.2f} us, median step {step.median():.2f} us,",
          "most often last:", last.topk(5).indices.tolist(), last.topk(5).values.tolist(),
          "slowest mean ranks:", rank.topk(5).indices.tolist(), [round(v, 1) for v in rank.topk(5).values.tolist()],
          flush=True)
json.dump(res, open(out_path, "w"))
