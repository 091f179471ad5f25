"""The `kda` command."""
from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from kda.core.errors import KdaError

DEFAULT_TASK = "fuse_scale_shift"
CPU_SALT = 7
CPU_SAMPLE_ROWS = 5  # rows the quick CPU gate of `kda run` checks: under a minute on two cores (README)


def _has_gpu() -> bool:
    try:
        import torch

        return torch.cuda.is_available()
    except Exception:  # noqa: BLE001
        return False


def cmd_vendor(args) -> int:
    from kda.definition.task import Task
    from kda.vendor.fetch import vendor_task, write_baseline_source
    from kda.vendor.mirror import mirror

    for ref in args.tasks or [p.name for p in _all_tasks()]:
        task = Task.load(ref)
        info = vendor_task(task.cfg)
        doc = write_baseline_source(task.cfg, info)
        print(f"{task.name}: {info.package}=={info.version} ({info.wheel}), {len(info.files)} file(s) verified; wrote {doc}")
        print(f"{task.name}: read-only copy in {mirror(task.path, info).relative_to(task.path)}/")
        if task.cfg["upstream_latest"]["version"]:  # today's release beside it (issue 40), carried the same way
            later = vendor_task(task.cfg, section="upstream_latest")
            print(f"{task.name}: upstream_latest {later.package}=={later.version} ({later.wheel}), "
                  f"{len(later.files)} file(s) verified; copy in {mirror(task.path, later).relative_to(task.path)}/")
    return 0


def _all_tasks():
    from kda.core.paths import all_task_dirs

    return all_task_dirs()


def _candidate(args) -> Path | None:
    """The --candidate file standing in for solution/, if one was given."""
    return Path(args.candidate).resolve() if args.candidate else None


def _run(args, mode: str) -> int:
    from rich.console import Console

    from kda.harness.runner import RunOptions, run_task
    from kda.harness.table import print_run
    from kda.definition.task import Task

    task = Task.load(args.task)
    if getattr(args, "cold", False) and (getattr(args, "sweep", None) is not None or getattr(args, "aa", False)):
        raise KdaError("--cold times the production rows against the candidate: it takes neither --sweep nor --aa")
    device = "cpu" if getattr(args, "cpu", False) else "cuda"
    if device == "cuda" and not _has_gpu():
        raise KdaError("no CUDA GPU is visible; use `kda check TASK --cpu` for the correctness gate through Triton's interpreter")
    opts = RunOptions(mode=mode, device=device, aa=getattr(args, "aa", False),
                      candidate=_candidate(args),
                      rows=args.rows.split(",") if args.rows else None, write=not getattr(args, "no_write", False),
                      salt=args.salt, sweep=_sweep(args, task, device),
                      l2="cold" if getattr(args, "cold", False) else None,
                      row_timeout_s=getattr(args, "row_timeout", None))
    out = run_task(task, opts)
    if mode == "bench" and opts.sweep is None and opts.l2 is None:  # sweeps and cold runs are evidence beside it
        from kda.evidence.ledger import record_bench

        record_bench(task, out)  # every benchmark that wrote a results file leaves a measurement in the ledger
    print_run(out, Console(stderr=False))
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1))
    return 0 if out["summary"]["rows_passed"] == out["summary"]["rows_total"] else 1


def _sweep(args, task, device: str):
    """The drawn rows of `--sweep N [--sweep-seed S]`, or None. On the CPU they come from the domain's CPU end."""
    if getattr(args, "sweep", None) is None:
        if getattr(args, "sweep_seed", None) is not None:
            raise KdaError("--sweep-seed needs --sweep N")
        return None
    if args.rows or getattr(args, "aa", False):
        raise KdaError("--sweep draws its own rows: it takes neither --rows nor --aa")
    from kda.definition.sweep import build

    return build(task, args.sweep, args.sweep_seed, cpu=device == "cpu")


def cmd_check(args) -> int:
    if getattr(args, "static", False):
        return _static(args)
    return _run(args, "check")


def _static(args) -> int:
    """Only the candidate's static rules (its source, no GPU, seconds): what fails every row of a bench before it
    starts. One line per broken rule; exit 1 if any."""
    from kda.harness.guards import static_violations
    from kda.definition.task import Task

    task = Task.load(args.task)
    problems = static_violations(task.static_files(_candidate(args)))
    for p in problems:
        print(f"{task.name}: {p}")
    if not problems:
        print(f"{task.name}: the candidate keeps every static rule")
    return 1 if problems else 0


def cmd_e2e(args) -> int:
    """Model blocks as the benchmark subject (docs/e2e.md), one after the other (one process: on the CPU the import
    costs more than a small block's check): on the CPU, each block's arms at reduced sizes against the fp32 path; on
    a GPU, every arm timed at production sizes (first run on two H200s on 2026-11-28)."""
    if args.cpu:
        # Before anything imports Triton: the candidate's kernels run in its interpreter (as `kda check --cpu`).
        os.environ["TRITON_INTERPRET"] = "1"
    return max(_e2e_block(name, args) for name in args.blocks)


def _e2e_block(name: str, args) -> int:
    import textwrap

    from kda.e2e.block import load_block
    from kda.e2e.wheel import mirror_problems

    block = load_block(name)
    problems = mirror_problems(block)
    if problems:
        raise KdaError("the block's claims about the wheel do not hold:\n" + "\n".join(problems))
    workloads = block.workloads()  # a catalog row the block cannot take fails here, before anything runs
    print(f"{block.name}: follows {block.follows.file.rpartition('/')[2]}:{block.follows.line} "
          f"{block.data['block']['follows']['class']}")
    for s in block.sites:
        print(f"  {s.name:<18} {s.task}")
        print(f"  {'':<18} :{s.entry}")
        mirrors = ", ".join(f"{m.file.rpartition('/')[2]}:{m.line}" for m in s.mirrors)
        print(textwrap.fill(f"  {'':<18} <- {mirrors}", width=80, subsequent_indent=" " * 24))
    if getattr(args, "workload", None) and (args.cpu or not args.trajectory):
        raise KdaError(f"{block.name}: --workload picks a GPU trajectory's workloads (`kda e2e {block.name} "
                       "--trajectory --workload ID`); a timing run covers every production workload")
    if args.trajectory:
        return _e2e_trajectory(block, workloads, args)
    if not args.cpu:
        if not _has_gpu():
            raise KdaError(f"no GPU here: `kda e2e {block.name} --cpu` runs the block at reduced sizes")
        from kda.e2e.timing import TRIALS, bench

        skip = args.skip_arm or []
        path = bench(block, [args.arm] if args.arm else None, skip, args.trials or TRIALS,
                     predict=not args.no_predict)
        print(f"wrote {path}")
        return 0
    from kda.e2e.check import check_cpu

    arms = [args.arm] if args.arm else ["eager"] + (["candidate"] if block.data["block"]["interpret"] else [])
    arms = [a for a in arms if a not in (args.skip_arm or [])]
    if not arms:
        raise KdaError(f"{block.name}: no arm left to run on the CPU")
    dims, results = check_cpu(block, arms)
    print(textwrap.fill("CPU sizes: " + ", ".join(f"{k}={v}" for k, v in dims.items()), width=80,
                        subsequent_indent="  "))
    print(textwrap.fill(f"production: {', '.join(w.id for w in workloads)} (GPU only)", width=80,
                        subsequent_indent="  "))
    tol = block.data["block"]["tolerance"]
    for r in results:
        errs = ", ".join(f"{e:.2e}" for e in r.errors)
        print(f"  {r.arm:<10} {'PASS' if r.passed else 'FAIL'}  rel. error vs fp32 [{errs}] (tol {tol:g})")
        for p in r.problems:
            print(f"    {p}")
    return 0 if all(r.passed for r in results) else 1


def _e2e_trajectory(block, workloads, args) -> int:
    """`kda e2e BLOCK --trajectory`: each arm's final latent over a sampled trajectory against the fp32 path (issue
    40). CPU: the CPU sizes, eager and (interpreted) candidate, the candidate's gap to eager shown; GPU: the smallest
    production workload or those `--workload` names, upstream, candidate and eager, written to results/trajectory/<gpu>.jsonl.gz. Exit 1 when
    the candidate loses more PSNR than allowed against upstream (GPU), or its trajectory goes non-finite."""
    import math
    import textwrap

    from kda.e2e import trajectory as T

    steps, depth = args.steps or T.STEPS, args.depth or T.DEPTH
    T.spec(block)  # a block without [trajectory] fails before anything is built
    if args.cpu:
        arms = ["eager"] + (["candidate"] if block.data["block"]["interpret"] else [])
        plan = [("cpu sizes", block.cpu_dims())]
        device, against = "cpu", "eager"
    else:
        if not _has_gpu():
            raise KdaError(f"no GPU here: `kda e2e {block.name} --trajectory --cpu` runs it at reduced sizes")
        picked = T.pick_workloads(block, workloads, args.workload)
        arms, plan, device, against = ["upstream", "candidate", "eager"], [(w.id, w.dims) for w in picked], \
            "cuda", "upstream"
    arms = [a for a in arms if a not in (args.skip_arm or [])]
    rows, worst = [], 0
    for wid, dims in plan:
        print(f"{block.name} {wid}: {depth} blocks x {steps} steps, arms {', '.join(arms)}", flush=True)
        r = T.run(block, arms, dims, device, steps=steps, depth=depth)
        for arm, db in r["psnr"].items():
            print(f"  {arm:<10} PSNR {db:7.2f} dB vs the fp32 trajectory" if math.isfinite(db)
                  else f"  {arm:<10} PSNR {db} (non-finite or equal)")
        if args.cpu:  # the rule is against upstream, which runs only on a GPU: here the gap to eager is shown
            why = "the candidate's trajectory went non-finite" if not r["finite"].get("candidate", True) else None
            p = r["psnr"]
            if "candidate" in p and "eager" in p and not why:
                print(f"  candidate - eager: {p['candidate'] - p['eager']:+.2f} dB (information; the rule is "
                      "against upstream, on a GPU)")
        else:
            why = T.verdict(r, against)
            print(textwrap.fill(f"  {'FAIL: ' + why if why else 'ok'} (the candidate against upstream, at most "
                                f"{T.MAX_PSNR_DROP_DB} dB below)", width=80, subsequent_indent="    "))
        if why and args.cpu:
            print(f"  FAIL: {why}")
        rows.append({"type": "row", "id": wid, "dims": dims, **r, "against": against, "problem": why})
        worst = max(worst, 1 if why else 0)
    if not args.cpu:
        from kda.core.gpu import gpu_slug
        from kda.harness.provenance import git_state
        import torch

        name = torch.cuda.get_device_name(0)
        print(f"wrote {T.write(block, rows, name, gpu_slug(name), git_state())}")
    return worst


def cmd_bench(args) -> int:
    return _run(args, "bench")


def _say(text: str) -> None:
    """A message for the person at the terminal, on stderr, wrapped at 80 columns."""
    import textwrap

    print(textwrap.fill(text, width=80), file=sys.stderr)


def cmd_run(args) -> int:
    """The main job on the embedded default task: the benchmark with a GPU, the CPU correctness gate without."""
    args.task = args.task or DEFAULT_TASK
    args.rows, args.candidate, args.json, args.salt = None, None, None, None
    if _has_gpu():
        return _run(args, "bench")
    from kda.definition.sample import representative
    from kda.definition.task import Task

    args.cpu = True
    # The quick gate is reproducible (the test suite's salt): a failure it prints is one anybody can rerun.
    # `kda check TASK --cpu` draws a fresh salt each time.
    args.salt = CPU_SALT
    rows = Task.load(args.task).select(cpu_only=True)
    if args.full:
        _say(f"no GPU visible: the CPU correctness gate of {args.task}, all {len(rows)} CPU rows, through Triton's "
             "interpreter (no timing)")
        return _run(args, "check")
    # The interpreter takes seconds a row: a quick gate checks the rows that cover every entry point, dtype, layout
    # and value distribution of the CPU grid, and says how to run the rest.
    picked = representative(rows, CPU_SAMPLE_ROWS)
    args.rows = ",".join(r.id for r in picked)
    _say(f"no GPU visible: the CPU correctness gate of {args.task} through Triton's interpreter (no timing), on "
         f"{len(picked)} of its {len(rows)} CPU rows (a sample covering every entry point, dtype and layout); "
         f"all of them: `kda run --full` or `kda check {args.task} --cpu`")
    return _run(args, "check")


def cmd_tasks(args) -> int:
    from rich.console import Console
    from rich.table import Table

    from kda.definition.task import Task
    from kda.harness import results_file

    t = Table(title="kda tasks")
    for col in ("task", "campaign", "upstream entry points", "language (base -> cand)", "rows (prod/cpu)", "latest results"):
        t.add_column(col, overflow="fold")
    for path in _all_tasks():
        task = Task.load(path)
        c = task.cfg["task"]
        latest = []
        for f in results_file.list_files(task.results_dir()):
            recs = results_file.read_records(f)
            if not recs:
                continue
            prov, summ = recs[0], recs[-1]
            g = (summ.get("metrics", {}).get(summ.get("headline_metric"), {}) or {}).get("vs_baseline")
            latest.append(f"{results_file.stem(f)}: {summ['rows_passed']}/{summ['rows_total']} pass"
                          + (f", {g['geomean']:.2f}x" if g else "") + f" ({prov.get('time_utc', '?')[:10]})")
        t.add_row(task.name, c["campaign"], "\n".join(c["entry_points"]), f"{c['language']} -> {c['candidate_language']}",
                  f"{len(task.rows)} ({sum(r.production for r in task.rows)}/{sum(r.cpu for r in task.rows)})",
                  "\n".join(latest) or "none")
    Console().print(t)
    return 0


def cmd_profile(args) -> int:
    import torch

    from kda.core.gpu import gpu_slug
    from kda.core.paths import cache_dir
    from kda.evidence.profile import resummarize, run_profile, save
    from kda.definition.task import Task

    if not args.from_csv and not _has_gpu():
        raise KdaError("kda profile needs a GPU (Nsight Compute reads hardware counters)")
    task = Task.load(args.task)
    task.select([args.row])  # fails early, naming the row, if it does not exist
    if args.from_csv:
        csv_dir = Path(args.from_csv)
        slug = args.gpu or csv_dir.resolve().parent.name  # docs/profile/<gpu>/csv
        summaries = resummarize(task, args.row, csv_dir, slug)
    else:
        slug = gpu_slug(torch.cuda.get_device_name(0))
        summaries = {}
        for arm in [args.compare, "candidate"] if args.compare else [args.arm]:
            summaries[arm], csv_text = run_profile(task, args.row, arm, slug, cache_dir() / "ncu" / task.name / slug)
            if args.save_csv:
                Path(args.save_csv).mkdir(parents=True, exist_ok=True)
                (Path(args.save_csv) / f"{args.row}-{arm}.csv").write_text(csv_text)
    for arm, summary in summaries.items():
        print(f"{task.name} {args.row} {arm}: {summary['duration_us']:.2f} us, {summary['bound']}")
    for path in save(task, slug, args.row, summaries):
        print(f"wrote {path}")
    return 0


def cmd_report(args) -> int:
    from kda.evidence import report

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


def _wide_console():
    """Tables of my commands fold badly at rich's default 80 columns when piped: use 200 unless on a terminal."""
    from rich.console import Console

    return Console() if sys.stdout.isatty() else Console(width=200)


def cmd_ledger(args) -> int:
    from kda.evidence import ledger
    from kda.core.paths import resolve_task

    task_dir = resolve_task(args.task)
    if args.add:
        if not args.decision:
            raise KdaError("kda ledger --add needs --decision (one of " + ", ".join(ledger.DECISIONS) + ")")
        entry = ledger.append(task_dir, {
            "kind": "decision", "decision": args.decision, "hypothesis": args.hypothesis or "",
            "change": args.change or "", "reason": args.reason or "", "parent": args.parent,
            "round": args.round if args.round is not None else ledger.current_round(task_dir),
            "author": args.author or ledger.default_author()})
        print(f"appended {entry['id']} to {ledger.ledger_path(task_dir)}")
    entries = ledger.read(task_dir)
    _wide_console().print(ledger.render_table(entries, title=f"ledger: {task_dir.name} ({len(entries)} entries)"))
    print(f"wrote {ledger.write_markdown(task_dir)}")
    return 0


def _read_round_budget(path: str) -> int:
    from kda.loop import agentrun
    from kda.core.schema import Field, validate

    try:
        raw = json.loads(Path(path).read_text())
    except (OSError, ValueError) as e:
        raise KdaError(f"{path}: cannot read the round budget file: {e}") from None
    if isinstance(raw, dict) and set(raw) == {"rounds"}:
        return validate(raw, {"rounds": Field(int)}, path)["rounds"]
    return agentrun.read_rounds_file(Path(path))["rounds"]


def _seconds(text: str) -> float:
    """A positive number of seconds (argparse type): anything else is a usage error naming the value."""
    try:
        v = float(text)
    except ValueError:
        v = float("nan")
    if not v > 0 or v == float("inf"):
        raise argparse.ArgumentTypeError(f"expected a positive number of seconds, got {text!r}")
    return v


def cmd_gate(args) -> int:
    from kda.loop import agentrun
    from kda.evidence import ledger
    from kda.loop.gate import gate_and_record, run_gate
    from kda.definition.task import Task

    task = Task.load(args.task)
    rounds_used = _read_round_budget(args.round_budget_file) if args.round_budget_file else None
    base = args.base
    run = agentrun.find_run(task.path)
    if base is None and run is not None:
        base = agentrun.load_manifest(run)["review_base"]  # inside an agent run: its pinned review base
    common = dict(device="cpu" if args.cpu else "auto", rows=args.rows.split(",") if args.rows else None, base=base,
                  row_timeout_s=args.row_timeout, rounds_used=rounds_used, quiet=False)
    if args.record:
        res, rec = gate_and_record(task, **common, entry={"hypothesis": args.hypothesis, "change": args.change,
                                                          "round": ledger.current_round(task.path),
                                                          "author": args.author or
                                                          f"kda gate ({ledger.default_author()})"})
    else:
        # issue 38: a gate run by hand (in the main checkout, or by an agent inside its run) leaves the committed
        # ledger and results alone; the Stop hook records the rounds of an agent run itself
        res, rec = run_gate(task, **common, write=False), None
    print(res.text())
    if rec is not None:
        print(f"ledger: {rec['id']} ({rec['decision']}) in {ledger.ledger_path(task.path)}")
    else:
        print("not recorded: nothing in the task folder was written (`--record` appends the ledger entry and, on a "
              "GPU, keeps the results file)")
    if args.json:
        Path(args.json).write_text(json.dumps({"status": res.status, "findings": res.findings, "notes": res.notes,
                                               "metrics": res.metrics, "ledger_id": rec and rec["id"]}, indent=1))
    return res.exit_code


def cmd_hook(args) -> int:
    from kda.loop import hook

    out, code = hook.stop(sys.stdin.read())
    if out:
        print(out)
    return code


def cmd_launchers(args) -> int:
    from kda.definition import launchers
    from kda.core.paths import repo_root

    if args.action == "drive":
        from kda.loop.drive import main as drive

        return drive(args.worktree, args.agent[1:] if args.agent[:1] == ["--"] else args.agent)
    if args.action == "prepare":
        from kda.loop.agentrun import prepare_from_args

        for path in prepare_from_args(args):
            print(f"wrote {path}")
        return 0
    problems, written = launchers.render(repo_root(), check=args.check)
    for path in written:
        print(f"wrote {path}")
    if problems:
        print("kda launchers render" + (" --check" if args.check else "") + ":\n  " + "\n  ".join(problems),
              file=sys.stderr)
        return 1
    if args.check:
        print("kda launchers render --check: every launcher matches templates/launch_task.sh.j2")
    return 0


def cmd_promote(args) -> int:
    from kda.loop.promote import promote

    outcome = promote(args.task, args.ref, author=args.author)
    print(outcome.message, file=sys.stdout if outcome.promoted else sys.stderr)
    return outcome.exit_code


def cmd_rules(args) -> int:
    """The production rules without a GPU (kda/loop/rules.py): every candidate compiles for every architecture."""
    from kda.core import gitutil
    from kda.core.paths import repo_root, resolve_task
    from kda.loop.rules import ARCHS, check, markdown

    if os.environ.get("TRITON_INTERPRET") == "1":
        print("kda rules: TRITON_INTERPRET=1 makes every kernel an interpreted function; unset it", file=sys.stderr)
        return 2
    try:
        archs = tuple(int(a) for a in args.arch.split(",")) if args.arch else ARCHS
    except ValueError:
        raise KdaError(f"--arch {args.arch!r}: expected compute capabilities x 10, comma-separated (80,89,90,100)")
    paths = [resolve_task(t) for t in args.tasks] if args.tasks else _all_tasks()
    print(f"kda rules: {len(paths)} task(s) x sm_{', sm_'.join(map(str, archs))}: Triton launches here, CUDA sources "
          "through nvcc in parallel (minutes)", flush=True)
    results = check(paths, archs, jobs=args.jobs, progress=lambda r: print("  " + r.line()[:200], flush=True))
    bad = [r for r in results if not r.ok]
    print(f"kda rules: {len(results) - len(bad)}/{len(results)} builds ok")
    if args.markdown:
        Path(args.markdown).write_text(markdown(results, archs, gitutil.commit_of("HEAD", repo_root())))
        print(f"wrote {args.markdown}")
    return 1 if bad else 0


def cmd_export(args) -> int:
    from kda.loop.export import export

    result = export(args.tasks, out=Path(args.out) if args.out else None, version=args.version)
    print(f"kda export: wrote {result.wheel}")
    return 0


def cmd_campaign(args) -> int:
    from kda.loop import campaign
    from kda.core.paths import repo_root

    if args.action == "status":
        campaign.print_status(repo_root(), _wide_console())
        return 0
    if args.action == "run":
        return _campaign_run(args)
    if args.idle_hours < 0:
        raise KdaError(f"--idle-hours {args.idle_hours}: expected 0 or more")
    return campaign.clean(repo_root(), yes=args.yes, idle_hours=args.idle_hours)


def _campaign_run(args) -> int:
    from kda.core.paths import repo_root
    from kda.loop import campaign_run as cr

    repo = repo_root()
    if args.resume:
        if args.tasks:
            raise KdaError("kda campaign run --resume ID takes no task names (the campaign's own are resumed)")
        c = cr.resume(repo, args.resume)
    else:
        if args.ray is not None and args.gpus:
            raise KdaError("kda campaign run --ray: Ray places each run on a free GPU of the cluster; --gpus is for "
                           "one host without Ray")
        gpus = ["ray"] if args.ray is not None else (
            [g.strip() for g in args.gpus.split(",") if g.strip()] if args.gpus else cr.visible_gpus())
        c = cr.plan(repo, args.tasks, gpus, args.agent, args.rounds)
    console = _wide_console()
    if args.ray is not None:
        from kda.loop import campaign_ray

        console.print(f"kda campaign {c.id}: {len(c.slots)} task(s) on the Ray cluster "
                      f"{args.ray if args.ray != 'local' else '(a local instance)'}, one GPU each; file "
                      f"{c.path(repo).relative_to(repo)}")
        c = campaign_ray.run(repo, c, address=None if args.ray == "local" else args.ray, node_repo=args.ray_repo,
                             console=console)
        console.print(cr.table(c))
        return 1 if [s for s in c.slots if s.rc not in (0, None) or s.state != "ended"] else 0
    console.print(f"kda campaign {c.id}: {len(c.slots)} task(s) on GPU(s) {', '.join(c.gpus)}; file "
                  f"{c.path(repo).relative_to(repo)}; Ctrl-C stops every agent and records each run's end")
    c = cr.run(repo, c, console=console)
    console.print(cr.table(c))
    failed = [s for s in c.slots if s.rc not in (0, None) or s.state != "ended"]
    return 1 if failed else 0


def cmd_shapes(args) -> int:
    from kda.core.paths import repo_root
    from kda.shapes.ingest import DEFAULT_CATALOG, ingest

    if args.action is None:
        from kda.shapes.catalog import load_catalog
        from kda.shapes.generate import sync

        from kda.shapes import llm

        models = load_catalog()  # a broken catalog fails here, naming file, key and row
        messages, problems = sync(_all_tasks(), check=args.check)
        llm_messages, llm_problems = llm.sync(check=args.check)  # the LLM campaign's grid (issue 35)
        messages, problems = messages + llm_messages, problems + llm_problems
        print(f"shape catalog: {len(models)} model file(s), {sum(len(m.rows) for m in models)} row(s)")
        print("\n".join(messages))
        if problems:
            print("\n".join(problems), file=sys.stderr)
            print("kda shapes: committed workloads.json out of date; run `kda shapes` to regenerate", file=sys.stderr)
            return 1
        return 0
    catalog = Path(args.catalog) if args.catalog else repo_root() / DEFAULT_CATALOG
    summary, total = ingest([Path(p) for p in args.logs], catalog)
    print(summary.text(catalog, total))
    return 0


def cmd_render(args) -> int:
    from kda.definition import render
    from kda.core.paths import repo_root

    out = render.render(repo_root(), args.tasks or None, check=args.check)
    for path in out.written:
        print(f"wrote {path}")
    for path in out.unconverted:
        print(f"note: {path} has no {render.SPEC_FILE}: none of its files are generated", file=sys.stderr)
    if out.problems:
        print("kda render" + (" --check" if args.check else "") + ":\n  " + "\n  ".join(out.problems), file=sys.stderr)
        return 1
    if args.check:
        print("kda render --check: every generated file matches its template and spec")
    return 0


def cmd_archive(args) -> int:
    """Supersede results files: record the commit that holds each (HEAD) in the ledger entries citing it, delete it."""
    from kda.evidence import ledger
    from kda.evidence.archive import supersede
    from kda.core.paths import resolve_task

    task_dir = resolve_task(args.task)
    done = 0
    for f in args.files:
        src = Path(f)
        if not src.is_absolute() and not src.exists():
            src = task_dir / f
        commit, ids = supersede(task_dir, src, label=args.label)
        done += 1
        print(f"{src}: removed; ledger {', '.join(ids)} now read it from git at {commit[:12]}")
    if done:
        ledger.write_markdown(task_dir)
        print("commit the removal and docs/ledger.jsonl together (git add -u the results files and the ledger)")
    return 0


def cmd_intake(args) -> int:
    """Take a GPU call's results.tar into the task folders (results files, new ledger lines, profiles)."""
    from kda.evidence.intake import intake
    from kda.core.paths import repo_root

    labels = {}
    for spec in args.label or []:
        task, sep, label = spec.partition("=")
        if not sep or not task or not label:
            raise KdaError(f"--label {spec!r}: expected TASK=VERSION (group_norm_silu=v9c)")
        labels[task] = label
    root = repo_root()
    for got in intake(Path(args.tar), root, labels):
        name = got.task_dir.relative_to(root)
        print(f"{name}:")
        for p, commit, ids in got.archived:
            print(f"  replaced  {p.relative_to(root)}: the old file is in git at {commit[:12]} (ledger {', '.join(ids)})")
        for p in got.results:
            print(f"  results   {p.relative_to(root)}")
        for p in got.kept:
            print(f"  kept      {p.relative_to(root)} (the tar's copy was measured earlier)")
        for remote_id, here in got.ledger_ids:
            print(f"  ledger    {here}" + (f" (was {remote_id} on the GPU machine)" if remote_id != here else ""))
        if got.profiles:
            print(f"  profiles  {len(got.profiles)} files under {(got.task_dir / 'docs' / 'profile').relative_to(root)}")
    print("next: kda report, kda verify")
    return 0


def cmd_verify(args) -> int:
    """Each results file's recorded commit against the sources it says it measured (git history needed); superseded
    files are read from git at the commit their ledger references name."""
    from rich.console import Console
    from rich.progress import Progress
    from rich.table import Table

    from kda.core.paths import repo_root, resolve_task
    from kda.evidence.verify import FAILING, REF_BROKEN, VERIFIED, verify

    root = repo_root()
    paths = [resolve_task(t) for t in args.tasks] if args.tasks else _all_tasks()
    with Progress(transient=True) as bar:
        job = bar.add_task("results files", total=None)
        verdicts = verify(root, paths, progress=lambda i, n, p: bar.update(job, completed=i, total=n))
    table = Table(title="Results files: recorded commit against the recorded candidate and harness sources")
    for col in ("results file", "commit field", "status", "files differing there", "commits holding the sources"):
        table.add_column(col, overflow="fold")
    for v in verdicts:
        if v.status == VERIFIED and not args.all:
            continue
        shown = ", ".join(c[:10] for c in v.matches[:3]) + (f" (+{len(v.matches) - 3})" if len(v.matches) > 3 else "")
        table.add_row(v.shown(root), (v.commit or "-")[:12], v.status,
                      ", ".join(f if f.startswith("(") or v.status == REF_BROKEN else Path(f).name
                                for f in v.differing[:4])
                      + (" ..." if len(v.differing) > 4 else ""),
                      shown or "-")
    ok = sum(v.status == VERIFIED for v in verdicts)
    if table.row_count:
        Console(width=200).print(table)
    print(f"{ok}/{len(verdicts)} results files verified at their recorded commit")
    return 1 if any(v.status in FAILING for v in verdicts) else 0


def cmd_compile(args) -> int:
    """Lower every Triton launch each candidate plans for its production rows for a GPU architecture, on this
    machine (no GPU needed): the failures a benchmark call would otherwise find first."""
    from rich.console import Console
    from rich.progress import Progress
    from rich.table import Table

    from kda.harness.aot import compile_task
    from kda.core.paths import resolve_task
    from kda.definition.task import Task

    if os.environ.get("TRITON_INTERPRET") == "1":
        print("kda compile: TRITON_INTERPRET=1 makes every kernel an interpreted function; unset it", file=sys.stderr)
        return 2
    import triton

    paths = [resolve_task(t) for t in args.tasks] if args.tasks else _all_tasks()
    # Registers and occupancy are those of this machine's Triton and ptxas; the GPU machine may run another version.
    title = (f"Triton launches of the candidates' production rows, compiled for sm_{args.arch} by Triton "
             f"{triton.__version__}")
    table = Table(title=title)
    for col in ("task", "rows", "launches", "compiled", "registers (max)", "occupancy (min, est.)", "problems"):
        table.add_column(col, overflow="fold")
    detail = Table(title=title + ": each launch")
    for col in ("task", "kernel", "first row", "warps", "registers", "shared bytes", "local bytes", "occupancy (est.)"):
        detail.add_column(col, overflow="fold")
    bad = 0
    with Progress(transient=True) as bar:
        for path in paths:
            task = Task.load(path)
            job = bar.add_task(task.name, total=None)
            rep = compile_task(task, args.arch, progress=lambda i, n, job=job: bar.update(job, completed=i, total=n))
            problems = [f"row {r}: not traced: {e}" for r, e in rep["trace_failures"].items()]
            problems += [f"{k} (first planned for {r}): {e.splitlines()[0] if e else e}"
                         for k, r, e in rep["compile_failures"]]
            use = rep["usage"]
            problems += [f"{u['kernel']} (first planned for {u['row']}): {u['local']} bytes of local memory (spills)"
                         for u in use if u["local"]]
            bad += len(rep["compile_failures"]) + len(rep["trace_failures"])
            table.add_row(task.name, str(rep["rows"]), str(rep["launches"]), str(rep["compiled"]),
                          str(max(u["registers"] for u in use)) if use else "-",
                          f"{min(u['occupancy'] for u in use):.0%}" if use else "-", "\n".join(problems) or "-")
            for u in use:
                detail.add_row(task.name, u["kernel"], u["row"], str(u["warps"]), str(u["registers"]), str(u["shared"]),
                               str(u["local"]), f"{u['occupancy']:.0%}")
    console = Console()
    if not console.is_terminal:  # a log or a pipe: no wrapping of kernel names at 80 columns
        console = Console(width=max(console.width, 160))
    if args.launches:
        console.print(detail)
    console.print(table)
    return 1 if bad else 0


def cmd_new(args) -> int:
    from kda.definition import scaffold
    from kda.core.paths import repo_root

    root = repo_root()
    if args.spec:
        try:
            text = Path(args.spec).read_text()
        except OSError as e:
            raise KdaError(f"{args.spec}: cannot read the spec: {e}") from None
        where = args.spec
    else:
        text = scaffold.spec_from_flags(root, args.name, campaign=args.campaign, description=args.description,
                                        language=args.language, candidate_language=args.candidate_language,
                                        entries=args.entry, files=args.file, shims=args.shim,
                                        candidate_entry=args.candidate_entry)
        where = f"the spec built from the flags of `kda new {args.name}`"
    for path in scaffold.new_task(root, args.name, text, where):
        print(f"wrote {path}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="kda", description="Evidence-first GPU kernel optimization campaigns.")
    sub = ap.add_subparsers(dest="command", required=True)

    p = sub.add_parser("run", help="the main job on the default task: benchmark on a GPU, CPU correctness gate otherwise")
    p.add_argument("task", nargs="?", default=None)
    p.add_argument("--full", action="store_true",
                   help="without a GPU: check every CPU row, not the covering sample (minutes instead of seconds)")
    p.set_defaults(fn=cmd_run)

    p = sub.add_parser("vendor", help="fetch and verify the pinned upstream baseline of tasks (all when none named)")
    p.add_argument("tasks", nargs="*")
    p.set_defaults(fn=cmd_vendor)

    for name, fn, text in (("check", cmd_check, "correctness gate on every row (no timing)"),
                           ("bench", cmd_bench, "interleaved A/B benchmark with checks; writes TASK/results/<gpu>.jsonl.gz")):
        p = sub.add_parser(name, help=text)
        p.add_argument("task")
        p.add_argument("--rows", help="comma-separated row ids (default: all)")
        p.add_argument("--candidate", help="a Python file to use as the candidate instead of solution/")
        p.add_argument("--json", help="also write the whole run as JSON here")
        p.add_argument("--salt", type=int, default=None, help="seed salt (default: random, recorded in the results)")
        p.add_argument("--sweep", type=int, metavar="N", help="the generalisation sweep: N rows drawn at random from "
                       "the task's [sweep] domain instead of workloads.json" + (" (the CPU end of it with --cpu)"
                       if name == "check" else "; writes TASK/results/sweep/<gpu>.jsonl.gz and its verdict"))
        p.add_argument("--sweep-seed", type=int, metavar="S", help="seed of the draw (default: the task's bench.seed)")
        p.add_argument("--row-timeout", type=_seconds, metavar="S", help="fail a row its worker has not answered "
                       "within S seconds (default: the task's bench.row_timeout_s, 300)")
        if name == "check":
            p.add_argument("--cpu", action="store_true", help="run on the CPU through Triton's interpreter (rows marked cpu)")
            p.add_argument("--static", action="store_true", help="only the candidate's static rules (its source: "
                           "imports, torch compute on the hot path); no rows are run")
        else:
            p.add_argument("--aa", action="store_true", help="time the baseline against itself (noise floor)")
            p.add_argument("--cold", action="store_true", help="flush the L2 before every sample (one call per sample); "
                           "writes TASK/results/cold/<gpu>.jsonl.gz, reported beside the hot file")
            p.add_argument("--no-write", action="store_true", help="do not write the results file")
        p.set_defaults(fn=fn)

    p = sub.add_parser("e2e", help="a model block (diffusion/e2e/BLOCK) with every call site on one arm's kernels: "
                       "--cpu checks its arms at reduced sizes against the fp32 path; on a GPU, times them")
    p.add_argument("blocks", nargs="+", metavar="BLOCK", help="one or more blocks, run one after the other")
    p.add_argument("--cpu", action="store_true", help="reduced sizes on the CPU, Triton's interpreter for candidates")
    p.add_argument("--arm", help="one arm only: upstream, candidate, eager, compile or only-<task>")
    p.add_argument("--skip-arm", action="append", metavar="ARM", help="leave this arm out (repeatable; "
                   "`--skip-arm compile` spares torch.compile's minute per workload)")
    p.add_argument("--trials", type=int, help="GPU: trials per workload (default 15)")
    p.add_argument("--no-predict", action="store_true", help="GPU: no Amdahl prediction from the task results "
                   "(which must otherwise have measured the solutions in the tree)")
    p.add_argument("--trajectory", action="store_true", help="a stack of the block under a sampler: each arm's "
                   "final-latent PSNR against the fp32 trajectory (with --cpu at reduced sizes)")
    p.add_argument("--steps", type=int, help="--trajectory: sampler steps (default 50)")
    p.add_argument("--depth", type=int, help="--trajectory: blocks in the stack (default 4)")
    p.add_argument("--workload", action="append", metavar="ID", help="--trajectory on a GPU: this production "
                   "workload (repeatable; default the block's smallest: the fp32 path at the largest runs minutes)")
    p.set_defaults(fn=cmd_e2e)

    p = sub.add_parser("compile", help="compile every Triton launch of each candidate's production rows for a GPU "
                       "architecture, without a GPU (inputs on the meta device, ptxas from the Triton wheel)")
    p.add_argument("tasks", nargs="*", help="task names or folders (default: every task)")
    p.add_argument("--arch", type=int, default=90, help="compute capability x 10 (default 90: Hopper)")
    p.add_argument("--launches", action="store_true", help="also each launch's warps, registers, shared and local "
                   "memory and theoretical occupancy (sm_90 only)")
    p.set_defaults(fn=cmd_compile)

    p = sub.add_parser("verify", help="check each results file's recorded commit against the candidate and harness "
                       "sources it records (needs git history); names the commits that do hold them")
    p.add_argument("tasks", nargs="*", help="task names or folders (default: every task)")
    p.add_argument("--all", action="store_true", help="list verified files too")
    p.set_defaults(fn=cmd_verify)

    p = sub.add_parser("archive", help="supersede results files: the ledger entries that cite each get the commit "
                       "that holds it (HEAD; the file must be committed and unmodified), then it is deleted; readers "
                       "and kda verify read it from git")
    p.add_argument("task")
    p.add_argument("files", nargs="+", help="results files (paths, or relative to the task folder: results/h100.jsonl.gz)")
    p.add_argument("--label", help="the candidate's version (v9c), named in the ledger entry written for a file no "
                   "entry cites")
    p.set_defaults(fn=cmd_archive)

    p = sub.add_parser("intake", help="take a GPU call's results.tar (scripts/gpu_tasks.sh) into the task folders: "
                       "a superseded results file replaced (the ledger entries citing it get the commit that holds "
                       "it), new ledger lines appended (renumbered after local ones), profile summaries copied (raw "
                       "CSVs left out); nothing written unless every check passes")
    p.add_argument("tar")
    p.add_argument("--label", action="append", metavar="TASK=VERSION",
                   help="the candidate version of a superseded results file, named in the ledger entry written "
                   "when no entry cites it (repeatable)")
    p.set_defaults(fn=cmd_intake)

    p = sub.add_parser("profile", help="one row of one arm under Nsight Compute, summarised into a named bound")
    p.add_argument("task")
    p.add_argument("--row", required=True)
    p.add_argument("--arm", choices=("baseline", "candidate", "compile", "eager"), default="candidate")
    p.add_argument("--compare", nargs="?", const="baseline", choices=("baseline", "compile", "eager"),
                   help="profile the candidate and the baseline (or the named peer) and put them side by side")
    p.add_argument("--save-csv", help="also keep ncu's raw CSV export in this folder (raw exports are not committed: "
                   "a folder under docs/profile/ is ignored by git)")
    p.add_argument("--from-csv", metavar="DIR", help="no GPU: rebuild the row's summaries from the raw CSVs "
                   "--save-csv kept in DIR (<...>/<gpu>/csv, as scripts/gpu_tasks.sh returns them in logs.tar)")
    p.add_argument("--gpu", help="with --from-csv: the GPU slug (default: the name of DIR's parent folder)")
    p.set_defaults(fn=cmd_profile)

    p = sub.add_parser("report", help="regenerate README results table, per-task docs/results.md, plots, campaign summary")
    p.add_argument("--check", action="store_true", help="fail if committed files differ from what the results generate")
    p.set_defaults(fn=cmd_report)

    p = sub.add_parser("tasks", help="list tasks, their upstream entry points, rows and latest results")
    p.set_defaults(fn=cmd_tasks)

    p = sub.add_parser("ledger", help="print a task's decision ledger (docs/ledger.jsonl), write docs/ledger.md, or --add a decision")
    p.add_argument("task")
    p.add_argument("--add", action="store_true", help="append a decision entry")
    p.add_argument("--decision", choices=("IMPROVEMENT", "NO-GO", "BLOCKED", "PROMOTED"))
    p.add_argument("--hypothesis", help="what was tried and the predicted effect")
    p.add_argument("--change", help="what changed")
    p.add_argument("--reason", help="why this decision (numbers from results files)")
    p.add_argument("--parent", help="id of the entry this one builds on (e.g. L0003)")
    p.add_argument("--round", type=int, default=None, help="agent round (default: the run's current round, else 0)")
    p.add_argument("--author", help="default: KDA_AUTHOR, else git user.name")
    p.set_defaults(fn=cmd_ledger)

    p = sub.add_parser("gate", help="every promotion gate on a task's candidate (GPU: full bench; CPU: correctness and, for Triton, the sm_90 compile gate, BLOCKED); --record appends a ledger entry")
    p.add_argument("task")
    p.add_argument("--round-budget-file", help="a JSON file with the rounds used (an agent run's .kda/rounds.json)")
    p.add_argument("--base", help="review base for the scope check (default: the agent run's review base, else none)")
    p.add_argument("--cpu", action="store_true", help="CPU correctness gate only, even when a GPU is visible")
    p.add_argument("--rows", help="comma-separated row ids (a partial gate never passes)")
    p.add_argument("--hypothesis", help="recorded in the ledger entry")
    p.add_argument("--change", help="recorded in the ledger entry")
    p.add_argument("--author")
    p.add_argument("--json", help="also write the verdict as JSON here")
    p.add_argument("--row-timeout", type=_seconds, metavar="S", help="fail a row its worker has not answered within "
                   "S seconds (default: the task's bench.row_timeout_s, 300)")
    p.add_argument("--record", action="store_true", help="append the verdict to the task's ledger and, on a GPU, keep "
                   "the bench's results file (without it the gate writes nothing in the task folder)")
    p.set_defaults(fn=cmd_gate)

    p = sub.add_parser("hook", help="agent hooks: `kda hook stop` is the Stop hook of an agent run (reads Claude Code's hook JSON on stdin)")
    p.add_argument("event", choices=("stop",))
    p.set_defaults(fn=cmd_hook)

    p = sub.add_parser("launchers", help="generate scripts/launch_kernels/kNN_<task>.sh from templates/launch_task.sh.j2")
    lsub = p.add_subparsers(dest="action", required=True)
    q = lsub.add_parser("render", help="write the launchers (--check: fail when a committed one drifted)")
    q.add_argument("--check", action="store_true")
    q.set_defaults(fn=cmd_launchers)
    q = lsub.add_parser("prepare", help="(called by lib/launch.sh) write brief, settings and manifest into a new worktree")
    for name in ("worktree", "repo", "task-path", "label", "run-id", "base-ref", "base-commit", "branch",
                 "review-base", "agent-kind", "agent-command", "hook-command"):
        q.add_argument(f"--{name}", required=True)
    for name in ("model", "effort", "permission-mode", "gpu"):
        q.add_argument(f"--{name}", default="")
    q.add_argument("--hook-timeout", type=int, default=7200)
    q.set_defaults(fn=cmd_launchers)
    q = lsub.add_parser("drive", help="(called by lib/launch.sh for KDA_AGENT_CMD) run an agent without a Stop hook "
                        "under the review loop: the gate when it exits, restarted with the findings while it fails")
    q.add_argument("--worktree", required=True)
    q.add_argument("agent", nargs=argparse.REMAINDER, help="-- then the agent command")
    q.set_defaults(fn=cmd_launchers)

    p = sub.add_parser("render", help="generate each task's config.toml, prompt.md, README.md, baseline/README.md from its "
                       "task.toml and templates/, and the launchers (--check: fail on drift, writing nothing)")
    p.add_argument("tasks", nargs="*", metavar="TASK", help="default: every task with a task.toml, and the launchers")
    p.add_argument("--check", action="store_true", help="name each drifted file with a short diff; write nothing")
    p.set_defaults(fn=cmd_render)

    p = sub.add_parser("new", help="scaffold a task folder from a spec (or from flags): task.toml, generated files, "
                       "skeletons of the hand-written parts, an empty ledger")
    p.add_argument("name")
    p.add_argument("--spec", help="a task.toml to start from (copied into the folder)")
    p.add_argument("--campaign", default="diffusion", choices=("diffusion", "llm"))
    p.add_argument("--entry", action="append", default=[], metavar="MODULE:FUNCTION", help="upstream entry point")
    p.add_argument("--file", action="append", default=[], metavar="PATH=SHA256", help="upstream file and its sha256")
    p.add_argument("--shim", action="append", default=[], metavar="MODULE", help="outside module served by a shim")
    p.add_argument("--language", default="triton", choices=("triton", "cuda", "cutedsl"))
    p.add_argument("--candidate-language", choices=("triton", "cuda", "cutedsl"))
    p.add_argument("--candidate-entry", help="default: the first entry point's function")
    p.add_argument("--description")
    p.set_defaults(fn=cmd_new)

    p = sub.add_parser("promote", help="re-run every gate on REF in a clean worktree (GPU) and write docs/review/<commit>.md")
    p.add_argument("task")
    p.add_argument("ref")
    p.add_argument("--author")
    p.set_defaults(fn=cmd_promote)

    p = sub.add_parser("export", help="the tasks' solutions as one pip-installable package (kda_diffusion_kernels): "
                       "a source tree and its wheel, with install()/uninstall() for SGLang's entry points")
    p.add_argument("tasks", nargs="*", metavar="TASK", help="default: every task under diffusion/kernels")
    p.add_argument("--out", help="folder for the source tree and the wheel (default: dist/ in the repository)")
    p.add_argument("--version", help="the package's version (default: 0.1.0+g<short commit>, .dirty when the "
                   "exported sources have uncommitted changes)")
    p.set_defaults(fn=cmd_export)

    p = sub.add_parser("rules", help="production rules without a GPU: every candidate's Triton launches and CUDA "
                       "sources compile for every architecture SGLang supports (sm_80, sm_89, sm_90, sm_100)")
    p.add_argument("tasks", nargs="*", metavar="TASK", help="default: every task")
    p.add_argument("--arch", help="comma-separated compute capabilities x 10 (default: 80,89,90,100)")
    p.add_argument("--jobs", type=int, help="nvcc builds at a time (default: half the CPUs)")
    p.add_argument("--markdown", metavar="FILE", help="also write the matrix as a page")
    p.set_defaults(fn=cmd_rules)

    p = sub.add_parser("campaign", help="agent runs of every task: status, or clean finished worktrees and branches")
    csub = p.add_subparsers(dest="action", required=True)
    q = csub.add_parser("status", help="runs, best result per GPU, promoted version, open worktrees")
    q.set_defaults(fn=cmd_campaign)
    q = csub.add_parser("run", help="one agent run per task through its launcher, each on a GPU it holds alone; a "
                        "queue when tasks outnumber GPUs; a live table; Ctrl-C stops every agent")
    q.add_argument("tasks", nargs="*", help="task names or folders (each needs a launcher: `kda launchers`)")
    q.add_argument("--gpus", help="comma-separated GPU indices (default: every GPU nvidia-smi lists)")
    q.add_argument("--rounds", type=int, help="at most this many gate rounds per run (never more than the task's "
                   "gates.max_rounds)")
    q.add_argument("--agent", default="claude", help="claude (default), codex, or a shell command run as the "
                   "launcher's KDA_AGENT_CMD (the brief's path in $1)")
    q.add_argument("--resume", metavar="ID", help="start the tasks of campaign ID that never started")
    q.add_argument("--ray", nargs="?", const="local", metavar="ADDRESS",
                   help="schedule the runs on a Ray cluster (pip install ray), one GPU each; ADDRESS as ray.init "
                   "takes it (auto, ray://host:10001), none: a local instance")
    q.add_argument("--ray-repo", metavar="PATH", help="with --ray: this repository's checkout on every node "
                   "(default: this checkout's path)")
    q.set_defaults(fn=cmd_campaign)
    q = csub.add_parser("clean", help="remove worktrees and branches of merged or ended runs (dry run without --yes)")
    q.add_argument("--yes", action="store_true", help="do it")
    q.add_argument("--idle-hours", type=float, default=24.0, help="a run that never ended counts as dry or "
                   "abandoned after this long without a round, commit or change to its task folder (default 24)")
    q.set_defaults(fn=cmd_campaign)
    p = sub.add_parser("shapes", help="the shape catalog: regenerate every task's workloads.json from it (--check: "
                       "fail on drift); `ingest` merges recorder logs into it")
    p.add_argument("--check", action="store_true", help="compare instead of writing; fail naming the task and row")
    p.set_defaults(fn=cmd_shapes, action=None)
    ssub = p.add_subparsers(dest="action", required=False)
    q = ssub.add_parser("ingest", help="validate recorder logs and merge them into diffusion/shapes/captured.toml")
    q.add_argument("logs", nargs="+", metavar="LOG")
    q.add_argument("--catalog", help="captured-signature file (default: diffusion/shapes/captured.toml in the repository)")
    q.set_defaults(fn=cmd_shapes)
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
