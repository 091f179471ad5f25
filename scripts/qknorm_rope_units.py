"""qknorm_rope v2 development check (GPU machine, repository root): one or two heads per lane group on the production
rows, timed by CUDA events over back-to-back calls (the candidate alone; `kda bench` is what counts). It settles the
kernel's grid heuristic; the output is a table of us per call for each setting.
Usage: python3 scripts/qknorm_rope_units.py
"""
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kda.task import Task
from kda.workloads import build_inputs


def time_us(fn, n=200):
    for _ in range(10):
        fn()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(n):
        fn()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) * 1e3 / n


def main():
    task = Task.load("qknorm_rope")
    solution = task.load_solution()
    fused_inplace_qknorm_rope = solution.fused_inplace_qknorm_rope
    ext = sys.modules[solution.__name__ + ".cuda_ext"].load()
    print(f"{'row':36} {'auto':>8} {'1 head':>8} {'2 heads':>8}   us per call")
    for row in task.rows:
        if not row.production:
            continue
        i = build_inputs(row, "cuda")
        sc = row.scalars
        call = lambda: fused_inplace_qknorm_rope(i["q"], i["k"], i["q_weight"], i["k_weight"], i["cos_sin_cache"],
                                                 i["positions"], is_neox=bool(sc["is_neox"]), eps=float(sc["eps"]),
                                                 head_dim=int(sc["head_dim"]), rope_dim=int(sc["rope_dim"]))
        got = []
        for units in (0, 1, 2):
            ext.set_units_override(units)
            got.append(time_us(call))
        ext.set_units_override(0)
        print(f"{row.id:36} {got[0]:8.2f} {got[1]:8.2f} {got[2]:8.2f}")


if __name__ == "__main__":
    main()
