"""`kda promote TASK REF`: re-run the full gate on a committed candidate and, only when every gate passes, write the
review file a person signs and a PROMOTED ledger entry.

The gate runs in a temporary, clean worktree of REF (nothing uncommitted, nothing from this checkout leaks in), on a
GPU: without one the benchmark gates cannot be evaluated, so promotion refuses and the candidate stays unpromoted.
Outputs land in this checkout's task folder: docs/review/<commit12>.md, docs/review/<commit12>-<gpu>.jsonl.gz (the
results file the gate wrote, as written) and the ledger entry. The merge itself stays a human step.
"""
from __future__ import annotations

import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from kda.evidence import ledger
from kda.loop.agentrun import scoped_env
from kda.core.gitutil import commit_of, git, ok
from kda.harness import results_file


@dataclass
class Outcome:
    promoted: bool
    message: str
    review: Path | None = None
    entry: dict | None = None

    @property
    def exit_code(self) -> int:
        return 0 if self.promoted else 1


def last_promoted(entries: list[dict]) -> dict | None:
    return next((e for e in reversed(entries) if e["decision"] == "PROMOTED" and e.get("commit")), None)


def _real_gate(task, base: str):
    from kda.loop.gate import run_gate

    return run_gate(task, device="cuda", base=base, quiet=False)


def promote(task_ref: str, ref: str, *, gate: Callable | None = None, gpu_check: Callable[[], bool] | None = None,
            author: str | None = None) -> Outcome:
    """`gate(task, base) -> GateResult` is the real GPU gate unless a test passes another."""
    from kda.loop.gate import has_gpu
    from kda.core.paths import repo_root
    from kda.definition.task import Task

    repo = repo_root()
    task = Task.load(task_ref)
    task_rel = task.path.resolve().relative_to(repo.resolve()).as_posix()
    commit = commit_of(ref, repo)
    short = commit[:12]
    if gate is None:
        if not (gpu_check or has_gpu)():
            return Outcome(False, f"kda promote: refused: no CUDA GPU is visible, so the benchmark gates of {task.name} "
                                  f"cannot run; {ref} ({short}) stays unpromoted. Run `kda promote` on a GPU machine.")
        gate = _real_gate
    entries = ledger.read(task.path)  # a broken ledger here stops promotion before any work
    merge_base = git("merge-base", "HEAD", commit, cwd=repo)
    prev = last_promoted(entries)
    diff_base = prev["commit"] if prev and ok("merge-base", "--is-ancestor", prev["commit"], commit, cwd=repo) else merge_base

    tmp = Path(tempfile.mkdtemp(prefix=f"kda-promote-{short}-"))
    tree = tmp / "tree"
    git("worktree", "add", "--detach", "-q", str(tree), commit, cwd=repo)
    try:
        cand_dir = tree / task_rel
        if not (cand_dir / "config.toml").is_file():
            return Outcome(False, f"kda promote: refused: {ref} ({short}) has no task folder {task_rel}")
        with scoped_env(KDA_ROOT=str(tree), KDA_CACHE=os.environ.get("KDA_CACHE") or str(repo / ".kda-cache")):
            cand_task = Task.load(cand_dir)
            res = gate(cand_task, merge_base)
            ref_entries = ledger.read(cand_dir)
        common = {"commit": commit, "metrics": res.metrics, "round": 0,
                  "author": author or ledger.default_author(), "source_hash": ledger.solution_hash(cand_dir)}
        if res.status != "PASS":
            entry = ledger.append(task.path, {
                **common, "kind": "decision", "decision": res.decision,
                "hypothesis": f"{short} meets every gate of {task.name} and can be promoted",
                "change": f"promotion attempt of {ref} ({short})",
                "reason": "kda promote refused:\n" + res.text()})
            ledger.write_markdown(task.path)
            return Outcome(False, f"kda promote: refused: {ref} ({short}) did not pass every gate "
                                  f"(ledger {entry['id']}):\n{res.text()}", entry=entry)
        review_dir = task.path / "docs" / "review"
        review_dir.mkdir(parents=True, exist_ok=True)
        results_copy = None
        if res.results_path:
            results_copy = review_dir / f"{short}-{res.gpu}{results_file.SUFFIX}"
            shutil.copyfile(res.results_path, results_copy)
        diff = git("diff", diff_base, commit, "--", f"{task_rel}/solution/", cwd=repo)
        profiles = sorted((cand_dir / "docs" / "profile").rglob("*.md")) if (cand_dir / "docs" / "profile").is_dir() else []
        review_path = review_dir / f"{short}.md"
        review_path.write_text(review_markdown(
            task=task.name, ref=ref, commit=commit, diff_base=diff_base,
            diff_base_kind="the last promoted version" if diff_base != merge_base else "the merge base with this branch",
            diff=diff, gate_text=res.text(), results=results_copy, ref_entries=ref_entries,
            profiles=[(p.relative_to(cand_dir).as_posix(), p.read_text()) for p in profiles]))
        entry = ledger.append(task.path, {
            **common, "kind": "decision", "decision": "PROMOTED",
            "hypothesis": f"{short} meets every gate of {task.name} on {res.gpu} and is ready for review",
            "change": f"promote {ref} ({short}); solution diff against {diff_base[:12]}",
            "reason": f"every gate passed; review {review_path.relative_to(task.path).as_posix()} and sign its checklist\n"
                      + res.text(),
            "results_ref": ledger.results_ref(task.path, results_copy) if results_copy else None})
        ledger.write_markdown(task.path)
        return Outcome(True, f"kda promote: {ref} ({short}) passed every gate; wrote {review_path} "
                             f"and ledger entry {entry['id']}", review_path, entry)
    finally:
        git("worktree", "remove", "--force", str(tree), cwd=repo, check=False)
        shutil.rmtree(tmp, ignore_errors=True)


# ---- the review file -----------------------------------------------------------------------------------------


def _f(v, digits=2) -> str:
    return "-" if v is None else f"{v:.{digits}f}"


def _sp(e: dict | None) -> str:
    if not e:
        return "-"
    ci = e.get("ci") or [None, None]
    return f"{_f(e.get('median', e.get('geomean')), 3)} [{_f(ci[0], 3)}, {_f(ci[1], 3)}]"


def results_markdown(path: Path) -> list[str]:
    recs = results_file.read_records(path)
    prov, rows, summ = recs[0], [r for r in recs if r.get("type") == "row"], recs[-1]
    metric = summ.get("headline_metric", "device_us")
    gpu = (prov.get("gpu") or {}).get("name", prov.get("gpu_slug"))
    out = [f"GPU {gpu}; measured copy bandwidth {_f(prov.get('copy_tbps'))} TB/s (datasheet "
           f"{prov.get('datasheet_tbps', '-')}); commit `{(prov.get('commit') or '?')[:12]}`; {prov.get('time_utc')}; "
           f"rows passed {summ.get('rows_passed')}/{summ.get('rows_total')}. Results file: `{path.name}`.", "",
           "| metric | geomean over baseline [95% CI] | min row | over best peer [95% CI] |", "|---|---|---|---|"]
    for m in ("device_us", "graph_us", "wall_us"):
        e = (summ.get("metrics") or {}).get(m) or {}
        vb, vp = e.get("vs_baseline"), e.get("vs_best_peer")
        mn = f"{_f(vb['min']['median'], 3)} ({vb['min']['id']})" if vb else "-"
        out.append(f"| {m} | {_sp(vb)} | {mn} | {_sp(vp)} |")
    nf = summ.get("noise_floor")
    out += ["", f"A/A noise floor (device_us): {_sp(nf) if nf else 'not measured'}", "",
            f"| row | prod | baseline {metric} | candidate {metric} | speedup [95% CI] | vs best peer | "
            f"candidate TB/s | % of copy BW | status |", "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        arms = r.get("arms") or {}
        base = (arms.get("baseline") or {}).get(metric) or {}
        cand = (arms.get("candidate") or {}).get(metric) or {}
        sp = (r.get("speedup") or {}).get(metric) or {}
        peer = f"{_sp(sp.get('vs_best_peer'))} ({sp.get('best_peer')})" if sp.get("vs_best_peer") else "-"
        frac = cand.get("copy_frac")
        status = r["status"] + (f" ({', '.join(r.get('reasons') or [])})" if r.get("reasons") else "")
        out.append(f"| {r['id']} | {'yes' if r.get('production') else 'no'} | {_f(base.get('median'))} | "
                   f"{_f(cand.get('median'))} | {_sp(sp.get('vs_baseline'))} | {peer} | {_f(cand.get('tbps'))} | "
                   f"{_f(100 * frac, 0) if frac else '-'} | {status} |")
    return out


def review_markdown(*, task: str, ref: str, commit: str, diff_base: str, diff_base_kind: str, diff: str,
                    gate_text: str, results: Path | None, ref_entries: list[dict],
                    profiles: list[tuple[str, str]]) -> str:
    short = commit[:12]
    out = [f"<!-- written by `kda promote {task} {ref}`; the reviewer signs the checklist at the end -->",
           f"# Review: {task} at `{short}` ({ref})", "",
           f"Promotion candidate `{commit}`. Every gate passed in a clean worktree of that commit:", "",
           "```text", gate_text, "```", "",
           f"## Solution diff against {diff_base_kind} (`{diff_base[:12]}`)", "",
           "```diff", diff.rstrip("\n") or "(no change under solution/)", "```", "", "## Results", ""]
    out += results_markdown(results) if results else ["(the gate wrote no results file)"]
    out += ["", f"## Ledger of {ref} (last 30 entries)", ""]
    recent = ref_entries[-30:]
    if recent:
        out += ["| id | round | kind | decision | metrics | hypothesis | reason |", "|---|---|---|---|---|---|---|"]
        for e in recent:
            out.append(f"| {e['id']} | {e['round']} | {e['kind']} | {e['decision'] or '-'} | "
                       f"{ledger.cell(ledger.metrics_text(e['metrics']))} | {ledger.cell(e['hypothesis'])} | "
                       f"{ledger.cell(e['reason'])} |")
    else:
        out.append("(the candidate's ledger is empty)")
    out += ["", "## Profile", ""]
    if profiles:
        for name, text in profiles:
            out += [f"### {name}", "", text.rstrip("\n"), ""]
    else:
        out.append("(no docs/profile/ summary in the candidate; `kda profile TASK --row ROW --compare` makes one)")
    out += ["", "## Reviewer checklist", "",
            "- [ ] The diff touches only the task's `solution/` (and `docs/`); the harness, adapter, oracle, workloads "
            "and config are unchanged.",
            "- [ ] The solution neither imports nor calls the baseline or the oracle, caches no results, and uses no "
            "streams, events or timers of its own.",
            "- [ ] Every figure above comes from the results file next to this review; the GPU and the commit match.",
            "- [ ] No row is faster than the datasheet bandwidth allows; the roofline columns are plausible.",
            "- [ ] The gain exceeds the A/A noise floor (or the floor was measured and is stated).",
            "- [ ] The ledger records the attempts, failed ones included, each with its hypothesis and outcome.",
            "- [ ] The code is readable and keeps the upstream signature (a user can drop it into SGLang).", "",
            "Reviewed by: ______________________  Date (UTC): ______________  Verdict: APPROVE / REJECT", ""]
    return "\n".join(out)
