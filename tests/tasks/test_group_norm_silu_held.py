"""group_norm_silu v17: the held kernel's plan (pure integer math, checked for every contiguous production row above
the resident limit, which is where the kernel would run) and its compilation for Hopper without spills where nvcc
is installed. Its numbers are checked on a GPU by `kda check` and the layout sweep; the plan is what a CPU can check:
a plan the kernel's assumptions do not hold for would hang the grid or write the wrong channels."""
import math
import sys

import pytest

from kda.definition.task import Task

TASK = Task.load("group_norm_silu")
IMPL = sys.modules[TASK.load_solution().__name__ + ".group_norm_silu"]
SMS = 132           # H200 multiprocessors
SMEM = 227 << 10    # opt-in shared memory per block on sm_90


def _x_bytes(row):
    x = row.tensors["x"]
    return math.prod(x.shape) * (4 if "float32" in str(x.dtype) else 2)


def _geometry(shape, elem, groups=32):
    B, C = shape[0], shape[1]
    S = math.prod(shape[2:])
    return B * groups, (C // groups) * S, S, elem


HELD_ROWS = [r for r in TASK.rows if r.tensors["x"].stride[-1] == 1 and _x_bytes(r) > IMPL._RESIDENT_MAX_BYTES
             and "float32" not in str(r.tensors["x"].dtype)]
TAKEN = [r for r in HELD_ROWS if _x_bytes(r) >= IMPL._HELD_MIN_BYTES]


def test_the_held_kernel_takes_every_contiguous_production_row_of_256_mb_or_more():
    big = {r.id for r in TASK.rows if r.production and r.tensors["x"].stride[-1] == 1 and 2 * _x_bytes(r) >= 256e6}
    assert len(big) == 6 and big <= {r.id for r in TAKEN}


@pytest.mark.parametrize("row", HELD_ROWS, ids=lambda r: r.id)
def test_every_held_row_has_a_plan_the_kernel_can_run(row):
    x = row.tensors["x"]
    units, group_elems, channel_elems, elem = _geometry(x.shape, 2, row.scalars["num_groups"])
    plan = IMPL.held_plan(units, group_elems, channel_elems, elem, SMS, SMEM)
    assert plan is not None
    ctas, slice_vecs, chunks, chunk_vecs, ring_slots, lag, warps, tma_store, reg_chunks, prefetch = plan
    assert prefetch == -(-IMPL._HELD_PREFETCH_BYTES // (16 * chunk_vecs))
    assert tma_store == 0  # y stored by the apply warps
    assert 0 <= reg_chunks <= IMPL._HELD_NO_LAG[2]
    if reg_chunks:  # only the instantiation that holds them, each thread's share of a chunk within its registers
        assert lag == 0 and warps == IMPL._HELD_REG_WARPS
        assert chunk_vecs <= IMPL._HELD_REG_PER_THREAD * warps * 32
        # no more than ring and registers need for two slices and the spare slots
        assert ring_slots + reg_chunks <= 2 * chunks + IMPL._HELD_SPARE_SLOTS
    assert warps in (8, 12, 16)  # the kernel's instantiations of apply warps
    group_vecs, channel_vecs = group_elems * elem // 16, channel_elems * elem // 16
    assert ctas <= SMS  # one CTA per SM, all resident (the grid waits for itself)
    assert (ctas - 1) * slice_vecs < group_vecs <= ctas * slice_vecs  # covered, and no CTA without a slice
    assert slice_vecs % 32 == 0  # every copy starts on a 512-byte boundary
    assert slice_vecs <= channel_vecs  # a slice spans at most two channels (the kernel keeps two coefficients)
    assert (chunks - 1) * chunk_vecs < slice_vecs <= chunks * chunk_vecs <= chunks * IMPL._HELD_CHUNK_VECS
    assert chunk_vecs <= warps * 32 * IMPL._HELD_UNROLL  # one unrolled round of the apply warps a chunk
    assert 0 <= lag <= min(IMPL._HELD_LAG, IMPL._HELD_MAX_LAG)
    # lag + 1 slices held (fewer would never free the slot the next copy waits for), and copies in flight; a lag
    # one larger would not leave them
    assert ring_slots >= (lag + 1) * chunks + IMPL._HELD_SPARE_SLOTS
    assert lag == IMPL._HELD_LAG or ring_slots < (lag + 2) * chunks + IMPL._HELD_SPARE_SLOTS
    assert ring_slots * chunk_vecs * 16 + IMPL._HELD_RESERVE <= SMEM and ring_slots <= IMPL._HELD_MAX_SLOTS


def test_the_largest_group_has_no_lag_and_runs_as_no_lag_says():
    # 17.8 MB per group over 132 CTAs: 8440.2 vectors each, rounded up to 8448 (a warp's multiple). At 12 apply warps,
    # six copies of 1408 vectors (22 KB; a round of 4 a thread) and 10 slots: too few for a second slice. So as
    # _HELD_NO_LAG says: 12 apply warps, copies of at most 768 vectors (two an apply thread): eleven of 768 (12 KB) and
    # 18 slots, and 4 chunks in registers, so that ring and registers hold two slices (22 chunks)
    assert IMPL._HELD_WARPS == 12 and IMPL._HELD_NO_LAG == (12, 768, 4)
    plan = IMPL.held_plan(*_geometry((1, 256, 17, 256, 256), 2), SMS, SMEM)
    assert plan[:9] == (132, 8448, 11, 768, 18, 0, 12, 0, 4)


def test_chunks_in_registers_only_where_the_no_lag_plan_can_hold_them(monkeypatch):
    shape = _geometry((1, 256, 17, 256, 256), 2)
    # as v19 ran it: 16 KB copies, three vectors a thread of a chunk, more than the kernel's registers take
    monkeypatch.setattr(IMPL, "_HELD_NO_LAG", (12, 1024, 4))
    assert IMPL.held_plan(*shape, SMS, SMEM)[:9] == (132, 8448, 9, 960, 14, 0, 12, 0, 0)
    # 16 apply warps: not the instantiation that holds registers
    monkeypatch.setattr(IMPL, "_HELD_NO_LAG", (16, 768, 4))
    assert IMPL.held_plan(*shape, SMS, SMEM)[8] == 0
    # fewer allowed: as many as allowed; more: as many as two slices and the spare slots need
    monkeypatch.setattr(IMPL, "_HELD_NO_LAG", (12, 768, 2))
    assert IMPL.held_plan(*shape, SMS, SMEM)[8] == 2
    monkeypatch.setattr(IMPL, "_HELD_NO_LAG", (12, 768, 9))
    assert IMPL.held_plan(*shape, SMS, SMEM)[8] == IMPL._HELD_REG_CHUNKS == 4  # what the kernel can hold
    monkeypatch.setattr(IMPL, "_HELD_REG_CHUNKS", 8)
    assert IMPL.held_plan(*shape, SMS, SMEM)[8] == 6  # two slices and the spare slots: 24 of 18 + 6


def test_prefetch_rounds_the_bytes_up_to_whole_chunks(monkeypatch):
    shape = _geometry((1, 512, 9, 128, 128), 2)  # copies of 1120 vectors (17.5 KB)
    assert IMPL.held_plan(*shape, SMS, SMEM)[9] == 2  # 32 KB: 1.8 copies
    monkeypatch.setattr(IMPL, "_HELD_PREFETCH_BYTES", 0)
    assert IMPL.held_plan(*shape, SMS, SMEM)[9] == 0
    monkeypatch.setattr(IMPL, "_HELD_PREFETCH_BYTES", 64 << 10)
    assert IMPL.held_plan(*shape, SMS, SMEM)[9] == 4  # 64 KB: 3.7 copies


def test_the_register_limits_mirror_the_kernel_header():
    import re
    header = (IMPL._EXT.csrc / "gn_resident.h").read_text()
    consts = {k: int(v) for k, v in re.findall(r"constexpr int (kHeldReg\w+) = (\d+);", header)}
    assert consts == {"kHeldRegVecs": 8, "kHeldRegChunks": 4, "kHeldRegWarps": 12}
    assert IMPL._HELD_REG_CHUNKS == consts["kHeldRegChunks"] and IMPL._HELD_REG_WARPS == consts["kHeldRegWarps"]
    assert IMPL._HELD_REG_PER_THREAD == consts["kHeldRegVecs"] // consts["kHeldRegChunks"]


def test_a_4_7_mb_group_takes_the_default_lag():
    # c512 t9 128x128: 2240 vectors a CTA in two copies of 1120; 12 slots hold the lag's three slices and more
    plan = IMPL.held_plan(*_geometry((1, 512, 9, 128, 128), 2), SMS, SMEM)
    assert plan[:9] == (132, 2240, 2, 1120, 12, IMPL._HELD_LAG, 12, 0, 0)


def test_no_plan_when_a_group_does_not_fit_the_grids_rings_or_a_slice_would_span_three_channels():
    # 4 channels of 2^22 elements per group: 32 MB over 132 rings of 227 KB (29 MB) cannot be held
    assert IMPL.held_plan(*_geometry((1, 128, 1, 2048, 2048), 2), SMS, SMEM) is None
    # on a GPU of 264 SMs the same group fits
    assert IMPL.held_plan(*_geometry((1, 128, 1, 2048, 2048), 2), 264, SMEM) is not None
    # 512 channels of 64 elements per group: a slice of 32 vectors over four channels of 8 vectors each
    assert IMPL.held_plan(*_geometry((1, 16384, 1, 8, 8), 2), SMS, SMEM) is None
    assert IMPL.held_plan(*_geometry((1, 64, 3, 5, 7), 2), SMS, SMEM) is None  # a channel is not whole vectors


@pytest.mark.slow  # nvcc, where installed: eight instantiations
def test_held_kernel_compiles_for_hopper_without_spills(hopper_build):
    # the held kernel for fp16 and bf16 (the only x it takes) at 8, 12 and 16 apply warps, and at 12 apply warps
    # holding chunks in registers
    assert hopper_build(IMPL._EXT.csrc / "gn_held.cu") == 8


@pytest.mark.parametrize("name, takes_held", [("NVIDIA H200", True), ("NVIDIA H200 NVL", True),
                                              ("NVIDIA H100 80GB HBM3", False), ("NVIDIA B200", False)])
def test_held_kernel_runs_only_on_the_gpus_it_was_measured_faster_on(monkeypatch, name, takes_held):
    import types

    monkeypatch.setattr(IMPL.torch.cuda, "get_device_properties", lambda device: types.SimpleNamespace(name=name))
    assert IMPL._gpu_named("cuda:0", IMPL._HELD_GPUS) is takes_held


def test_rows_below_the_size_floor_keep_the_split_path():
    # 85 MB and 72 MB contiguous rows: the held kernel ran even with or behind the split path (956b206-held.json)
    small = {r.id for r in HELD_ROWS if r.id in ("hyvae_c128_t17_256x80_contig", "hyvae_c256_t9_128x128_contig")}
    assert len(small) == 2 and not small & {r.id for r in TAKEN}


def test_the_held_epoch_is_one_zeroed_int32_per_device_made_once(monkeypatch):
    # every call reads and advances the device's epoch (graph replays included), so it must persist and start at 0
    zeroed = []
    monkeypatch.setattr(IMPL, "_launch_zero", lambda grid, tensors, *rest: zeroed.append(tensors[0]))
    monkeypatch.setattr(IMPL, "_epochs", {})
    dev = IMPL.torch.device("cpu")
    first = IMPL._held_epoch(dev)
    assert first.dtype == IMPL.torch.int32 and first.numel() == 1 and zeroed == [first]
    assert IMPL._held_epoch(dev) is first and len(zeroed) == 1


def test_team_counters_share_the_zeroed_buffer_helper_and_grow_when_more_units_come(monkeypatch):
    zeroed = []
    monkeypatch.setattr(IMPL, "_launch_zero", lambda grid, tensors, *rest: zeroed.append(tensors[0].numel()))
    monkeypatch.setattr(IMPL, "_counters", {})
    dev = IMPL.torch.device("cpu")
    cnt, done = IMPL._team_counters(dev, 32)
    assert cnt.numel() == done.numel() == 32 and zeroed == [128]  # at least 64 units' worth when made
    IMPL._team_counters(dev, 64)
    assert zeroed == [128]  # still fits
    cnt, done = IMPL._team_counters(dev, 100)
    assert cnt.numel() == done.numel() == 100 and zeroed == [128, 200]
