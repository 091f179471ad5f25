"""kda/harness/stats.py: paired bootstrap speedups, geomeans and summaries."""
import math

import numpy as np
import pytest

from kda.harness.stats import geomean, geomean_ci, paired_speedup, summary


def synthetic(ratio, n, seed, noise=0.05):
    """Paired samples: a shared per-trial drift (both arms) and independent noise; base/cand = ratio in expectation."""
    rng = np.random.default_rng(seed)
    drift = rng.uniform(0.8, 1.2, n)
    cand = 10.0 * drift * np.exp(rng.normal(0, noise, n))
    base = ratio * 10.0 * drift * np.exp(rng.normal(0, noise, n))
    return base.tolist(), cand.tolist()


@pytest.mark.parametrize("ratio", [0.5, 1.0, 1.37, 3.0])
def test_paired_speedup_recovers_known_ratio(ratio):
    base, cand = synthetic(ratio, 41, seed=0)
    s = paired_speedup(base, cand, resamples=2000, seed=0)
    assert s["n"] == 41
    lo, hi = s["ci"]
    assert lo <= s["median"] <= hi
    assert lo < ratio < hi
    assert s["median"] == pytest.approx(ratio, rel=0.05)


def test_paired_speedup_ci_coverage():
    """Over many synthetic datasets the 95% interval holds the true ratio about 95% of the time."""
    hits, n_sets = 0, 200
    for i in range(n_sets):
        base, cand = synthetic(1.37, 31, seed=1000 + i, noise=0.1)
        lo, hi = paired_speedup(base, cand, resamples=1000, seed=i)["ci"]
        hits += lo < 1.37 < hi
    assert 0.85 * n_sets <= hits <= n_sets


def test_pairing_cancels_shared_drift():
    # Drift across trials is huge but shared by both arms: the paired ratio is exact.
    drift = [1, 10, 100, 1000, 5, 50]
    s = paired_speedup([2.0 * d for d in drift], list(map(float, drift)), resamples=500, seed=1)
    assert s["median"] == pytest.approx(2.0) and s["ci"] == pytest.approx([2.0, 2.0])


def test_ci_narrows_with_more_samples():
    widths = []
    for n in (9, 41, 401):
        base, cand = synthetic(1.5, n, seed=7, noise=0.1)
        lo, hi = paired_speedup(base, cand, resamples=2000, seed=3)["ci"]
        widths.append(hi - lo)
    assert widths[0] > widths[1] > widths[2] > 0


def test_paired_speedup_deterministic_per_seed():
    base, cand = synthetic(1.2, 21, seed=11, noise=0.2)
    assert paired_speedup(base, cand, 1000, 5) == paired_speedup(base, cand, 1000, 5)


def test_paired_speedup_drops_bad_pairs():
    s = paired_speedup([2.0, None, 4.0, math.inf, 0.0, 6.0, math.nan],
                       [1.0, 1.0, 2.0, 1.0, 1.0, None, 1.0], resamples=200, seed=0)
    assert s["n"] == 2 and s["median"] == pytest.approx(2.0)
    assert paired_speedup([], [], 100, 0) is None
    assert paired_speedup([None, math.inf], [1.0, 1.0], 100, 0) is None


def test_geomean():
    assert geomean([2.0, 8.0]) == pytest.approx(4.0)
    assert geomean([3.0]) == pytest.approx(3.0)
    assert geomean([]) is None
    assert geomean([None, math.inf, 0.0, -1.0, math.nan]) is None
    assert geomean([None, 2.0, math.inf, 8.0, 0.0]) == pytest.approx(4.0)


def test_geomean_ci_contains_true_geomean():
    rows = [synthetic(r, 31, seed=i) for i, r in enumerate((1.2, 2.0, 0.9, 1.5))]
    lo, hi = geomean_ci(rows, resamples=2000, seed=0)
    true = math.exp(sum(map(math.log, (1.2, 2.0, 0.9, 1.5))) / 4)
    assert lo < true < hi and hi - lo < 0.2


def test_geomean_ci_edges():
    assert geomean_ci([], 100, 0) is None
    assert geomean_ci([([None], [1.0]), ([1.0], [0.0])], 100, 0) is None
    # a row with no valid pair is skipped, the others still count
    lo, hi = geomean_ci([([2.0, 2.0], [1.0, 1.0]), ([math.inf], [1.0])], 100, 0)
    assert lo == pytest.approx(2.0) and hi == pytest.approx(2.0)


def test_summary():
    s = summary([5.0, 1.0, 3.0, None, math.inf, math.nan])
    assert s["n"] == 3 and s["median"] == 3.0 and s["min"] == 1.0
    assert 1.0 <= s["p10"] <= s["median"] <= s["p90"] <= 5.0
    for empty in ([], [None], [math.inf, -math.inf, math.nan]):
        assert summary(empty) == {"n": 0, "median": None, "p10": None, "p90": None, "min": None}
