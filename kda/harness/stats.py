"""Statistics of paired A/B samples: medians, percentile-bootstrap intervals, geomeans."""
from __future__ import annotations

import math

import numpy as np


def summary(samples: list[float]) -> dict:
    a = np.asarray([s for s in samples if s is not None and math.isfinite(s)], dtype=float)
    if a.size == 0:
        return {"n": 0, "median": None, "p10": None, "p90": None, "min": None}
    return {"n": int(a.size), "median": float(np.median(a)), "p10": float(np.percentile(a, 10)),
            "p90": float(np.percentile(a, 90)), "min": float(a.min())}


def paired_speedup(base: list[float], cand: list[float], resamples: int, seed: int) -> dict | None:
    """Median of per-trial ratios base/cand and its 95% percentile-bootstrap interval (resampling trials)."""
    pairs = [(b, c) for b, c in zip(base, cand) if b and c and math.isfinite(b) and math.isfinite(c)]
    if not pairs:
        return None
    r = np.array([b / c for b, c in pairs])
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, r.size, size=(resamples, r.size))
    boots = np.median(r[idx], axis=1)
    lo, hi = np.percentile(boots, [2.5, 97.5])
    return {"median": float(np.median(r)), "ci": [float(lo), float(hi)], "n": int(r.size)}


def geomean(values: list[float]) -> float | None:
    v = [x for x in values if x is not None and x > 0 and math.isfinite(x)]
    return float(math.exp(sum(map(math.log, v)) / len(v))) if v else None


def geomean_ci(rows: list[tuple[list[float], list[float]]], resamples: int, seed: int) -> list[float] | None:
    """Interval of the geomean of per-row median ratios, resampling trials within each row."""
    ratios = []
    for base, cand in rows:
        r = np.array([b / c for b, c in zip(base, cand) if b and c and math.isfinite(b) and math.isfinite(c)])
        if r.size:
            ratios.append(r)
    if not ratios:
        return None
    rng = np.random.default_rng(seed)
    logs = np.zeros(resamples)
    for r in ratios:
        idx = rng.integers(0, r.size, size=(resamples, r.size))
        logs += np.log(np.median(r[idx], axis=1))
    boots = np.exp(logs / len(ratios))
    lo, hi = np.percentile(boots, [2.5, 97.5])
    return [float(lo), float(hi)]
