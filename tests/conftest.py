"""Suite-wide options: slow tests sampled in the default run, complete with `-m slow`.

Most of the suite's time goes into Triton's CPU interpreter (task grids, the CPU correctness gate). A test that takes
more than a few seconds is marked `slow`. The default run (`python3 -m pytest`, what CI runs) keeps a deterministic
sample of the slow ones: every slow test function runs, but of a parametrized one only one case in SAMPLE_EVERY
(chosen by a stable hash of its id, so the sample is the same on every machine) and a test with a grid inside uses
the `full_grid` fixture to take a sample of it (`@pytest.mark.slow(inside=True)`: every case runs, each samples itself). `python3 -m pytest -m slow` runs every slow case and every grid
whole; `python3 -m pytest -m "slow or not slow"` runs everything.
"""
from __future__ import annotations

import zlib

import pytest

SAMPLE_EVERY = 4


def _complete(config) -> bool:
    """Slow tests run whole when the marker expression names them (`-m slow`, `-m "slow or not slow"`)."""
    return "slow" in (config.getoption("markexpr", "") or "")


def pytest_configure(config):
    config.addinivalue_line("markers", "slow: takes more than a few seconds on a CPU; sampled unless `-m slow` is given")


def pytest_collection_modifyitems(config, items):
    if _complete(config):
        return
    first: set[str] = set()
    keep, drop = [], []
    for item in items:
        mark = item.get_closest_marker("slow")
        if mark is None or mark.kwargs.get("inside") or not hasattr(item, "callspec"):
            keep.append(item)
            continue
        func = item.nodeid.split("[", 1)[0]
        if func not in first or zlib.crc32(item.nodeid.encode()) % SAMPLE_EVERY == 0:
            first.add(func)  # the first case of each slow function always runs, so none goes untested
            keep.append(item)
        else:
            drop.append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


@pytest.fixture(scope="session")
def full_grid(request) -> bool:
    """True when slow tests run whole (`-m slow`): a test with a grid inside runs all of it, else a sample."""
    return _complete(request.config)

