"""`kda campaign run TASK... [--gpus 0,1,...] [--rounds N] [--agent claude|codex|CMD]` (issue 38): one agent run
per task, each through the task's own launcher (worktree, branches, brief, Stop-hook gate, as a single launch), each
pinned to a GPU it holds alone for as long as it runs; a queue when tasks outnumber GPUs; a live table of every
run; Ctrl-C stops the agents and leaves every run consistent.

Why through the launchers: a campaign is N single launches, and a single launch already records everything a
reviewer needs (the manifest, the rounds, the ledger, the end state). This module only schedules them:

- Launches start one at a time, each after the previous one's worktree is prepared (`.kda/run.json` written):
  git locks its refs and worktree list, and two launchers creating branches at once could fail on a lock.
- A GPU is free again only when its run's process has exited, so two benchmarks never share a GPU.
- Ctrl-C sends SIGINT to each running launcher's process group. The driver (`kda launchers drive`) passes it to
  its agent and records the run's end (`ended.why`); Claude Code stops itself. After a grace period the rest get
  SIGTERM. Tasks still queued are recorded as not started.
- The campaign's own file (`.kda-campaign/<id>/campaign.json`, ignored by git, beside each run's log) says which
  tasks started, on which GPU, and how each ended. `--resume ID` starts the tasks of that campaign that never
  started; a run that was interrupted keeps its worktree, and `kda campaign status` and `clean` treat it like any
  other run.
"""
from __future__ import annotations

import json
import os
import secrets
import signal
import subprocess
import time
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable

from kda.core.errors import KdaError

CAMPAIGN_DIR = ".kda-campaign"
# The agents the flag names; anything else is a shell command (the launcher's KDA_AGENT_CMD, brief path in $1)
AGENTS = {
    "claude": None,  # the launcher's default: Claude Code with the Stop hook
    "codex": 'codex exec --full-auto "Read $1 and carry out the task it describes, under its rules and gates."',
}
PREPARE_TIMEOUT_S = 600.0  # a launch vendors the baseline before it prepares: minutes on a cold cache
GRACE_S = 30.0  # after Ctrl-C, how long the runs get to record their end before SIGTERM
POLL_S = 1.0


@dataclass
class Slot:
    task: str  # the task folder's path, as the launcher index names it
    launcher: str  # scripts/launch_kernels/<label>.sh
    state: str = "queued"  # queued | preparing | running | ended | not started
    gpu: str | None = None
    run_id: str | None = None
    worktree: str | None = None
    log: str | None = None
    rc: int | None = None
    started_utc: str | None = None
    ended_utc: str | None = None


@dataclass
class Campaign:
    id: str
    gpus: list[str]
    agent: str
    rounds: int | None
    slots: list[Slot] = field(default_factory=list)

    def path(self, repo: Path) -> Path:
        return Path(repo) / CAMPAIGN_DIR / self.id / "campaign.json"

    def save(self, repo: Path) -> None:
        p = self.path(repo)
        p.parent.mkdir(parents=True, exist_ok=True)
        tmp = p.with_suffix(".tmp")
        tmp.write_text(json.dumps(asdict(self), indent=1) + "\n")
        tmp.replace(p)  # a crash never leaves half a file

    @classmethod
    def load(cls, repo: Path, cid: str) -> "Campaign":
        p = Path(repo) / CAMPAIGN_DIR / cid / "campaign.json"
        if not p.is_file():
            raise KdaError(f"{p}: no such campaign (kda campaign run --resume takes the id it printed)")
        data = json.loads(p.read_text())
        return cls(**{**data, "slots": [Slot(**s) for s in data["slots"]]})


def _utc(fmt: str = "%Y-%m-%dT%H:%M:%SZ") -> str:
    return datetime.now(timezone.utc).strftime(fmt)


def new_run_id() -> str:
    """The launcher's run-id format (YYYYmmddTHHMMSSZ-xxxx), made here so the campaign knows the worktree."""
    return f"{_utc('%Y%m%dT%H%M%SZ')}-{secrets.token_hex(2)}"


def visible_gpus() -> list[str]:
    """GPU indices nvidia-smi lists; [] without one."""
    try:
        out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired):
        return []
    return [str(i) for i, line in enumerate(l for l in out.splitlines() if l.startswith("GPU "))]


def plan(repo: Path, tasks: list[str], gpus: list[str], agent: str, rounds: int | None) -> Campaign:
    """Each task's launcher from scripts/launch_kernels/index.toml; a named error for a task without one."""
    from kda.core.paths import resolve_task
    from kda.definition import launchers

    if not tasks:
        raise KdaError("kda campaign run: name at least one task")
    if not gpus:
        raise KdaError("kda campaign run: no GPU listed by nvidia-smi; pass --gpus (e.g. --gpus 0,1)")
    if len(set(gpus)) != len(gpus):
        raise KdaError(f"--gpus {','.join(gpus)}: a GPU is listed twice (each run holds its GPU alone)")
    if rounds is not None and rounds < 1:
        raise KdaError(f"--rounds {rounds}: expected at least 1")
    index = {e["task"]: e for e in launchers.load_index(repo)}
    slots = []
    for t in tasks:
        rel = resolve_task(t).resolve().relative_to(Path(repo).resolve()).as_posix()
        if rel not in index:
            raise KdaError(f"{t}: no launcher in scripts/launch_kernels/index.toml (run `kda launchers`)")
        if rel in [s.task for s in slots]:
            raise KdaError(f"{t}: named twice; one campaign runs one agent per task")
        slots.append(Slot(task=rel, launcher=f"scripts/launch_kernels/{launchers.label(index[rel])}.sh"))
    return Campaign(id=_utc("%Y%m%dT%H%M%SZ") + "-" + secrets.token_hex(2), gpus=list(gpus), agent=agent,
                    rounds=rounds, slots=slots)


def _worktree_root(repo: Path, env: dict) -> Path:
    """Where the launcher puts worktrees (its KDA_WORKTREE_ROOT default)."""
    return Path(env.get("KDA_WORKTREE_ROOT") or (Path(repo).parent / f"{Path(repo).name}-worktrees"))


def launch_env(c: Campaign, env: dict) -> dict:
    """A launcher's environment for any run of `c`: its agent command and round budget (each run adds its run id
    and GPU)."""
    out = dict(env)
    agent = AGENTS.get(c.agent, c.agent)
    if agent:
        out["KDA_AGENT_CMD"] = agent
    if c.rounds is not None:
        out["KDA_MAX_ROUNDS"] = str(c.rounds)
    return out


def wait_prepared(proc: subprocess.Popen, worktree: Path, timeout_s: float, poll_s: float) -> None:
    """Until the launch has made its branches and worktree (its manifest exists), exited, or `timeout_s` passed:
    git locks refs and the worktree list, so the next launch waits for this point."""
    deadline = time.monotonic() + timeout_s
    manifest = Path(worktree) / ".kda" / "run.json"
    while proc.poll() is None and not manifest.is_file() and time.monotonic() < deadline:
        time.sleep(poll_s)


def _progress(slot: Slot) -> dict:
    """Round, last gate verdict and best headline geomean of a run, read from its worktree."""
    from kda.loop import agentrun

    out = {"round": "-", "verdict": "-", "best": "-"}
    if not slot.worktree or not (Path(slot.worktree) / ".kda" / "run.json").is_file():
        return out
    wt = Path(slot.worktree)
    try:
        manifest = agentrun.load_manifest(wt)
        rounds = agentrun.load_rounds(wt, manifest)
    except (KdaError, OSError, ValueError):
        return out
    out["round"] = f"{rounds['rounds']}/{rounds['max_rounds']}"
    if rounds["history"]:
        out["verdict"] = rounds["history"][-1]["status"]
    ledger = wt / slot.task / "docs" / "ledger.jsonl"
    best = None
    if ledger.is_file():
        for line in ledger.read_text().splitlines():
            m = (json.loads(line).get("metrics") or {}) if line.strip() else {}
            g = m.get("graph_us_geomean") if m.get("rows_passed") == m.get("rows_total") else None
            best = g if g is not None and (best is None or g > best) else best
    out["best"] = f"{best:.3f}x graph_us" if best is not None else "-"
    if manifest.get("ended"):
        out["verdict"] += f" (ended: {manifest['ended'].get('why', '')[:40]})"
    return out


def table(c: Campaign):
    from rich.table import Table

    t = Table(title=f"kda campaign {c.id} ({len(c.gpus)} GPU(s), agent {c.agent})")
    for col in ("task", "GPU", "run", "state", "round", "last gate", "best so far"):
        t.add_column(col, overflow="fold")
    for s in c.slots:
        p = _progress(s)
        t.add_row(Path(s.task).name, s.gpu or "-", s.run_id or "-",
                  s.state + (f" (rc {s.rc})" if s.rc not in (None, 0) else ""), p["round"], p["verdict"], p["best"])
    return t


def run(repo: Path, c: Campaign, *, env: dict | None = None, console=None, poll_s: float = POLL_S,
        grace_s: float = GRACE_S, prepare_timeout_s: float = PREPARE_TIMEOUT_S,
        stop: Callable[[], bool] = lambda: False) -> Campaign:
    """Run every queued slot of `c` through its launcher, at most one per GPU at a time; returns when all ended.
    `stop()` (tests) acts as Ctrl-C would."""
    repo = Path(repo)
    env = dict(os.environ if env is None else env)
    base_env = launch_env(c, env)
    procs: dict[int, subprocess.Popen] = {}  # slot index -> its launcher
    busy: dict[str, int] = {}  # GPU -> slot index
    logs = c.path(repo).parent
    c.save(repo)
    last_lines: list[str] = []
    live = None
    if console is not None and console.is_terminal:  # a terminal: one table, redrawn in place (rich.live)
        from rich.live import Live

        live = Live(table(c), console=console, refresh_per_second=1, transient=False)
        live.start()

    def show():
        if console is None:
            return
        if live is not None:
            live.update(table(c))
        else:  # a log (CI): one line per change of state
            lines = [f"{Path(s.task).name}: {s.state}" + (f" on GPU {s.gpu}" if s.gpu else "") +
                     (f", run {s.run_id}" if s.run_id else "") + (f", rc {s.rc}" if s.rc is not None else "")
                     for s in c.slots]
            for line in lines:
                if line not in last_lines:
                    console.print(line)
            last_lines[:] = lines

    def start(i: int, gpu: str) -> None:
        s = c.slots[i]
        s.run_id, s.gpu, s.state, s.started_utc = new_run_id(), gpu, "preparing", _utc()
        s.worktree = str(_worktree_root(repo, env) / f"{Path(s.task).name}-{s.run_id}")
        s.log = str(logs / f"{Path(s.task).name}.log")
        run_env = dict(base_env, KDA_RUN_ID=s.run_id, KDA_GPU=gpu)
        with open(s.log, "w") as log:  # the child keeps its own descriptor
            procs[i] = subprocess.Popen(["bash", str(repo / s.launcher)], cwd=repo, env=run_env, stdout=log,
                                        stderr=subprocess.STDOUT, start_new_session=True)
        busy[gpu] = i
        wait_prepared(procs[i], Path(s.worktree), prepare_timeout_s, poll_s / 4)
        s.state = "running" if procs[i].poll() is None else s.state
        c.save(repo)

    def reap() -> None:
        for i, p in list(procs.items()):
            if p.poll() is not None:
                s = c.slots[i]
                s.state, s.rc, s.ended_utc = "ended", p.returncode, _utc()
                del procs[i]
                busy.pop(s.gpu, None)
                c.save(repo)

    interrupted = False
    try:
        while True:
            reap()
            if stop():
                raise KeyboardInterrupt
            queued = [i for i, s in enumerate(c.slots) if s.state == "queued"]
            for gpu in [g for g in c.gpus if g not in busy]:
                if not queued:
                    break
                start(queued.pop(0), gpu)
            show()
            if not procs and not queued:
                break
            time.sleep(poll_s)
    except KeyboardInterrupt:
        interrupted = True
    if interrupted:
        for p in procs.values():
            try:
                os.killpg(p.pid, signal.SIGINT)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + grace_s
        while procs and time.monotonic() < deadline:
            reap()
            time.sleep(poll_s / 4)
        for p in procs.values():
            try:
                os.killpg(p.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            p.wait()
        reap()
        for s in c.slots:
            if s.state == "queued":
                s.state = "not started"
        c.save(repo)
        show()
    if live is not None:
        live.stop()
    return c


def resume(repo: Path, cid: str) -> Campaign:
    """A campaign's tasks that never started, queued again (its interrupted runs stay as they are)."""
    c = Campaign.load(repo, cid)
    for s in c.slots:
        if s.state in ("not started", "queued"):
            s.state = "queued"
        elif s.state in ("preparing", "running"):  # its launcher died with the campaign: never restarted here
            s.state = "interrupted"
    if not any(s.state == "queued" for s in c.slots):
        raise KdaError(f"campaign {cid}: every task has started; nothing to resume (kda campaign status)")
    return c
