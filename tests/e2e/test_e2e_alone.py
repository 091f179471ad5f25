"""kda/e2e/alone.py: which arms run alone, and the judgement of each workload's peers beside the candidate
against the same peers timed in a process that never imported it (the child itself: tests/e2e/test_e2e_redteam.py)."""
import pytest

from kda.e2e import alone


def test_the_peers_run_alone_only_where_a_candidate_ran_beside_them():
    assert alone.needed(["upstream", "candidate", "eager", "compile"]) == ["upstream", "eager"]
    assert alone.needed(["upstream", "latest", "only-norm_infer"]) == ["upstream", "latest"]
    assert alone.needed(["upstream", "eager"]) == [] and alone.needed(["candidate", "eager"]) == []
    cmd = alone.command("wan", ["upstream", "eager"], 5, "/tmp/x")
    assert cmd[1:] == ["-m", "kda.e2e.alone_child", "wan", "--arms", "upstream,eager", "--trials", "5", "--out", "/tmp/x"]


def test_the_child_refuses_a_candidate_arm():
    from kda.e2e import alone_child

    with pytest.raises(SystemExit, match="would import a candidate"):
        alone_child.main(["wan", "--arms", "upstream,candidate", "--trials", "1", "--out", "/tmp/never"])


def _row(rid, graph, eager, calls=None, speedup=True):
    inv = {"total_us": 1.0, "tasks": {}, "task_calls": calls} if calls is not None else None
    return {"id": rid, "speedup": {"candidate/upstream": {"graph_us": {"median": 1.1}}} if speedup else {},
            "arms": {"upstream": {"graph_us": graph, "eager_us": eager, "inventory": inv}}}


def test_a_peer_slower_or_doing_more_beside_the_candidate_has_the_workloads_speedups_withheld():
    calls = {"norm_infer": 4}
    rows = [_row("same", [10.0, 10.2, 9.9], [20.0] * 3, calls),
            _row("slow", [13.0] * 3, [20.0] * 3, calls),  # graph_us 1.3x its time alone
            _row("more", [10.0] * 3, [20.0] * 3, {"norm_infer": 8}),  # twice the launches at its sites
            _row("gone", [10.0] * 3, [20.0] * 3, calls),  # the child has no such workload
            _row("failed", [], [], calls, speedup=False)]  # never timed: nothing to judge
    alone_rows = {r: _row(r, [10.0] * 3, [20.0] * 3, calls) for r in ("same", "slow", "more", "failed")}
    alone.judge_rows(rows, alone_rows, ["upstream", "eager"])
    same, slow, more, gone, failed = rows
    assert same["speedup"] and "error" not in same and same["alone"]["upstream"]["graph_us"]["ratio"] == 1.0
    assert same["alone"]["upstream"]["site_calls"] == {"beside": calls, "alone": calls}
    assert slow["speedup"] == {} and "candidate/upstream" in slow["speedup_withheld"]
    assert "upstream graph_us: 1.30x its time alone (at most 1.15)" in slow["error"]
    assert more["speedup"] == {} and "norm_infer 8 beside, 4 alone" in more["error"]
    assert gone["speedup"] == {} and "not timed alone" in gone["error"]
    assert "alone" not in failed and "error" not in failed


def test_a_child_that_failed_withholds_every_timed_workload():
    rows = [_row("w", [10.0], [20.0], {"t": 1})]
    alone.judge_rows(rows, None, ["upstream"], "exited 1: CUDA out of memory")
    assert rows[0]["speedup"] == {} and "could not be timed alone: exited 1: CUDA out of memory" in rows[0]["error"]


def test_counted_launches_in_one_process_only_are_a_problem_not_a_pass():
    beside, lone = _row("w", [10.0], [20.0], {"t": 1}), _row("w", [10.0], [20.0], None)
    _, problems = alone.compare(beside, lone, ["upstream"])
    assert problems == ["upstream: site launches counted in one process only"]


def test_the_child_builds_its_kernels_into_caches_of_its_own(tmp_path, monkeypatch):
    """A candidate imported in the parent could have written a slower binary under an upstream kernel's key in
    the shared caches; a child reading them would agree with the parent on a slowed peer."""
    monkeypatch.setenv("TRITON_CACHE_DIR", "/shared/triton")
    monkeypatch.setenv("TVM_FFI_CACHE_DIR", "/shared/tvm-ffi")
    env = alone.child_env(tmp_path)
    for var in alone.FRESH_CACHES:
        assert env[var].startswith(str(tmp_path)) and not env[var].startswith("/shared")
    assert env["PYTHONUNBUFFERED"] == "1" and env["PATH"] == __import__("os").environ["PATH"]
