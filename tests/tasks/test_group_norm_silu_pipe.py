"""group_norm_silu v13: the pipeline's plan for every contiguous 16-bit production row of _PIPE_MIN_BYTES and more
(chunks of units, launch j applying chunk j - 1 and reading chunk j), the kernel itself under Triton's interpreter
(no program of the pipeline waits for another, so the interpreter's one-after-another order runs it as a GPU would,
the launch boundary being the only barrier), its sm_90 lowering, and the gates that keep it to H200s and GPU tensors."""
import math
import sys
import textwrap

import pytest

from gn_probe_support import PROLOGUE
from kda.task import Task

TASK = Task.load("group_norm_silu")
SOLUTION = TASK.load_solution()
IMPL = sys.modules[SOLUTION.__name__ + ".group_norm_silu"]


def _contiguous_16bit_pipe_sized(row):
    x = row.tensors["x"]
    nbytes = math.prod(x.shape) * 2
    return row.production and "float32" not in str(x.dtype) and x.stride == tuple(
        math.prod(x.shape[i + 1:]) for i in range(len(x.shape))) and nbytes >= IMPL._PIPE_MIN_BYTES


PIPE_ROWS = [r for r in TASK.rows if _contiguous_16bit_pipe_sized(r)]


def test_the_large_contiguous_production_rows_are_there():
    # The plan test below is parametrized over this list: a filter gone empty would pass it vacuously.
    assert len(PIPE_ROWS) >= 6


def _units(start, tiles, nt):
    """The units a launch's `tiles` tiles from unit `start` cover (whole units only)."""
    assert tiles % nt == 0, (start, tiles, nt)
    return list(range(start, start + tiles // nt))


@pytest.mark.parametrize("row", PIPE_ROWS, ids=lambda r: r.id)
def test_pipe_plan_reads_then_applies_each_unit_once_in_chunks_that_fit_the_l2(row):
    B, C = row.tensors["x"].shape[:2]
    S = math.prod(row.tensors["x"].shape[2:])
    G = int(row.scalars["num_groups"])
    M = (C // G) * S
    pp = IMPL.pipe_plan(B * G, M, S, 2)
    assert pp is not None  # every HunyuanVideo VAE row's channel is a whole number of apply blocks
    nt, launches = pp
    block, iters, _, _ = IMPL._PIPE_LAYOUT
    span = block * iters
    assert nt * span >= M and (nt - 1) * span < M  # tiles cover a unit, none of them needless
    assert len(launches) >= 2
    stats = [_units(us0, ns, nt) for _, _, _, us0, ns in launches]
    apply = [_units(ua0, na, nt) for _, ua0, na, _, _ in launches]
    # Each unit's statistics are read once and its y written once, over all launches.
    assert sum(stats, []) == list(range(B * G))
    assert sum(apply, []) == list(range(B * G))
    # The launch boundary is the barrier: a launch applies exactly the units the launch before finished reading.
    for j in range(1, len(launches)):
        assert apply[j] == stats[j - 1], j
    assert apply[0] == [] and stats[-1] == []
    # No empty launch in between (a grid of 0 programs does not launch), and one program per tile.
    assert all(stats[j] for j in range(len(launches) - 1)) and all(apply[j] for j in range(1, len(launches)))
    for grid, _, na, _, ns in launches:
        assert grid == na + ns
    # A chunk's x stays within the L2 budget, unless a single unit is already larger than it.
    for chunk in stats[:-1]:
        assert len(chunk) == 1 or len(chunk) * M * 2 <= IMPL._PIPE_CHUNK_BYTES, (len(chunk), M)


def test_pipe_plan_refuses_what_the_kernel_cannot_tile():
    block = IMPL._PIPE_LAYOUT[0]
    # the apply runs of a tile must stay inside one channel (one weight and bias each)
    assert IMPL.pipe_plan(32, 8 * (block + 1), block + 1, 2) is None
    assert IMPL.pipe_plan(0, 8 * block, block, 2) is None


_PROBE = PROLOGUE + textwrap.dedent("""
    # Small layouts so the tiny cases span many tiles: (16, 3, 3, 1) leaves each unit a short last tile. Chunks of
    # one unit give several launches (the pipeline proper), a large budget one chunk (two launches).
    configs = [(layout, chunk, order, True) for layout in ((16, 2, 2, 1), (16, 3, 3, 1))
               for chunk in (1, 1 << 30) for order in (0, 1, 2)]
    configs.append(((16, 2, 2, 1), 1, 0, False))  # the loads and stores without eviction hints
    for layout, chunk, order, evict in configs:
        mod._PIPE_LAYOUT, mod._PIPE_CHUNK_BYTES, mod._PIPE_ORDER, mod._PIPE_EVICT = layout, chunk, order, evict
        for x, w, b, G, ref in cases():
            B, C = x.shape[0], x.shape[1]
            S = x[0, 0].numel()
            pp = mod.pipe_plan(B * G, (C // G) * S, S, x.element_size())
            assert pp is not None, (layout, x.shape)
            assert len(pp[1]) == (B * G + 1 if chunk == 1 else 2), (chunk, len(pp[1]))
            out = torch.full_like(x, float("nan"))  # a tile left unwritten stays NaN and fails close()
            mod._run_pipe(x, w, b, out, 1e-5, mod.pipe_launch(x, w, b, G, pp))
            assert close(out, ref), (layout, chunk, order, evict, x.dtype, x.shape, G)
            cnt = mod._team_counters(x.device, B * G)[0]
            assert int(cnt.abs().sum()) == 0, "arrival counters not back to zero"
    print("ok")
""")


def test_pipe_kernel_matches_torch_over_layouts_chunks_and_program_orders(interpreted):
    interpreted(_PROBE)


def test_pipe_kernel_compiles_for_hopper_without_spills_and_shares_an_sm():
    """`kda compile` never reaches the pipe path (it needs x on a GPU), so its lowering for sm_90 is checked here on
    a launch that both applies and reads: ptxas accepts it, nothing spills, and at least 4 programs fit an SM (the
    statistics programs of one launch hide the apply programs' latency only if they run side by side)."""
    import torch

    from kda.aot import compile_plan, occupancy, resource_usage

    x = torch.empty((1, 512, 9, 128, 128), dtype=torch.float16, device="meta")
    w = torch.empty((512,), dtype=torch.float16, device="meta")
    plans = IMPL.pipe_launch(x, w, w, 32, IMPL.pipe_plan(32, 16 * 9 * 128 * 128, 9 * 128 * 128, 2))[0]
    assert len(plans) >= 3
    plan = plans[len(plans) // 2]
    use = resource_usage(compile_plan(IMPL._gn_pipe_kernel, plan))
    assert use["local"] == 0  # no spills
    per_sm, _ = occupancy(use["registers"], use["shared"], plan.num_warps)
    assert per_sm >= 4, use


@pytest.mark.parametrize("name, takes_pipe", [("NVIDIA H200", True), ("NVIDIA H100 80GB HBM3", False),
                                              ("NVIDIA B200", False)])
def test_pipe_runs_only_on_the_gpus_it_was_measured_faster_on(monkeypatch, name, takes_pipe):
    """v13 was measured on an H200 only (_PIPE_GPUS): elsewhere the team or stream path keeps the large rows."""
    import types

    monkeypatch.setattr(IMPL.torch.cuda, "get_device_properties", lambda device: types.SimpleNamespace(name=name))
    assert IMPL._pipe_gpu("cuda:0") is takes_pipe


def test_cpu_tensors_never_take_the_pipe_path(monkeypatch):
    """The pipe path launches on x's device and keeps its counters there: a CPU x must get the Triton plan. The size
    and GPU-name gates are opened so that only x being on the CPU keeps it out."""
    import torch

    monkeypatch.setattr(IMPL, "_PIPE_MIN_BYTES", 0)
    monkeypatch.setattr(IMPL, "_RESIDENT_MAX_BYTES", 0)
    monkeypatch.setattr(IMPL, "_pipe_gpu", lambda device: True)
    x = torch.randn(1, 8, 4, 4096).to(torch.float16)  # channels of a whole apply block: pipe_plan would take it
    w = torch.randn(8).to(torch.float16)
    plan = IMPL._plan(x, w, w, 2)
    assert plan is not None and plan[0] != "pipe", plan[0]
