"""group_norm_silu v9: the team kernel's plan for every contiguous production row above
the resident limit, and the kernel itself under Triton's interpreter with one program per team (the interpreter runs
programs one after another, so a team of several would wait forever for members that have not started: the waits
are checked on a GPU only)."""
import math
import sys
import textwrap

import pytest

from gn_probe_support import PROLOGUE
from kda.definition.task import Task

TASK = Task.load("group_norm_silu")
SOLUTION = TASK.load_solution()
IMPL = sys.modules[SOLUTION.__name__ + ".group_norm_silu"]
PROGRAMS = 132 * IMPL._TEAM_PER_SM  # H100 and H200: 132 SMs


def _contiguous_16bit_above_resident(row):
    x = row.tensors["x"]
    nbytes = math.prod(x.shape) * 2
    return row.production and "float32" not in str(x.dtype) and x.stride == tuple(
        math.prod(x.shape[i + 1:]) for i in range(len(x.shape))) and nbytes > IMPL._RESIDENT_MAX_BYTES


TEAM_ROWS = [r for r in TASK.rows if _contiguous_16bit_above_resident(r)]


def test_the_large_contiguous_production_rows_are_there():
    whole = [r for r in TEAM_ROWS if math.prod(r.tensors["x"].shape[2:]) % IMPL._TEAM_BLOCK == 0]
    assert len(whole) >= 6  # the six of 256 MB and more among them


@pytest.mark.parametrize("row", TEAM_ROWS, ids=lambda r: r.id)
def test_team_plan_covers_each_unit_with_whole_tiles_and_fits_the_l2_budget(row):
    B, C = row.tensors["x"].shape[:2]
    S = math.prod(row.tensors["x"].shape[2:])
    G = int(row.scalars["num_groups"])
    M = (C // G) * S
    plan = IMPL.team_plan(B * G, M, S, 2, PROGRAMS)
    if S % IMPL._TEAM_BLOCK:  # channels that are not whole tiles stay on the split path
        assert plan is None
        return
    fit = IMPL._TEAM_L2_BYTES // (M * 2)
    if fit < IMPL._TEAM_MIN_TEAMS:
        fit = IMPL._TEAM_L2_MAX_BYTES // (M * 2)
    if fit < IMPL._TEAM_MIN_TEAMS:  # too few units in flight to hide a team's wait: the split path keeps x
        assert plan is None
        return
    team, teams, slice_ = plan
    assert team * teams <= PROGRAMS and IMPL._TEAM_MIN_TEAMS <= teams <= min(B * G, IMPL._TEAM_MAX_TEAMS)
    # whole tiles, the unit covered, and no slice a tile longer than it needs to be
    assert slice_ % IMPL._TEAM_BLOCK == 0 and slice_ * team >= M and (slice_ - IMPL._TEAM_BLOCK) * team < M
    # units in flight fit the budget: the small one where it holds enough units
    budget = IMPL._TEAM_L2_BYTES if IMPL._TEAM_L2_BYTES // (M * 2) >= IMPL._TEAM_MIN_TEAMS else IMPL._TEAM_L2_MAX_BYTES
    assert teams * M * 2 <= budget


def test_team_plan_refuses_what_the_kernel_cannot_tile():
    block = IMPL._TEAM_BLOCK
    assert IMPL.team_plan(32, 8 * (block + 1), block + 1, 2, PROGRAMS) is None  # channel not a multiple of a tile
    assert IMPL.team_plan(0, 8 * block, block, 2, PROGRAMS) is None
    assert IMPL.team_plan(1, 2**31, block, 2, PROGRAMS) is None  # int32 offsets within a unit
    assert IMPL.team_plan(3, 4 * block, block, 2, PROGRAMS)[1] == 3  # never more teams than units


def test_team_plan_leaves_units_too_large_for_several_teams_to_the_split_path():
    block = IMPL._TEAM_BLOCK
    one = IMPL._TEAM_L2_MAX_BYTES // 2 // block * block  # one unit fills the whole budget
    assert IMPL.team_plan(32, one, block, 2, PROGRAMS) is None
    small = (IMPL._TEAM_L2_BYTES // 2 // (IMPL._TEAM_MAX_TEAMS + 2)) // block * block
    assert IMPL.team_plan(32, small, block, 2, PROGRAMS)[1] == IMPL._TEAM_MAX_TEAMS


def test_team_path_is_for_16_bit_x_only():
    assert set(IMPL._TEAM_DTYPES) == {IMPL.torch.float16, IMPL.torch.bfloat16}


_PROBE = PROLOGUE + textwrap.dedent("""
    mod._TEAM_BLOCK = 64
    for x, w, b, G, ref in cases():
        B, C = x.shape[0], x.shape[1]
        M = (C // G) * x[0, 0].numel()
        for teams in sorted({1, B * G}):
            out = torch.full_like(x, float("nan"))
            assert mod._run_team(x, w, b, out, 1e-5, mod.team_launch(x, w, b, G, (1, teams, M)))
            assert close(out, ref), (x.dtype, x.shape, G, teams)
            cnt, done = mod._team_counters(x.device, B * G)
            assert int(cnt.abs().sum()) == 0 and int(done.abs().sum()) == 0, "counters not back to zero"
    print("ok")
""")


def test_team_kernel_matches_torch_with_one_program_per_team(interpreted):
    interpreted(_PROBE)


def test_team_programs_never_exceed_what_an_sm_holds():
    assert IMPL.team_programs(132, 4, 5) == 528
    assert IMPL.team_programs(132, 4, 3) == 396
    assert IMPL.team_programs(132, 4, 0) == 0


class _FakeKernel:
    """Stands in for the compiled team kernel: records the grid each try compiled."""

    def __init__(self):
        self.grids = []

    def warmup(self, *args, grid, num_warps):
        self.grids.append(grid[0])
        return grid[0]


@pytest.mark.parametrize("resident,expected", [(5, 4 * 132), (3, 3 * 132), (1, 132), (0, None)])
def test_team_fit_shrinks_the_grid_to_what_the_driver_says_is_resident(monkeypatch, resident, expected):
    import torch
    fake = _FakeKernel()
    monkeypatch.setattr(IMPL, "_gn_team_kernel", fake)
    monkeypatch.setattr(IMPL, "resident_blocks", lambda kernel, warps: resident)
    x = torch.empty((1, 512, 9, 128, 128), dtype=torch.float16, device="meta")
    launch = IMPL._team_fit(x, None, None, 32, 132)
    if expected is None:
        assert launch is None
        return
    plan = launch[0]
    team, teams = plan.constexprs[0], plan.constexprs[1]
    assert team * teams <= expected and plan.grid[0] == team * teams
    assert fake.grids[-1] == plan.grid[0]  # the binary asked about is the plan's own
    assert all(g > expected for g in fake.grids[:-1])  # every rejected try had more programs than fit


def test_team_kernel_compiles_for_hopper_with_its_programs_per_sm_resident():
    """`kda compile` never reaches the team path (it needs x on a GPU), so its lowering for sm_90 is checked here:
    ptxas accepts it, and at the defaults the registers let _TEAM_PER_SM programs share an SM (the GPU
    machine's Triton may allocate otherwise: _team_fit asks the driver there)."""
    import torch

    from kda.harness.aot import compile_plan, occupancy, resource_usage

    x = torch.empty((1, 512, 9, 128, 128), dtype=torch.float16, device="meta")
    w = torch.empty((512,), dtype=torch.float16, device="meta")
    plan = IMPL.team_launch(x, w, w, 32, IMPL.team_plan(32, 16 * 9 * 128 * 128, 9 * 128 * 128, 2, PROGRAMS))[0]
    use = resource_usage(compile_plan(IMPL._gn_team_kernel, plan))
    assert use["local"] == 0  # no spills
    per_sm, _ = occupancy(use["registers"], use["shared"], IMPL._TEAM_WARPS)
    assert per_sm >= IMPL._TEAM_PER_SM, use


@pytest.mark.parametrize("name, takes_team", [("NVIDIA H100 80GB HBM3", True), ("NVIDIA H100 PCIe", True),
                                              ("NVIDIA H200", False), ("NVIDIA B200", False)])
def test_team_kernel_runs_only_on_the_gpus_it_was_measured_faster_on(monkeypatch, name, takes_team):
    """v9d: on an H200 the stream/split path beat the team kernel on five of the six large rows (ledger L0047)."""
    import types

    monkeypatch.setattr(IMPL.torch.cuda, "get_device_properties", lambda device: types.SimpleNamespace(name=name))
    assert IMPL._gpu_named("cuda:0", IMPL._TEAM_GPUS) is takes_team


def _meta_launch():
    import torch

    x = torch.empty((1, 512, 9, 128, 128), dtype=torch.float16, device="meta")
    w = torch.empty((512,), dtype=torch.float16, device="meta")
    return IMPL.team_launch(x, w, w, 32, IMPL.team_plan(32, 16 * 9 * 128 * 128, 9 * 128 * 128, 2, PROGRAMS))


def test_team_grid_goes_out_as_a_cooperative_launch():
    """The driver then refuses a grid the GPU (or its MPS share) cannot hold at once, instead of starting part of it
    and leaving the started programs waiting for ever."""
    assert dict(_meta_launch()[0].options) == {"launch_cooperative_grid": True}


class _Refusing:
    def __init__(self, message):
        self.message, self.calls = message, 0

    def run(self, plan, tensors, floats):
        self.calls += 1
        raise RuntimeError(self.message)


def test_a_refused_cooperative_grid_reports_false_and_other_launch_errors_propagate(monkeypatch):
    import torch

    x = torch.zeros((1, 4, 64), dtype=torch.float16)
    out = torch.empty_like(x)
    launch = (_meta_launch()[0], 4, 8)
    # the counters come from a Triton kernel: no launch here (no GPU, no interpreter in this process)
    monkeypatch.setattr(IMPL, "_team_counters", lambda device, units: (torch.zeros(units, dtype=torch.int32),) * 2)
    monkeypatch.setattr(IMPL, "_launch_team", _Refusing("Triton Error [CUDA]: too many blocks in cooperative launch"))
    assert IMPL._run_team(x, None, None, out, 1e-5, launch) is False
    monkeypatch.setattr(IMPL, "_launch_team", _Refusing("Triton Error [CUDA]: an illegal memory access"))
    with pytest.raises(RuntimeError, match="illegal memory access"):
        IMPL._run_team(x, None, None, out, 1e-5, launch)


_REFUSED = PROLOGUE + textwrap.dedent("""
    import torch.nn.functional as F

    class Refusing:
        calls = 0

        def run(self, plan, tensors, floats):
            Refusing.calls += 1
            raise RuntimeError("Triton Error [CUDA]: too many blocks in cooperative launch")

    x = (torch.randn((1, 8, 4, 16), generator=g) * 2 + 50).to(torch.float16)
    w, b = torch.randn(8, generator=g).to(torch.float16), torch.randn(8, generator=g).to(torch.float16)
    meta = torch.empty((1, 512, 9, 128, 128), dtype=torch.float16, device="meta")
    wm = torch.empty((512,), dtype=torch.float16, device="meta")
    team = mod.team_launch(meta, wm, wm, 32, mod.team_plan(32, 16 * 9 * 128 * 128, 9 * 128 * 128, 2, 528))
    key = mod._plan_key(x, w, b, 2)
    fallback = mod._triton_plan(x, w, b, 2)
    mod._launch_team = Refusing()
    mod._plans[key] = ("team", (team[0], 2, 8), fallback)
    ref = F.silu(F.group_norm(x.float(), 2, w.float(), b.float(), 1e-5))
    out = mod.triton_group_norm_silu(x, w, b, 2, 1e-5)
    assert Refusing.calls == 1 and close(out, ref)
    assert mod._plans[key] is fallback, "the refused signature should keep the split path"
    out = mod.triton_group_norm_silu(x, w, b, 2, 1e-5)
    assert Refusing.calls == 1 and close(out, ref)
    print("ok")
""")


def test_a_refused_team_call_takes_the_split_path_and_keeps_it(interpreted):
    """The call still returns the right answer (through the plan's fallback), and the signature's plan becomes the
    fallback, so later calls do not ask the driver again."""
    interpreted(_REFUSED)
