"""group_norm_silu task folder: the 48 derived HunyuanVideo-VAE shapes in both layouts, and the oracle against
PyTorch's own GroupNorm + SiLU. Checks every task shares: tests/test_task_folders.py; the CPU gate:
tests/test_cpu_gate.py."""
import math

import pytest
import torch
import torch.nn.functional as F

from kda.definition.task import Task
from kda.definition.workloads import build_inputs, refill_inputs

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
import sys
import torch, torch.nn.functional as F
from kda.definition.task import Task
sys.path.insert(0, "tests/support")
from grid import sample
m = __import__(Task.load("group_norm_silu").load_solution().__name__ + ".group_norm_silu", fromlist=["_plan"])
g = torch.Generator().manual_seed(7)
FULL = {full}  # every case's kernels run (-m slow), else a sample's; every case is planned and checked either way
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
# sampled: flat and per-channel tiles, partials merged by the apply and by a finalize launch
run = set(sample([(flat, i) for flat in (0, 4) for i in range(len(layouts))], FULL))
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
        if (flat, i) not in run:
            continue
        for wt, bt in ((w, b), (None, None)):
            got = m.triton_group_norm_silu(x, wt, bt, 2, 1e-6)
            ref = want if wt is not None else F.silu(F.group_norm(x.double(), 2, None, None, 1e-6))
            torch.testing.assert_close(got.double(), ref, atol=2e-5, rtol=2e-5)
        got = m.triton_group_norm_silu(x_off, w, b, 2, 1e-6)
        torch.testing.assert_close(got.double(), want_off, atol=1e-3, rtol=1e-3)
assert merged == {(True, True), (False, False)}, merged
# channels_last_3d of 10 channels (not a power of two, so not the row kernels), v7's channel-fast tiles: one tile
# spans both groups, so a merging apply program merges the partials of both.
x10 = torch.randn(1, 10, 4, 64, 64, generator=g) * 1e-2 + 100.0
x10[0, 0, 0, 0, 5] = 1e3
w10, b10 = torch.randn(10, generator=g), torch.randn(10, generator=g)
want10 = F.silu(F.group_norm(x10.double(), 2, w10.double(), b10.double(), 1e-6))
x10 = x10.to(memory_format=torch.channels_last_3d)
run = set(sample((0, 512), FULL))
for merge_max in (0, 512):
    m._MERGE_IN_APPLY_MAX = merge_max
    m._plans.clear()
    plan = m._plan(x10, w10, b10, 2)
    assert plan[0] == "split" and plan[3].constexprs[0] == 2 and (plan[2] is None) == (merge_max > 0), plan
    if merge_max not in run:
        continue
    got = m.triton_group_norm_silu(x10, w10, b10, 2, 1e-6)
    torch.testing.assert_close(got.double(), want10, atol=1e-3, rtol=1e-3)
# v8's row tiles: statistics over whole rows of channels, apply over [channel block, rows] tiles (blocks narrower
# than, as wide as and wider than the 8 channels; a tail of rows), partials merged by a finalize launch or by the
# apply programs; a batch of two.
x_cl = x_off.to(memory_format=torch.channels_last_3d)
x_cl2 = torch.cat([x_off, x_off.flip(2) * 0.5 - 20.0]).to(memory_format=torch.channels_last_3d)
want_cl2 = F.silu(F.group_norm(x_cl2.double(), 2, w.double(), b.double(), 1e-6))
rows_seen = set()
rows_layouts = (((128, 16, 1, 64, 64, 4, 4), 64), ((512, 3, 1, 4, 32, 3, 4), 0), ((64, 5, 2, 8, 16, 2, 2), 1 << 20))
# sampled: a batch of one and of two, at two of the layouts
run = set(sample([(batch, i) for batch in (1, 2) for i in range(len(rows_layouts))], FULL))
for batch, (xc, ref) in ((1, (x_cl, want_off)), (2, (x_cl2, want_cl2))):
    for i, (lay, merge_max) in enumerate(rows_layouts):
        m._SPLIT_ROWS, m._ROWS_MERGE_MAX = lay, merge_max
        m._plans.clear()
        plan = m._plan(xc, w, b, 2)
        assert plan[0] == "split_rows", plan[0]
        rows_seen.add((plan[2] is None, plan[3].constexprs[0]))
        if (batch, i) not in run:
            continue
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
from kda.definition.task import Task
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


@pytest.mark.slow
def test_sixteen_channel_groups_take_flat_tiles(interpreted):
    interpreted(_FLAT16_PROBE)


@pytest.mark.slow
def test_candidate_split_path_variants_match_torch(interpreted, full_grid):
    """Flat or per-channel tiles, any tile sizes and warps of either pass, partials merged by a finalize launch or
    by the apply programs, contiguous or channels_last: the same y (Triton interpreter), also far from zero. Every
    case is planned and its plan checked; the default run runs the kernels of a sample of them, `-m slow` of all."""
    interpreted(_SPLIT_PROBE.replace("{full}", repr(full_grid)))


def _module():
    return __import__(TASK.load_solution().__name__ + ".group_norm_silu", fromlist=["_triton_plan"])


def test_channels_last_row_plans_cover_x_with_warps_along_the_channels():
    """v8's plan for channels_last x: statistics tiles of whole rows whose warps sit side by side along the channels
    (a lane's rows are its own, so the column sums need no shared memory), programs that cover every row once, and
    apply tiles that cover every channel and row; other layouts and channel counts keep the other paths."""
    m = _module()
    lane_elems, max_iters = m._SPLIT_ROWS[0], m._SPLIT_ROWS[1]
    for shape, dtype in (((1, 256, 17, 256, 256), torch.float16), ((1, 128, 5, 96, 80), torch.float16),
                         ((1, 512, 9, 128, 128), torch.float16), ((2, 512, 3, 48, 40), torch.float32),
                         ((1, 64, 5, 96, 96), torch.bfloat16)):
        x = torch.empty(shape, dtype=dtype).to(memory_format=torch.channels_last_3d)
        C, S = shape[1], math.prod(shape[2:])
        w = torch.empty(C, dtype=dtype)
        plan = m._triton_plan(x, w, w, 32)
        assert plan[0] == "split_rows", (shape, plan[0])
        partial, finalize, apply, n, groups = plan[1:]
        n_part, span = partial.ints[4], partial.ints[5]
        c, cpg, block_s, wide = partial.constexprs
        assert (c, cpg, wide) == (C, C // 32, False)
        lanes = 32 * partial.num_warps
        assert lanes * 16 // x.element_size() <= max(C, 32 * 16 // x.element_size()), (shape, partial.num_warps)
        assert block_s * C == lane_elems * lanes and span % block_s == 0 and span // block_s <= max_iters
        assert n_part == partial.grid[0] and (n_part - 1) * span < S <= n_part * span and partial.grid[1] == shape[0]
        assert n == shape[0] * 32 * n_part and groups == shape[0] * 32
        assert (finalize is None) == (n_part <= m._ROWS_MERGE_MAX)
        cblk, rows = apply.constexprs[0], apply.constexprs[1]
        tiles = apply.ints[-1]
        assert apply.grid[0] * cblk == C and (apply.grid[1] - 1) * rows * tiles < S <= apply.grid[1] * rows * tiles
        assert apply.grid[2] == shape[0]
    # few rows: fewer tiles per statistics program, down to one
    x = torch.empty((1, 256, 2, 12, 10), dtype=torch.float16).to(memory_format=torch.channels_last_3d)
    assert m._rows_plan(x, 1, 256, 32, 8, 240, x.stride(0), 256, False, (x.dtype,) * 4, True, True)[1].ints[5] == 16
    # 96 channels (not a power of two), more than _ROWS_MAX_C channels, or a contiguous x: not the row kernels
    cl = torch.channels_last_3d
    x96 = torch.empty((1, 96, 8, 64, 64), dtype=torch.float16)
    assert m._triton_plan(x96.to(memory_format=cl), None, None, 32)[0] == "split"
    x8k = torch.empty((1, 2 * m._ROWS_MAX_C, 1, 64, 64), dtype=torch.float16, device="meta").to(memory_format=cl)
    assert m._triton_plan(x8k, None, None, 32)[0] == "split"
    xc = torch.empty((1, 256, 5, 64, 64), dtype=torch.float16)
    assert m._triton_plan(xc, None, None, 32)[0] == "split"
    # A 3 MB channels_last x whose groups fit the one-launch path keeps it, few (batch, group) programs or not: the row
    # kernels' two extra launches cost eager callers more than a CUDA graph gains (ledger L0028-L0030)
    x6 = torch.empty((1, 256, 3, 48, 40), dtype=torch.float16, device="meta").to(memory_format=cl)
    assert m._triton_plan(x6, None, None, 32)[0] == "fused"
    x_many = torch.empty((16, 256, 1, 24, 40), dtype=torch.float16, device="meta").to(memory_format=cl)
    assert m._triton_plan(x_many, None, None, 32)[0] == "fused"  # 512 (batch, group) programs



class _OnGpu:
    """A meta tensor that says it is on a GPU, for planning without one."""
    is_cuda = True

    def __init__(self, t):
        self._t = t

    def __getattr__(self, name):
        return getattr(self._t, name)


def _production_paths(monkeypatch, gpu: str) -> dict:
    """{path: production row ids} as `_plan` assigns the rows on an sm_90 GPU named `gpu` with 132 SMs and 227 KB
    of shared memory a block (H100 and H200 both), the team kernel's grid answered as sm_90 holds it (five programs
    an SM)."""
    import collections
    import types

    m = _module()
    monkeypatch.setattr(m, "_plans", {})
    monkeypatch.setattr(m, "_device_limits", lambda device: (132, 232448))
    monkeypatch.setattr(m, "_gpu_named", lambda device, names: any(k in gpu for k in names))
    monkeypatch.setattr(m, "_gn_team_kernel", types.SimpleNamespace(warmup=lambda *a, grid, num_warps: None))
    monkeypatch.setattr(m, "resident_blocks", lambda kernel, warps: 5)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: (9, 0))  # H100 and H200: sm_90
    paths = collections.defaultdict(list)
    for r in TASK.rows:
        if not r.production:
            continue
        t = r.tensors["x"]
        dt = getattr(torch, t.dtype)
        x = torch.empty_strided(t.shape, t.stride, dtype=dt, device="meta")
        w = torch.empty(t.shape[1], dtype=dt, device="meta")
        paths[m._plan(_OnGpu(x), w, w, r.scalars["num_groups"])[0]].append(r.id)
    return dict(paths)


def test_the_solution_readme_counts_the_production_rows_each_path_serves(monkeypatch):
    """solution/README.md's table says how many production rows each path serves on an H100 and an H200: the
    planner's own assignment, so the table cannot drift from the code or the workloads."""
    import re

    readme = (TASK.path / "solution" / "README.md").read_text()
    table = {}
    for line in readme.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 5 and re.match(r"[a-z_]+ \(", cells[0]):
            table[cells[0].split()[0]] = {gpu: int(n) for n, gpu in re.findall(r"(\d+) (H100|H200)\b", cells[2])}
    assert set(table) == {"fused", "split", "split_rows", "resident", "team", "held"}, table
    for gpu in ("H100", "H200"):
        counts = {path: len(ids) for path, ids in _production_paths(monkeypatch, "NVIDIA " + gpu).items()}
        assert counts == {path: n[gpu] for path, n in table.items() if n.get(gpu)}, (gpu, counts)
