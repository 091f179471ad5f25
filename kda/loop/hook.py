"""`kda hook stop`: the Stop hook of an agent run, the review loop.

Claude Code runs it each time the agent is about to stop, with a JSON object on stdin (`session_id`, `cwd`,
`stop_hook_active`, `hook_event_name`, and in recent versions `last_assistant_message`). Each call is one round:

1. find the run from `cwd` (the worktree's `.kda/run.json`); outside an agent run the stop is allowed untouched;
2. count the round in `.kda/rounds.json` (under a lock);
3. run the gate (kda/loop/gate.py) on the worktree, or the command in `KDA_GATE_CMD` (its exit code stands for the
   status: 0 PASS, 3 BLOCKED, anything else FAIL; its stdout for the findings), so tests and CI need no GPU;
4. optionally send the diff against the pinned review base to `KDA_REVIEWER_CMD` on stdin; its stdout is the
   reviewer's verdict, recorded in the ledger and passed on to the agent (advisory: it does not change the status);
5. append a ledger entry for the round;
6. while the gate FAILs and rounds < max_rounds, print `{"decision": "block", "reason": ...}` so the agent gets the
   findings as its next instruction; otherwise allow the stop (print nothing, exit 0) and record why in the run
   manifest (`ended`): passed, blocked (e.g. no GPU), or round limit.

The hook fails open: an internal error allows the stop (a hook that always blocks would trap the agent), and the
error is recorded. `stop_hook_active` is recorded but not used: our own round counter is the budget.
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import traceback
from pathlib import Path

from kda.loop import agentrun

from kda.evidence import ledger
from kda.core.errors import KdaError

GATE_EXIT = {0: "PASS", 3: "BLOCKED"}
REASON_LIMIT = 6000  # characters of findings handed to the agent / stored per round


def _stated(message: str | None, key: str) -> str | None:
    """The text after 'Key:' on the last line that starts with it (markdown bold allowed)."""
    for line in reversed((message or "").splitlines()):
        m = re.match(rf"\s*[-*]*\s*\**{key}\**\s*:\s*\**\s*(.+)", line, re.I)
        if m and m.group(1).strip():
            return m.group(1).strip()
    return None


def _diff_summary(wt: Path, base: str) -> str:
    from kda.core.gitutil import changed_files, git

    try:
        files = changed_files(wt, base)
        short = git("diff", "--shortstat", base, cwd=wt).strip()
    except KdaError as e:
        return f"(diff against {base} unavailable: {e})"
    if not files:
        return f"no change against {base}"
    listed = ", ".join(files[:8]) + (f" and {len(files) - 8} more" if len(files) > 8 else "")
    return f"{listed} ({short or 'untracked files only'}) against {base}"


def _gate_by_command(cmd: str, wt: Path, manifest: dict, round_no: int) -> dict:
    env = dict(os.environ, KDA_ROUND=str(round_no), KDA_TASK=manifest["task_path"], KDA_WORKTREE=str(wt))
    p = subprocess.run(cmd, shell=True, cwd=wt, env=env, capture_output=True, text=True)
    status = GATE_EXIT.get(p.returncode, "FAIL")
    text = p.stdout.strip() or f"the gate command exited {p.returncode}" + (f": {p.stderr.strip()[-500:]}" if p.stderr.strip() else "")
    return {"status": status, "text": f"kda gate (KDA_GATE_CMD) {manifest['task']}: {status}\n{text}", "metrics": {},
            "results_path": None, "commit": None, "why": text.splitlines()[0]}


def _gate_in_process(wt: Path, manifest: dict, round_no: int) -> dict:
    from kda.loop.gate import run_gate
    from kda.definition.task import Task

    try:
        task = Task.load(wt / manifest["task_path"])
        res = run_gate(task, base=manifest["review_base"], rounds_used=round_no)
    except KdaError as e:  # e.g. a task file the agent broke: a finding for the agent, not a reason to let it go
        text = f"kda gate {manifest['task']}: FAIL\nWhat failed:\n  - the gate could not run: {e}"
        return {"status": "FAIL", "text": text, "metrics": {}, "results_path": None, "commit": None, "why": str(e)}
    unreached = [n for n in res.notes if "not reachable" in n or "only the rows" in n]
    return {"status": res.status, "text": res.text(), "metrics": res.metrics, "results_path": res.results_path,
            "commit": res.commit, "why": (unreached or res.notes or [res.status])[0]}


def _review(wt: Path, manifest: dict, round_no: int, status: str) -> str | None:
    cmd = os.environ.get("KDA_REVIEWER_CMD")
    if not cmd:
        return None
    from kda.core.gitutil import diff_with_untracked

    diff = diff_with_untracked(wt, manifest["review_base"])
    env = dict(os.environ, KDA_ROUND=str(round_no), KDA_TASK=manifest["task_path"], KDA_GATE_STATUS=status,
               KDA_REVIEW_BASE=manifest["review_base"])
    try:
        p = subprocess.run(cmd, shell=True, cwd=wt, env=env, input=diff, capture_output=True, text=True,
                           timeout=float(os.environ.get("KDA_REVIEWER_TIMEOUT_S", "1800")))
    except subprocess.TimeoutExpired:
        return "(the reviewer command timed out)"
    verdict = p.stdout.strip()
    if p.returncode != 0:
        verdict = f"(the reviewer command exited {p.returncode}) " + (verdict or p.stderr.strip()[-500:])
    return verdict[:REASON_LIMIT] or "(the reviewer printed nothing)"


def _allow(note: str) -> tuple[str, int]:
    print(f"kda hook stop: {note}", file=sys.stderr)
    return "", 0


def stop(stdin_text: str) -> tuple[str, int]:
    """One Stop-hook call: returns (stdout, exit code)."""
    try:
        data = json.loads(stdin_text or "{}")
        if not isinstance(data, dict):
            raise ValueError("not a JSON object")
    except ValueError as e:
        return _allow(f"stdin is not the hook's JSON object ({e}); allowing the stop")
    wt = agentrun.find_run(data.get("cwd") or os.getcwd())
    if wt is None:
        return _allow("not inside a kda agent run (no .kda/run.json above cwd); allowing the stop")
    try:
        # tasks, caches and the ledger resolve inside the worktree
        with agentrun.locked(wt), agentrun.scoped_env(KDA_ROOT=str(wt)):
            return _round(wt, data)
    except Exception as e:  # noqa: BLE001  (fail open, but leave a trace)
        detail = "".join(traceback.format_exception(e))[-3000:]
        try:
            (agentrun.state_dir(wt) / "hook-error.log").write_text(detail)
        except OSError:
            pass
        return _allow(f"internal error, allowing the stop (details in .kda/hook-error.log): {e}")


def _round(wt: Path, data: dict) -> tuple[str, int]:
    manifest = agentrun.load_manifest(wt)
    state = agentrun.load_rounds(wt, manifest)
    max_rounds = state["max_rounds"]
    task_dir = wt / manifest["task_path"]

    def hist(round_no: int, status: str, outcome: str, why: str, ledger_id=None, review=None) -> dict:
        return {"round": round_no, "time_utc": ledger.now_utc(), "status": status, "outcome": outcome, "why": why,
                "ledger_id": ledger_id, "session_id": data.get("session_id"),
                "stop_hook_active": data.get("stop_hook_active"), "review": review}

    if state["rounds"] >= max_rounds:
        state["history"].append(hist(state["rounds"], "SKIPPED", "allow", "round budget already spent; the gate was not run"))
        agentrun.save_rounds(wt, state)
        return _allow(f"round budget of {max_rounds} already spent; allowing the stop")

    round_no = state["rounds"] + 1
    state["rounds"] = round_no
    agentrun.save_rounds(wt, state)  # the round counts even if the gate dies half way

    cmd = os.environ.get("KDA_GATE_CMD")
    gate = _gate_by_command(cmd, wt, manifest, round_no) if cmd else _gate_in_process(wt, manifest, round_no)
    status = gate["status"]
    review = _review(wt, manifest, round_no, status)

    message = data.get("last_assistant_message")
    parent = next((h["ledger_id"] for h in reversed(state["history"]) if h.get("ledger_id")), None)
    fields = {
        "kind": "decision", "decision": {"PASS": "IMPROVEMENT", "FAIL": "NO-GO", "BLOCKED": "BLOCKED"}[status],
        "round": round_no, "parent": parent,
        "hypothesis": _stated(message, "hypothesis") or "(the agent stated no hypothesis this round)",
        "change": _stated(message, "change") or _diff_summary(wt, manifest["review_base"]),
        "reason": gate["text"][:REASON_LIMIT], "metrics": gate["metrics"], "review": review,
        "results_ref": ledger.results_ref(task_dir, gate["results_path"]) if gate["results_path"] else None,
        "commit": gate["commit"], "author": f"kda hook stop (run {manifest['run_id']}, {manifest['agent']['kind']})",
    }
    ledger_id, ledger_error = None, None
    try:
        ledger_id = ledger.append(task_dir, fields)["id"]
        ledger.write_markdown(task_dir)
    except KdaError as e:
        ledger_error = str(e)

    must_fix = status == "FAIL" or ledger_error is not None
    if must_fix and round_no < max_rounds:
        outcome, why = "block", f"gate {status}" + ("; ledger invalid" if ledger_error else "")
    elif must_fix:
        outcome, why = "allow", f"round limit: {round_no} of {max_rounds} rounds used, gate {status}"
    elif status == "PASS":
        outcome, why = "allow", "passed"
    else:
        outcome, why = "allow", "blocked: " + gate["why"][:400]
    state["history"].append(hist(round_no, status, outcome, why, ledger_id, review))
    agentrun.save_rounds(wt, state)
    # a run that ends commits its last ledger entry and loose work, so its worktree is clean
    manifest["ended"] = None if outcome == "block" else agentrun.ended(wt, manifest, why, round_no)
    agentrun.save_manifest(wt, manifest)
    if outcome == "allow":
        return _allow(f"round {round_no}: {why}")
    reason = [f"kda review loop, round {round_no} of {max_rounds}: the gate says {status} for {manifest['task_path']}.",
              gate["text"][:REASON_LIMIT]]
    if ledger_error:
        reason.append(f"The ledger could not be written, fix it first: {ledger_error}")
    if review:
        reason.append(f"Reviewer's verdict on your diff against {manifest['review_base']}:\n{review}")
    reason.append(f"Next: fix what failed in {manifest['task_path']}/solution/ (run `kda gate {manifest['task_path']}` "
                  f"yourself first), commit, and end your final message with 'Hypothesis: ...' (with the predicted "
                  f"effect) and 'Change: ...'. Then stop: the gate runs again. {max_rounds - round_no} round(s) left.")
    return json.dumps({"decision": "block", "reason": "\n\n".join(reason)}), 0
