"""group_norm_silu v12 (off by default): the queue kernel's plan for the large contiguous production rows, the kernel
under Triton's interpreter (programs run one after another there, which the queue's order allows: a unit's apply
tiles come after all its statistics tiles, so one program can take every task), and its lowering for sm_90."""
import math
import sys
import textwrap

import pytest

from gn_probe_support import PROLOGUE
from kda.task import Task

TASK = Task.load("group_norm_silu")
SOLUTION = TASK.load_solution()
IMPL = sys.modules[SOLUTION.__name__ + ".group_norm_silu"]
MIB = 1 << 20


def _large_contiguous_16bit(row):
    x = row.tensors["x"]
    return row.production and "float32" not in str(x.dtype) and x.stride == tuple(
        math.prod(x.shape[i + 1:]) for i in range(len(x.shape))) and math.prod(x.shape) * 2 >= IMPL._TEAM_MIN_BYTES


ROWS = [r for r in TASK.rows if _large_contiguous_16bit(r)]


@pytest.mark.parametrize("row", ROWS, ids=lambda r: r.id)
def test_queue_plan_covers_every_unit_with_whole_tasks_and_keeps_the_lag_in_the_l2_budget(row):
    shape = row.tensors["x"].shape
    B, C, G = shape[0], shape[1], row.scalars["num_groups"]
    S = math.prod(shape[2:])
    group = (C // G) * S
    qp = IMPL.queue_plan(B * G, group, S, 2, 132)
    if S % IMPL._QUEUE_BLOCK:
        assert qp is None
        return
    n_tiles, lag, programs = qp
    assert n_tiles * IMPL._QUEUE_BLOCK == group and programs == 132 * IMPL._QUEUE_PER_SM
    assert 1 <= lag <= B * G
    assert lag == 1 or (lag + 1) * group * 2 <= IMPL._QUEUE_L2_BYTES


def test_every_large_contiguous_production_row_can_take_the_queue():
    assert ROWS and all(math.prod(r.tensors["x"].shape[2:]) % IMPL._QUEUE_BLOCK == 0 for r in ROWS)


def test_queue_plan_refuses_what_the_kernel_cannot_tile():
    block = IMPL._QUEUE_BLOCK
    assert IMPL.queue_plan(32, 8 * (block + 1), block + 1, 2, 132) is None
    assert IMPL.queue_plan(0, 8 * block, block, 2, 132) is None
    assert IMPL.queue_plan(1, 2**31, block, 2, 132) is None


def test_queue_lag_is_one_unit_at_least_and_all_units_at_most(monkeypatch):
    block = IMPL._QUEUE_BLOCK
    monkeypatch.setattr(IMPL, "_QUEUE_L2_BYTES", 0)
    assert IMPL.queue_plan(32, 64 * block, block, 2, 132)[1] == 1
    monkeypatch.setattr(IMPL, "_QUEUE_L2_BYTES", 1 << 40)
    assert IMPL.queue_plan(5, 64 * block, block, 2, 132)[1] == 5


_PROBE = PROLOGUE + textwrap.dedent("""
    mod._QUEUE_BLOCK = 64
    for x, w, b, G, ref in cases():
        B, C, S = x.shape[0], x.shape[1], x[0, 0].numel()
        for lag_bytes in (0, 1 << 30):  # a lag of one unit, and of every unit
            mod._QUEUE_L2_BYTES = lag_bytes
            qp = mod.queue_plan(B * G, (C // G) * S, S, x.element_size(), 3)
            for _ in range(2):  # the second call needs the control words the first returned to zero
                out = torch.full_like(x, float("nan"))
                mod._run_queue(x, w, b, out, 1e-5, mod.queue_launch(x, w, b, G, qp))
                assert close(out, ref), (x.dtype, x.shape, G, qp)
                assert int(mod._queue_control(x.device, B * G).abs().sum()) == 0, "control words not back to zero"
    print("ok")
""")


def test_queue_kernel_matches_torch_under_the_interpreter(interpreted):
    interpreted(_PROBE)


def test_queue_kernel_compiles_for_hopper_without_spills():
    import torch

    from kda.aot import compile_plan, occupancy, resource_usage

    x = torch.empty((1, 512, 9, 128, 128), dtype=torch.float16, device="meta")
    w = torch.empty((512,), dtype=torch.float16, device="meta")
    plan = IMPL.queue_launch(x, w, w, 32, IMPL.queue_plan(32, 16 * 9 * 128 * 128, 9 * 128 * 128, 2, 132))[0]
    use = resource_usage(compile_plan(IMPL._gn_queue_kernel, plan))
    assert use["local"] == 0, use
    per_sm, _ = occupancy(use["registers"], use["shared"], IMPL._QUEUE_WARPS)
    assert per_sm >= IMPL._QUEUE_PER_SM, use
