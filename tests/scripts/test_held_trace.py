"""scripts/held_trace.py on a CPU: its event names follow the kernel's HeldTrace, and its summary of the stamps."""
import re
import sys

import pytest

from kda.definition.task import Task
from script_support import load_script

TRACE = load_script("held_trace")


def test_events_follow_the_kernel_header_in_order():
    impl = sys.modules[Task.load("group_norm_silu").load_solution().__name__ + ".group_norm_silu"]
    header = (impl._EXT.csrc / "gn_resident.h").read_text()
    body = re.search(r"enum class HeldTrace : int \{(.*?)\};", header, re.S).group(1)
    names = re.findall(r"^\s*k(\w+),", body, re.M)
    snake = [re.sub(r"(?<!^)(?=[A-Z])", "_", n).lower() for n in names]
    assert tuple(snake) == TRACE.EVENTS
    assert int(re.search(r"kHeldTraceEvents = (\d+);", header).group(1)) == len(TRACE.EVENTS)


def test_summary_is_earliest_median_latest_from_the_first_start_and_drops_stale_events():
    n = len(TRACE.EVENTS)
    base = 10_000_000
    stamps = [[base + 1000 * i + 500 * c for i in range(n)] for c in range(3)]
    stamps[1][3] = 5  # an earlier call's stamp: before this call began
    stamps.append([0] * n)  # a CTA past the plan's grid: not read
    s = TRACE.summarize(stamps, 3)
    assert s["start"] == (0.0, 0.5, 1.0)
    assert s["ready"] == pytest.approx((1.0, 1.5, 2.0))
    assert "first_stats" not in s and len(s) == n - 1


def test_set_takes_integer_knobs_the_module_has_and_names_a_bad_one():
    import types

    mod = types.SimpleNamespace(__name__="m", _HELD_PREFETCH_BYTES=32768)
    TRACE.apply_sets(mod, ["_HELD_PREFETCH_BYTES=0"])
    assert mod._HELD_PREFETCH_BYTES == 0
    with pytest.raises(SystemExit, match="_NO_SUCH=1"):
        TRACE.apply_sets(mod, ["_NO_SUCH=1"])
    with pytest.raises(SystemExit, match="NAME=INT"):
        TRACE.apply_sets(mod, ["_HELD_PREFETCH_BYTES=lots"])
