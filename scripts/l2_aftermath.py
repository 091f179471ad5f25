"""Whether a candidate variant's gain survives outside a loop of its own calls, and what it leaves in the L2 for the
kernel that runs next: for L2 cache hints (evict_last loads, say), whose effect can come from the state one call
leaves to the next rather than from the call itself.

For each variant of layout_sweep.py (the default first), by CUDA-graph replay:
- alone: the candidate back to back (layout_sweep's graph_us);
- after_flush: a write of twice the L2 before each call, minus that write alone: the call on an L2 holding none of
  its own lines, as after an unrelated kernel in a model;
- follower: a kernel that reads one buffer of a third of the L2 eight times, timed after each candidate call (minus
  the candidate alone), against the same reads back to back (their buffer left in the L2 by the previous replay)
  and after the write of twice the L2: what the candidate's L2 state costs or saves the next kernel.

    python3 scripts/l2_aftermath.py cutedsl_norm_scale_shift --rows a,b --variants default,x --out aftermath.json
"""
import argparse
import json
import sys
from pathlib import Path

import torch
import triton
import triton.language as tl

sys.path.insert(0, str(Path(__file__).resolve().parent))
from layout_sweep import VARIANTS, _graph_us, patched, row_case, worst_norm_err  # noqa: E402

from kda.definition.task import Task  # noqa: E402


@triton.jit
def _reread(src, dst, nblocks, REPS: tl.constexpr, BLOCK: tl.constexpr):
    # Each program reads REPS blocks, a different one each time (p + r * 997 mod nblocks), so every pass over the
    # buffer after the first finds it in the L2 (if it is there) and never in this SM's L1.
    p = tl.program_id(0)
    acc = tl.zeros([BLOCK], tl.float32)
    for r in range(REPS):
        b = (p + r * 997) % nblocks
        acc += tl.load(src + b.to(tl.int64) * BLOCK + tl.arange(0, BLOCK)).to(tl.float32)
    tl.store(dst + p, tl.sum(acc, axis=0))


def l2_buffers(l2_bytes: int):
    """(flush, follower): a write of twice the L2, and one kernel that reads a bf16 buffer of a third of the L2 eight
    times over (from the L2 it runs several times faster than from the DRAM)."""
    big = torch.empty(2 * l2_bytes, dtype=torch.uint8, device="cuda")
    block = 4096
    nblocks = l2_bytes // 3 // (2 * block)
    src = torch.randn(nblocks * block, dtype=torch.bfloat16, device="cuda")
    dst = torch.empty(nblocks, dtype=torch.float32, device="cuda")

    def flush():
        big.fill_(1)

    def follower():
        _reread[(nblocks,)](src, dst, nblocks, REPS=8, BLOCK=block, num_warps=8)
    return flush, follower


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("task")
    ap.add_argument("--rows", required=True)
    ap.add_argument("--variants", required=True, help="comma-separated variant names of layout_sweep.py")
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    torch.set_grad_enabled(False)
    task = Task.load(args.task)
    module, variants = VARIANTS[args.task]()
    names = args.variants.split(",")
    unknown = [n for n in names if n not in variants]
    if unknown:
        raise SystemExit(f"unknown variants for {args.task}: {', '.join(unknown)}")
    sol, ad = task.load_solution(), task.adapter
    tol = task.cfg["check"]["tolerance"]
    flush, follower = l2_buffers(torch.cuda.get_device_properties(0).L2_cache_size)
    base = {"flush": _graph_us(flush), "flush_follower": _graph_us([flush, follower]),
            "follower_alone": _graph_us(follower)}
    base["follower_after_flush"] = base["flush_follower"] - base["flush"]
    print(f"flush {base['flush']:.1f} us, follower back to back {base['follower_alone']:.1f} us, after a flush "
          f"{base['follower_after_flush']:.1f} us", flush=True)
    results = []
    for rid in args.rows.split(","):
        row, inp, ref, specs, out = row_case(task, rid)
        rec = {"row": rid, "variants": {}}

        def cand():
            ad.call_candidate(sol, row, inp, out)
        for name in names:
            with patched(module, variants[name]):
                cand()
                v = {"worst_norm_err": worst_norm_err(out, ref, specs, tol), "alone_us": _graph_us(cand)}
                v["after_flush_us"] = _graph_us([flush, cand]) - base["flush"]
                v["follower_us"] = _graph_us([cand, follower]) - v["alone_us"]
            rec["variants"][name] = v
            print(f"{rid} {name}: alone {v['alone_us']:.1f} after a flush {v['after_flush_us']:.1f} us; the follower "
                  f"{v['follower_us']:.1f} us after it (after a flush: {base['follower_after_flush']:.1f})"
                  + (" !" if v["worst_norm_err"] > 1 else ""), flush=True)
        results.append(rec)
        if args.out:
            with open(args.out, "w") as f:
                json.dump({"task": args.task, "gpu": torch.cuda.get_device_name(), "reference": base,
                           "rows": results}, f, indent=1)


if __name__ == "__main__":
    main()
