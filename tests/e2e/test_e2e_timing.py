"""kda/e2e/timing.py on the CPU: everything but the CUDA primitives (timing.Cuda, swapped for the CPU stand-ins
below) runs as on a GPU, on a block at its CPU sizes, and writes a results file that reads back."""
from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from kda.core.errors import KdaError
from kda.core.paths import repo_root
from kda.e2e import alone, check, inventory, timing
from kda.e2e.block import Workload, load_block
from kda.e2e.kernels import KernelSet, arms as all_arms
from kda.harness import results_file
from e2e_cpu_support import CpuStandIn

BLOCK = "qwen_image"
TRIALS = 3




def _as_eager(real):
    """kernel_set with every arm but compile resolved to the PyTorch path under its own name: the arms' bookkeeping
    (pairs, predictions) without their kernels, which do not run on a CPU."""
    def ks(block, arm):
        if arm in ("eager", "compile"):
            return real(block, arm)
        all_arms(block).index(arm)  # an unknown arm still fails
        e = real(block, "eager")
        return KernelSet(arm, e._fns, e.sources)
    return ks


@pytest.fixture
def cpu(monkeypatch):
    # the peers alone (kda.e2e.alone: a child process) have their own tests, test_e2e_alone.py and the red team's
    monkeypatch.setattr(alone, "needed", lambda arms: [])
    dev = CpuStandIn()
    monkeypatch.setattr(timing, "DEV", dev)
    monkeypatch.setattr(timing, "TARGET_SAMPLE_US", 1.0)  # one call per sample: a fast test
    block = load_block(BLOCK)
    dims = block.cpu_dims()
    real = block.workloads()
    monkeypatch.setattr(block, "workloads", lambda: [Workload(w.id, dims, w.rows) for w in real[:2]])
    return dev, block


def _fake_arms(monkeypatch):
    ks = _as_eager(timing.kernel_set)
    monkeypatch.setattr(timing, "kernel_set", ks)
    monkeypatch.setattr(check, "kernel_set", ks)


def test_bench_writes_a_results_file_that_reads_back(cpu, monkeypatch, tmp_path):
    dev, block = cpu
    _fake_arms(monkeypatch)
    only = f"only-{block.tasks[0]}"
    arms = ["upstream", "candidate", "eager", only]
    log = []
    path = timing.bench(block, arms, trials=TRIALS, out=tmp_path, log=log.append)
    assert path == tmp_path / "cpu-stand-in.jsonl.gz"
    recs = results_file.read_records(path)
    assert [r["type"] for r in recs] == ["provenance", "row", "row", "summary"]
    prov, rows, summary = recs[0], recs[1:-1], recs[-1]
    assert prov["block"] == BLOCK and prov["arms"] == arms and prov["not_yet_validated"] and prov["trials"] == TRIALS
    assert summary == {"type": "summary", "rows": 2, "workloads": 2, "complete": True, "rows_failed": [],
                       "arms_failed": []}
    assert [r["id"] for r in rows] == [w.id for w in block.workloads()]
    for row in rows:
        assert set(row["arms"]) == set(arms)
        for a, rec in row["arms"].items():
            assert rec["passed"] and not rec.get("error"), (a, rec)
            assert len(rec["eager_us"]) == TRIALS and len(rec["graph_us"]) == TRIALS
            assert all(v > 0 for v in rec["eager_us"] + rec["graph_us"])
            assert rec["inventory"] == {"total_us": 0, "tasks": {}, "task_calls": {},
                                        "families": dict.fromkeys(inventory.FAMILIES, 0), "kernels": []}
        assert set(row["speedup"]) == {"candidate/upstream", "candidate/eager", f"{only}/upstream"}
        for s in row["speedup"].values():
            assert set(s) == {"eager_us", "graph_us"} and all(v["n"] == TRIALS for v in s.values())
        assert row["predicted"] is None  # no kernels in a CPU inventory: nothing to predict from
        assert row["catalog_rows"] and row["inner"] == 1
    assert any("graph capture" in line for line in log) and any("workload 2/2" in line for line in log)


def test_a_failing_arm_is_recorded_and_the_others_are_timed(cpu, monkeypatch, tmp_path):
    dev, block = cpu
    _fake_arms(monkeypatch)

    def broken(model):
        raise RuntimeError("compile failed")

    monkeypatch.setattr(timing, "_compiled", broken)
    real_graph = dev.graph
    calls = {"n": 0}

    def graph(fn, n):  # the second capture (the candidate's) fails
        calls["n"] += 1
        if calls["n"] == 2:
            raise RuntimeError("capture failed")
        return real_graph(fn, n)

    monkeypatch.setattr(dev, "graph", graph)
    block.workloads = (lambda ws: lambda: ws[:1])(block.workloads())
    path = timing.bench(block, ["eager", "compile", "candidate"], trials=TRIALS, out=tmp_path, log=lambda m: None)
    recs = results_file.read_records(path)
    (row,) = [r for r in recs if r["type"] == "row"]
    comp, cand, eager = (row["arms"][a] for a in ("compile", "candidate", "eager"))
    assert comp == {"passed": False, "error": "RuntimeError: compile failed", "stage": "check"}
    assert cand["graph_error"] == "RuntimeError: capture failed" and cand["graph_us"] == []
    assert len(cand["eager_us"]) == TRIALS and len(eager["eager_us"]) == TRIALS == len(eager["graph_us"])
    assert set(row["speedup"]) == {"candidate/eager"} and set(row["speedup"]["candidate/eager"]) == {"eager_us"}
    assert recs[-1]["arms_failed"] == ["compile"] and recs[-1]["complete"]


def test_a_failing_workload_is_recorded_and_the_next_runs(cpu, monkeypatch, tmp_path):
    dev, block = cpu
    real_build = timing.build
    seen = []

    def build(b, dims, device):
        seen.append(device)
        if len(seen) == 1:
            raise RuntimeError("CUDA out of memory")
        return real_build(b, dims, device)

    monkeypatch.setattr(timing, "build", build)
    path = timing.bench(block, ["eager"], trials=2, out=tmp_path, log=lambda m: None)
    rows = [r for r in results_file.read_records(path) if r["type"] == "row"]
    assert rows[0]["error"] == "RuntimeError: CUDA out of memory" and rows[0]["arms"] == {}
    assert len(rows[1]["arms"]["eager"]["graph_us"]) == 2 and seen == ["cpu", "cpu"]


def test_arms_are_chosen_before_anything_runs(cpu):
    _, block = cpu
    assert "compile" not in timing.select_arms(block, None, ["compile"])
    assert timing.select_arms(block, ["eager", "compile"], ["compile"]) == ["eager"]
    with pytest.raises(Exception, match="no arm 'nope'"):
        timing.select_arms(block, None, ["nope"])
    with pytest.raises(Exception, match="no arm left"):
        timing.select_arms(block, ["eager"], ["eager"])


def test_no_gpu_is_an_error_naming_the_cpu_check(monkeypatch):
    dev = CpuStandIn()
    dev.available = lambda: False
    monkeypatch.setattr(timing, "DEV", dev)
    with pytest.raises(Exception, match="--cpu"):
        timing.bench(load_block(BLOCK), ["eager"])


def test_speedups_follow_the_pairs():
    s = {a: {"eager_us": [2.0, 2.0], "graph_us": [1.0, 1.0]} for a in ("upstream", "candidate", "compile", "only-x")}
    s["candidate"] = {"eager_us": [1.0, 1.0], "graph_us": [0.5, 0.5]}
    got = timing.speedups(s, 0)
    assert set(got) == {"candidate/upstream", "candidate/compile", "only-x/upstream"}
    assert got["candidate/upstream"]["graph_us"]["median"] == 2.0
    assert got["only-x/upstream"]["eager_us"]["median"] == 1.0
    s["latest"] = {"eager_us": [1.5, 1.5], "graph_us": [0.75, 0.75]}  # today's SGLang, op by op
    assert timing.speedups(s, 0)["candidate/latest"]["graph_us"]["median"] == 1.5


def test_a_run_with_the_latest_arm_records_what_it_ran_per_task(cpu, monkeypatch, tmp_path):
    dev, block = cpu
    _fake_arms(monkeypatch)
    path = timing.bench(block, ["upstream", "candidate", "latest"], trials=TRIALS, out=tmp_path, log=lambda m: None)
    prov, row = results_file.read_records(path)[:2]
    assert prov["latest"]["scope"] == timing.LATEST_SCOPE and "fused sites are not modeled" in prov["latest"]["scope"]
    assert set(prov["latest"]["tasks"]) == set(block.tasks)
    assert "candidate/latest" in row["speedup"]
    without = timing.bench(block, ["upstream", "candidate"], trials=TRIALS, out=tmp_path / "b", log=lambda m: None)
    assert "latest" not in results_file.read_records(without)[0]


def test_kda_e2e_on_a_gpu_goes_through_bench(cpu, monkeypatch, tmp_path, capsys):
    """The CLI's GPU path (`kda e2e BLOCK --arm eager --trials 2`) with the stand-ins, writing into tmp_path."""
    from kda import cli
    from kda.e2e.block import BlockDef

    _, block = cpu
    monkeypatch.setattr(cli, "_has_gpu", lambda: True)
    monkeypatch.setattr(BlockDef, "workloads", lambda self, directory=None: block.workloads())
    monkeypatch.setattr(timing, "results_path", lambda b, slug, out=None: tmp_path / results_file.file_name(slug))
    assert cli.main(["e2e", BLOCK, "--skip-arm", "compile", "--arm", "eager", "--trials", "2"]) == 0
    path = tmp_path / "cpu-stand-in.jsonl.gz"
    assert f"wrote {path}" in capsys.readouterr().out
    rows = [r for r in results_file.read_records(path) if r["type"] == "row"]
    assert len(rows) == 2 and all(len(r["arms"]["eager"]["eager_us"]) == 2 for r in rows)


def test_a_task_results_file_of_another_solution_stops_the_run_before_anything_runs(cpu, monkeypatch, tmp_path):
    """Issue 33's bad input: a prediction read from a results file that measured another solution would credit the
    block with kernels it does not run. fuse_scale_shift's committed H200 file measured the solution in the tree;
    with its solution hash changed, the run stops naming the file, block and task, and --no-predict runs it anyway.
    (cutedsl_norm_scale_shift's H200 file predates an import-path edit of its solution: listed either way.)"""
    from kda.e2e.block import load_block
    from kda.harness import provenance as ledger  # where solution_hash lives

    wan = load_block("wan")
    before = timing.stale_task_results(wan, "h200")
    assert not any("task fuse_scale_shift" in p for p in before)
    real = ledger.solution_hash
    monkeypatch.setattr(ledger, "solution_hash", lambda d: "0" * 64 if d.name == "fuse_scale_shift" else real(d))
    (problem,) = set(timing.stale_task_results(wan, "h200")) - set(before)
    assert "fuse_scale_shift/results/h200.jsonl.gz: block wan, task fuse_scale_shift" in problem
    _, block = cpu
    monkeypatch.setattr(timing, "stale_task_results", lambda b, slug: [problem])
    monkeypatch.setattr(timing, "results_path", lambda b, slug, out=None: tmp_path / results_file.file_name(slug))
    with pytest.raises(KdaError, match="--no-predict"):
        timing.bench(block, ["eager"], trials=2)
    assert not list(tmp_path.iterdir())  # nothing written
    path = timing.bench(block, ["eager"], trials=2, predict=False)
    assert all(r.get("predicted") is None for r in results_file.read_records(path) if r["type"] == "row")


def test_a_candidate_that_changes_upstreams_modules_stops_the_run_and_nothing_is_kept(cpu, monkeypatch, tmp_path):
    """The runtime half of docs/e2e.md's threat model: upstream's and 0.5.23's kernels load first, their modules are
    snapshotted (kda.harness.guards.UpstreamWatch), and a change seen after a candidate's load, an arm, the trials
    or the profile stops the run; the results file, rewritten after each workload, is removed."""
    import types

    from kda.e2e import kernels

    dev, block = cpu
    real_ks = _as_eager(timing.kernel_set)
    fake = types.ModuleType("kda_fake_upstream")
    fake.kernel = lambda x: x  # what the upstream arm would launch
    monkeypatch.setitem(sys.modules, "kda_fake_upstream", fake)
    monkeypatch.setattr(kernels, "upstream_modules", lambda block: {"kda_fake_upstream": fake})
    tamper = {"on": False}

    def ks(block, arm):
        if arm == "candidate" and tamper["on"]:
            fake.kernel = lambda x: (time.sleep(0), x)[1]  # a slower stand-in, installed on the candidate's load
        got = real_ks(block, arm)
        if arm != "upstream":
            return got

        def lazy(fn):  # upstream's own first run binds a global (a lazily built table): no tampering
            def call(*args, **kwargs):
                if not hasattr(fake, "table"):
                    fake.table = {}
                return fn(*args, **kwargs)
            return call
        return KernelSet(arm, {s: lazy(f) for s, f in got._fns.items()}, got.sources)

    monkeypatch.setattr(timing, "kernel_set", ks)
    monkeypatch.setattr(check, "kernel_set", ks)
    path = timing.bench(block, ["upstream", "candidate"], trials=TRIALS, out=tmp_path, log=lambda m: None)
    assert results_file.read_records(path)[0]["upstream_watch"] == 1  # the control: watched, untouched, kept
    tamper["on"] = True
    original = fake.kernel
    with pytest.raises(kernels.UpstreamTampered, match="kda_fake_upstream.kernel.*no timing of this run is kept"):
        timing.bench(block, ["upstream", "candidate"], trials=TRIALS, out=tmp_path, log=lambda m: None)
    assert not path.exists() and fake.kernel is original  # put back, and the file of the run gone
    # a run without a candidate-bearing arm has nothing to watch
    assert kernels.watch_upstream(block, ["upstream", "eager"], ks) is None
