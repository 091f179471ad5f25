"""`kda gate`: is the candidate in a task folder good enough to promote? One verdict, with the numbers behind it.

Gates, in order: the scope of the change (only the task's solution/, docs/ and results/ may differ from the review
base), the static rules on solution/, the round budget, correctness on every row, and the benchmark gates of
`[gates]` in config.toml: min_geomean, min_row and ci_over_noise on the headline metric, and min_graph_peer_row_ci
on each production row's graph_us against the best peer (what a user who captures graphs gains over what they could
run instead). The benchmark gates read a bench run's rows and summary, so a committed results file can be gated
too (results_file_findings). With a GPU the correctness and benchmark parts are one `kda bench` run (which writes
results/<gpu>.jsonl.gz); without a GPU only the CPU correctness gate and, for a Triton candidate, the compile gate
(every production launch lowers for sm_90) can run, and the verdict is BLOCKED, never PASS: the candidate stays
unpromoted until a GPU measured it.

Statuses: PASS (exit 0), FAIL (exit 1: something the candidate must fix), BLOCKED (exit 3: nothing failed that
could be checked, but a gate could not be evaluated).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from kda.evidence import ledger
from kda.evidence.report import graph_peer_losses
from kda.core.errors import KdaError
from kda.harness import results_file
from kda.harness.provenance import DEVICE_US_START
from kda.loop.evidence import profile_pointers

EXIT = {"PASS": 0, "FAIL": 1, "BLOCKED": 3}
DECISION = {"PASS": "IMPROVEMENT", "FAIL": "NO-GO", "BLOCKED": "BLOCKED"}
# Inside the task folder, the only places a candidate's change may touch.
ALLOWED_DIRS = ("solution", "docs", "results")
MAX_ROW_FINDINGS = 15


@dataclass
class GateResult:
    task: str
    status: str  # PASS | FAIL | BLOCKED
    findings: list[str] = field(default_factory=list)  # what failed, with numbers
    notes: list[str] = field(default_factory=list)  # what was checked, skipped or not reachable
    metrics: dict = field(default_factory=dict)
    results_path: Path | None = None
    gpu: str | None = None
    commit: str | None = None

    @property
    def exit_code(self) -> int:
        return EXIT[self.status]

    @property
    def decision(self) -> str:
        return DECISION[self.status]

    def text(self) -> str:
        head = f"kda gate {self.task}: {self.status}" + (f" on {self.gpu}" if self.gpu else "")
        lines = [head]
        if self.findings:
            lines.append("What failed:")
            lines += [f"  - {f}" for f in self.findings]
        if self.notes:
            lines.append("Notes:")
            lines += [f"  - {n}" for n in self.notes]
        if self.metrics.get("rows_total") is not None:
            lines.append(f"Numbers: {ledger.metrics_text(self.metrics)}")
        return "\n".join(lines)


def has_gpu() -> bool:
    try:
        import torch

        return torch.cuda.is_available()
    except Exception:  # noqa: BLE001  (a broken CUDA install is "no GPU" here, and the text says so)
        return False


def scope_violations(repo: Path, base: str, task_rel: str) -> list[str]:
    """Files changed since `base` outside the task's solution/, docs/ and results/ (the harness side is fixed)."""
    from kda.core.gitutil import changed_files

    allowed = tuple(f"{task_rel.rstrip('/')}/{d}/" for d in ALLOWED_DIRS)
    bad = [f for f in changed_files(repo, base) if not f.startswith(allowed)]
    return [f"scope: {f} differs from the review base {base} (only {', '.join(allowed)} may change)" for f in bad]


def _row_findings(rows: list[dict]) -> list[str]:
    bad = [r for r in rows if r["status"] != "PASS"]
    out = []
    for r in bad[:MAX_ROW_FINDINGS]:
        details = "; ".join(str(d) for d in (r.get("details") or [])[:2])
        out.append(f"row {r['id']}: {r['status']} ({', '.join(r.get('reasons') or []) or 'no reason code'})"
                   + (f": {details}" if details else ""))
    if len(bad) > MAX_ROW_FINDINGS:
        out.append(f"... and {len(bad) - MAX_ROW_FINDINGS} more failing rows (see the run table)")
    return out


def _rows_named(findings: list[str]) -> list[str]:
    """The row ids a speed gate's findings name (`row <id>` in min_row and min_graph_peer_row_ci)."""
    return [m for f in findings for m in re.findall(r"\brow ([A-Za-z0-9_.\-]+?)(?=[:,\s]|$)", f)]


def _fmt_ci(ci) -> str:
    return f"[{ci[0]:.3f}, {ci[1]:.3f}]" if ci and None not in ci else "[no interval]"


def bench_findings(summary: dict, gates: dict) -> tuple[list[str], list[str]]:
    """The benchmark gates on a bench summary: (findings, notes)."""
    findings, notes = [], []
    metric = summary.get("headline_metric", "device_us")
    e = ((summary.get("metrics") or {}).get(metric) or {}).get("vs_baseline")
    if not e:
        return [f"min_geomean: no passing production row, so there is no {metric} geomean to gate"], notes
    g, ci = e["geomean"], e.get("ci")
    if g < gates["min_geomean"]:
        findings.append(f"min_geomean: {metric} geomean over the baseline {g:.3f}x {_fmt_ci(ci)} is below "
                        f"{gates['min_geomean']} ({e['rows']} production rows)")
    worst = e["min"]
    if worst["median"] < gates["min_row"]:
        findings.append(f"min_row: row {worst['id']} is at {worst['median']:.3f}x {_fmt_ci(worst.get('ci'))}, "
                        f"below {gates['min_row']}")
    if gates["ci_over_noise"]:
        nf = summary.get("noise_floor")
        if not nf:
            notes.append("ci_over_noise not checked: no A/A file results/<gpu>-aa.jsonl.gz for this GPU "
                         "(run `kda bench TASK --aa` once per GPU)")
        elif not ci or ci[0] is None or ci[0] <= nf["geomean"]:
            findings.append(f"ci_over_noise: the geomean's CI lower bound {ci[0] if ci else float('nan'):.3f} does not "
                            f"exceed the A/A noise floor geomean {nf['geomean']:.3f} ({nf['file']})")
        if nf and nf.get("device_us_start", DEVICE_US_START) != DEVICE_US_START:
            notes.append(f"ci_over_noise: the A/A floor ({nf['file']}) stamped device_us's start on an "
                         f"{nf['device_us_start']}, this harness behind a {DEVICE_US_START} (docs/harness.md); run "
                         "`kda bench TASK --aa` again for a floor measured the same way")
    return findings, notes


def graph_peer_findings(rows: list[dict], gates: dict) -> tuple[list[str], list[str]]:
    """min_graph_peer_row_ci on a bench run's rows: each passing production row whose 95% interval of graph_us over
    the best peer lies wholly below the bound is a finding; a row with no such interval (the candidate's graph
    capture failed, or no correct peer was timed) is a note, so it is never passed in silence. (findings, notes)"""
    bound = gates["min_graph_peer_row_ci"]
    losses = graph_peer_losses(rows, bound)
    findings = [f"min_graph_peer_row_ci: row {r['id']}: graph_us {r['median']:.3f}x {_fmt_ci(r['ci'])} over "
                f"{r['peer']} (the best peer), wholly below {bound}" for r in losses.below]
    notes = [f"min_graph_peer_row_ci: row {rid} not checked: {why}" for rid, why in losses.unmeasured]
    return _capped(findings, "rows below the bound"), _capped(notes, "rows not checked")


def _capped(lines: list[str], what: str) -> list[str]:
    """At most MAX_ROW_FINDINGS lines about rows, then how many more there are."""
    if len(lines) <= MAX_ROW_FINDINGS:
        return lines
    return lines[:MAX_ROW_FINDINGS] + [f"... and {len(lines) - MAX_ROW_FINDINGS} more {what} (see the results file)"]


def benchmark_findings(summary: dict, rows: list[dict], gates: dict) -> tuple[list[str], list[str]]:
    """Every benchmark gate on a bench run (its summary and rows): (findings, notes)."""
    findings, notes = bench_findings(summary, gates)
    f, n = graph_peer_findings(rows, gates)
    return findings + f, notes + n


def results_file_findings(path: Path, gates: dict, task=None) -> tuple[list[str], list[str]]:
    """The benchmark gates on a written results file (a bench run's, committed or not): what `kda gate` would find
    in its numbers, with `task` (a kda Task) the pointers to the named rows' profiles too. Correctness is the rows'
    status, gated by _row_findings. (findings, notes)"""
    recs = results_file.read_records(path)
    rows = [r for r in recs if r.get("type") == "row"]
    findings, notes = benchmark_findings(recs[-1], rows, gates)
    if task is not None:
        notes += profile_pointers(task.path, task.name, _rows_named(findings), recs[0].get("gpu_slug"))
    return _row_findings(rows) + findings, notes


def compile_findings(task, compiler: Callable | None = None) -> tuple[list[str], list[str]]:
    """The compile gate of a Triton candidate without a GPU: every launch of its production rows must lower for sm_90
    (kda.harness.aot.compile_task, or `compiler(task)` returning the same dict). (findings, notes)."""
    import os

    if task.cfg["task"].get("candidate_language") != "triton":
        return [], []
    if os.environ.get("TRITON_INTERPRET") == "1":
        return [], ["compile gate not run: TRITON_INTERPRET=1 in this process makes every kernel an interpreted "
                    "function (run `kda compile` without it)"]
    if compiler is None:
        from kda.harness.aot import compile_task

        def compiler(t):  # registers and occupancy are for reading, not gating
            return compile_task(t, with_usage=False)
    rep = compiler(task)
    findings = [f"compile: {k} (first planned for row {r}) does not lower for sm_90: "
                f"{(e.strip().splitlines() or [''])[0]}" for k, r, e in rep["compile_failures"]]
    notes = [f"compile: {rep['compiled']}/{rep['launches']} Triton launches of the production rows lower for sm_90"]
    notes += [f"compile: row {r} not traced on meta tensors ({e.splitlines()[0] if e else e}); its launches were "
              f"not compiled" for r, e in rep["trace_failures"].items()]
    return findings, notes


def run_gate(task, *, device: str = "auto", rows: list[str] | None = None, base: str | None = None,
             rounds_used: int | None = None, runner: Callable | None = None, gpu_check: Callable[[], bool] = has_gpu,
             quiet: bool = True, compiler: Callable | None = None, row_timeout_s: float | None = None,
             write: bool = True) -> GateResult:
    """Run every gate on `task` (a kda.definition.task.Task). `runner(task, RunOptions)` defaults to the harness's run_task;
    `compiler(task)` (the CPU path's compile gate) to kda.harness.aot.compile_task. `write`: keep the GPU bench's
    results file (the Stop hook's rounds and `kda gate --record`; a plain `kda gate` writes nothing)."""
    from kda.harness.guards import static_violations
    from kda.harness.runner import RunOptions

    gates = task.cfg["gates"]
    res = GateResult(task=task.name, status="PASS")
    if base:
        from kda.core.gitutil import toplevel

        root = toplevel(task.path)  # the checkout holding the task, whatever KDA_ROOT or the cwd say
        res.findings += scope_violations(root, base, task.path.resolve().relative_to(root.resolve()).as_posix())
    res.findings += [f"static rule: {v}" for v in static_violations(task.static_files())]
    if rounds_used is not None:
        if rounds_used > gates["max_rounds"]:
            res.findings.append(f"max_rounds: this is round {rounds_used}, over the budget of {gates['max_rounds']}")
        else:
            res.notes.append(f"round {rounds_used} of {gates['max_rounds']}")
    use_gpu = gpu_check() if device == "auto" else device == "cuda"
    if device == "cuda" and not gpu_check():
        raise KdaError("kda gate --device cuda: no CUDA GPU is visible")
    if runner is None:
        from kda.harness.runner import run_task as runner
    try:
        if use_gpu:
            out = runner(task, RunOptions(mode="bench", device="cuda", rows=rows, quiet=quiet, write=write,
                                          row_timeout_s=row_timeout_s))
        else:
            out = runner(task, RunOptions(mode="check", device="cpu", rows=rows, write=False, quiet=quiet,
                                          row_timeout_s=row_timeout_s))
    except KdaError as e:
        res.findings.append(f"the harness could not run the candidate: {e}")
        res.status = "FAIL"
        return res
    summ, prov = out["summary"], out["provenance"]
    res.metrics = ledger.metrics_from_summary(summ, prov)
    res.gpu = prov.get("gpu_slug")
    res.commit = prov.get("commit")
    res.results_path = Path(out["path"]) if out.get("path") else None
    res.findings += _row_findings(out["rows"])
    if use_gpu:
        f, n = benchmark_findings(summ, out["rows"], gates)
        res.findings += f
        res.notes += n + profile_pointers(task.path, task.name, _rows_named(f), res.gpu)
    else:
        res.notes.append(f"GPU not reachable (no CUDA device visible): only the CPU correctness gate ran, on the "
                         f"{summ['rows_total']} rows marked cpu; min_geomean, min_row, ci_over_noise and "
                         f"min_graph_peer_row_ci were not evaluated, so the candidate stays unpromoted")
        f, n = compile_findings(task, compiler)
        res.findings += f
        res.notes += n
    if rows:
        res.notes.append(f"only the rows {', '.join(rows)} were run: a candidate is promoted on every row")
    res.status = "FAIL" if res.findings else ("PASS" if use_gpu and not rows else "BLOCKED")
    return res


def ledger_fields(res: GateResult, task_dir: Path, **extra) -> dict:
    """A ledger decision entry for a gate result (callers add round, parent, hypothesis, change, author, review)."""
    fields = {
        "kind": "decision", "decision": res.decision,
        "hypothesis": "(no hypothesis given for this gate run)",
        "change": "gate run on the working tree",
        "reason": res.text(),
        "metrics": res.metrics,
        "results_ref": ledger.results_ref(task_dir, res.results_path) if res.results_path else None,
        "author": "kda gate",
        "commit": res.commit,
    }
    fields.update({k: v for k, v in extra.items() if v is not None})
    return fields


def gate_and_record(task, **kwargs) -> tuple[GateResult, dict]:
    """run_gate, then append its ledger entry and refresh docs/ledger.md. Keyword `entry` holds ledger extras."""
    entry = kwargs.pop("entry", {}) or {}
    res = run_gate(task, **kwargs)
    rec = ledger.append(task.path, ledger_fields(res, task.path, **entry))
    ledger.write_markdown(task.path)
    return res, rec
