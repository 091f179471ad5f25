"""kda/loop/drive.py through the launcher: an agent without a Stop hook (KDA_AGENT_CMD that only runs and exits, as
`codex exec` does) gets the review loop from the driver: the gate when it exits, and a restart with the findings
while the gate fails. KDA_GATE_CMD stands in for the gate."""
import json

from agentrun_support import TASK_PATH, git, launch, make_clone, worktree_of
from test_hook_loop import FAIL_TWICE, script
from kda.evidence import ledger
from kda.loop import agentrun

RUN = "20260102T030405Z-d21e"

EXIT_ONLY = r'''#!/usr/bin/env bash
# Stand-in for an agent without a Stop hook: one edit, a statement of it, exit.
set -euo pipefail
n=$(( $(cat .kda/agent-runs 2>/dev/null || echo 0) + 1 )); echo "$n" > .kda/agent-runs
if [ -n "${KDA_FINDINGS:-}" ]; then cp "$KDA_FINDINGS" ".kda/seen-findings-$n.md"; fi
echo "round $KDA_ROUND" > ".kda/seen-round-$n"
echo "# exit-only agent edit $n" >> "$KDA_TASK/solution/scale_shift.py"
echo "Done with attempt $n."
echo "Hypothesis: attempt $n trims the host path (predicted effect: +$n% on small rows)"
echo "Change: appended comment $n"
'''


def _run(tmp_path, agent_text: str, gate_text: str = FAIL_TWICE):
    repo = make_clone(tmp_path)
    agent = script(tmp_path, "agent.sh", agent_text)
    gate = script(tmp_path, "gate.sh", gate_text)
    p = launch(repo, tmp_path, KDA_RUN_ID=RUN, KDA_AGENT_CMD=f'{agent} "$1"', KDA_GATE_CMD=str(gate))
    return p, worktree_of(tmp_path, RUN)


def test_an_agent_without_a_stop_hook_is_gated_on_exit_and_restarted_with_the_findings(tmp_path):
    p, wt = _run(tmp_path, EXIT_ONLY)
    assert p.returncode == 0, p.stderr
    state = wt / ".kda"
    assert (state / "agent-runs").read_text().strip() == "3"  # failed, failed, passed
    assert not (state / "seen-findings-1.md").exists()  # the first start has no findings
    for n in (2, 3):
        seen = (state / f"seen-findings-{n}.md").read_text()
        assert f"round {n - 1} of 8" in seen and f"device_us geomean 0.9{n - 1} x is below 1.0" in seen
        assert (state / f"seen-round-{n}").read_text().strip() == f"round {n}"
    rounds = agentrun.load_rounds(wt)
    assert [(h["round"], h["status"], h["outcome"]) for h in rounds["history"]] == \
        [(1, "FAIL", "block"), (2, "FAIL", "block"), (3, "PASS", "allow")]
    assert agentrun.load_manifest(wt)["ended"]["why"] == "passed"
    entries = ledger.read(wt / TASK_PATH)
    assert [e["decision"] for e in entries] == ["NO-GO", "NO-GO", "IMPROVEMENT"]
    # the agent's last output is its last message: its statement goes to the ledger
    assert entries[1]["hypothesis"] == "attempt 2 trims the host path (predicted effect: +2% on small rows)"
    assert entries[2]["change"] == "appended comment 3"
    assert "the gate blocked the stop (round 1)" in p.stderr and "Done with attempt 3." in p.stdout
    # the run ended clean: the last ledger entry and the agent's uncommitted edits are one commit on its branch
    ended = agentrun.load_manifest(wt)["ended"]
    assert ended["commit"] and git(wt, "status", "--porcelain") == ""
    assert git(wt, "log", "-1", "--format=%s").startswith(f"kda: run {RUN} ended at round 3 (passed)")
    shown = git(wt, "show", "--stat", "HEAD")
    assert "docs/ledger.jsonl" in shown and "solution/scale_shift.py" in shown
    # so `kda campaign clean` removes it instead of refusing a dirty worktree
    from kda.loop import campaign

    said = []
    assert campaign.runs(wt.parent.parent / "repo", "fuse_scale_shift")[0].dirty == []
    assert campaign.clean(tmp_path / "repo", yes=False, echo=said.append) == 0
    assert any(line.startswith(f"would clean kda/fuse_scale_shift/{RUN} (run ended (passed))") for line in said)


def test_an_agent_that_fails_without_a_change_ends_the_run_without_a_gate_round(tmp_path):
    p, wt = _run(tmp_path, "#!/usr/bin/env bash\necho 'cannot reach the model' >&2\nexit 3\n")
    assert p.returncode == 3
    manifest = agentrun.load_manifest(wt)
    assert manifest["ended"]["why"] == "the agent exited 3 without changing anything; no gate ran"
    assert agentrun.load_rounds(wt)["rounds"] == 0 and ledger.read(wt / TASK_PATH) == []
    assert "cannot reach the model" in p.stdout  # its output passes through


def test_a_command_that_cannot_start_ends_the_run_and_says_so(tmp_path):
    p, wt = _run(tmp_path, "#!/usr/bin/env bash\nexec /no/such/agent-binary\n")
    assert p.returncode == 127
    why = agentrun.load_manifest(wt)["ended"]["why"]
    assert why.startswith("the agent command could not start (exit 127)")
    assert json.loads((wt / ".kda" / "run.json").read_text())["ended"]["round"] == 0
