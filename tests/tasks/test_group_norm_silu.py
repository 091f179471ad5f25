"""group_norm_silu task folder: the 48 derived HunyuanVideo-VAE shapes in both layouts, and the oracle against
PyTorch's own GroupNorm + SiLU. Checks every task shares: tests/test_task_folders.py; the CPU gate:
tests/test_cpu_gate.py."""
import math

import torch
import torch.nn.functional as F

from kda.task import Task
from kda.workloads import build_inputs, refill_inputs

TASK = Task.load("group_norm_silu")



def test_production_rows_are_the_48_vae_shapes_in_both_layouts():
    prod = [r for r in TASK.rows if r.production]
    assert all(r.source.startswith("derived:") and not r.cpu for r in prod)
    assert all(r.source.startswith("regression:") for r in TASK.rows if not r.production)
    shapes = {r.tensors["x"].shape for r in prod}
    assert len(prod) == 96 and len(shapes) == 48
    assert {s[1] for s in shapes} == {128, 256, 512} and {s[2] for s in shapes} == {2, 3, 5, 9, 17}
    assert max(shapes, key=math.prod) == (1, 256, 17, 256, 256)
    assert all(r.scalars == {"num_groups": 32, "eps": 1e-6} and r.tensors["x"].dtype == "float16" for r in prod)
    for shape in shapes:
        layouts = {r.tensors["x"].stride for r in prod if r.tensors["x"].shape == shape}
        b, c, t, h, w = shape
        assert layouts == {(c * t * h * w, t * h * w, h * w, w, 1), (c * t * h * w, 1, h * w * c, w * c, c)}


def test_oracle_matches_torch_group_norm_silu():
    for rid in ("reg_fp32_4d_b2_c64_g32_s9x7", "reg_fp16_cl3d_b2_c96_g32", "reg_fp16_permuted_thw"):
        row = next(r for r in TASK.rows if r.id == rid)
        inputs = build_inputs(row, "cpu")
        refill_inputs(row, inputs, 3)
        x, w, b = (inputs[k].double() for k in ("x", "weight", "bias"))
        want = F.silu(F.group_norm(x, row.scalars["num_groups"], w, b, row.scalars["eps"]))
        got = TASK.oracle.reference(row, inputs)["y"]
        assert got.dtype == (torch.float32) and got.is_contiguous()
        torch.testing.assert_close(got.double(), want, atol=2e-5, rtol=2e-5)


_SPLIT_PROBE = r"""
import torch, torch.nn.functional as F
from kda.task import Task
m = __import__(Task.load("group_norm_silu").load_solution().__name__ + ".group_norm_silu", fromlist=["_plan"])
g = torch.Generator().manual_seed(7)
# One batch, two groups of 4 channels x 16384 positions: 64 K-element groups with few programs take the split path.
x = (torch.randn(1, 8, 4, 64, 64, generator=g) * 3 + 5).contiguous()
w, b = torch.randn(8, generator=g), torch.randn(8, generator=g)
want = F.silu(F.group_norm(x.double(), 2, w.double(), b.double(), 1e-6))
seen = set()
# Far from zero with a small spread (|mean| / std = 1e4 in group 1; group 0 holds an outlier): a pivot that
# did nothing would lose most of the variance to cancellation in fp32.
x_off = x * 1e-2 + 100.0
x_off[0, 0, 0, 0, 5] = 1e3
want_off = F.silu(F.group_norm(x_off.double(), 2, w.double(), b.double(), 1e-6))
layouts = ((2048, 4, 4, 4, 8), (4096, 2, 8, 4, 4), (1024, 4, 2, 8, 4))
merged = set()
for flat in (0, 4):
    for i, lay in enumerate(layouts):
        m._FLAT_MAX_CPG, m._SPLIT_CONTIGUOUS, m._SPLIT_FLAT = flat, lay, lay
        m._MERGE_IN_APPLY_MAX = 512 if i % 2 else 0  # the apply pass merges the partials, or a finalize launch does
        m._plans.clear()
        plan = m._plan(x, w, b, 2)
        assert plan[0] == "split", plan[0]
        partial, finalize, apply = plan[1:4]
        assert (partial.num_warps, apply.num_warps) == lay[3:]
        seen.add((apply.constexprs[7], partial.constexprs[2], apply.constexprs[2]))
        merged.add((finalize is None, apply.constexprs[8]))
        for wt, bt in ((w, b), (None, None)):
            got = m.triton_group_norm_silu(x, wt, bt, 2, 1e-6)
            ref = want if wt is not None else F.silu(F.group_norm(x.double(), 2, None, None, 1e-6))
            torch.testing.assert_close(got.double(), ref, atol=2e-5, rtol=2e-5)
        got = m.triton_group_norm_silu(x_off, w, b, 2, 1e-6)
        torch.testing.assert_close(got.double(), want_off, atol=1e-3, rtol=1e-3)
assert merged == {(True, True), (False, False)}, merged
# channels_last_3d, v7's tiles: one tile spans both groups, so a merging apply program merges the partials of both.
x_cl = x_off.to(memory_format=torch.channels_last_3d)
m._ROWS = False
for merge_max in (0, 512):
    m._MERGE_IN_APPLY_MAX = merge_max
    m._plans.clear()
    plan = m._plan(x_cl, w, b, 2)
    assert plan[0] == "split" and plan[3].constexprs[0] == 2 and (plan[2] is None) == (merge_max > 0), plan
    got = m.triton_group_norm_silu(x_cl, w, b, 2, 1e-6)
    torch.testing.assert_close(got.double(), want_off, atol=1e-3, rtol=1e-3)
# v8's row tiles: statistics over whole rows of channels, apply over [channel block, rows] tiles (blocks narrower
# than, as wide as and wider than the 8 channels; a tail of rows), partials merged by a finalize launch or by the
# apply programs; a batch of two.
m._ROWS = True
x_cl2 = torch.cat([x_off, x_off.flip(2) * 0.5 - 20.0]).to(memory_format=torch.channels_last_3d)
want_cl2 = F.silu(F.group_norm(x_cl2.double(), 2, w.double(), b.double(), 1e-6))
rows_seen = set()
for lay, merge_max in (((128, 16, 1, 64, 64, 4, 4), 64), ((512, 3, 1, 4, 32, 3, 4), 0),
                       ((64, 5, 2, 8, 16, 2, 2), 1 << 20)):
    m._SPLIT_ROWS, m._ROWS_MERGE_MAX = lay, merge_max
    m._plans.clear()
    for xc, ref in ((x_cl, want_off), (x_cl2, want_cl2)):
        plan = m._plan(xc, w, b, 2)
        assert plan[0] == "split_rows", plan[0]
        rows_seen.add((plan[2] is None, plan[3].constexprs[0]))
        got = m.triton_group_norm_silu(xc, w, b, 2, 1e-6)
        torch.testing.assert_close(got.double(), ref, atol=1e-3, rtol=1e-3)
assert {m for m, _ in rows_seen} == {True, False} and {c for _, c in rows_seen} == {4, 8}, rows_seen
# flat on and off, and statistics tiles smaller than, equal to and larger than the apply tiles
assert len(seen) == 6 and {f for f, _, _ in seen} == {True, False}, seen
assert {(st > at) - (st < at) for _, st, at in seen} == {-1, 0, 1}, seen
print("ok")
"""


_FLAT16_PROBE = r"""
import torch, torch.nn.functional as F
from kda.task import Task
m = __import__(Task.load("group_norm_silu").load_solution().__name__ + ".group_norm_silu", fromlist=["_plan"])
g = torch.Generator().manual_seed(8)
# Two groups of 16 channels x 4096 positions, at the module's own layouts: flat tiles (a 4096-element tile is one
# channel's run, so each tile takes one w and b).
x = torch.randn(1, 32, 1, 64, 64, generator=g) * 2 - 1
w, b = torch.randn(32, generator=g), torch.randn(32, generator=g)
plan = m._plan(x, w, b, 2)
assert plan[0] == "split" and plan[3].constexprs[7], plan
got = m.triton_group_norm_silu(x, w, b, 2, 1e-6)
want = F.silu(F.group_norm(x.double(), 2, w.double(), b.double(), 1e-6))
torch.testing.assert_close(got.double(), want, atol=2e-5, rtol=2e-5)
print("ok")
"""


def test_sixteen_channel_groups_take_flat_tiles(interpreted):
    interpreted(_FLAT16_PROBE)


def test_candidate_split_path_variants_match_torch(interpreted):
    """Flat or per-channel tiles, any tile sizes and warps of either pass, partials merged by a finalize launch or
    by the apply programs, contiguous or channels_last: the same y (Triton interpreter), also far from zero."""
    interpreted(_SPLIT_PROBE)
