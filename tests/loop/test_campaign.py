"""`kda campaign status|clean` over several runs in a throwaway clone, and `kda promote` (refusal without a GPU; a
fake gate for the pass and fail paths, since the real one needs a GPU)."""
import json
import shutil
from pathlib import Path

import pytest

from agentrun_support import ROOT, TASK_PATH, git, launch, make_clone, worktree_of
from kda.loop import agentrun, campaign, promote
from kda import cli
from kda.evidence import ledger
from kda.loop.gate import GateResult
from kda.harness import results_file

RUNS = {"merged": "20260103T000000Z-0001", "ended": "20260103T000000Z-0002", "open": "20260103T000000Z-0003",
        "dirty": "20260103T000000Z-0004"}
RESULTS = ROOT / TASK_PATH / "results" / "h200.jsonl.gz"
SUMMARY = results_file.read_records(RESULTS)[-1]  # the committed run: expected numbers come from it
HEAD = SUMMARY["metrics"]["device_us"]["vs_baseline"]


@pytest.fixture
def repo(tmp_path, monkeypatch):
    repo = make_clone(tmp_path)
    for run_id in RUNS.values():
        p = launch(repo, tmp_path, KDA_RUN_ID=run_id, KDA_NO_CLAUDE="1")
        assert p.returncode == 0, p.stderr
    monkeypatch.setenv("KDA_ROOT", str(repo))
    monkeypatch.setenv("KDA_AUTHOR", "tester")
    return repo


def wt(tmp_path, kind):
    return worktree_of(tmp_path, RUNS[kind])


def commit_in(path: Path, msg: str):
    git(path, "add", "-A")
    git(path, "commit", "-q", "-m", msg)


def end_run(path: Path, why: str):
    m = agentrun.load_manifest(path)
    m["ended"] = {"time_utc": "2026-01-03T01:00:00Z", "why": why, "round": 8}
    agentrun.save_manifest(path, m)


@pytest.fixture
def campaign_state(repo, tmp_path):
    # merged: a commit of its own, merged into main
    sol = wt(tmp_path, "merged") / TASK_PATH / "solution" / "scale_shift.py"
    sol.write_text(sol.read_text() + "# merged improvement\n")
    (wt(tmp_path, "merged") / TASK_PATH / "results").mkdir(exist_ok=True)
    shutil.copy2(RESULTS, wt(tmp_path, "merged") / TASK_PATH / "results" / "h200.jsonl.gz")
    commit_in(wt(tmp_path, "merged"), "merged run")
    git(repo, "merge", "-q", "--ff-only", f"kda/fuse_scale_shift/{RUNS['merged']}")
    # ended: a failed attempt, never merged
    sol = wt(tmp_path, "ended") / TASK_PATH / "solution" / "scale_shift.py"
    sol.write_text(sol.read_text() + "# failed attempt\n")
    commit_in(wt(tmp_path, "ended"), "failed attempt")
    end_run(wt(tmp_path, "ended"), "round limit: 8 of 8 rounds used, gate FAIL")
    # dirty: ended, with uncommitted work
    end_run(wt(tmp_path, "dirty"), "passed")
    (wt(tmp_path, "dirty") / TASK_PATH / "solution" / "wip.py").write_text("x = 1\n")
    return repo


def test_status(campaign_state, tmp_path, capsys):
    repo = campaign_state
    s = {x["task"]: x for x in campaign.status(repo)}["fuse_scale_shift"]
    runs = {r.run_id: r for r in s["runs"]}
    assert set(runs) == set(RUNS.values())
    assert runs[RUNS["merged"]].merged and not runs[RUNS["open"]].merged and not runs[RUNS["open"]].over
    assert runs[RUNS["ended"]].ended.startswith("round limit") and runs[RUNS["ended"]].rounds == 0
    assert runs[RUNS["dirty"]].dirty
    best = s["best"]["h200"]
    assert best["geomean"] == pytest.approx(HEAD["geomean"])
    assert best["all_pass"] == (SUMMARY["rows_passed"] == SUMMARY["rows_total"])
    assert s["promoted"] is None
    assert cli.main(["campaign", "status"]) == 0
    out = capsys.readouterr().out
    assert "fuse_scale_shift" in out and f"h200: {HEAD['geomean']:.3f}x" in out and RUNS["open"] in out


def test_clean_is_a_dry_run_by_default_and_keeps_what_it_must(campaign_state, tmp_path, capsys):
    repo = campaign_state
    before = git(repo, "for-each-ref", "--format=%(refname:short)")
    assert cli.main(["campaign", "clean"]) == 1  # 1: the dirty worktree was refused
    out = capsys.readouterr().out
    assert f"would clean kda/fuse_scale_shift/{RUNS['merged']} (merged into HEAD)" in out
    assert f"would clean kda/fuse_scale_shift/{RUNS['ended']} (run ended (round limit" in out
    assert f"refuse kda/fuse_scale_shift/{RUNS['dirty']}" in out and "wip.py" in out
    assert RUNS["open"] not in out and "dry run: nothing was changed" in out
    assert git(repo, "for-each-ref", "--format=%(refname:short)") == before

    assert cli.main(["campaign", "clean", "--yes"]) == 1
    refs = set(git(repo, "for-each-ref", "--format=%(refname:short)").splitlines())
    for kind in ("merged", "ended"):
        assert f"kda/fuse_scale_shift/{RUNS[kind]}" not in refs and f"kda-base/fuse_scale_shift/{RUNS[kind]}" not in refs
        assert not wt(tmp_path, kind).exists()
    assert f"kda-archive/fuse_scale_shift/{RUNS['ended']}" in refs  # the failed attempt is kept as a tag
    assert f"kda-archive/fuse_scale_shift/{RUNS['merged']}" not in refs
    for kind in ("open", "dirty"):
        assert f"kda/fuse_scale_shift/{RUNS[kind]}" in refs and wt(tmp_path, kind).is_dir()


# ---- promote -------------------------------------------------------------------------------------------------

def test_promote_refuses_without_a_gpu(repo, tmp_path):
    out = promote.promote("fuse_scale_shift", f"kda/fuse_scale_shift/{RUNS['open']}", gpu_check=lambda: False)
    assert not out.promoted and out.exit_code == 1
    assert "no CUDA GPU is visible" in out.message and "stays unpromoted" in out.message
    assert not (repo / TASK_PATH / "docs" / "review").exists() and ledger.read(repo / TASK_PATH) == []


def fake_gate(status: str, seen: dict):
    def gate(task, base):
        seen.update(task_path=task.path, base=base)
        results = task.path / "results" / "h200.jsonl.gz"
        results.parent.mkdir(exist_ok=True)
        shutil.copy2(RESULTS, results)
        summ = results_file.read_records(RESULTS)[-1]
        return GateResult(task=task.name, status=status, gpu="h200", results_path=results,
                          findings=[] if status == "PASS" else ["min_row: row r is at 0.900x, below 0.97"],
                          metrics=ledger.metrics_from_summary(summ, {"gpu_slug": "h200"}))
    return gate


def candidate(tmp_path) -> str:
    w = wt(tmp_path, "open")
    sol = w / TASK_PATH / "solution" / "scale_shift.py"
    sol.write_text(sol.read_text() + "# candidate line for review\n")
    ledger.append(w / TASK_PATH, {"kind": "decision", "decision": "IMPROVEMENT", "round": 1, "author": "agent",
                                  "hypothesis": "2-D loads (predicted +10%)", "change": "c", "reason": "1.15x"})
    commit_in(w, "candidate")
    return f"kda/fuse_scale_shift/{RUNS['open']}"


def test_promote_writes_the_review_and_a_promoted_entry(repo, tmp_path):
    ref = candidate(tmp_path)
    (wt(tmp_path, "open") / TASK_PATH / "docs" / "profile" / "h200").mkdir(parents=True, exist_ok=True)
    seen = {}
    out = promote.promote("fuse_scale_shift", ref, gate=fake_gate("PASS", seen))
    assert out.promoted and out.exit_code == 0, out.message
    commit = git(repo, "rev-parse", ref)
    assert seen["task_path"] != repo / TASK_PATH and seen["base"] == git(repo, "merge-base", "HEAD", commit)
    assert not Path(seen["task_path"]).exists()  # the temporary worktree is gone
    assert str(seen["task_path"]) not in git(repo, "worktree", "list")
    review = repo / TASK_PATH / "docs" / "review" / f"{commit[:12]}.md"
    assert out.review == review
    text = review.read_text()
    for part in ("# Review: fuse_scale_shift", "+# candidate line for review", "## Results",
                 f"| device_us | {HEAD['geomean']:.3f} [{HEAD['ci'][0]:.3f}, {HEAD['ci'][1]:.3f}]", "% of copy BW",
                 HEAD["min"]["id"], f"A/A noise floor (device_us): {SUMMARY['noise_floor']['geomean']:.3f}",
                 "2-D loads (predicted +10%)", "## Reviewer checklist",
                 "- [ ] The diff touches only", "Reviewed by:"):
        assert part in text, part
    assert (repo / TASK_PATH / "docs" / "review" / f"{commit[:12]}-h200.jsonl.gz").read_bytes() == RESULTS.read_bytes()
    e = ledger.read(repo / TASK_PATH)[-1]
    assert e["decision"] == "PROMOTED" and e["commit"] == commit and e["author"] == "tester"
    assert e["results_ref"]["path"] == f"docs/review/{commit[:12]}-h200.jsonl.gz"
    assert e["metrics"]["device_us_geomean"] == pytest.approx(HEAD["geomean"])
    s = {x["task"]: x for x in campaign.status(repo)}["fuse_scale_shift"]
    assert s["promoted"]["commit"] == commit
    # the next promotion diffs against this one
    w = wt(tmp_path, "open")
    (w / TASK_PATH / "solution" / "scale_shift.py").write_text(
        (w / TASK_PATH / "solution" / "scale_shift.py").read_text() + "# second change\n")
    commit_in(w, "second")
    out2 = promote.promote("fuse_scale_shift", ref, gate=fake_gate("PASS", {}))
    text2 = out2.review.read_text()
    assert f"against the last promoted version (`{commit[:12]}`)" in text2
    assert "+# second change" in text2 and "+# candidate line for review" not in text2


def test_promote_refuses_a_failing_candidate(repo, tmp_path):
    ref = candidate(tmp_path)
    out = promote.promote("fuse_scale_shift", ref, gate=fake_gate("FAIL", {}))
    assert not out.promoted and "did not pass every gate" in out.message and "min_row: row r is at 0.900x" in out.message
    assert not (repo / TASK_PATH / "docs" / "review").exists()
    e = ledger.read(repo / TASK_PATH)[-1]
    assert e["decision"] == "NO-GO" and "kda promote refused" in e["reason"]


def test_promote_cli_without_gpu(repo, capsys, monkeypatch):
    monkeypatch.setattr("kda.loop.gate.has_gpu", lambda: False)
    assert cli.main(["promote", "fuse_scale_shift", "HEAD"]) == 1
    assert "refused: no CUDA GPU is visible" in capsys.readouterr().err
    assert cli.main(["promote", "fuse_scale_shift", "no-such-ref"]) == 2
    assert "'no-such-ref' does not name a commit" in capsys.readouterr().err


def test_dry_and_abandoned_runs_are_cleaned_once_idle(campaign_state, tmp_path, capsys):
    """A run prepared and never started (KDA_NO_CLAUDE=1) never ends by itself: after --idle-hours without a round,
    commit or change it is a dry run; a run whose worktree was removed by hand is abandoned at once."""
    repo = campaign_state
    assert cli.main(["campaign", "clean"]) == 1
    assert RUNS["open"] not in capsys.readouterr().out  # prepared minutes ago: not idle yet
    assert cli.main(["campaign", "clean", "--idle-hours", "0"]) == 1
    out = capsys.readouterr().out
    assert f"would clean kda/fuse_scale_shift/{RUNS['open']} (dry run: no round and no commit of its own, idle 0 h)" \
        in out, out
    # work in the task folder is a sign of life, whatever the clock says of the start
    sol = wt(tmp_path, "open") / TASK_PATH / "solution" / "scale_shift.py"
    sol.write_text(sol.read_text() + "# still working\n")
    commit_in(wt(tmp_path, "open"), "wip")
    runs = {r.run_id: r for r in campaign.runs(repo, "fuse_scale_shift")}
    assert runs[RUNS["open"]].idle_s < 60 and runs[RUNS["open"]].stale(1.0) is None
    assert runs[RUNS["open"]].stale(0) == "abandoned: no round, commit or change to its task folder, idle 0 h"
    git(repo, "worktree", "remove", "--force", str(wt(tmp_path, "open")))
    assert cli.main(["campaign", "clean", "--yes"]) == 1  # the dirty run is still refused
    out = capsys.readouterr().out
    assert f"clean kda/fuse_scale_shift/{RUNS['open']} (abandoned: its worktree is gone and the run never ended)" \
        in out
    refs = set(git(repo, "for-each-ref", "--format=%(refname:short)").splitlines())
    assert f"kda/fuse_scale_shift/{RUNS['open']}" not in refs and f"kda-archive/fuse_scale_shift/{RUNS['open']}" in refs
    assert cli.main(["campaign", "clean", "--idle-hours", "-1"]) != 0
    assert "--idle-hours -1.0: expected 0 or more" in capsys.readouterr().err
