"""How fast can a channels_last x be moved group by group? The access pattern a one-read group norm would need.

On a channels_last x[N, C, T, H, W] every spatial position holds every group, so a kernel that reads x once must hold
whole groups on chip and take them unit by unit (a unit: `k` adjacent groups of one sample, as the held kernel does on
contiguous x, gn_held.cu). Each position then gives a unit a piece of k * C/G channels, 8-128 bytes at a stride of
2C bytes, and a piece smaller than a 32-byte sector drags its neighbours' bytes through the L2 and the DRAM. This
copies x to y in that order (all of unit 0's pieces, then unit 1's, ...) with one Triton kernel, and in position
order with the same kernel, and times both against torch's copy of the same bytes: the ceiling of any one-read
channels_last schedule on these shapes, before anyone builds one.

    python3 diffusion/kernels/group_norm_silu/tools/unit_order_copy.py --shape 1x512x9x128x128 --groups 32 \
        --out result.json
    ncu --metrics dram__bytes_read.sum,dram__bytes_write.sum -k regex:tile_copy \
        python3 diffusion/kernels/group_norm_silu/tools/unit_order_copy.py --shape 1x512x9x128x128 \
        --rounds 0   # the bytes each pattern moves

Variants: `linear` (the kernel over position-major tiles: its own ceiling), `units_k` (k groups a unit, k = 1, 2, 4,
... up to the widths a unit of at most --max-unit-mb allows; a unit must fit the grid's shared memory), `torch`.
"""
import argparse
import json
import os
import statistics
import sys

import torch
import triton
import triton.language as tl

_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [_HERE, os.path.join(_HERE, "..", "..", "..", "..", "scripts")]  # this folder; the campaign's scripts/
from held_scaling import parse_shape as parse_any_shape  # noqa: E402  (this folder, scripts/)
from layout_sweep import _graph_us, copy_share, round_order  # noqa: E402


@triton.jit
def _tile_copy_kernel(x_ptr, y_ptr, P, C, n_blocks, n_units,
                      WIDTH: tl.constexpr, BLOCK_P: tl.constexpr, UNIT_MAJOR: tl.constexpr):
    pid = tl.program_id(0)
    # Programs start roughly in id order, so the id's split decides which bytes the grid touches at once.
    if UNIT_MAJOR:
        u = pid // n_blocks
        b = pid % n_blocks
    else:
        b = pid // n_units
        u = pid % n_units
    rows = b * BLOCK_P + tl.arange(0, BLOCK_P)
    cols = u * WIDTH + tl.arange(0, WIDTH)
    offs = rows[:, None].to(tl.int64) * C + cols[None, :]
    mask = rows[:, None] < P
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=mask), mask=mask)


def tile_copy(x2d: torch.Tensor, y2d: torch.Tensor, width: int, unit_major: bool, tile_bytes: int = 16384):
    """Copy x2d[P, C] into y2d tile by tile: tiles of `width` channels, taken unit-major (every position of channels
    [0, width) first) or position-major."""
    P, C = x2d.shape
    if C % width:
        raise ValueError(f"width {width} does not divide C={C}")
    block_p = triton.next_power_of_2(max(1, tile_bytes // (width * x2d.element_size())))
    n_blocks, n_units = triton.cdiv(P, block_p), C // width
    _tile_copy_kernel[(n_blocks * n_units,)](x2d, y2d, P, C, n_blocks, n_units,
                                             WIDTH=width, BLOCK_P=block_p, UNIT_MAJOR=unit_major, num_warps=4)


def parse_shape(text: str) -> tuple:
    """'1x512x9x128x128' -> (1, 512, 9, 128, 128): a 3-d group norm's x, five sizes."""
    dims = parse_any_shape(text)
    if len(dims) != 5:
        raise SystemExit(f"--shape {text!r}: expected five sizes N x C x T x H x W")
    return dims


def unit_widths(shape: tuple, groups: int, elem_bytes: int, max_unit_mb: float) -> list[int]:
    """Channel widths of a unit of k = 1, 2, 4, ... groups whose bytes fit max_unit_mb, never below one 16-byte
    vector per position (a TMA box's least inner extent)."""
    n, c, t, h, w = shape
    if c % groups:
        raise SystemExit(f"C={c} is not a multiple of --groups {groups}")
    cpg, positions = c // groups, t * h * w
    out, k = [], 1
    while k <= groups and groups % k == 0:
        width = cpg * k
        if width * elem_bytes >= 16 and positions * width * elem_bytes <= max_unit_mb * 1e6:
            out.append(width)
        k *= 2
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shape", action="append", required=True, help="N x C x T x H x W, repeatable")
    ap.add_argument("--groups", type=int, default=32)
    ap.add_argument("--dtype", default="float16", choices=["float16", "bfloat16"])
    ap.add_argument("--max-unit-mb", type=float, default=24.0,
                    help="largest unit that could be held on chip (132 SMs x ~227 KB of shared memory, less a ring)")
    ap.add_argument("--rounds", type=int, default=5,
                    help="interleaved timing rounds; 0 runs each variant once, checked (a run for ncu to count bytes)")
    ap.add_argument("--copy-tbps", type=float, default=None, help="the bench's measured copy rate, for copy shares")
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    dtype = getattr(torch, args.dtype)
    report = {"gpu": torch.cuda.get_device_name(0), "groups": args.groups, "dtype": args.dtype,
              "max_unit_mb": args.max_unit_mb, "copy_tbps": args.copy_tbps, "rows": []}
    for text in args.shape:
        shape = parse_shape(text)
        n, c, t, h, w = shape
        x = torch.randn(n * t * h * w, c, device="cuda", dtype=dtype)
        y = torch.empty_like(x)
        nbytes = 2 * x.numel() * x.element_size()
        variants = {"torch": lambda: y.copy_(x), "linear": lambda: tile_copy(x, y, min(c, 64), False)}
        for width in unit_widths(shape, args.groups, x.element_size(), args.max_unit_mb):
            variants[f"units_{width // (c // args.groups)}"] = (lambda wd=width: tile_copy(x, y, wd, True))
        for name, fn in variants.items():
            y.zero_()
            fn()
            torch.cuda.synchronize()
            if not torch.equal(x, y):
                raise SystemExit(f"{text} {name}: y is not a copy of x")
        if args.rounds < 1:
            print(text, "each variant ran once and copied x:", ", ".join(variants), flush=True)
            continue
        times = {name: [] for name in variants}
        for r in range(args.rounds):
            for name in round_order(list(variants), r):
                times[name].append(_graph_us(variants[name], calls=5, replays=11))
        row = {"shape": text, "bytes": nbytes, "us": {}, "vs_torch": {}}
        med = {name: statistics.median(ts) for name, ts in times.items()}
        for name, us in med.items():
            row["us"][name] = round(us, 2)
            row["vs_torch"][name] = round(med["torch"] / us, 3)
            if args.copy_tbps:
                row.setdefault("copy_share", {})[name] = round(copy_share(nbytes, us, args.copy_tbps), 3)
        report["rows"].append(row)
        print(text, json.dumps(row["us"]), "vs torch", json.dumps(row["vs_torch"]), flush=True)
        del x, y
        torch.cuda.empty_cache()
    if args.out:
        with open(args.out, "w") as f:
            json.dump(report, f, indent=1)


if __name__ == "__main__":
    main()
