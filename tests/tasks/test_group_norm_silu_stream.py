"""group_norm_silu v6: the L2 stream kernel's plan (pure integer math, checked for every contiguous production row it
takes) and its compilation for Hopper without spills where nvcc is installed. Its numbers are checked on a GPU by
`kda check` and timed by `kda bench`; the dispatch on CPU tensors is covered by test_group_norm_silu_resident.py."""
import math
import sys

import pytest

from kda.task import Task

TASK = Task.load("group_norm_silu")
SOLUTION = TASK.load_solution()
IMPL = sys.modules[SOLUTION.__name__ + ".group_norm_silu"]
SMS = 132  # H200 multiprocessors


def _x_bytes(row):
    x = row.tensors["x"]
    return math.prod(x.shape) * (4 if "float32" in str(x.dtype) else 2)


SMEM_OPTIN = 232448  # H100/H200 shared memory a block may opt into


def _plan_for(shape, dtype_bytes, groups=32, ctas_per_sm=1):
    B, C = shape[0], shape[1]
    S = math.prod(shape[2:])
    return IMPL.stream_plan(B * groups, (C // groups) * S, S, dtype_bytes, SMS, ctas_per_sm, SMEM_OPTIN)


@pytest.fixture
def held(monkeypatch):
    """Held mode at `unroll` vectors per thread per chunk (and the lag given, if any) for the test's plans."""
    def set_(unroll, lag_bytes=None):
        monkeypatch.setattr(IMPL, "_STREAM_HELD", unroll)
        if lag_bytes is not None:
            monkeypatch.setattr(IMPL, "_STREAM_LAG_BYTES", lag_bytes)
    return set_


STREAM_ROWS = [r for r in TASK.rows if r.tensors["x"].stride[-1] == 1 and _x_bytes(r) > IMPL._RESIDENT_MAX_BYTES]


def test_the_rows_above_the_resident_limit_include_every_contiguous_production_row_of_256_mb_or_more():
    # the rows the 85%-of-copy rule applies to (x read + y written >= 256 MB) are all stream rows
    big = {r.id for r in TASK.rows if r.production and r.tensors["x"].stride[-1] == 1 and 2 * _x_bytes(r) >= 256e6}
    assert big and big <= {r.id for r in STREAM_ROWS}


@pytest.mark.parametrize("row", STREAM_ROWS, ids=lambda r: r.id)
def test_every_stream_row_has_a_plan_whose_slices_and_chunks_cover_each_group(row):
    x = row.tensors["x"]
    elem = 4 if "float32" in str(x.dtype) else 2
    plan = _plan_for(x.shape, elem)
    assert plan is not None
    ctas, slice_vecs, chunks, chunk_vecs, lag, hints, coef_bufs, held_slots, held_unroll = plan
    group_vecs = (x.shape[1] // 32) * math.prod(x.shape[2:]) * elem // 16
    assert ctas == SMS  # one CTA per SM (the 192 KB ring), every CTA resident
    assert ctas * slice_vecs >= group_vecs > ctas * (slice_vecs - 32)  # covered, no CTA a warp of vectors short
    assert slice_vecs % 32 == 0  # slices start on 512-byte boundaries
    assert chunk_vecs == IMPL._STREAM_THREADS * IMPL._STREAM_UNROLL  # full chunks but a slice's last
    assert (chunks - 1) * chunk_vecs < slice_vecs <= chunks * chunk_vecs  # no empty chunk
    assert lag >= 1 and (lag - 1) * 16 * chunk_vecs * ctas < IMPL._STREAM_LAG_BYTES <= lag * 16 * chunk_vecs * ctas
    assert hints == IMPL._STREAM_HINTS
    assert 2 <= coef_bufs == IMPL._STREAM_COEF_BUFS <= 8  # kStreamCoefBufs
    assert (held_slots, held_unroll) == (0, 0)  # the L2 mode unless _STREAM_HELD is set


def test_the_largest_group_is_read_in_five_chunks_per_cta():
    ctas, slice_vecs, chunks, chunk_vecs, lag, *_ = _plan_for((1, 256, 17, 256, 256), 2)
    # 17.8 MB per group over 132 CTAs: 8440.2 vectors each, rounded up to 8448 (a warp's multiple); four full passes
    # of 512 threads x 4 vectors and one of 256 vectors
    assert (ctas, slice_vecs, chunks, chunk_vecs) == (132, 8448, 5, 2048)
    assert lag == 2  # 8 MB of lag at 132 x 2048 x 16 bytes (4.3 MB) per chunk step


def test_one_cta_per_sm_and_no_plan_beyond_the_sync_warps_merge():
    assert _plan_for((1, 256, 17, 256, 256), 2, ctas_per_sm=2)[0] == SMS  # the 192 KB ring: one CTA per SM
    assert IMPL.stream_plan(32, 8 * 65536, 65536, 2, IMPL._STREAM_MAX_CTAS, 1) is not None
    assert IMPL.stream_plan(32, 8 * 65536, 65536, 2, IMPL._STREAM_MAX_CTAS + 1, 1) is None


def test_no_plan_when_a_vector_would_span_two_channels_or_a_group_has_too_many_channels():
    assert _plan_for((1, 64, 3, 5, 7), 2) is None  # 105 elements x 2 bytes per channel: not a multiple of 16
    assert _plan_for((1, 64, 3, 5, 8), 4) is not None
    assert _plan_for((1, 2048, 1, 8, 8), 2, groups=1) is None  # 2048 channels in one group > the 1024-entry table


def test_no_plan_when_a_slice_spans_more_channels_than_a_coefficient_buffer_holds():
    # 16-byte channels (8 fp16 elements): a 2048-vector chunk of one CTA spans 2048 channels; with 512 channels per
    # group and 8 CTAs a slice spans 64 (fits), with 1024 per group and 2 CTAs it spans 512 (does not)
    assert IMPL.stream_plan(2, 512 * 8, 8, 2, 8, 1, SMEM_OPTIN) is not None
    assert IMPL.stream_plan(2, 1024 * 8, 8, 2, 2, 1, SMEM_OPTIN) is None


@pytest.mark.parametrize("unroll", [1, 2])
@pytest.mark.parametrize("row", STREAM_ROWS, ids=lambda r: r.id)
def test_held_plans_cut_even_chunks_and_hold_every_chunk_from_its_statistics_to_its_apply(row, unroll, held):
    held(unroll)
    x = row.tensors["x"]
    elem = 4 if "float32" in str(x.dtype) else 2
    plan = _plan_for(x.shape, elem)
    if plan is None:
        return  # checked below: only when even one chunk of lag does not fit
    ctas, slice_vecs, chunks, chunk_vecs, lag, _, _, held_slots, held_unroll = plan
    cmax = IMPL._STREAM_THREADS * unroll
    assert held_unroll == unroll and chunk_vecs <= cmax and chunk_vecs % 32 == 0
    assert chunks == -(-slice_vecs // cmax)  # as few chunks as the slot size allows ...
    assert chunks * chunk_vecs - slice_vecs < 32 * chunks  # ... cut evenly: no sliver
    assert lag >= 1 and held_slots == chunks + lag + IMPL._STREAM_HELD_STAGES[unroll]  # the ring's invariant
    assert held_slots * cmax * 16 + IMPL._STREAM_STATIC_SMEM <= SMEM_OPTIN  # the ring and the static arrays fit


def test_held_plan_of_the_largest_group_and_where_held_mode_gives_up(held):
    held(1)
    # 8448 vectors per CTA in 17 chunks of 512 (one vector per thread); 26 slots of 8 KB leave 3 steps of lag
    assert _plan_for((1, 256, 17, 256, 256), 2)[2:5] == (17, 512, 3)
    held(2)
    # 16 KB slots: 13 of them, 9 chunks plus 4 stages in flight leave no lag
    assert _plan_for((1, 256, 17, 256, 256), 2) is None
    held(1, 4 << 20)
    # c512_t9_128x128: 2240 vectors in 5 chunks of 448; 4 MB of lag at 132 x 448 x 16 bytes a step is 5 steps
    assert _plan_for((1, 512, 9, 128, 128), 2)[2:5] == (5, 448, 5)


def test_stream_kernel_compiles_for_hopper_without_spills(hopper_build):
    # the stream kernel for fp16, bf16 and fp32, each in the L2 mode and in held mode at 1 and 2 vectors per thread
    assert hopper_build(IMPL._EXT.csrc / "gn_stream.cu") == 9
