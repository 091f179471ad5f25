"""`kda campaign status` and `kda campaign clean [--yes]`: the agent runs of every task, seen from one checkout.

A run is a branch `kda/<task>/<run-id>` (with its pinned review base `kda-base/<task>/<run-id>`) and, while open, a
worktree holding `.kda/run.json`. `clean` removes the worktrees and branches of runs that are over: the branch is
merged into HEAD (it has commits of its own, all reachable from HEAD), or the manifest says the run ended. Before
deleting a branch that is not merged it tags the tip `kda-archive/<task>/<run-id>`, so no attempt (and no ledger
line) is lost. A worktree with uncommitted changes is never removed. Without --yes it only prints the plan.

Runs that never end by themselves are over too once idle (`--idle-hours`, default 24): a dry run (prepared with
KDA_NO_CLAUDE=1, or an agent that never got to a round) has no round and no commit of its own; an abandoned one (its
agent killed, the machine lost) has not moved since. Idle means no round, commit or change to its task folder for
that long. A run whose worktree was removed by hand, and that neither ended nor merged, is abandoned at once.
"""
from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path

from kda.loop import agentrun

from kda.evidence import ledger
from kda.core.errors import KdaError
from kda.core.gitutil import git, ok, worktrees
from kda.harness import results_file


@dataclass
class Run:
    task: str
    run_id: str
    branch: str
    tip: str
    review_base: str | None
    worktree: Path | None
    manifest: dict | None
    rounds: int | None
    merged: bool
    ended: str | None
    dirty: list[str] = field(default_factory=list)
    idle_s: float | None = None  # since the last round, commit or change to its task folder (None: no worktree)
    own_commits: bool = True

    @property
    def over(self) -> bool:
        return self.merged or self.ended is not None

    def stale(self, idle_hours: float) -> str | None:
        """Why a run that did not end by itself is over (dry or abandoned), or None."""
        if self.over:
            return None
        if self.worktree is None:
            return "abandoned: its worktree is gone and the run never ended"
        if self.idle_s is None or self.idle_s < idle_hours * 3600:
            return None
        idle = f"idle {self.idle_s / 3600:.0f} h"
        if not self.rounds and not self.own_commits:
            return f"dry run: no round and no commit of its own, {idle}"
        return f"abandoned: no round, commit or change to its task folder, {idle}"


def _ref(repo: Path, name: str) -> str | None:
    out = git("rev-parse", "--verify", "-q", name, cwd=repo, check=False)
    return out if len(out) == 40 else None


def runs(repo: Path, task: str) -> list[Run]:
    trees = {w["branch"]: w for w in worktrees(repo) if w.get("branch")}
    out = []
    listing = git("for-each-ref", "--format=%(refname:short) %(objectname)", f"refs/heads/kda/{task}/", cwd=repo)
    for line in filter(None, listing.splitlines()):
        branch, tip = line.split()
        run_id = branch.rsplit("/", 1)[-1]
        base_name = f"kda-base/{task}/{run_id}"
        base_tip = _ref(repo, base_name)
        wt = trees.get(branch)
        path = Path(wt["path"]) if wt and not wt["prunable"] and Path(wt["path"]).is_dir() else None
        manifest = rounds = ended = None
        dirty: list[str] = []
        if path is not None:
            if (path / ".kda" / "run.json").is_file():
                try:
                    manifest = agentrun.load_manifest(path)
                    rounds = agentrun.load_rounds(path, manifest)["rounds"]
                    ended = (manifest.get("ended") or {}).get("why")
                except KdaError as e:
                    ended = None
                    dirty.append(f"(unreadable run state: {e})")
            dirty += git("status", "--porcelain", cwd=path).splitlines()
        own_commits = base_tip is None or tip != base_tip
        merged = own_commits and ok("merge-base", "--is-ancestor", tip, "HEAD", cwd=repo)
        idle = None if path is None else time.time() - _last_activity(repo, path, tip, manifest)
        out.append(Run(task, run_id, branch, tip, base_name if base_tip else None, path, manifest, rounds, merged,
                       ended, dirty, idle, own_commits))
    return out


def _epoch(utc: str | None) -> float:
    from datetime import datetime

    try:
        return datetime.strptime(utc or "", "%Y-%m-%dT%H:%M:%SZ").timestamp() if utc else 0.0
    except ValueError:
        return 0.0


def _last_activity(repo: Path, path: Path, tip: str, manifest: dict | None) -> float:
    """Epoch seconds of a run's last sign of life: its start, its last round, its tip commit, the newest file of its
    task folder in the worktree."""
    times = [float(git("log", "-1", "--format=%ct", tip, cwd=repo) or 0)]
    if manifest:
        times.append(_epoch(manifest.get("time_utc")))
        try:
            hist = agentrun.load_rounds(path, manifest)["history"]
        except (KdaError, OSError, ValueError):
            hist = []
        times += [_epoch(h.get("time_utc")) for h in hist[-1:]]
        folder = path / manifest["task_path"]
        if folder.is_dir():
            times += [f.stat().st_mtime for f in folder.rglob("*") if f.is_file()]
    return max(times)


def _results_candidates(repo: Path, task_dir: Path, task_runs: list[Run]) -> list[tuple[str, str]]:
    """(source label, results file text) from this checkout, every run branch and every open worktree."""
    rel = task_dir.resolve().relative_to(repo.resolve()).as_posix()
    found = [("this checkout", results_file.read_text(p)) for p in results_file.list_files(task_dir / "results")]
    for r in task_runs:
        names = git("ls-tree", "--name-only", f"{r.tip}:{rel}/results", cwd=repo, check=False).splitlines()
        for n in filter(results_file.is_results_name, names):
            blob = results_file.git_blob(repo, f"{r.tip}:{rel}/results/{n}")
            if blob is not None:
                found.append((r.branch, results_file.decode(blob, f"{r.branch}:{rel}/results/{n}").decode()))
        if r.worktree is not None:
            found += [(f"worktree {r.worktree.name}", results_file.read_text(p))
                      for p in results_file.list_files(r.worktree / rel / "results")]
    return found


def best_per_gpu(repo: Path, task_dir: Path, task_runs: list[Run]) -> dict[str, dict]:
    best: dict[str, dict] = {}
    for source, text in _results_candidates(repo, task_dir, task_runs):
        try:
            recs = [json.loads(x) for x in text.splitlines() if x.strip()]
            prov, summ = recs[0], recs[-1]
        except (ValueError, IndexError):
            continue
        if prov.get("mode") != "bench" or prov.get("aa"):
            continue
        metric = summ.get("headline_metric", "device_us")
        e = ((summ.get("metrics") or {}).get(metric) or {}).get("vs_baseline")
        cand = {"source": source, "metric": metric, "geomean": e["geomean"] if e else None,
                "all_pass": summ.get("rows_passed") == summ.get("rows_total"),
                "commit": (prov.get("commit") or "?")[:12], "time_utc": prov.get("time_utc")}
        key = (cand["all_pass"], cand["geomean"] or 0.0)
        cur = best.get(prov.get("gpu_slug", "?"))
        if cur is None or key > (cur["all_pass"], cur["geomean"] or 0.0):
            best[prov.get("gpu_slug", "?")] = cand
    return best


def status(repo: Path) -> list[dict]:
    from kda.core.paths import all_task_dirs
    from kda.loop.promote import last_promoted

    out = []
    for task_dir in all_task_dirs():
        task_runs = runs(repo, task_dir.name)
        try:
            promoted = last_promoted(ledger.read(task_dir))
        except KdaError as e:
            promoted = {"id": "?", "commit": None, "time_utc": "", "error": str(e)}
        out.append({"task": task_dir.name, "runs": task_runs, "best": best_per_gpu(repo, task_dir, task_runs),
                    "promoted": promoted})
    return out


def print_status(repo: Path, console) -> None:
    from rich.markup import escape
    from rich.table import Table

    t = Table(title="kda campaign")
    for col in ("task", "runs", "open worktrees", "best result per GPU", "promoted"):
        t.add_column(col, overflow="fold")
    detail = Table(title="agent runs")
    for col in ("task", "run", "worktree", "rounds", "state"):
        detail.add_column(col, overflow="fold")
    for s in status(repo):
        best = "\n".join(
            f"{gpu}: {('%.3fx' % b['geomean']) if b['geomean'] is not None else '-'} {b['metric']}"
            f"{'' if b['all_pass'] else ' (rows failing)'} [{b['source']}, {b['commit']}]"
            for gpu, b in sorted(s["best"].items())) or "none"
        p = s["promoted"]
        promoted = (f"{p['id']}: {p['commit'][:12] if p.get('commit') else '?'} ({p['time_utc'][:10]})" if p else "never")
        open_wts = [str(r.worktree) for r in s["runs"] if r.worktree is not None]
        t.add_row(s["task"], str(len(s["runs"])), escape("\n".join(open_wts) or "none"), escape(best), escape(promoted))
        for r in s["runs"]:
            state = ("merged" if r.merged else "") + (f" ended: {r.ended}" if r.ended else "") or "open"
            detail.add_row(r.task, r.run_id, escape(str(r.worktree) if r.worktree else "(removed)"),
                           "-" if r.rounds is None else str(r.rounds),
                           escape(state.strip() + (" (dirty)" if r.dirty else "")))
    console.print(t)
    if detail.row_count:
        console.print(detail)


def clean(repo: Path, yes: bool, echo=print, idle_hours: float = 24.0) -> int:
    """Remove the worktrees and branches of runs that are over (ended, merged, or dry or abandoned after
    `idle_hours`). Dry run unless yes. Returns an exit code."""
    from kda.core.paths import all_task_dirs

    refused = 0
    acted = 0
    for task_dir in all_task_dirs():
        for r in runs(repo, task_dir.name):
            stale = r.stale(idle_hours)
            if not r.over and not stale:
                continue
            why = "merged into HEAD" if r.merged else f"run ended ({r.ended})" if r.ended is not None else stale
            if r.dirty:
                refused += 1
                echo(f"refuse {r.branch}: {why}, but its worktree {r.worktree} has uncommitted changes:\n  "
                     + "\n  ".join(r.dirty[:8]) + "\n  commit or discard them first")
                continue
            steps = []
            if r.worktree is not None:
                steps.append(("remove worktree " + str(r.worktree), ["worktree", "remove", str(r.worktree)]))
            if not r.merged:
                tag = f"kda-archive/{r.task}/{r.run_id}"
                steps.append((f"tag {tag} at {r.tip[:12]} (keeps the unmerged attempt)", ["tag", tag, r.tip]))
            steps.append((f"delete branch {r.branch}", ["branch", "-D", r.branch]))
            if r.review_base:
                steps.append((f"delete branch {r.review_base}", ["branch", "-D", r.review_base]))
            echo(f"{'clean' if yes else 'would clean'} {r.branch} ({why}):")
            for text, args in steps:
                echo(f"  {text}")
                if yes:
                    git(*args, cwd=repo)
            acted += 1
    if yes:
        git("worktree", "prune", cwd=repo)
    if not acted and not refused:
        echo("nothing to clean")
    elif not yes and acted:
        echo("dry run: nothing was changed; run `kda campaign clean --yes` to do it")
    return 1 if refused else 0
