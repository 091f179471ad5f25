"""group_norm_silu's investigation tools (diffusion/kernels/group_norm_silu/tools/) on a CPU: the layout variants
scripts/layout_sweep.py loads from there, held_scaling's shape parsing and line fit, held_trace's events against the
kernel header and its summary, unit_order_copy's unit widths and its copy kernel under Triton's interpreter."""
import re
import sys

import pytest

from kda.core.paths import resolve_task
from kda.definition.task import Task
from script_support import load_script

TASK = "group_norm_silu"
IMPL = sys.modules[Task.load(TASK).load_solution().__name__ + ".group_norm_silu"]


def test_layout_sweep_loads_the_tasks_variants_from_its_tools_folder():
    sweep = load_script("layout_sweep")
    module, variants = sweep.VARIANTS[TASK]()
    assert module is IMPL and variants.get("default") == {}
    lays = {v["_SPLIT_FLAT"] for v in variants.values() if "_SPLIT_FLAT" in v}
    assert module._SPLIT_FLAT in lays and module._SPLIT_CONTIGUOUS in lays


SCALING = load_script("held_scaling", TASK)


def test_shapes_parse_and_bad_ones_name_themselves():
    assert SCALING.parse_shape("2x512x9x128x128") == (2, 512, 9, 128, 128)
    with pytest.raises(SystemExit, match="1x512xnine"):
        SCALING.parse_shape("1x512xnine")
    with pytest.raises(SystemExit, match="at least"):
        SCALING.parse_shape("1x512")


def test_line_fit_recovers_a_fixed_cost_and_a_rate():
    # 5 us a call, then 4 TB/s (4 MB a microsecond)
    pts = [(mb, 5.0 + mb / 4.0) for mb in (302.0, 604.0, 1208.0)]
    a, s = SCALING.line_fit(pts)
    assert a == pytest.approx(5.0) and 1 / s == pytest.approx(4.0)
    assert SCALING.line_fit([(302.0, 80.0), (302.0, 81.0)]) == (None, None)  # one size: no line


def test_families_share_everything_but_the_batch():
    assert SCALING.family_key((1, 512, 9, 128, 128)) == SCALING.family_key((4, 512, 9, 128, 128))
    assert SCALING.family_key((1, 512, 9, 128, 128)) != SCALING.family_key((1, 512, 18, 128, 128))


TRACE = load_script("held_trace", TASK)


def test_trace_events_follow_the_kernel_header_in_order():
    header = (IMPL._EXT.csrc / "gn_resident.h").read_text()
    body = re.search(r"enum class HeldTrace : int \{(.*?)\};", header, re.S).group(1)
    names = re.findall(r"^\s*k(\w+),", body, re.M)
    snake = [re.sub(r"(?<!^)(?=[A-Z])", "_", n).lower() for n in names]
    assert tuple(snake) == TRACE.EVENTS
    assert int(re.search(r"kHeldTraceEvents = (\d+);", header).group(1)) == len(TRACE.EVENTS)


def test_trace_summary_is_earliest_median_latest_from_the_first_start_and_drops_stale_events():
    n = len(TRACE.EVENTS)
    base = 10_000_000
    stamps = [[base + 1000 * i + 500 * c for i in range(n)] for c in range(3)]
    stamps[1][3] = 5  # an earlier call's stamp: before this call began
    stamps.append([0] * n)  # a CTA past the plan's grid: not read
    s = TRACE.summarize(stamps, 3)
    assert s["start"] == (0.0, 0.5, 1.0)
    assert s["ready"] == pytest.approx((1.0, 1.5, 2.0))
    assert "first_stats" not in s and len(s) == n - 1


def test_trace_set_takes_integer_knobs_the_module_has_and_names_a_bad_one():
    import types

    mod = types.SimpleNamespace(__name__="m", _HELD_PREFETCH_BYTES=32768)
    TRACE.apply_sets(mod, ["_HELD_PREFETCH_BYTES=0"])
    assert mod._HELD_PREFETCH_BYTES == 0
    with pytest.raises(SystemExit, match="_NO_SUCH=1"):
        TRACE.apply_sets(mod, ["_NO_SUCH=1"])
    with pytest.raises(SystemExit, match="NAME=INT"):
        TRACE.apply_sets(mod, ["_HELD_PREFETCH_BYTES=lots"])


UOC = load_script("unit_order_copy", TASK)


def test_a_shape_needs_five_sizes():
    assert UOC.parse_shape("1x512x9x128x128") == (1, 512, 9, 128, 128)
    with pytest.raises(SystemExit, match="five sizes"):
        UOC.parse_shape("1x512x9x128")


def test_unit_widths_keep_16_byte_pieces_and_units_that_fit():
    # C=128, G=32: a group is 4 channels, 8 bytes of fp16 a position: one group alone is below a 16-byte piece
    assert UOC.unit_widths((1, 128, 1, 8, 8), 32, 2, 1e6) == [8, 16, 32, 64, 128]
    # C=512: 16 channels a group; 147456 positions x 32 B = 4.7 MB a group, so 24 MB allows 1, 2 and 4 groups
    assert UOC.unit_widths((1, 512, 9, 128, 128), 32, 2, 24.0) == [16, 32, 64]
    assert UOC.unit_widths((1, 256, 17, 256, 256), 32, 2, 10.0) == []  # 17.8 MB for one group
    with pytest.raises(SystemExit, match="multiple of --groups"):
        UOC.unit_widths((1, 100, 1, 4, 4), 32, 2, 24.0)


_TILE_COPY = f"""
import torch, sys
sys.path.insert(0, {str(resolve_task(TASK) / "tools")!r})
sys.path.insert(1, 'scripts')
import unit_order_copy as u
x = torch.randn(300, 64, dtype=torch.float16)
for width in (8, 16, 64):
    for major in (True, False):
        y = torch.zeros_like(x)
        u.tile_copy(x, y, width, major, tile_bytes=512)
        assert torch.equal(x, y), (width, major)
try:
    u.tile_copy(x, torch.zeros_like(x), 24, True)
except ValueError as e:
    assert 'width 24' in str(e)
else:
    raise AssertionError('width 24 accepted')
print('ok')
"""


def test_tile_copy_copies_in_both_orders_under_the_interpreter(interpreted):
    interpreted(_TILE_COPY)
