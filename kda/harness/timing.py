"""The three timers, bound to the functions captured when this module was imported (before any candidate ran).

- device_us: CUDA events around N back-to-back calls, behind one untimed lead call; a device-wide synchronize
  precedes the end stamp, so work a call left on another stream is counted.
- wall_us: host clock around one call followed by a device synchronize: what a single caller waits.
- graph_us: the same N calls captured once in a CUDA graph and replayed: device time without the launch path.

Each takes one call or a list of calls, one per rotated input set (issue 34, attack 2): call i of a sample is
calls[i % len(calls)], the lead call calls[0], so with len(calls) > N no two calls of a sample share inputs or
outputs.
"""
from __future__ import annotations

import math
import time

import torch

_perf = time.perf_counter
_sync = torch.cuda.synchronize
_Event = torch.cuda.Event
_record = torch.cuda.Event.record
_elapsed = torch.cuda.Event.elapsed_time
_event_sync = torch.cuda.Event.synchronize
_replay = torch.cuda.CUDAGraph.replay


class Flusher:
    """Writes a buffer twice the L2 size before a cold sample; a no-op when the configured state is hot."""

    def __init__(self, cold: bool, l2_bytes: int):
        self.buf = torch.empty(max(2 * l2_bytes, 1 << 20), dtype=torch.uint8, device="cuda") if cold else None
        self.value = 0

    def __call__(self) -> None:
        if self.buf is not None:
            self.value = (self.value + 1) % 251
            self.buf.fill_(self.value)


def inner_count(one_call_us: float, bench: dict) -> int:
    """Calls per sample: enough for a sample of about bench.target_sample_us at the baseline's one-call time, within
    [min_inner, max_inner]; one where the L2 is cold (each sample starts from a flushed L2)."""
    if bench["l2"] == "cold":
        return 1
    wanted = math.ceil(bench["target_sample_us"] / max(one_call_us, 1e-3))
    return max(bench["min_inner"], min(bench["max_inner"], wanted))


def _cycle(call):
    """calls[i] for the i-th call of a sample: a list of calls (one per rotated input set, kda.definition.workloads.
    InputSets) is taken in turn; a single callable is every call."""
    calls = call if isinstance(call, (list, tuple)) else [call]
    return lambda i: calls[i % len(calls)]


def device_us(call, n: int, flush: Flusher) -> float:
    """The start stamp is enqueued behind one untimed call: it is taken when that call's work ends, by which time
    the host has queued the first timed call unless the arm is host-bound (and then the host's pace is what the
    sample measures). Stamped on an idle GPU instead, every sample also held the launch path of its first call and
    that call's first touch of its buffers after another arm ran, once per sample whatever N, which on rows timed
    one call per sample was a quarter of the candidate's time (scripts/first_call.py takes a sample apart; its runs
    are in docs/evidence/). The host synchronize ahead of the end stamp stays in every sample; N amortizes it."""
    nth = _cycle(call)
    start, end = _Event(enable_timing=True), _Event(enable_timing=True)
    _sync()
    nth(0)()
    flush()  # after the lead call: a cold sample must not find what the lead call left in the L2
    _record(start)
    for i in range(1, n + 1):
        nth(i)()
    _sync()
    _record(end)
    _event_sync(end)
    return _elapsed(start, end) * 1000.0 / n


def wall_us(call, repeats: int, flush: Flusher) -> float:
    nth = _cycle(call)
    best = []
    for i in range(repeats):
        flush()
        _sync()
        t0 = _perf()
        nth(i + 1)()
        _sync()
        best.append((_perf() - t0) * 1e6)
    best.sort()
    return best[len(best) // 2]


class GraphArm:
    """N calls captured once; replays time pure device work. `error` says why a row could not be captured."""

    def __init__(self, call, n: int):
        self.n = n
        self.graph = None
        self.error = None
        nth = _cycle(call)
        try:
            stream = torch.cuda.Stream()
            stream.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(stream):
                nth(0)()  # one eager call on the capture stream (lazy init, allocator warm-up)
            torch.cuda.current_stream().wait_stream(stream)
            _sync()
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                for i in range(1, n + 1):
                    nth(i)()
            _sync()
            self.graph = g
        except Exception as e:  # noqa: BLE001 - any failure means "not capturable", recorded verbatim
            self.error = f"{type(e).__name__}: {str(e).splitlines()[0][:200] if str(e) else ''}"
            try:
                _sync()
            except Exception:  # noqa: BLE001
                pass

    def sample_us(self, flush: Flusher) -> float | None:
        if self.graph is None:
            return None
        start, end = _Event(enable_timing=True), _Event(enable_timing=True)
        flush()
        _sync()
        _record(start)
        _replay(self.graph)
        _sync()
        _record(end)
        _event_sync(end)
        return _elapsed(start, end) * 1000.0 / self.n


def copy_bandwidth_tbps(nbytes: int = 1 << 30, repeats: int = 7) -> float:
    """Device-to-device copy, counting bytes read plus bytes written."""
    src = torch.empty(nbytes, dtype=torch.uint8, device="cuda").random_()
    dst = torch.empty_like(src)
    for _ in range(2):
        dst.copy_(src)
    times = []
    for _ in range(repeats):
        start, end = _Event(enable_timing=True), _Event(enable_timing=True)
        _sync()
        _record(start)
        dst.copy_(src)
        _record(end)
        _event_sync(end)
        times.append(_elapsed(start, end) / 1000.0)
    times.sort()
    del src, dst
    torch.cuda.empty_cache()
    return 2 * nbytes / times[len(times) // 2] / 1e12
