"""kda/harness/runner.py's comparison of the baseline beside the candidate with the baseline alone: a verdict in hot
runs, a note in cold-L2 runs, where both metrics of a small row time the host's launch against the flush."""
import subprocess
import sys
from types import SimpleNamespace

import pytest

from kda.harness import runner

B = {"clean_baseline_samples": 5, "clean_baseline_max_ratio": 1.6, "row_timeout_s": 10.0}


class _Clean:
    def __init__(self, reply):
        self.reply, self.asked = reply, []

    def ask(self, row, inner, samples, timeout):
        self.asked.append((row, inner, samples))
        return self.reply


@pytest.fixture
def worker():
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    yield SimpleNamespace(proc=proc)
    proc.kill()
    proc.wait()


def _raw():
    return {"inner": 8, "arms": {"baseline": {"device_us": [20.0] * 5, "graph_us": [10.0] * 5}}}


def test_a_baseline_twice_as_fast_alone_fails_a_hot_run(worker):
    raw, clean = _raw(), _Clean({"type": "clean", "device_us": [10.0] * 5, "graph_us": [5.0] * 5})
    runner._time_alone(clean, worker, "row", raw, B)
    assert clean.asked == [("row", 8, 5)]
    assert "baseline_slowed" in raw and raw["clean_baseline"]["graph_us"]["ratio"] == pytest.approx(2.0)


def test_in_a_cold_run_the_same_numbers_are_recorded_and_noted_not_judged(worker):
    raw, clean = _raw(), _Clean({"type": "clean", "device_us": [10.0] * 5, "graph_us": [5.0] * 5})
    runner._time_alone(clean, worker, "row", raw, B, judged=False)
    assert "baseline_slowed" not in raw
    assert raw["clean_baseline"]["device_us"]["ratio"] == pytest.approx(2.0)
    assert "recorded, not judged: a cold-L2 run" in raw["notes"][0]


def test_the_candidates_worker_runs_again_after_the_baseline_alone(worker):
    import os
    import time

    raw, clean = _raw(), _Clean(None)
    runner._time_alone(clean, worker, "row", raw, B)
    time.sleep(0.1)
    state = open(f"/proc/{worker.proc.pid}/stat").read().split(")")[1].split()[0]
    assert state != "T", "left stopped"
    assert raw["notes"] == ["baseline alone: no answer from the clean worker; not compared"]
    assert os.path.exists(f"/proc/{worker.proc.pid}")


def test_todays_release_slowed_beside_the_candidate_fails_the_row_as_peer_slowed(worker):
    """The peer `latest` (issue 40) is timed alone in the same clean worker: a candidate that slowed it would inflate
    its figures over the best peer and over today's SGLang. Same rule as the baseline's; the baseline here is fine."""
    raw = _raw()
    raw["arms"]["latest"] = {"device_us": [30.0] * 5, "graph_us": [16.0] * 5}
    clean = _Clean({"type": "clean", "device_us": [20.0] * 5, "graph_us": [10.0] * 5,
                    "latest": {"device_us": [15.0] * 5, "graph_us": [8.0] * 5}})
    runner._time_alone(clean, worker, "row", raw, B)
    assert "baseline_slowed" not in raw
    assert raw["latest_slowed"].startswith("today's release (latest) timed alone ran faster")
    assert raw["clean_latest"]["graph_us"]["ratio"] == pytest.approx(2.0)
    cold = _raw()
    cold["arms"]["latest"] = raw["arms"]["latest"]
    runner._time_alone(clean, worker, "row", cold, B, judged=False)
    assert "latest_slowed" not in cold and "recorded, not judged" in cold["notes"][0]
    honest = _raw()  # no latest arm beside the candidate (a task pinning none): nothing compared
    runner._time_alone(clean, worker, "row", honest, B)
    assert "clean_latest" not in honest


def test_only_the_clean_worker_compiles_into_caches_of_its_own(monkeypatch):
    """A binary a candidate planted under a baseline kernel's key in the shared caches would slow the baseline in
    both workers alike; the clean worker builds its own, in folders the candidate's worker is never told."""
    monkeypatch.setenv("TRITON_CACHE_DIR", "/shared/triton")
    monkeypatch.setenv("TVM_FFI_CACHE_DIR", "/shared/tvm-ffi")
    clean = runner.worker_env(runner.RunOptions(mode="bench", device="cpu", clean=True), "/tmp/kda-worker-x.log")
    beside = runner.worker_env(runner.RunOptions(mode="bench", device="cpu"), "/tmp/kda-worker-y.log")
    assert {clean[v] for v in runner.FRESH_CACHES} == {"/tmp/kda-worker-x.log.triton_cache_dir",
                                                       "/tmp/kda-worker-x.log.tvm_ffi_cache_dir"}
    assert beside["TRITON_CACHE_DIR"] == "/shared/triton" and beside["TVM_FFI_CACHE_DIR"] == "/shared/tvm-ffi"
    assert str(runner.repo_root()) in clean["PYTHONPATH"].split(":")
