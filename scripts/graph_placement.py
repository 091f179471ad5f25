"""Does where an arm's output lives change its graph_us? Times the candidate by CUDA-graph replay (the harness's
GraphArm, N calls per replay) with its output preallocated outside the graph, as `kda bench` gives it, and
allocated inside the captured region (the graph's private pool, where torch.compile's and eager's outputs land),
next to the baseline and the torch.compile peer, interleaved per trial. `--variants` adds the candidate under
layout variants of scripts/layout_sweep.py, timed the same way (interleaved with the other arms, as in `kda bench`,
where back-to-back replays of one arm in a sweep can rank them differently). The candidate and every variant are
checked against the oracle first (worst error over the task's tolerance, `!` after a time when above 1). A
diagnostic for a profile or ledger entry; the numbers a campaign reports come from `kda bench`.

    python3 scripts/graph_placement.py fuse_scale_shift --rows a,b [--variants v1,v2] --out placement.json
"""
import argparse
import json
import random
import statistics

import torch

from kda.harness.peers import peer_call, peer_math
from kda.harness.timing import Flusher, GraphArm
from kda.definition.task import Task
from layout_sweep import (  # scripts/ is on sys.path here
    VARIANTS, patched, row_inputs, upstream_entry_points, worst_norm_err)


def _patched(call, module, patch):
    """`call` run under the variant's patch (layout_sweep.patched) each time it is called."""
    def run():
        with patched(module, patch):
            return call()
    return run


def _arms(task, sol, upstream, row, inp, specs, variants):
    ad = task.adapter

    def fresh():
        return {k: torch.empty(s[0], dtype=s[1], device="cuda") for k, s in specs.items()}

    out_c, out_b = fresh(), fresh()

    def cand_pool():
        out = fresh()  # inside the capture: the graph's private pool
        ad.call_candidate(sol, row, inp, out)
        return out

    arms = {
        "candidate": lambda: ad.call_candidate(sol, row, inp, out_c),
        "candidate_pool": cand_pool,
        "baseline": lambda: ad.call_baseline(upstream, row, inp, out_b),
        "compile": peer_call(peer_math(task.oracle), row, inp, {k: s[1] for k, s in specs.items()}, "compile"),
    }
    outputs = {"candidate": out_c}  # the arms whose output is checked against the oracle
    module, patches = variants
    for name, patch in patches.items():
        out_v = outputs[f"v:{name}"] = fresh()
        arms[f"v:{name}"] = _patched(lambda o=out_v: ad.call_candidate(sol, row, inp, o), module, patch)
    return arms, outputs


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("task")
    ap.add_argument("--rows", required=True)
    ap.add_argument("--trials", type=int, default=15)
    ap.add_argument("--target-us", type=float, default=4000.0, help="N calls per replay: about this long")
    ap.add_argument("--variants", default="", help="comma-separated layout_sweep variant names")
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    torch.set_grad_enabled(False)
    task = Task.load(args.task)
    sol = task.load_solution()
    upstream = upstream_entry_points(task)
    module, patches = VARIANTS[args.task]() if args.variants else (None, {})
    chosen = (module, {k: patches[k] for k in args.variants.split(",") if k})
    tol, inplace = task.cfg["check"]["tolerance"], bool(task.cfg["check"].get("inplace"))
    flush = Flusher(False, 0)
    rng = random.Random(0)
    results = []
    for rid in args.rows.split(","):
        row, inp = row_inputs(task, rid)
        specs = task.adapter.output_specs(row, inp)
        # The oracle on the untouched inputs; each checked arm's output after its first call: a variant that is fast
        # because it is wrong shows an error ratio above 1. In-place tasks (check.inplace) write their inputs, which
        # every arm then shares, so they are not checked here (kda check does that).
        ref = None if inplace else task.oracle.reference(row, inp)
        arms, outputs = _arms(task, sol, upstream, row, inp, specs, chosen)
        for call in arms.values():
            call()
        torch.cuda.synchronize()
        errs = {} if inplace else {name: worst_norm_err(out, ref, specs, tol) for name, out in outputs.items()}
        one = GraphArm(arms["baseline"], 1)
        n = max(1, min(1024, round(args.target_us / max(one.sample_us(flush), 1e-3))))
        graphs = {name: GraphArm(call, n) for name, call in arms.items()}
        samples = {name: [] for name in graphs}
        for _ in range(args.trials):
            order = list(graphs)
            rng.shuffle(order)
            for name in order:
                samples[name].append(graphs[name].sample_us(flush))
        med = {name: statistics.median(v) for name, v in samples.items() if None not in v}
        errors = {name: g.error for name, g in graphs.items() if g.error}
        results.append({"row": rid, "n": n, "graph_us_median": med, "worst_norm_err": errs, "samples": samples,
                        "errors": errors})
        print(f"{rid} (N={n}): " + " ".join(f"{k}={v:.1f}" + ("!" if errs.get(k, 0.0) > 1 else "")
                                            for k, v in med.items())
              + (f" errors={errors}" if errors else ""), flush=True)
        del graphs, arms
        torch.cuda.empty_cache()
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"task": args.task, "gpu": torch.cuda.get_device_name(), "rows": results}, f, indent=1)


if __name__ == "__main__":
    main()
