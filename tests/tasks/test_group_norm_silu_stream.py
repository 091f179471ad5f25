"""group_norm_silu v6: the L2 stream kernel's plan (pure integer math, checked for every contiguous production row it
takes) and its compilation for Hopper without spills where nvcc is installed. Its numbers are checked on a GPU by
`kda check` and timed by `kda bench`; the dispatch on CPU tensors is covered by test_group_norm_silu_resident.py."""
import math
import sys

import pytest

from kda.definition.task import Task

TASK = Task.load("group_norm_silu")
SOLUTION = TASK.load_solution()
IMPL = sys.modules[SOLUTION.__name__ + ".group_norm_silu"]
SMS = 132  # H200 multiprocessors


def _x_bytes(row):
    x = row.tensors["x"]
    return math.prod(x.shape) * (4 if "float32" in str(x.dtype) else 2)


def _plan_for(shape, dtype_bytes, groups=32, ctas_per_sm=1):
    B, C = shape[0], shape[1]
    S = math.prod(shape[2:])
    return IMPL.stream_plan(B * groups, (C // groups) * S, S, dtype_bytes, SMS, ctas_per_sm)


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
    ctas, slice_vecs, chunks, chunk_vecs, lag, hints = plan
    group_vecs = (x.shape[1] // 32) * math.prod(x.shape[2:]) * elem // 16
    assert ctas == SMS  # one CTA per SM (the 192 KB ring), every CTA resident
    assert ctas * slice_vecs >= group_vecs > ctas * (slice_vecs - 32)  # covered, no CTA a warp of vectors short
    assert slice_vecs % 32 == 0  # slices start on 512-byte boundaries
    assert chunk_vecs == IMPL._STREAM_THREADS * IMPL._STREAM_UNROLL  # full chunks but a slice's last
    assert (chunks - 1) * chunk_vecs < slice_vecs <= chunks * chunk_vecs  # no empty chunk
    assert lag >= 1 and (lag - 1) * 16 * chunk_vecs * ctas < IMPL._STREAM_LAG_BYTES <= lag * 16 * chunk_vecs * ctas
    assert hints == IMPL._STREAM_HINTS


def test_the_largest_group_is_read_in_five_chunks_per_cta():
    ctas, slice_vecs, chunks, chunk_vecs, lag, _ = _plan_for((1, 256, 17, 256, 256), 2)
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


def test_stream_kernel_compiles_for_hopper_without_spills(hopper_build):
    # the stream kernel for fp16, bf16 and fp32
    assert hopper_build(IMPL._EXT.csrc / "gn_stream.cu") == 3
