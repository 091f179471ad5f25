"""Sampling a grid inside a slow test (see tests/conftest.py): the whole grid under `-m slow`, a sample otherwise."""
from __future__ import annotations

SAMPLE_EVERY = 4


def sample(cases, full: bool, every: int = SAMPLE_EVERY) -> list:
    """All of `cases` when `full`, else the first and every `every`-th after it: deterministic, never empty."""
    cases = list(cases)
    return cases if full else cases[::every]
