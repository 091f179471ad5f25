"""The order of operations in a device_us sample, with the CUDA primitives replaced by recorders (no GPU needed)."""
import pytest

from kda.harness import timing


class FakeEvent:
    def __init__(self, enable_timing=False):
        self.name = None


@pytest.fixture
def trace(monkeypatch):
    log = []
    events = []

    def make_event(enable_timing=False):
        e = FakeEvent(enable_timing)
        e.name = "start" if not events else "end"
        events.append(e)
        return e

    monkeypatch.setattr(timing, "_Event", make_event)
    monkeypatch.setattr(timing, "_sync", lambda: log.append("sync"))
    monkeypatch.setattr(timing, "_record", lambda e: log.append(f"record {e.name}"))
    monkeypatch.setattr(timing, "_event_sync", lambda e: log.append(f"wait {e.name}"))
    monkeypatch.setattr(timing, "_elapsed", lambda a, b: 2.5)  # ms
    return log


class Flush:
    def __init__(self, log):
        self.log = log

    def __call__(self):
        self.log.append("flush")


def test_device_us_stamps_the_start_behind_one_untimed_call(trace):
    us = timing.device_us(lambda: trace.append("call"), 3, Flush(trace))
    assert trace == ["sync", "call", "flush", "record start", "call", "call", "call", "sync", "record end",
                     "wait end"]
    assert us == pytest.approx(2500.0 / 3)


def test_device_us_flushes_after_the_lead_call_so_a_cold_sample_stays_cold(trace):
    timing.device_us(lambda: trace.append("call"), 1, Flush(trace))
    lead, flush, start = trace.index("call"), trace.index("flush"), trace.index("record start")
    assert lead < flush < start
    assert trace[start:].count("call") == 1


def test_flusher_writes_only_when_cold():
    hot = timing.Flusher(False, 1 << 20)
    hot()
    assert hot.buf is None and hot.value == 0


BENCH = {"l2": "hot", "target_sample_us": 4000.0, "min_inner": 4, "max_inner": 1024}


def test_inner_count_fills_a_sample_at_the_baseline_time():
    assert timing.inner_count(40.0, BENCH) == 100
    assert timing.inner_count(0.5, BENCH) == 1024  # capped
    assert timing.inner_count(1e-9, BENCH) == 1024  # a zero reading does not divide by zero


def test_inner_count_keeps_min_inner_calls_where_the_baseline_is_slow():
    # A 10 ms baseline would fill a sample with one call; the end stamp's synchronize is then shared by min_inner.
    assert timing.inner_count(10_000.0, BENCH) == 4
    assert timing.inner_count(10_000.0, {**BENCH, "min_inner": 1}) == 1


def test_inner_count_is_one_when_the_l2_is_cold():
    assert timing.inner_count(40.0, {**BENCH, "l2": "cold"}) == 1


def test_a_list_of_calls_is_taken_in_turn_lead_call_first():
    """Rotated input sets: call i of a sample is calls[i % len(calls)], the lead call calls[0]; with more sets than a
    sample has calls, no two calls of a sample share a set."""
    from kda.harness.timing import _cycle

    seen = []
    calls = [lambda i=i: seen.append(i) for i in range(5)]
    nth = _cycle(calls)
    for i in range(5):
        nth(i)()
    assert seen == [0, 1, 2, 3, 4] and nth(7) is calls[2]
    one = lambda: None  # noqa: E731
    assert _cycle(one)(3) is one
