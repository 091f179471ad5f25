"""The state of one agent run, kept in its worktree: `.kda/run.json` (manifest), `.kda/rounds.json` (Stop-hook
rounds), `.kda/BRIEF.md` (the agent's brief) and `.claude/settings.json` (the Stop hook).

The launcher (scripts/launch_kernels/lib/launch.sh) does the git work and calls `kda launchers prepare`, which
writes these files through `prepare` below. None of them is committed: they are added to the repository's
info/exclude, so `git add -A` in the worktree cannot pick them up.
"""
from __future__ import annotations

import fcntl
import json
import os
import re
from contextlib import contextmanager
from pathlib import Path

from kda.core.errors import KdaError
from kda.core.gitutil import git, ok
from kda.core.schema import Field, ListOf, one_of, positive, validate
from kda.evidence.ledger import now_utc

NONE = type(None)
STATE_DIR = ".kda"
EXCLUDES = ("/.kda/", "/.claude/")


def _run_id(v: str) -> str | None:
    return None if re.fullmatch(r"\d{8}T\d{6}Z-[0-9a-f]{4}", v) else f"expected 'YYYYmmddTHHMMSSZ-xxxx', got {v!r}"


def _commit(v: str) -> str | None:
    return None if re.fullmatch(r"[0-9a-f]{40}", v) else "expected a 40-hex commit"


ENDED = {
    "time_utc": Field(str),
    "why": Field(str, doc="passed, round limit, blocked: ..., or what ended it"),
    "round": Field(int),
    "commit": Field((str, NONE), required=False,
                    doc="the end-of-run commit of what the task folder held uncommitted (None: nothing to commit)"),
    "commit_error": Field(str, required=False, doc="why that commit could not be made"),
}

MANIFEST = {
    "schema": Field(int, check=lambda v: None if v == 1 else f"expected 1, got {v}"),
    "run_id": Field(str, check=_run_id),
    "task": Field(str, doc="task name"),
    "task_path": Field(str, doc="task folder relative to the repository root"),
    "label": Field(str, doc="launcher name, e.g. k01_fuse_scale_shift"),
    "repo": Field(str, doc="the checkout the run was launched from"),
    "base_ref": Field(str),
    "base_commit": Field(str, check=_commit),
    "branch": Field(str),
    "review_base": Field(str, doc="branch pinned at base_commit; reviews diff against it"),
    "worktree": Field(str),
    "agent": Field({
        "kind": Field(str, check=one_of("claude", "custom")),
        "command": Field(str, doc="the exact command line the launcher runs"),
        "model": Field((str, NONE)),
        "effort": Field((str, NONE)),
        "permission_mode": Field((str, NONE)),
    }),
    "gpu": Field(str, doc="KDA_GPU, or 'any'"),
    "time_utc": Field(str),
    "max_rounds": Field(int, check=positive),
    "ended": Field((ENDED, NONE), required=False),
}

HISTORY = {
    "round": Field(int),
    "time_utc": Field(str),
    "status": Field(str, check=one_of("PASS", "FAIL", "BLOCKED", "SKIPPED")),
    "outcome": Field(str, check=one_of("block", "allow")),
    "why": Field(str),
    "ledger_id": Field((str, NONE)),
    "session_id": Field((str, NONE)),
    "stop_hook_active": Field((bool, NONE)),
    "review": Field((str, NONE)),
}

ROUNDS = {
    "run_id": Field(str, check=_run_id),
    "task_path": Field(str),
    "rounds": Field(int, doc="Stop-hook rounds started so far"),
    "max_rounds": Field(int, check=positive),
    "history": Field(ListOf(HISTORY)),
}


def state_dir(worktree: Path) -> Path:
    return Path(worktree) / STATE_DIR


def find_run(start: Path | str) -> Path | None:
    """The worktree holding `.kda/run.json` at or above `start`, or None outside an agent run."""
    start = Path(start).resolve()
    for d in (start, *start.parents):
        if (d / STATE_DIR / "run.json").is_file():
            return d
    return None


def _read_json(path: Path, spec: dict) -> dict:
    try:
        raw = json.loads(path.read_text())
    except FileNotFoundError:
        raise KdaError(f"{path}: no such file") from None
    except json.JSONDecodeError as e:
        raise KdaError(f"{path}: not valid JSON: {e}") from None
    return validate(raw, spec, str(path))


def _write_json(path: Path, data: dict, spec: dict) -> None:
    validate(data, spec, f"{path} (about to be written)")
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data, indent=1) + "\n")
    os.replace(tmp, path)  # readers never see half a file


def load_manifest(worktree: Path) -> dict:
    return _read_json(state_dir(worktree) / "run.json", MANIFEST)


def save_manifest(worktree: Path, data: dict) -> None:
    _write_json(state_dir(worktree) / "run.json", data, MANIFEST)


def load_rounds(worktree: Path, manifest: dict | None = None) -> dict:
    path = state_dir(worktree) / "rounds.json"
    if not path.is_file():
        m = manifest or load_manifest(worktree)
        return {"run_id": m["run_id"], "task_path": m["task_path"], "rounds": 0, "max_rounds": m["max_rounds"],
                "history": []}
    return _read_json(path, ROUNDS)


def read_rounds_file(path: Path) -> dict:
    return _read_json(Path(path), ROUNDS)


def save_rounds(worktree: Path, data: dict) -> None:
    _write_json(state_dir(worktree) / "rounds.json", data, ROUNDS)


# Who signs the end-of-run commit where the worktree has no git identity configured (a fresh container).
END_IDENTITY = {"GIT_AUTHOR_NAME": "kda review loop", "GIT_AUTHOR_EMAIL": "kda-review-loop@localhost",
                "GIT_COMMITTER_NAME": "kda review loop", "GIT_COMMITTER_EMAIL": "kda-review-loop@localhost"}


def commit_run_end(worktree: Path, manifest: dict, why: str, round_no: int) -> str | None:
    """Commit what the run leaves uncommitted in its task folder (the last round's ledger entry, and whatever the
    agent did not commit in `solution/`, `docs/` and `results/`), so an ended run is a clean worktree that
    `kda campaign clean` can remove. Changes elsewhere are left for a person (the gate fails them anyway).
    Returns the commit, or None when there was nothing to commit."""
    task = manifest["task_path"]
    scope = [f"{task}/{part}" for part in ("solution", "docs", "results") if (Path(worktree) / task / part).exists()]
    if not scope:
        return None
    git("add", "-A", "--", *scope, cwd=worktree)
    if ok("diff", "--cached", "--quiet", cwd=worktree):
        return None
    message = (f"kda: run {manifest['run_id']} ended at round {round_no} ({why[:200]})\n\n"
               "The review loop's last ledger entry and the work the agent left uncommitted in the task folder.")
    identity = {} if git("config", "user.email", cwd=worktree, check=False) else END_IDENTITY
    with scoped_env(**identity):
        git("commit", "-q", "-m", message, cwd=worktree)
    return git("rev-parse", "HEAD", cwd=worktree)


def ended(worktree: Path, manifest: dict, why: str, round_no: int) -> dict:
    """The manifest's `ended` record of a run that ends now, with its end-of-run commit (commit_run_end) or why
    that commit could not be made: the hook and the driver end runs alike."""
    record = {"time_utc": now_utc(), "why": why, "round": round_no}
    try:
        record["commit"] = commit_run_end(worktree, manifest, why, round_no)
    except KdaError as e:
        record["commit_error"] = str(e)[:500]
    return record


@contextmanager
def scoped_env(**values: str):
    """Set environment variables for the duration of a block (the hook and promote point KDA_ROOT elsewhere, and
    must not leave it set for whatever runs next in the same process)."""
    old = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


@contextmanager
def locked(worktree: Path):
    """Serialises Stop-hook invocations of one run (a second stop must not start a round while a gate runs)."""
    state_dir(worktree).mkdir(parents=True, exist_ok=True)
    with open(state_dir(worktree) / "hook.lock", "w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        yield


# ---- prepare: what the launcher writes into a new worktree ---------------------------------------------------

BRIEF = """\
# Agent brief: {{ task }} (run {{ run_id }})

You work in the git worktree `{{ worktree }}` on branch `{{ branch }}`. The review base is the branch
`{{ review_base }}` (commit `{{ base_commit[:12] }}`, taken from `{{ base_ref }}`): reviewers and the gates diff
against it. GPU: {{ gpu_text }}

## The task card (`{{ task_path }}/prompt.md`)

{{ prompt }}

## Rules of this run

- Change only `{{ task_path }}/solution/` (your candidate) and `{{ task_path }}/docs/` (notes); results files are
  written by `kda bench`. Files anywhere else (the harness `kda/`, `bench/`, `oracle.py`, `config.toml`, tests)
  are fixed: the gate fails a diff that touches them.
- Never import, call or copy the baseline or the oracle into `solution/`; no torch compute ops on the host path; no
  streams, events or timers of your own; no caching of results (`docs/harness.md` lists every check).
- Every figure you report comes from a results file `kda bench` wrote; never type a number by hand.
- Commit your work on `{{ branch }}` with messages that say what changed and why, `docs/ledger.jsonl` included.
- Record each attempt, failed ones too, in the ledger:
  `kda ledger {{ task_path }} --add --decision NO-GO|IMPROVEMENT|BLOCKED --hypothesis "... (predicted effect: ...)"
  --change "..." --reason "... (numbers from results/...)"`.
- End each round's final message with two lines, `Hypothesis: <what you tried and the predicted effect>` and
  `Change: <what you changed>`; the Stop hook copies them into the ledger.

## Gates (`[gates]` in `{{ task_path }}/config.toml`)

| gate | value | meaning |
|---|---|---|
| correctness | every row | `kda check` passes every row of `bench/workloads.json` (oracle, error ratio, poison, guards) |
| static rules | none broken | `kda.harness.guards.static_violations` on `solution/` |
| `min_geomean` | {{ gates.min_geomean }} | geomean speedup over the baseline ({{ metric }}, production rows) at least this |
| `min_row` | {{ gates.min_row }} | the worst production row's median speedup at least this |
| `ci_over_noise` | {{ gates.ci_over_noise | lower }} | the geomean's 95% CI lower bound above the A/A noise floor (`results/<gpu>-aa.jsonl.gz`, when present) |
| `min_graph_peer_row_ci` | {{ gates.min_graph_peer_row_ci }} | no production row whose 95% interval of graph_us over the best peer (upstream, torch.compile, eager) lies wholly below this |
| `max_rounds` | {{ gates.max_rounds }} | rounds this run gets |

How to run them yourself:

- `kda gate {{ task_path }}`: all of the above. On a GPU it runs the full benchmark (`kda bench`) and writes
  `results/<gpu>.jsonl.gz`; without a GPU it runs only the CPU correctness gate, says so, and the candidate stays
  unpromoted.
- `kda check {{ task_path }} --cpu`: correctness of the rows marked `cpu` through Triton's interpreter (no GPU).
- `kda bench {{ task_path }}` and `kda bench {{ task_path }} --aa` (noise floor): timings on a GPU.

## Evidence already here

Read it before you change anything; what a row is bound by decides what can help it.

{{ evidence }}

## The review loop

When you stop, the Stop hook (`kda hook stop`, in `.claude/settings.json`) runs the gate. While a gate fails and
rounds remain, your stop is blocked and the findings come back as your next instruction; when the gates pass, or
after {{ gates.max_rounds }} rounds, the stop goes through. Each round is a ledger entry. An agent without a Stop
hook is run by `kda launchers drive`: the gate runs when it exits, and while it fails the agent starts again with
the findings in `.kda/FINDINGS.md` (its path in KDA_FINDINGS): if that file exists, act on it first. Promotion is a separate,
human-reviewed step (`kda promote`), never part of this run.
"""

def brief_text(manifest: dict, prompt: str, gates: dict, metric: str, evidence: list[str] | None = None) -> str:
    """`evidence`: the bullets of kda.loop.evidence.lines for the task (none: the section says nothing is known)."""
    import jinja2

    env = jinja2.Environment(undefined=jinja2.StrictUndefined, keep_trailing_newline=True)
    gpu = manifest["gpu"]
    gpu_text = (f"`{gpu}` (CUDA_VISIBLE_DEVICES is set to it)." if gpu != "any" else
                "any: before each GPU run pick an idle GPU (`nvidia-smi`: no processes, low utilisation) and "
                "pin it with CUDA_VISIBLE_DEVICES; check again after the run that nobody else used it.")
    return env.from_string(BRIEF).render(**manifest, prompt=prompt.strip(), gates=gates, metric=metric,
                                         gpu_text=gpu_text,
                                         evidence="\n".join(evidence or ["- Nothing recorded for this task yet."]))


def settings_json(existing: dict | None, hook_command: str, timeout_s: int) -> dict:
    """Claude Code project settings with our Stop hook added (keeps whatever settings the repository has)."""
    data = json.loads(json.dumps(existing or {}))
    hooks = data.setdefault("hooks", {})
    stop = hooks.setdefault("Stop", [])
    stop.append({"hooks": [{"type": "command", "command": hook_command, "timeout": timeout_s}]})
    return data


def add_excludes(worktree: Path) -> Path:
    """Add .kda/ and .claude/ to the repository's info/exclude (shared by all worktrees of the repository)."""
    rel = git("rev-parse", "--git-path", "info/exclude", cwd=worktree)
    path = (Path(worktree) / rel) if not Path(rel).is_absolute() else Path(rel)
    path.parent.mkdir(parents=True, exist_ok=True)
    have = path.read_text().splitlines() if path.is_file() else []
    missing = [e for e in EXCLUDES if e not in have]
    if missing:
        with open(path, "a") as f:
            if have and have[-1] != "":
                f.write("\n")
            f.write("# kda agent runs: per-worktree state, never committed\n" + "\n".join(missing) + "\n")
    return path


def max_rounds(cfg) -> int:
    """The run's round budget: the task's `gates.max_rounds`, or fewer where KDA_MAX_ROUNDS asks (`kda campaign run
    --rounds N`); never more, since the gate's own budget finding reads the config."""
    budget = cfg["gates"]["max_rounds"]
    asked = os.environ.get("KDA_MAX_ROUNDS")
    if not asked:
        return budget
    if not asked.isdigit() or int(asked) < 1:
        raise KdaError(f"KDA_MAX_ROUNDS={asked!r}: expected a whole number of rounds, at least 1")
    return min(int(asked), budget)


def prepare(worktree: Path, manifest: dict, hook_command: str, hook_timeout_s: int = 7200) -> list[Path]:
    """Write the brief, the Claude settings and the manifest into a fresh worktree; returns the paths written."""
    from kda.definition.config import load_config

    worktree = Path(worktree)
    task_dir = worktree / manifest["task_path"]
    cfg = load_config(task_dir / "config.toml")
    manifest = dict(manifest, task=cfg["task"]["name"], max_rounds=max_rounds(cfg), ended=None)
    exclude = add_excludes(worktree)
    state = state_dir(worktree)
    state.mkdir(parents=True, exist_ok=True)
    prompt_path = task_dir / "prompt.md"
    if not prompt_path.is_file():
        raise KdaError(f"{prompt_path}: no such file (every task has a prompt.md task card)")
    brief = state / "BRIEF.md"
    from kda.loop.evidence import lines as evidence_lines

    evidence = evidence_lines(task_dir, manifest["task_path"], worktree)
    gates = dict(cfg["gates"], max_rounds=manifest["max_rounds"])  # the run's budget (KDA_MAX_ROUNDS may lower it)
    brief.write_text(brief_text(manifest, prompt_path.read_text(), gates, cfg["bench"]["metric"], evidence))
    settings_path = worktree / ".claude" / "settings.json"
    existing = None
    if settings_path.is_file():
        try:
            existing = json.loads(settings_path.read_text())
        except json.JSONDecodeError as e:
            raise KdaError(f"{settings_path}: not valid JSON: {e}") from None
    settings_path.parent.mkdir(parents=True, exist_ok=True)
    settings_path.write_text(json.dumps(settings_json(existing, hook_command, hook_timeout_s), indent=1) + "\n")
    save_manifest(worktree, manifest)
    return [brief, settings_path, state / "run.json", exclude]


def prepare_from_args(args) -> list[Path]:
    """`kda launchers prepare`: called by lib/launch.sh inside the new worktree."""
    manifest = {
        "schema": 1, "run_id": args.run_id, "task": Path(args.task_path).name, "task_path": args.task_path.rstrip("/"),
        "label": args.label, "repo": args.repo, "base_ref": args.base_ref, "base_commit": args.base_commit,
        "branch": args.branch, "review_base": args.review_base, "worktree": args.worktree,
        "agent": {"kind": args.agent_kind, "command": args.agent_command,
                  "model": (args.model or None) if args.agent_kind == "claude" else None,
                  "effort": (args.effort or None) if args.agent_kind == "claude" else None,
                  "permission_mode": (args.permission_mode or None) if args.agent_kind == "claude" else None},
        "gpu": args.gpu or "any", "time_utc": now_utc(), "max_rounds": 1,  # max_rounds: replaced from the config
    }
    return prepare(Path(args.worktree), manifest, args.hook_command, args.hook_timeout)
