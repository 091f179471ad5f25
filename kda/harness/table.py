"""The table printed at the end of a run (rich), read from the same records that go into the results file.

It must stay readable in an 80-column terminal: a few narrow columns, no vertical rules, the long text (reasons,
notes) on lines of its own below the table; every other figure is in the results file and `docs/results.md`.
"""
from __future__ import annotations

from rich import box
from rich.console import Console
from rich.table import Table

from kda.harness import sweep_verdict


def _fmt(v, digits=2):
    return "-" if v is None else f"{v:.{digits}f}"


def _speed(s):
    if not s:
        return "-"
    return f"{s['median']:.2f} [{s['ci'][0]:.2f}, {s['ci'][1]:.2f}]"


def print_run(out: dict, console: Console) -> None:
    prov, rows, summ = out["provenance"], out["rows"], out["summary"]
    bench = prov["mode"] == "bench"
    title = f"{prov['task']} {'A/A ' if prov['aa'] else ''}{prov['mode']} on {prov['gpu']['name'] if prov.get('gpu') else 'CPU (Triton interpreter)'}"
    t = Table(title=title, box=box.SIMPLE_HEAD, pad_edge=False, padding=(0, 1))
    t.add_column("row", overflow="fold", ratio=1)  # the one column that folds
    t.add_column("status", no_wrap=True)
    if bench:
        metric = summ["headline_metric"]
        t.add_column("x base [95% CI]", justify="right", no_wrap=True)
        t.add_column("x peer", justify="right", no_wrap=True)
        t.add_column("graph x", justify="right", no_wrap=True)
        t.add_column("% copy", justify="right", no_wrap=True)
    else:
        t.add_column("worst err cand/base", justify="right", no_wrap=True)
    for r in rows:
        status = {"PASS": "[green]PASS", "FAIL": "[red]FAIL"}.get(r["status"], f"[red]{r['status']}")
        name = r["id"] + ("" if r["production"] or r.get("model") == "sweep" else " (reg)")  # sweep ids say it
        if bench and r.get("arms"):
            cand = r["arms"].get("candidate", {}).get(metric, {})
            sp = r["speedup"].get(metric, {})
            peer = sp.get("vs_best_peer")
            t.add_row(name, status, _speed(sp.get("vs_baseline")),
                      (f"{peer['median']:.2f} {sp['best_peer'][:4]}" if peer else "-"),
                      _fmt((r["speedup"].get("graph_us", {}).get("vs_baseline") or {}).get("median")),
                      _fmt(100 * cand["copy_frac"], 0) if cand.get("copy_frac") else "-")
        elif bench:
            t.add_row(name, status, "-", "-", "-", "-")
        else:
            d = r.get("checks", {})
            t.add_row(name, status, f"{_fmt(d.get('candidate', {}).get('worst_norm_err'), 3)} / "
                                    f"{_fmt(d.get('baseline', {}).get('worst_norm_err'), 3)}")
    console.print(t)
    for r in rows:
        if r["status"] != "PASS":
            console.print(f"[red]{r['id']}[/red]: " + " | ".join(r["details"][:4]))
        # The skipped-baseline note is the same on every row; the summary line below says it once.
        notes = [n for n in r["notes"] if not n.startswith("baseline not run")][:1]
        notes += [f"{k}: {v}" for k, v in r.get("arm_errors", {}).items()][:1]
        if notes:
            console.print(f"{r['id']}: " + "; ".join(notes), markup=False)
    line = f"rows passed: {summ['rows_passed']}/{summ['rows_total']} (production {summ['production_passed']}/{summ['production_total']})"
    if bench:
        for m in ("device_us", "graph_us", "wall_us"):
            e = summ["metrics"].get(m) or {}
            vb, vp = e.get("vs_baseline"), e.get("vs_best_peer")
            if vb:
                ci = vb["ci"] or [float("nan")] * 2
                line += (f"\n{m}: geomean over baseline {vb['geomean']:.3f} [{ci[0]:.3f}, {ci[1]:.3f}], "
                         f"min {vb['min']['median']:.3f} ({vb['min']['id']})")
                if vp:
                    line += f"; over best peer {vp['geomean']:.3f}, min {vp['min']['median']:.3f} ({vp['min']['id']})"
        if prov.get("copy_tbps"):
            line += f"\nmeasured copy bandwidth {prov['copy_tbps']:.2f} TB/s (datasheet {prov.get('datasheet_tbps')})"
        nf = summ.get("noise_floor")
        if nf:
            line += f"\nA/A noise floor ({nf['file']}): geomean {nf['geomean']:.3f}, false-win rate {nf['false_win_rate']:.2f}"
    else:
        line += "\nno timing was taken: this is the correctness gate only"
    if prov.get("baseline_skipped"):
        line += f"\nbaseline not run: {prov['baseline_skipped']}"
    console.print(line)
    sweep = prov.get("sweep")
    if sweep:
        domain = "the CPU end of its domain" if sweep["cpu"] else "its domain"
        console.print(f"sweep: {sweep['n']} rows drawn with seed {sweep['seed']} from {domain} (config.toml's "
                      "[sweep])", markup=False)
    if summ.get("sweep"):
        console.print("\n".join(sweep_verdict.lines(summ["sweep"])), markup=False)
    if out.get("path"):
        console.print(f"results written to {out['path']}")
