"""group_norm_silu v5: the resident CUDA kernel's plan (pure integer math, checked here for every production shape),
its dispatch (CPU tensors never build the extension), its sources (hashed as solution code) and, where nvcc is
installed, its compilation for Hopper without spills. The kernel's numbers are checked on a GPU by `kda check`."""
import math
import sys

import pytest
import torch

from kda.harness.guards import static_violations
from kda.definition.task import Task

TASK = Task.load("group_norm_silu")
SOLUTION = TASK.load_solution()
IMPL = sys.modules[SOLUTION.__name__ + ".group_norm_silu"]
H200 = (132, 232448)  # multiprocessors, opt-in shared memory per block


def _plan_for(shape, dtype_bytes, groups=32, limits=H200):
    B, C = shape[0], shape[1]
    S = math.prod(shape[2:])
    return IMPL.resident_plan(B * groups, (C // groups) * S, S, dtype_bytes, *limits)


@pytest.mark.parametrize("row", [r for r in TASK.rows if r.production and r.tensors["x"].stride[-1] == 1],
                         ids=lambda r: r.id)
def test_every_contiguous_production_row_has_a_plan_that_covers_its_groups(row):
    shape = row.tensors["x"].shape
    plan = _plan_for(shape, 2)
    assert plan is not None
    team, teams, chunk, ring = plan
    sms, smem = H200
    group_vecs = (shape[1] // 32) * math.prod(shape[2:]) * 2 // 16
    assert 1 <= team <= sms and 1 <= teams <= 32 and team * teams <= sms  # every CTA resident at once
    assert team * chunk >= group_vecs > (team - 1) * chunk  # slices cover the group; no member is idle
    assert chunk <= ring <= (smem - IMPL._RESIDENT_RESERVE) // 16 and ring <= 2 * chunk


def test_the_largest_group_spans_every_sm_and_small_groups_stay_on_few():
    team, teams, chunk, ring = _plan_for((1, 256, 17, 256, 256), 2)
    assert (team, teams) == (132, 1) and ring < 2 * chunk  # 17.8 MB per group: 135 KB per SM, no double buffer
    team, teams, _, _ = _plan_for((1, 512, 2, 12, 10), 2)
    assert (team, teams) == (1, 32)  # 7.5 KB groups: one CTA each, no team wait


def test_no_plan_when_a_group_cannot_be_held_or_a_vector_spans_two_channels():
    assert _plan_for((1, 32, 1, 3000, 3000), 2, groups=1) is None  # 576 MB group > 132 x 226 KB
    assert _plan_for((1, 64, 3, 5, 7), 2) is None  # 105 elements x 2 bytes per channel: not a multiple of 16
    assert _plan_for((1, 64, 3, 5, 8), 4) is not None


def test_cost_prices_each_round_so_mid_size_rows_take_one_round_of_larger_slices(monkeypatch):
    # 590 KB groups (c512_t3_48x128, 18.9 MB): 32 teams of 4 hold every group at once (144 KB a CTA, one round);
    # without a round's cost, 16 teams of 8 took two rounds of 72 KB, 21.2 us against 17.9 by graph replay on an H200
    # (layout-sweep/fc3d26a-resident-gen.json)
    assert IMPL._RESIDENT_ROUND_VECS == 16384
    assert _plan_for((1, 512, 3, 48, 128), 2)[:2] == (4, 32)
    monkeypatch.setattr(IMPL, "_RESIDENT_ROUND_VECS", 0)
    assert _plan_for((1, 512, 3, 48, 128), 2)[:2] == (8, 16)
    # a round's cost never splits a small group over a team: 7.5 KB groups stay one CTA each
    assert _plan_for((1, 512, 2, 12, 10), 2)[:2] == (1, 32)


_CPU_PROBE = r"""
import torch, torch.nn.functional as F
from kda.definition.task import Task
m = __import__(Task.load("group_norm_silu").load_solution().__name__ + ".group_norm_silu", fromlist=["_EXT"])
def refuse():
    raise AssertionError("the CUDA extension was asked for")
m._EXT.load = refuse
x = torch.randn(1, 64, 2, 8, 8, generator=torch.Generator().manual_seed(3))
y = m.triton_group_norm_silu(x, torch.ones(64), torch.zeros(64), 32, 1e-6)
assert m._plans and all(p[0] not in ("resident", "held", "team") for p in m._plans.values())
torch.testing.assert_close(y.double(), F.silu(F.group_norm(x.double(), 32, eps=1e-6)), atol=1e-4, rtol=1e-4)
print("ok")
"""


def test_cpu_tensors_take_the_triton_path_and_never_build_the_extension(interpreted):
    interpreted(_CPU_PROBE)


def test_sources_are_hashed_as_solution_code_and_pass_the_static_rules():
    names = {p.name for p in TASK.solution_files()}
    assert set(IMPL._EXT.sources) <= names
    assert all((IMPL._EXT.csrc / s).is_file() for s in IMPL._EXT.sources)
    assert static_violations(TASK.solution_files()) == []


def test_resident_kernel_compiles_for_hopper_without_spills(hopper_build):
    # the resident kernel for fp16, bf16 and fp32, and the counter-zeroing kernel
    assert hopper_build(IMPL._EXT.csrc / "gn_resident.cu") == 4
