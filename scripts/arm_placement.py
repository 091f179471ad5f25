"""Whether a row's time gap between the upstream baseline and the candidate follows the kernels, the buffers they
touch, or the calls around them.

Each case is timed by CUDA-graph replay (median over replays, per call) and, where it names kernels, by
torch.profiler's per-kernel GPU time (kernels only: no gaps, no launch path):
- baseline (or compile, with `--against compile`: the harness's torch.compile peer) / candidate: as layout_sweep.py
  times them (the candidate writes the harness's preallocated outputs, the other arm allocates its own);
- candidate_into_baseline_outputs: the candidate writes the very tensors one call of the other arm returned;
- candidate_fresh_outputs: the candidate allocates its outputs as the other arm does;
- moved_inputs: both arms again on copies of the inputs placed after a spacer of odd size;
- alternating: one graph of the other arm, candidate, other arm, candidate...: each kernel after the other's.
`--sequence` only launches, for a profiler to sample: two warm-up calls of each arm (torch.compile autotunes in its
first), then, between cudaProfilerStart and Stop, the other arm four times, the candidate four times and the two
alternating twice, back to back (ncu's `--profile-from-start off --launch-count 12`).
Only for diagnosis (ledger entries cite the JSON it writes); the numbers a campaign reports come from `kda bench`.

    python3 scripts/arm_placement.py cutedsl_norm_scale_shift --row ROW --out placement.json
"""
import argparse
import json
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from layout_sweep import _graph_us as graph_us, _kernel_us as kernel_us, row_case, upstream_entry_points, \
    worst_norm_err  # noqa: E402

from kda.definition.task import Task  # noqa: E402


_SPACERS = []  # kept alive for the run: freed, their memory would go to the next allocation


def _moved(inp: dict) -> dict:
    """Copies of the inputs at new addresses: a spacer of an odd size first, so no copy keeps its old alignment to
    the others beyond the allocator's own."""
    _SPACERS.append(torch.empty((3 << 20) + 4096 + 512, dtype=torch.uint8, device="cuda"))
    return {k: (v.clone() if isinstance(v, torch.Tensor) else v) for k, v in inp.items()}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("task")
    ap.add_argument("--row", required=True)
    ap.add_argument("--out", default=None)
    ap.add_argument("--sequence", action="store_true", help="only launch the profiling sequence (see above)")
    ap.add_argument("--against", choices=("baseline", "compile"), default="baseline",
                    help="the other arm: the upstream baseline, or the torch.compile peer the harness runs")
    args = ap.parse_args(argv)
    torch.set_grad_enabled(False)
    task = Task.load(args.task)
    sol, ad = task.load_solution(), task.adapter
    tol = task.cfg["check"]["tolerance"]
    row, inp, ref, specs, out = row_case(task, args.row)

    def empty_outs():
        return {k: torch.empty(s[0], dtype=s[1], device="cuda") for k, s in specs.items()}

    if args.against == "compile":
        from kda.harness.peers import peer_call, peer_math
        dtypes = {k: s[1] for k, s in specs.items()}

        def base(i):
            return peer_call(peer_math(task.oracle), row, i, dtypes, "compile")
    else:
        upstream = upstream_entry_points(task)

        def base(i):
            return lambda: ad.call_baseline(upstream, row, i, None)

    def cand(i, o):
        return lambda: ad.call_candidate(sol, row, i, o)

    if args.sequence:
        b, c = base(inp), cand(inp, out)
        for f in [b, c, b, c]:
            f()
        torch.cuda.synchronize()
        torch.cuda.cudart().cudaProfilerStart()
        for f in [b] * 4 + [c] * 4 + [b, c] * 2:
            f()
        torch.cuda.synchronize()
        torch.cuda.cudart().cudaProfilerStop()
        return
    kept = base(inp)()  # the baseline's own outputs, kept alive for the candidate to write
    fresh = {}

    def cand_fresh():
        fresh.clear()
        fresh.update(empty_outs())
        return ad.call_candidate(sol, row, inp, fresh)

    moved = _moved(inp)
    out_moved = empty_outs()
    other = args.against
    cases = {
        other: [base(inp)],
        "candidate": [cand(inp, out)],
        f"candidate_into_{other}_outputs": [cand(inp, kept)],
        "candidate_fresh_outputs": [cand_fresh],
        f"{other}_moved_inputs": [base(moved)],
        "candidate_moved_inputs": [cand(moved, out_moved)],
        "alternating": [base(inp), cand(inp, out)],
    }
    # every candidate case must still be correct, or its time means nothing
    errs = {}
    for name, o in (("candidate", out), (f"candidate_into_{other}_outputs", kept), ("candidate_moved_inputs",
                                                                                    out_moved)):
        ad.call_candidate(sol, row, moved if "moved" in name else inp, o)
        errs[name] = worst_norm_err(o, ref, specs, tol)
    rec = {"row": args.row, "against": args.against, "worst_norm_err": errs, "graph_us": {}, "kernel_us": {}}
    order = list(cases) * 2  # each case twice, the second pass in the same order: drift shows as a difference
    for i, name in enumerate(order):
        key = name if i < len(cases) else name + "#2"
        rec["graph_us"][key] = graph_us(cases[name])
        print(f"{key}: {rec['graph_us'][key]:.2f} us per step", flush=True)
    for name in (other, "candidate", "alternating"):
        rec["kernel_us"][name] = kernel_us(cases[name])
        print(f"{name} kernels: {rec['kernel_us'][name]}", flush=True)
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"task": args.task, "gpu": torch.cuda.get_device_name(), "rows": [rec]}, f, indent=1)


if __name__ == "__main__":
    main()
