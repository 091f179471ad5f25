"""Worker-bound test work started when the session starts, run on the cores the single-threaded rest of the suite
leaves idle; a test module's fixture takes each result when its test comes (tests/conftest.py starts them).

A test module opts in with `early_jobs(items, config) -> {key: callable}` (items: the session's selected items of
that module). `take(key, fn)` returns the started job's result, or runs `fn` itself when nothing was started (a
single test run by node id, say). Either way a job runs once and its exception is returned, not raised, so the
test that needs it reports it.
"""
from __future__ import annotations

import os
from concurrent.futures import Future, ThreadPoolExecutor

_pool: ThreadPoolExecutor | None = None
_jobs: dict[object, Future] = {}


def _guard(fn):
    def run():
        try:
            return fn()
        except Exception as e:  # noqa: BLE001 - handed to the test that needs it
            return e
    return run


def start(jobs: dict) -> None:
    global _pool
    if not jobs:
        return
    if _pool is None:
        # The workers are processes of their own (Triton's interpreter, one thread each): as many at once as cores.
        _pool = ThreadPoolExecutor(max_workers=max(1, os.cpu_count() or 1), thread_name_prefix="early")
    for key, fn in jobs.items():
        if key not in _jobs:
            _jobs[key] = _pool.submit(_guard(fn))


def take(key, fn):
    job = _jobs.get(key)
    return job.result() if job is not None else _guard(fn)()


def shutdown() -> None:
    if _pool is not None:
        _pool.shutdown(wait=True, cancel_futures=True)
