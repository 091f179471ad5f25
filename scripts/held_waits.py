"""Experiment (group_norm_silu v18): where each role of the held kernel spends its cycles, per CTA (clock64 totals
the kernel writes when _HELD_TRACE is set). Prints, as shares of the compute warps' run: the compute warp's wait for
data, its statistics (waits included), its wait for coefficients, its apply; the copy lane's wait for free slots; the
sync lane's spin on the grid's partials, its wait for the CTA's own partial, its wait for the warps to take the
coefficients. Medians over CTAs of the median of 5 calls."""
import json
import sys

import torch

from kda.task import Task

sys.path.insert(0, "scripts")
from layout_sweep import row_case  # noqa: E402

NAMES = ["wait_full", "stats", "wait_coef", "apply", "copy_wait_empty", "sync_spin", "sync_wait_part", "sync_wait_taken"]
task = Task.load("group_norm_silu")
sol = task.load_solution()
m = sys.modules[sol.__name__ + ".group_norm_silu"]
for kv in sys.argv[3:]:  # NAME=value overrides of the module's knobs, e.g. _HELD_HALF_EXP=True
    name, value = kv.split("=", 1)
    setattr(m, name, eval(value))
res = {}
for rid in sys.argv[1].split(","):
    row, inp, ref, specs, out = row_case(task, rid)
    task.adapter.call_candidate(sol, row, inp, out)  # plans and builds
    plan = next(p for p in m._plans.values() if p and p[0] == "held")
    ctas = plan[1][0]
    m._plans.clear()
    trace = torch.zeros((ctas, 10), dtype=torch.int64, device="cuda")
    m._HELD_TRACE = trace
    runs = []
    for _ in range(5):
        task.adapter.call_candidate(sol, row, inp, out)
        torch.cuda.synchronize()
        runs.append(trace.cpu().double())
    m._HELD_TRACE = None
    m._plans.clear()
    t = torch.stack(runs).median(0).values  # [ctas, 10]
    total = t[:, 8]
    share = {n: float((t[:, i] / total).median()) for i, n in enumerate(NAMES)}
    share["max_over_ctas"] = {n: float((t[:, i] / total).max()) for i, n in enumerate(NAMES)}
    res[rid] = {"plan": list(plan[1]), "total_cycles_median": float(total.median()), "share": share}
    print(rid, "plan", plan[1], f"total {total.median() / 1e3:.0f} kcycles;",
          ", ".join(f"{n} {share[n]:.0%}" for n in NAMES), flush=True)
json.dump(res, open(sys.argv[2], "w"), indent=1)
