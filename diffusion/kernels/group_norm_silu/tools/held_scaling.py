"""How group_norm_silu's time on large contiguous x splits into a fixed cost per call and a cost per byte, on a GPU.

Each shape is timed by CUDA-graph replay (layout_sweep's method), beside a device copy of the same bytes (x into a
tensor of its size: what a copy of this size reaches, not the 1 GiB copy the harness divides by). Shapes in a family
share a unit (group) size and differ in their batch, so a straight line through their times gives the fixed cost per
call (its intercept) and the rate (its slope). Only to explain where a row's share of the copy goes: the numbers a
campaign reports come from `kda bench`.

    python3 diffusion/kernels/group_norm_silu/tools/held_scaling.py \
        --shapes 1x512x9x128x128,2x512x9x128x128 --out scaling.json
"""
import argparse
import json
import math
import os
import sys

import torch

_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [_HERE, os.path.join(_HERE, "..", "..", "..", "..", "scripts")]  # this folder; the campaign's scripts/
from layout_sweep import _graph_us  # noqa: E402  (scripts/)

from kda.definition.task import Task  # noqa: E402


def parse_shape(text: str) -> tuple:
    """'1x512x9x128x128' -> (1, 512, 9, 128, 128); a clear error for anything else."""
    try:
        shape = tuple(int(v) for v in text.split("x"))
    except ValueError:
        raise SystemExit(f"--shapes: {text!r} is not a shape like 1x512x9x128x128") from None
    if len(shape) < 3 or min(shape) < 1:
        raise SystemExit(f"--shapes: {text!r} needs at least (B, C, S) and every size >= 1")
    return shape


def line_fit(points):
    """(intercept, slope) of the least-squares line through (x, y) points; slope None with fewer than two xs."""
    xs = [p[0] for p in points]
    if len(set(xs)) < 2:
        return None, None
    mx, my = sum(xs) / len(xs), sum(p[1] for p in points) / len(points)
    slope = sum((x - mx) * (y - my) for x, y in points) / sum((x - mx) ** 2 for x in xs)
    return my - slope * mx, slope


def family_key(shape) -> tuple:
    """Shapes differing only in their batch share a unit size."""
    return shape[1:]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shapes", required=True, help="comma-separated BxCxTxHxW (or BxCxS) shapes of fp16 x")
    ap.add_argument("--groups", type=int, default=32)
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    shapes = [parse_shape(s) for s in args.shapes.split(",")]
    torch.set_grad_enabled(False)
    sol = Task.load("group_norm_silu").load_solution()
    impl = sys.modules[sol.__name__ + ".group_norm_silu"]
    from kda.harness.timing import copy_bandwidth_tbps
    copy_tbps = copy_bandwidth_tbps()
    rows = []
    for shape in shapes:
        B, C = shape[0], shape[1]
        x = torch.randn(shape, dtype=torch.float16, device="cuda")
        w = torch.randn(C, dtype=torch.float16, device="cuda")
        b = torch.randn(C, dtype=torch.float16, device="cuda")
        out = torch.empty_like(x)
        dst = torch.empty_like(x)
        plan = impl._plan(x, w, b, args.groups)
        us = _graph_us(lambda: sol.triton_group_norm_silu(x, w, b, args.groups, 1e-5, out=out))
        copy_us = _graph_us(lambda: dst.copy_(x))
        nbytes = 2 * x.numel() * x.element_size()
        S = math.prod(shape[2:])
        rec = {"shape": list(shape), "units": B * args.groups, "unit_mb": C // args.groups * S * 2 / 1e6,
               "bytes": nbytes, "path": plan[0], "plan": list(plan[1]) if plan[0] == "held" else None,
               "graph_us": us, "copy_us": copy_us, "share_of_copy": nbytes / (us * 1e-6) / 1e12 / copy_tbps,
               "share_of_same_size_copy": copy_us / us}
        rows.append(rec)
        print(f"{'x'.join(map(str, shape))}: {rec['path']} {us:.1f} us, copy of the same bytes {copy_us:.1f} us; "
              f"{rec['share_of_copy']:.0%} of the {copy_tbps:.2f} TB/s copy, {rec['share_of_same_size_copy']:.0%} "
              f"of the same-size copy", flush=True)
        del x, out, dst
    fits = []
    for key in dict.fromkeys(family_key(tuple(r["shape"])) for r in rows):
        pts = [(r["bytes"] / 1e6, r["graph_us"]) for r in rows if family_key(tuple(r["shape"])) == key]
        cpts = [(r["bytes"] / 1e6, r["copy_us"]) for r in rows if family_key(tuple(r["shape"])) == key]
        a, s = line_fit(pts)
        ca, cs = line_fit(cpts)
        if s is None:
            continue
        # MB per us is TB/s
        fits.append({"unit_shape": list(key), "fixed_us": a, "tbps": 1 / s, "copy_fixed_us": ca, "copy_tbps": 1 / cs})
        print(f"unit {'x'.join(map(str, key))}: fixed {a:.1f} us a call, then {1 / s:.2f} TB/s "
              f"(copy: fixed {ca:.1f} us, then {1 / cs:.2f} TB/s)", flush=True)
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"gpu": torch.cuda.get_device_name(), "copy_tbps": copy_tbps, "rows": rows, "fits": fits}, f,
                      indent=1)


if __name__ == "__main__":
    main()
