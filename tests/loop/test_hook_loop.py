"""The review loop end to end with a fake agent: the launcher starts it in a worktree (KDA_AGENT_CMD); it edits the
candidate and stops the way Claude Code does, piping the Stop-hook JSON into the hook command from
.claude/settings.json, until the hook lets it stop. KDA_GATE_CMD stands in for the gate (no GPU needed)."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from agentrun_support import TASK_PATH, launch, make_clone, worktree_of
from kda.loop import agentrun, hook
from kda.evidence import ledger

RUN = "20260102T030405Z-beef"

FAKE_AGENT = r'''#!/usr/bin/env bash
# Stand-in for Claude Code: one edit per round, then a stop through the configured Stop hook.
set -euo pipefail
brief="$1"
test -f "$brief"
hook="$(PY -c 'import json; print(json.load(open(".claude/settings.json"))["hooks"]["Stop"][0]["hooks"][0]["command"])')"
active=false
for i in $(seq 1 20); do
  echo "# fake agent edit $i" >> "$KDA_TASK/solution/scale_shift.py"
  payload="$(PY - "$active" "$i" <<'EOF'
import json, os, sys
active, i = sys.argv[1] == "true", sys.argv[2]
print(json.dumps({"session_id": "fake-session", "transcript_path": "/dev/null", "cwd": os.getcwd(),
                  "permission_mode": "bypassPermissions", "hook_event_name": "Stop", "stop_hook_active": active,
                  "last_assistant_message": f"Round {i} done.\nHypothesis: edit {i} trims the launch path "
                                            f"(predicted effect: +{i}% on small rows)\nChange: appended comment {i}"}))
EOF
)"
  out="$(printf '%s' "$payload" | sh -c "$hook")"
  printf '%s' "$out" > ".kda/hook-out-$i.json"
  if [[ $out == *'"decision": "block"'* ]]; then active=true; continue; fi
  echo "fake agent: stop allowed after round $i"
  exit 0
done
echo "fake agent: never allowed to stop" >&2
exit 1
'''

FAIL_TWICE = r'''#!/usr/bin/env bash
n=$(( $(cat .kda/gate-calls 2>/dev/null || echo 0) + 1 )); echo "$n" > .kda/gate-calls
if [ "$n" -le 2 ]; then echo "min_geomean: device_us geomean 0.9$n x is below 1.0 (round $KDA_ROUND)"; exit 1; fi
echo "every gate passed (round $KDA_ROUND)"
'''

REVIEWER = 'cat > ".kda/review-$KDA_ROUND.diff"; echo "reviewer: round $KDA_ROUND, gate $KDA_GATE_STATUS, looks honest"'


def script(tmp: Path, name: str, text: str) -> Path:
    p = tmp / "bin" / name
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(text.replace("PY ", f"{sys.executable} "))
    p.chmod(0o755)
    return p


def run_loop(tmp_path, gate_text: str, **env):
    repo = make_clone(tmp_path)
    agent = script(tmp_path, "fake_agent.sh", FAKE_AGENT)
    gate = script(tmp_path, "gate.sh", gate_text)
    p = launch(repo, tmp_path, KDA_RUN_ID=RUN, KDA_AGENT_CMD=f'{agent} "$1"', KDA_GATE_CMD=str(gate), **env)
    wt = worktree_of(tmp_path, RUN)
    return p, wt


def hook_outputs(wt: Path) -> list[dict | None]:
    outs = []
    for i in range(1, 21):
        f = wt / ".kda" / f"hook-out-{i}.json"
        if not f.exists():
            break
        outs.append(json.loads(f.read_text()) if f.read_text().strip() else None)
    return outs


def test_gate_fails_twice_then_passes(tmp_path):
    p, wt = run_loop(tmp_path, FAIL_TWICE, KDA_REVIEWER_CMD=REVIEWER)
    assert p.returncode == 0, p.stderr
    assert "fake agent: stop allowed after round 3" in p.stdout
    outs = hook_outputs(wt)
    assert len(outs) == 3 and outs[2] is None  # allowed: nothing on stdout
    for i, o in enumerate(outs[:2], 1):
        assert o["decision"] == "block"
        assert f"round {i} of 8" in o["reason"] and f"device_us geomean 0.9{i} x is below 1.0" in o["reason"]
        assert f"reviewer: round {i}, gate FAIL, looks honest" in o["reason"]
        assert f"{8 - i} round(s) left" in o["reason"] and "Hypothesis:" in o["reason"]
    state = agentrun.load_rounds(wt)
    assert state["rounds"] == 3
    assert [(h["round"], h["status"], h["outcome"]) for h in state["history"]] == \
        [(1, "FAIL", "block"), (2, "FAIL", "block"), (3, "PASS", "allow")]
    assert [h["stop_hook_active"] for h in state["history"]] == [False, True, True]
    assert agentrun.load_manifest(wt)["ended"]["why"] == "passed"
    entries = ledger.read(wt / TASK_PATH)
    assert [(e["round"], e["decision"]) for e in entries] == [(1, "NO-GO"), (2, "NO-GO"), (3, "IMPROVEMENT")]
    assert [e["parent"] for e in entries] == [None, "L0001", "L0002"]
    assert entries[0]["hypothesis"] == "edit 1 trims the launch path (predicted effect: +1% on small rows)"
    assert entries[1]["change"] == "appended comment 2"
    assert entries[2]["review"] == "reviewer: round 3, gate PASS, looks honest"
    assert "every gate passed (round 3)" in entries[2]["reason"]
    assert len({e["source_hash"] for e in entries}) == 3  # each round measured a different candidate
    diff = (wt / ".kda" / "review-2.diff").read_text()
    assert "+# fake agent edit 2" in diff and "solution/scale_shift.py" in diff
    assert "L0003" in (wt / TASK_PATH / "docs" / "ledger.md").read_text()


def test_always_failing_gate_stops_at_the_round_limit(tmp_path):
    p, wt = run_loop(tmp_path, '#!/bin/sh\necho "min_row: row r1 is at 0.800x, below 0.97"\nexit 1\n')
    assert p.returncode == 0, p.stderr
    outs = hook_outputs(wt)
    assert len(outs) == 8 and all(o["decision"] == "block" for o in outs[:7]) and outs[7] is None
    assert "round 7 of 8" in outs[6]["reason"] and "1 round(s) left" in outs[6]["reason"]
    state = agentrun.load_rounds(wt)
    assert state["rounds"] == 8 and state["history"][-1]["outcome"] == "allow"
    assert state["history"][-1]["why"].startswith("round limit: 8 of 8 rounds used")
    assert agentrun.load_manifest(wt)["ended"]["why"].startswith("round limit")
    entries = ledger.read(wt / TASK_PATH)
    assert [e["round"] for e in entries] == list(range(1, 9)) and {e["decision"] for e in entries} == {"NO-GO"}
    # a stop after the budget is spent does not run the gate again
    payload = json.dumps({"session_id": "s", "cwd": str(wt), "hook_event_name": "Stop", "stop_hook_active": True})
    root_before = os.environ.get("KDA_ROOT")
    out, code = hook.stop(payload)
    assert (out, code) == ("", 0)
    assert os.environ.get("KDA_ROOT") == root_before  # the hook does not leave its KDA_ROOT behind
    assert agentrun.load_rounds(wt)["history"][-1]["status"] == "SKIPPED" and len(ledger.read(wt / TASK_PATH)) == 8


# ---- the hook alone ------------------------------------------------------------------------------------------

@pytest.fixture
def run_dir(tmp_path, monkeypatch):
    """A minimal prepared run (no launcher): a git worktree-like folder with the task config and a manifest."""
    repo = make_clone(tmp_path)
    p = launch(repo, tmp_path, KDA_RUN_ID=RUN, KDA_NO_CLAUDE="1")
    assert p.returncode == 0, p.stderr
    monkeypatch.delenv("KDA_REVIEWER_CMD", raising=False)
    monkeypatch.setenv("KDA_ROOT", str(worktree_of(tmp_path, RUN)))
    return worktree_of(tmp_path, RUN)


def stop_payload(wt: Path, **kw) -> str:
    return json.dumps({"session_id": "s1", "cwd": str(wt / TASK_PATH), "hook_event_name": "Stop",
                       "stop_hook_active": False, **kw})


def test_blocked_gate_allows_the_stop_and_says_why(run_dir, monkeypatch):
    monkeypatch.setenv("KDA_GATE_CMD", "echo 'GPU not reachable: correctness passed on cpu rows'; exit 3")
    out, code = hook.stop(stop_payload(run_dir))  # cwd below the worktree root is fine
    assert (out, code) == ("", 0)
    e = ledger.read(run_dir / TASK_PATH)[-1]
    assert e["decision"] == "BLOCKED" and e["hypothesis"] == "(the agent stated no hypothesis this round)"
    assert "no change against" in e["change"]
    ended = agentrun.load_manifest(run_dir)["ended"]
    assert ended["why"] == "blocked: GPU not reachable: correctness passed on cpu rows" and ended["round"] == 1


def test_outside_a_run_and_bad_input_allow_the_stop(tmp_path, capsys):
    assert hook.stop(json.dumps({"cwd": str(tmp_path)})) == ("", 0)
    assert "not inside a kda agent run" in capsys.readouterr().err
    assert hook.stop("not json") == ("", 0)
    assert "not the hook's JSON" in capsys.readouterr().err


def test_a_broken_ledger_blocks_with_the_error(run_dir, monkeypatch):
    monkeypatch.setenv("KDA_GATE_CMD", "echo ok")
    path = ledger.ledger_path(run_dir / TASK_PATH)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("{broken\n")
    out, code = hook.stop(stop_payload(run_dir))
    reason = json.loads(out)["reason"]
    assert code == 0 and "The ledger could not be written" in reason and "ledger.jsonl:1: not valid JSON" in reason


def test_hook_cli_reads_stdin(run_dir):
    from agentrun_support import clean_env, kda_wrapper
    p = subprocess.run([str(kda_wrapper(run_dir.parent.parent)), "hook", "stop"], input=stop_payload(run_dir),
                       capture_output=True, text=True, cwd=run_dir,
                       env=clean_env(KDA_GATE_CMD="echo 'static rule: k.py:1: imports sglang'; exit 1"))
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    assert out["decision"] == "block" and "static rule: k.py:1: imports sglang" in out["reason"]


def test_internal_error_fails_open_and_leaves_a_trace(run_dir, monkeypatch):
    (run_dir / ".kda" / "rounds.json").write_text("{not json")
    out, code = hook.stop(stop_payload(run_dir))
    assert (out, code) == ("", 0)
    assert "rounds.json: not valid JSON" in (run_dir / ".kda" / "hook-error.log").read_text()


def test_stated_lines():
    msg = "Done.\n**Hypothesis:** 2-D loads cut index math (predicted +8%)\n- Change: BLOCK_L 64\n"
    assert hook._stated(msg, "hypothesis") == "2-D loads cut index math (predicted +8%)"
    assert hook._stated(msg, "change") == "BLOCK_L 64"
    assert hook._stated(None, "change") is None


def test_in_process_gate_error_blocks_with_the_error(run_dir, monkeypatch):
    monkeypatch.delenv("KDA_GATE_CMD", raising=False)
    (run_dir / TASK_PATH / "bench" / "workloads.json").write_text("[oops")
    out, code = hook.stop(stop_payload(run_dir))
    reason = json.loads(out)["reason"]
    assert code == 0 and "the gate could not run" in reason and "workloads.json" in reason
    assert ledger.read(run_dir / TASK_PATH)[-1]["decision"] == "NO-GO"
