"""`kda launchers drive`: the review loop for an agent without a Stop hook (issue 38).

Claude Code calls `kda hook stop` each time it is about to stop, and the hook's verdict decides whether it goes
on. Codex (`codex exec`) or any other command has no such hook: it runs and exits. The launcher starts those
through this driver, which gives them the same loop:

1. run the agent command in the worktree (its output streamed through, the last part kept);
2. when it exits, unless the run has already ended (an agent that pipes the hook's JSON into `kda hook stop`
   itself, as tests/loop/test_hook_loop.py's fake does, ends it there), make the hook's call: the same round
   counter, gate, ledger entry and manifest as Claude Code's stop, with the agent's last output as its last
   message (its `Hypothesis:` and `Change:` lines go to the ledger);
3. while the hook blocks the stop, write its findings to `.kda/FINDINGS.md` and start the agent again, with
   KDA_FINDINGS naming that file and KDA_ROUND the round it is in; the brief tells it to act on them first.

It ends the run without a gate round when the agent could not start (exit 126 or 127) or exited with an error
having changed nothing since it started (a broken agent would otherwise spend every round on an unchanged tree),
and on Ctrl-C (SIGINT passes to the agent first). Each end is recorded in the manifest's `ended`.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from kda.loop import agentrun, hook

FINDINGS = "FINDINGS.md"
TAIL_CHARS = 6000  # of the agent's output, handed to the hook as its last message


def _tree_state(wt: Path) -> str:
    """The worktree's commit and uncommitted changes: what a round of the agent may have changed."""
    head = subprocess.run(["git", "-C", str(wt), "rev-parse", "HEAD"], capture_output=True, text=True).stdout
    status = subprocess.run(["git", "-C", str(wt), "status", "--porcelain", "--untracked-files=all"],
                            capture_output=True, text=True).stdout
    diff = subprocess.run(["git", "-C", str(wt), "diff", "HEAD"], capture_output=True, text=True).stdout
    return head + status + diff


def _run_agent(argv: list[str], wt: Path, env: dict) -> tuple[int, str]:
    """(exit code, the last TAIL_CHARS of its output). Output is passed through as it comes."""
    tail = ""
    try:
        proc = subprocess.Popen(argv, cwd=wt, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                bufsize=1)
    except OSError as e:
        print(f"kda drive: the agent could not start: {e}", file=sys.stderr)
        return 127, ""
    try:
        for line in proc.stdout:
            sys.stdout.write(line)
            sys.stdout.flush()
            tail = (tail + line)[-TAIL_CHARS:]
        return proc.wait(), tail
    except KeyboardInterrupt:
        proc.send_signal(2)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
        raise


def _end(wt: Path, why: str, round_no: int) -> None:
    manifest = agentrun.load_manifest(wt)
    manifest["ended"] = agentrun.ended(wt, manifest, why, round_no)  # as the hook ends a run, commit included
    agentrun.save_manifest(wt, manifest)
    print(f"kda drive: {why}", file=sys.stderr)


def drive(wt: Path, argv: list[str]) -> int:
    """Run the agent under the review loop until the hook lets it stop; returns the agent's last exit code."""
    wt = Path(wt).resolve()
    manifest = agentrun.load_manifest(wt)  # not a prepared run: an error before anything starts
    findings = agentrun.state_dir(wt) / FINDINGS
    findings.unlink(missing_ok=True)  # a relaunch in this worktree starts without stale findings
    started = 0
    rc = 0
    while True:
        rounds = agentrun.load_rounds(wt, manifest)["rounds"]
        env = {**os.environ, "KDA_ROUND": str(rounds + 1)}
        if findings.exists():
            env["KDA_FINDINGS"] = str(findings)
        before = _tree_state(wt)
        try:
            rc, tail = _run_agent(argv, wt, env)
        except KeyboardInterrupt:
            _end(wt, "interrupted (Ctrl-C): the agent was stopped, no gate ran on its last round", rounds)
            return 130
        started += 1
        if agentrun.load_manifest(wt).get("ended"):
            return rc  # the agent went through the Stop hook itself and was let stop
        if rc in (126, 127):
            _end(wt, f"the agent command could not start (exit {rc}): {' '.join(argv)[:200]}", rounds)
            return rc
        if rc != 0 and _tree_state(wt) == before:
            _end(wt, f"the agent exited {rc} without changing anything; no gate ran", rounds)
            return rc
        payload = {"session_id": f"kda-drive-{manifest['run_id']}", "cwd": str(wt), "hook_event_name": "Stop",
                   "stop_hook_active": started > 1, "last_assistant_message": tail}
        out, _ = hook.stop(json.dumps(payload))
        if not out:
            return rc  # the hook let it stop and recorded why in the manifest
        reason = json.loads(out)["reason"]
        findings.write_text(reason + "\n")
        print(f"kda drive: the gate blocked the stop (round {rounds + 1}); starting the agent again with "
              f"{findings.relative_to(wt)}", file=sys.stderr)


def main(worktree: str, argv: list[str]) -> int:
    if not argv:
        raise SystemExit("kda launchers drive: no agent command after --")
    return drive(Path(worktree), argv)
