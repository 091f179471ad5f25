"""The `kda` command."""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from kda.errors import KdaError

DEFAULT_TASK = "fuse_scale_shift"


def _has_gpu() -> bool:
    try:
        import torch

        return torch.cuda.is_available()
    except Exception:  # noqa: BLE001
        return False


def cmd_vendor(args) -> int:
    from kda.task import Task
    from kda.vendor.fetch import vendor_task, write_baseline_source

    for ref in args.tasks or [p.name for p in _all_tasks()]:
        task = Task.load(ref)
        info = vendor_task(task.cfg)
        doc = write_baseline_source(task.cfg, info)
        print(f"{task.name}: {info.package}=={info.version} ({info.wheel}), {len(info.files)} file(s) verified; wrote {doc}")
    return 0


def _all_tasks():
    from kda.paths import all_task_dirs

    return all_task_dirs()


def _run(args, mode: str) -> int:
    from rich.console import Console

    from kda.harness.runner import RunOptions, run_task
    from kda.harness.table import print_run
    from kda.task import Task

    task = Task.load(args.task)
    device = "cpu" if getattr(args, "cpu", False) else "cuda"
    if device == "cuda" and not _has_gpu():
        raise KdaError("no CUDA GPU is visible; use `kda check TASK --cpu` for the correctness gate through Triton's interpreter")
    opts = RunOptions(mode=mode, device=device, aa=getattr(args, "aa", False),
                      candidate=Path(args.candidate).resolve() if args.candidate else None,
                      rows=args.rows.split(",") if args.rows else None, write=not getattr(args, "no_write", False),
                      salt=args.salt)
    out = run_task(task, opts)
    print_run(out, Console(stderr=False))
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1))
    return 0 if out["summary"]["rows_passed"] == out["summary"]["rows_total"] else 1


def cmd_check(args) -> int:
    return _run(args, "check")


def cmd_bench(args) -> int:
    return _run(args, "bench")


def cmd_run(args) -> int:
    """The main job on the embedded default task: the benchmark with a GPU, the CPU correctness gate without."""
    args.task = args.task or DEFAULT_TASK
    args.rows, args.candidate, args.json, args.salt = None, None, None, None
    if _has_gpu():
        return _run(args, "bench")
    print(f"no GPU visible: running the CPU correctness gate of {args.task} through Triton's interpreter", file=sys.stderr)
    args.cpu = True
    return _run(args, "check")


def cmd_tasks(args) -> int:
    from rich.console import Console
    from rich.table import Table

    from kda.task import Task

    t = Table(title="kda tasks")
    for col in ("task", "campaign", "upstream entry points", "language (base -> cand)", "rows (prod/cpu)", "latest results"):
        t.add_column(col, overflow="fold")
    for path in _all_tasks():
        task = Task.load(path)
        c = task.cfg["task"]
        latest = []
        for f in sorted(task.results_dir().glob("*.jsonl")):
            lines = f.read_text().splitlines()
            if not lines:
                continue
            prov, summ = json.loads(lines[0]), json.loads(lines[-1])
            g = (summ.get("metrics", {}).get(summ.get("headline_metric"), {}) or {}).get("vs_baseline")
            latest.append(f"{f.stem}: {summ['rows_passed']}/{summ['rows_total']} pass"
                          + (f", {g['geomean']:.2f}x" if g else "") + f" ({prov.get('time_utc', '?')[:10]})")
        t.add_row(task.name, c["campaign"], "\n".join(c["entry_points"]), f"{c['language']} -> {c['candidate_language']}",
                  f"{len(task.rows)} ({sum(r.production for r in task.rows)}/{sum(r.cpu for r in task.rows)})",
                  "\n".join(latest) or "none")
    Console().print(t)
    return 0


def cmd_profile(args) -> int:
    import torch

    from kda.gpu import gpu_slug
    from kda.paths import cache_dir
    from kda.profile import run_profile, save
    from kda.task import Task

    if not _has_gpu():
        raise KdaError("kda profile needs a GPU (Nsight Compute reads hardware counters)")
    task = Task.load(args.task)
    task.select([args.row])  # fails early, naming the row, if it does not exist
    slug = gpu_slug(torch.cuda.get_device_name(0))
    arms = ["baseline", "candidate"] if args.compare else [args.arm]
    summaries = {}
    for arm in arms:
        summary, csv_text = run_profile(task, args.row, arm, slug, cache_dir() / "ncu" / task.name / slug)
        summaries[arm] = summary
        if args.save_csv:
            Path(args.save_csv).mkdir(parents=True, exist_ok=True)
            (Path(args.save_csv) / f"{args.row}-{arm}.csv").write_text(csv_text)
        print(f"{task.name} {args.row} {arm}: {summary['duration_us']:.2f} us, {summary['bound']}")
    for path in save(task, slug, args.row, summaries):
        print(f"wrote {path}")
    return 0


def cmd_report(args) -> int:
    from kda import report

    if args.check:
        stale = report.check()
        if stale:
            print("kda report --check: these files do not match the committed results (run `kda report`):\n  "
                  + "\n  ".join(stale), file=sys.stderr)
            return 1
        print("kda report --check: README and docs match the results files")
        return 0
    for path in report.write():
        print(f"wrote {path}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="kda", description="Evidence-first GPU kernel optimization campaigns.")
    sub = ap.add_subparsers(dest="command", required=True)

    p = sub.add_parser("run", help="the main job on the default task: benchmark on a GPU, CPU correctness gate otherwise")
    p.add_argument("task", nargs="?", default=None)
    p.set_defaults(fn=cmd_run)

    p = sub.add_parser("vendor", help="fetch and verify the pinned upstream baseline of tasks (all when none named)")
    p.add_argument("tasks", nargs="*")
    p.set_defaults(fn=cmd_vendor)

    for name, fn, text in (("check", cmd_check, "correctness gate on every row (no timing)"),
                           ("bench", cmd_bench, "interleaved A/B benchmark with checks; writes TASK/results/<gpu>.jsonl")):
        p = sub.add_parser(name, help=text)
        p.add_argument("task")
        p.add_argument("--rows", help="comma-separated row ids (default: all)")
        p.add_argument("--candidate", help="a Python file to use as the candidate instead of solution/")
        p.add_argument("--json", help="also write the whole run as JSON here")
        p.add_argument("--salt", type=int, default=None, help="seed salt (default: random, recorded in the results)")
        if name == "check":
            p.add_argument("--cpu", action="store_true", help="run on the CPU through Triton's interpreter (rows marked cpu)")
        else:
            p.add_argument("--aa", action="store_true", help="time the baseline against itself (noise floor)")
            p.add_argument("--no-write", action="store_true", help="do not write the results file")
        p.set_defaults(fn=fn)

    p = sub.add_parser("profile", help="one row of one arm under Nsight Compute, summarised into a named bound")
    p.add_argument("task")
    p.add_argument("--row", required=True)
    p.add_argument("--arm", choices=("baseline", "candidate", "compile", "eager"), default="candidate")
    p.add_argument("--compare", action="store_true", help="profile baseline and candidate and put them side by side")
    p.add_argument("--save-csv", help="also keep ncu's raw CSV export in this folder")
    p.set_defaults(fn=cmd_profile)

    p = sub.add_parser("report", help="regenerate README results table, per-task docs/results.md, plots, campaign summary")
    p.add_argument("--check", action="store_true", help="fail if committed files differ from what the results generate")
    p.set_defaults(fn=cmd_report)

    p = sub.add_parser("tasks", help="list tasks, their upstream entry points, rows and latest results")
    p.set_defaults(fn=cmd_tasks)
    return ap


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.fn(args)
    except KdaError as e:
        print(f"kda: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
