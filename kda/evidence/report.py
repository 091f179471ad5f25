"""`kda report`: every figure in README and docs, generated from the committed results files.

Writes the README results table (between markers), each task's docs/results.md with per-row tables and SVG plots
(speedup with intervals; achieved bandwidth against the roofline), and docs/campaign.md with fast_p. `--check`
regenerates the markdown in memory and fails if a committed file differs, a linked plot is missing, drawn from
other data or over PLOT_MAX_BYTES, or a plot no page links is left in docs/plots/.
"""
from __future__ import annotations

import hashlib
import io
import json
import math
import re
from dataclasses import dataclass
from pathlib import Path

from kda.core.errors import KdaError
from kda.harness import results_file, sweep_verdict
from kda.harness.provenance import device_us_start
from kda.harness.stats import geomean, geomean_ci, paired_speedup
from kda.core.paths import all_task_dirs, repo_root

START, END = "<!-- kda:results:start -->", "<!-- kda:results:end -->"
E2E_START, E2E_END = "<!-- kda:e2e:start -->", "<!-- kda:e2e:end -->"
FAST_P = (1.0, 1.2, 1.5)
METRICS = ("device_us", "graph_us", "wall_us")
ARMS = ("baseline", "candidate", "compile", "eager", "latest")


@dataclass
class ResultsFile:
    path: Path
    provenance: dict
    rows: list[dict]
    summary: dict

    @property
    def task(self) -> str:
        return self.provenance["task"]

    @property
    def gpu(self) -> str:
        return self.provenance["gpu_slug"]

    @property
    def aa(self) -> bool:
        return bool(self.provenance.get("aa"))

    @property
    def run(self) -> str:
        """The file's name without its encoding (`h100`, `h100-aa`): what its plots are named after."""
        return results_file.stem(self.path)


def load_results(path: Path) -> ResultsFile:
    path = Path(path)
    recs = results_file.read_records(path)
    if len(recs) < 2 or recs[0].get("type") != "provenance" or recs[-1].get("type") != "summary":
        raise KdaError(f"{path}: expected a provenance line first and a summary line last")
    rows = [r for r in recs[1:-1] if r.get("type") == "row"]
    return ResultsFile(path, recs[0], rows, recs[-1])


def all_results(root: Path | None = None) -> dict[Path, list[ResultsFile]]:
    out = {}
    for task_dir in all_task_dirs():
        files = [load_results(p) for p in results_file.list_files(task_dir / "results")]
        files = [f for f in files if f.provenance.get("mode") == "bench"]
        if files:
            out[task_dir] = files
    return out


def _beside(folder: str, keep) -> dict[Path, list[ResultsFile]]:
    """Each task's results files in results/<folder>/ that `keep` accepts, apart from its production files."""
    out = {}
    for task_dir in all_task_dirs():
        files = [load_results(p) for p in results_file.list_files(task_dir / "results" / folder)]
        files = [f for f in files if f.provenance.get("mode") == "bench" and keep(f)]
        if files:
            out[task_dir] = files
    return out


def all_sweeps() -> dict[Path, list[ResultsFile]]:
    """Each task's sweep results files (TASK/results/sweep/<gpu>.jsonl.gz), apart from its production files."""
    return _beside("sweep", lambda f: bool(f.summary.get("sweep")))


def all_colds() -> dict[Path, list[ResultsFile]]:
    """Each task's cold-L2 results files (TASK/results/cold/<gpu>.jsonl.gz: `kda bench --cold`)."""
    return _beside("cold", lambda f: f.provenance.get("l2") == "cold")


def _ci(e: dict | None, digits=3) -> str:
    if not e:
        return "-"
    lo, hi = (e.get("ci") or [None, None])
    med = e.get("geomean", e.get("median"))
    if lo is None:
        return f"{med:.{digits}f}"
    return f"{med:.{digits}f} [{lo:.{digits}f}, {hi:.{digits}f}]"


def _f(v, digits=1):
    return "-" if v is None else f"{v:.{digits}f}"


def noise_floor_text(aa: ResultsFile | None) -> str:
    if aa is None:
        return "not measured"
    from kda.harness.runner import aa_noise

    noise = aa_noise(aa.rows, aa.summary)
    if noise is None:
        return "not measured"
    return f"{_ci(noise)}; {noise['false_wins']}/{noise['rows']} rows falsely 'faster'"


def rows_below_one(entry: dict | None) -> str:
    """Production rows whose 95% interval lies wholly below 1 (a summary's vs_baseline or vs_best_peer entry)."""
    return "-" if not entry else f"{entry['rows_ci_below_1']}/{entry['rows']}"


LATEST_TEXT = ("**Over today's SGLang** is `graph_us` over SGLang 0.5.23's kernel for the same op (the peer `latest`, "
               "where a task pins it: docs/sglang-0.5.23.md), with the production rows whose interval lies wholly "
               "below 1. Where a task pins none, the cell says why (its `[upstream_latest] note`); `-`: the run predates the peer.")
READ_RIGHT = ("**Kernel vs best peer** is `graph_us` (CUDA-graph replay: the kernels alone) over the fastest of upstream, "
              "torch.compile, eager PyTorch and, where a task pins it, today's SGLang (`latest`) on each row: what a user who captures graphs, as serving engines do, gains "
              "over the best they could run instead. **Eager call vs upstream** is `device_us` (back-to-back calls, host "
              "path included) over the pinned upstream kernel: what an eager caller gains by swapping the candidate in; "
              "on small rows most of it is launch overhead, not the kernel. **Rows below 1** counts production rows "
              "whose 95% interval of kernel vs best peer lies wholly below 1: rows where a user would lose.")


GEOMEANS = ("Geomeans over passing production rows of the median paired per-trial ratio (baseline or peer time / "
            "candidate time), with 95% bootstrap intervals.")
LEAD_HEAD = "| kernel vs best peer | eager call vs upstream | rows below 1 |"


@dataclass
class PeerLosses:
    """The passing production rows of a results file read against the best peer on graph_us."""
    below: list[dict]  # interval wholly below the bound, worst median first: {id, peer, median, ci}
    unmeasured: list[tuple[str, str]]  # rows with no interval: (id, why)
    rows: int  # rows with an interval


def graph_peer_losses(rows: list[dict], bound: float = 1.0) -> PeerLosses:
    """Rows whose 95% interval of graph_us over the best peer lies wholly below `bound` (its upper end under it).
    The rows are those the summaries' rows_ci_below_1 counts (passing production rows with an interval), so at
    bound 1 the README's count, results.md and `kda gate` agree; a failing row is the correctness gate's."""
    below, unmeasured, measured = [], [], 0
    for r in rows:
        if not r.get("production") or r.get("status") != "PASS":
            continue
        sp = ((r.get("speedup") or {}).get("graph_us") or {})
        e = sp.get("vs_best_peer")
        if not e:
            unmeasured.append((r["id"], _no_interval_why(r)))
            continue
        measured += 1
        if e["ci"][1] < bound:
            below.append({"id": r["id"], "peer": sp.get("best_peer") or "?", "median": e["median"], "ci": e["ci"]})
    return PeerLosses(sorted(below, key=lambda x: x["median"]), unmeasured, measured)


# The bootstrap of "over today's SGLang": fixed, so a regenerated page is byte-identical (the harness's own summaries
# use the task's bench seed; this figure is computed here, from the rows' stored samples, for files written before it
# existed as well as after).
LATEST_RESAMPLES, LATEST_SEED = 2000, 20261128


def vs_latest(f: ResultsFile, metric: str = "graph_us") -> dict | None:
    """The candidate over today's SGLang (the peer `latest`, issue 40) on the passing production rows where that arm
    ran and passed its checks: geomean of per-row median paired ratios with its interval, the rows, and how many lie
    wholly below 1. None where the file has no such row (the task pins no later release, or none loaded)."""
    usable = []
    for r in f.rows:
        checks = (r.get("checks") or {}).get("latest") or {}
        samples = r.get("samples") or {}
        if (r.get("production") and r.get("status") == "PASS" and checks.get("checks") and not checks.get("failed")
                and samples.get("latest", {}).get(metric) and samples.get("candidate", {}).get(metric)):
            pair = (samples["latest"][metric], samples["candidate"][metric])
            sp = paired_speedup(*pair, LATEST_RESAMPLES, LATEST_SEED)
            if sp:
                usable.append((r["id"], sp, pair))
    if not usable:
        return None
    worst = min(usable, key=lambda u: u[1]["median"])
    return {"geomean": geomean([u[1]["median"] for u in usable]),
            "ci": geomean_ci([u[2] for u in usable], LATEST_RESAMPLES, LATEST_SEED), "rows": len(usable),
            "rows_ci_below_1": sum(u[1]["ci"][1] < 1.0 for u in usable),
            "min": {"id": worst[0], "median": worst[1]["median"], "ci": worst[1]["ci"]}}


def latest_note(task_dir: Path) -> str:
    """The task's `[upstream_latest] note`: why no later release is pinned, where none is ("" otherwise)."""
    from kda.definition.task import Task

    if not (Path(task_dir) / "config.toml").is_file():  # a folder of results only (the tests' pages)
        return ""
    return Task.load(task_dir).cfg["upstream_latest"]["note"]


def latest_cell(f: ResultsFile, note: str = "") -> str:
    e = vs_latest(f)
    if e is None:
        return note or "-"
    return f"{_ci(e)}, {e['rows_ci_below_1']}/{e['rows']} below 1"


def _no_interval_why(row: dict) -> str:
    err = ((row.get("arms") or {}).get("candidate") or {}).get("graph_error")
    if err:
        return f"the candidate's graph capture failed ({str(err).splitlines()[0][:80]})"
    return "no correct peer has a graph_us time"


def readme_table(results: dict[Path, list[ResultsFile]]) -> str:
    """The lead table: few columns (readable at 80), the two figures that answer different users first."""
    lines = [f"| task | GPU | rows passed {LEAD_HEAD} over today's SGLang | measured |",
             "|---|---|---|---|---|---|---|---|"]
    for task_dir, files in sorted(results.items(), key=lambda kv: kv[0].name):
        note = latest_note(task_dir)
        for f in (f for f in files if not f.aa):
            s, m = f.summary, f.summary["metrics"]
            kernel = (m.get("graph_us") or {}).get("vs_best_peer")
            eager = (m.get("device_us") or {}).get("vs_baseline")
            rel = task_dir.relative_to(repo_root())
            lines.append(
                f"| [{f.task}]({rel}/docs/results.md) | {f.gpu.upper()} | {s['rows_passed']}/{s['rows_total']} "
                f"| {_ci(kernel)} | {_ci(eager)} | {rows_below_one(kernel)} | {latest_cell(f, note)} "
                f"| {f.provenance['time_utc'][:10]} `{(f.provenance.get('commit') or '?')[:7]}`"
                f"{' (dirty)' if f.provenance.get('dirty') else ''} |")
    lines += ["", READ_RIGHT, "", LATEST_TEXT, "", timing_method(results), "",
              f"{GEOMEANS} Every other summary figure (wall_us, worst rows, copy "
              "bandwidth, the A/A noise floor) is in [docs/campaign.md](docs/campaign.md). Generated by `kda report` "
              "from `*/kernels/*/results/*.jsonl.gz`."]
    return "\n".join(lines)


def e2e_files() -> list[Path]:
    """The model blocks' results files (diffusion/e2e/<block>/results/<gpu>.jsonl.gz, `kda e2e BLOCK` on a GPU)."""
    return sorted(p for d in sorted((repo_root() / "diffusion" / "e2e").glob("*/results"))
                  for p in results_file.list_files(d))


def e2e_table(paths: list[Path], link: bool = False) -> str:
    """The end-to-end table (issue 33): per block workload and GPU, the candidate arm over upstream by eager_us and
    graph_us, over torch.compile of the block by graph_us, and the graph_us gain the task results predict. `link`:
    each block's name links its page (README)."""
    if not paths:
        return ("No model block has been timed on a GPU yet: `kda e2e BLOCK` writes "
                "`diffusion/e2e/<block>/results/<gpu>.jsonl.gz` ([docs/e2e.md](docs/e2e.md)).")
    lines = ["| block | GPU | workload | cand / upstream eager_us | cand / upstream graph_us | cand / compile graph_us "
             "| cand / 0.5.23 graph_us | predicted graph_us |", "|---|---|---|---|---|---|---|---|"]
    older: dict[str, list[str]] = {}  # block -> its tasks whose latest arm ran the 0.5.15 baseline, with why
    from kda.e2e.inventory import FLAWED, REPAIRED, prediction, readable

    unattributed: dict[str, set[str]] = {}  # why a file's inventories are not read -> its blocks
    repaired: dict[str, set[str]] = {}  # what was set right on reading a file's inventories -> its blocks
    withheld: list[str] = []  # workloads whose speedups the peers-alone backstop withheld (kda.e2e.alone)
    for path in paths:
        records = results_file.read_records(path)
        prov = records[0]
        trusted = readable(prov.get("inventory"))
        if not trusted:
            why = FLAWED.get(prov.get("inventory"), f"were taken by an unknown method {prov.get('inventory')!r}")
            unattributed.setdefault(why, set()).add(str(prov.get("block")))
        elif prov.get("inventory") in REPAIRED:
            repaired.setdefault(REPAIRED[prov["inventory"]], set()).add(str(prov.get("block")))
        for task, what in ((prov.get("latest") or {}).get("tasks") or {}).items():
            if "0.5.23" not in what.split(" ")[0]:
                older.setdefault(str(prov.get("block")), []).append(f"{task} on {what}")
        pending = (prov.get("alone") or {}).get("state") == "pending"  # the run ended before the peers ran alone
        for r in (r for r in records if r.get("type") == "row"):
            sp = {} if pending else (r.get("speedup") or {})
            if pending or "speedup_withheld" in r:
                withheld.append(f"{prov.get('block')} {r['id']}: " + ("the run ended before its peers were timed "
                                                                       "alone" if pending else r.get("error", "")))
            up, comp, latest = (sp.get(k) or {} for k in ("candidate/upstream", "candidate/compile",
                                                            "candidate/latest"))
            # from the upstream arm's inventory, cleaned (kda.e2e.inventory.clean), and the task speedups the run
            # read; a row that recorded no speedups (a test's) keeps its recorded figure
            rec = r.get("predicted") or {}
            up_inv = ((r.get("arms") or {}).get("upstream") or {}).get("inventory")
            pred = None if not trusted else (prediction(up_inv, rec["task_speedups"])
                                             if up_inv and "task_speedups" in rec else rec.get("graph_us"))
            name = prov.get("block")
            cell = f"[{name}](diffusion/e2e/{name}/results.md)" if link else name
            lines.append(f"| {cell} | {str(prov.get('gpu_slug', '?')).upper()} | {r['id']} "
                         f"| {_ci(up.get('eager_us'))} | {_ci(up.get('graph_us'))} | {_ci(comp.get('graph_us'))} "
                         f"| {_ci(latest.get('graph_us'))} | {_f(pred, 3) if pred else '-'} |")
    note = " (not yet validated: the first GPU runs of the timing code)" \
        if any(results_file.read_records(p)[0].get("not_yet_validated") for p in paths) else ""
    gap = "".join(f" No prediction is shown for {', '.join(sorted(blocks))}: their inventories {why} (docs/e2e.md)."
                  for why, blocks in unattributed.items())
    gap += "".join(f" The inventories of {', '.join(sorted(blocks))} {why} (docs/e2e.md)."
                   for why, blocks in repaired.items())
    gap += (" Speedups withheld (the peers timed alone, kda.e2e.alone): " + "; ".join(withheld) + ".") \
        if withheld else ""
    latest_note = " 0.5.23: SGLang 0.5.23's kernel for each call site's op (the arm `latest`), its fused sites not " \
        "modeled" + ("; " + "; ".join(f"{b} runs {', '.join(ts)}" for b, ts in sorted(older.items())) if older else "") \
        + "."
    return "\n".join(lines + ["", f"Median paired per-trial ratios with 95% bootstrap intervals{note}; predicted: "
                               "Amdahl over the upstream arm's profiler inventory with each task's measured graph_us "
                               f"speedup on the rows the workload was read from.{latest_note}{gap}"])


def e2e_error_table(paths: list[Path]) -> str:
    """Issue 33's correctness target per workload: each arm's largest relative RMS error against the fp32 path (the
    block's outputs), the candidate's over upstream's (at most 2), and the arms that failed their check."""
    lines = []
    for path in paths:
        records = results_file.read_records(path)
        gpu = str(records[0].get("gpu_slug", "?")).upper()
        for r in (r for r in records if r.get("type") == "row"):
            arms = r.get("arms") or {}
            err = {a: max(rec["errors"]) for a, rec in arms.items() if rec.get("errors")}
            if not err:
                continue
            up, cand = err.get("upstream"), err.get("candidate")
            ratio = f"{cand / up:.2f}" if up and cand is not None else "-"
            failed = ", ".join(a for a, rec in arms.items() if rec.get("passed") is False or rec.get("error")) or "none"
            lines.append(f"| {r['id']} | {gpu} | {_f(up, 5) if up is not None else '-'} "
                         f"| {_f(cand, 5) if cand is not None else '-'} | {ratio} | {failed} |")
    if not lines:
        return ""
    return "\n".join(["| workload | GPU | upstream error | candidate error | candidate / upstream | arms failed |",
                      "|---|---|---|---|---|---|", *lines, "",
                      "Largest relative RMS error of the block's outputs against the fp32 path, per arm (issue 33: "
                      "every arm within the block's tolerance, the candidate's error at most twice upstream's)."])


def e2e_family_table(paths: list[Path]) -> str:
    """Per workload, the upstream arm's profiled block call split by kernel family told apart by name alone (every
    kernel: a site's norm or rope kernel counts as "other"), which holds whatever a file's attribution method once
    its profile kept every kernel (not the first run's, which lost the Triton ones); the ceiling is the block's gain if every kernel but attention and GEMM took no time, the bound on what
    faster site kernels can give; beside it the candidate arm's profiled call against upstream's."""
    from kda.e2e.inventory import FAMILIES, clean, family

    lines = []
    for path in paths:
        records = results_file.read_records(path)
        if not records[0].get("inventory"):  # the first run's inventories lack every Triton kernel: not a total
            continue
        gpu = str(records[0].get("gpu_slug", "?")).upper()
        for r in (r for r in records if r.get("type") == "row"):
            invs = {a: ((r.get("arms") or {}).get(a) or {}).get("inventory") for a in INVENTORY_ARMS}
            # ranges listed as kernels (a file of the third run) are not kernels of any family: left out
            invs = {a: clean(i) if i else i for a, i in invs.items()}
            up = invs["upstream"]
            if not (up and up.get("kernels") and up.get("total_us")):
                continue
            fams = dict.fromkeys(FAMILIES, 0.0)
            for k in up["kernels"]:
                fams[family(k["kernel"])] += float(k["us"])
            total = up["total_us"]
            heavy = fams["attention"] + fams["gemm"]
            ceiling = f"{total / heavy:.2f}" if heavy > 0 else "-"
            cand = invs["candidate"]
            ratio = f"{total / cand['total_us']:.3f}" if cand and cand.get("total_us") else "-"
            cells = " | ".join(f"{100 * fams[f] / total:.0f}%" for f in FAMILIES)
            lines.append(f"| {r['id']} | {gpu} | {total / 1000:.2f} | {cells} | {ceiling} | {ratio} |")
    if not lines:
        return ""
    head = ["| workload | GPU | upstream ms | " + " | ".join(FAMILIES) + " | ceiling | profiled cand / upstream |",
            "|---|---|---|" + "---|" * len(FAMILIES) + "---|---|"]
    return "\n".join(head + lines + ["", "One profiled block call of the upstream arm (not a timed call), its kernels "
                                      "grouped by name alone: a call site's norm, rope or modulation kernels are "
                                      "among \"other\" and \"copy\". Ceiling: the block's gain if every kernel but "
                                      "attention and GEMM took no time, the most faster site kernels can give. "
                                      "Profiled cand / upstream: the two arms' profiled GPU time per call."])


def trajectory_files(block_dir: Path | None = None) -> list[Path]:
    """The trajectory results (diffusion/e2e/<block>/results/trajectory/<gpu>.jsonl.gz, `kda e2e BLOCK
    --trajectory` on a GPU), of one block or of all."""
    dirs = [block_dir / "results" / "trajectory"] if block_dir else \
        sorted((repo_root() / "diffusion" / "e2e").glob("*/results/trajectory"))
    return sorted(p for d in dirs if d.is_dir() for p in results_file.list_files(d))


def trajectory_table(paths: list[Path], link: bool = False) -> str:
    """Issue 40's trajectory check: per block, GPU and workload, each arm's final-latent PSNR against the fp32
    trajectory, the candidate's gap to upstream and the verdict (at most MAX_PSNR_DROP_DB below)."""
    from kda.e2e.trajectory import MAX_PSNR_DROP_DB

    if not paths:
        return "No trajectory has run on a GPU yet (`kda e2e BLOCK --trajectory`, docs/e2e.md)."

    def db(v) -> str:
        return "-" if v is None else (f"{v:.2f}" if math.isfinite(v) else str(v))

    lines = ["| block | GPU | workload | stack | upstream dB | candidate dB | eager dB | cand - upstream | verdict |",
             "|---|---|---|---|---|---|---|---|---|"]
    for path in paths:
        records = results_file.read_records(path)
        prov = records[0]
        name = prov.get("block")
        cell = f"[{name}](diffusion/e2e/{name}/results.md)" if link else name
        for r in (r for r in records if r.get("type") == "row"):
            p = r.get("psnr") or {}
            up, cand = p.get("upstream"), p.get("candidate")
            gap = f"{cand - up:+.2f}" if up is not None and cand is not None and math.isfinite(up) \
                and math.isfinite(cand) else "-"
            lines.append(f"| {cell} | {str(prov.get('gpu_slug', '?')).upper()} | {r['id']} "
                         f"| {r.get('depth')} x {r.get('steps')} steps | {db(up)} | {db(cand)} | {db(p.get('eager'))} "
                         f"| {gap} | {'FAIL: ' + r['problem'] if r.get('problem') else 'ok'} |")
    return "\n".join(lines + ["", "Final-latent PSNR against the fp32 path's trajectory (a stack of the block's copies "
                               "under the flow-matching Euler sampler, random weights: a comparison of arms on one "
                               "dynamic, not a sample's quality); the rule: the candidate at most "
                               f"{MAX_PSNR_DROP_DB} dB below upstream."])


def e2e_by_block() -> dict[Path, list[Path]]:
    out: dict[Path, list[Path]] = {}
    for path in e2e_files():
        out.setdefault(path.parent.parent, []).append(path)
    return out


INVENTORY_ARMS = ("upstream", "candidate")


def e2e_plot_name(path: Path) -> str:
    return f"{results_file.stem(path)}-inventory{PLOT_SUFFIX}"


def e2e_plot_data(path: Path) -> dict | None:
    """What a block file's inventory plot draws: per workload, the upstream and candidate arms' GPU time per block
    call split by owner (each task's kernels, then GEMM, attention, copies, other), as shares of the upstream arm's
    total, so the candidate's bar is as long as its time relative to upstream. None where the file's inventories
    predate attribution by time window (kda.e2e.inventory) or no workload has both arms' inventories."""
    from kda.e2e.inventory import FAMILIES, clean, readable

    records = results_file.read_records(path)
    prov = records[0]
    if not readable(prov.get("inventory")):
        return None
    rows = []
    for r in (r for r in records if r.get("type") == "row"):
        invs = [((r.get("arms") or {}).get(a) or {}).get("inventory") for a in INVENTORY_ARMS]
        invs = [clean(i) if i else i for i in invs]
        if all(i and i.get("total_us") for i in invs):
            rows.append((r["id"], invs))
    if not rows:
        return None
    tasks = sorted({t for _, invs in rows for i in invs for t in i.get("tasks", {})})
    ids, series = [], []
    for rid, invs in rows:
        total = invs[0]["total_us"]
        for arm, inv in zip(INVENTORY_ARMS, invs):
            ids.append(f"{rid} {arm}")
            series.append([round(inv.get("tasks", {}).get(t, 0.0) / total, 5) for t in tasks]
                          + [round(inv.get("families", {}).get(f, 0.0) / total, 5) for f in FAMILIES])
    return {"kind": "inventory", "ids": ids, "categories": [*tasks, *FAMILIES], "series": series,
            "title": f"{prov.get('block')}: GPU time per block call on {prov.get('gpu')}, as a share of upstream's"}


def e2e_block_md(block_dir: Path, paths: list[Path]) -> str:
    """A block's page (diffusion/e2e/<block>/results.md): per results file, the run, the table and the inventory."""
    out = ["<!-- generated by `kda report` from results/*.jsonl.gz; do not edit -->", f"# Results: {block_dir.name}",
           "", "The end-to-end tier (docs/e2e.md): the block with every kernel call site on one arm's kernels. "
           "Ratios are the candidate arm's speedup (median of paired per-trial ratios, 95% bootstrap interval).", ""]
    for path in paths:
        prov = results_file.read_records(path)[0]
        out += [f"## {prov.get('gpu')} ({path.name})", "",
                f"- run: {prov.get('time_utc')}, commit `{str(prov.get('commit') or '?')[:12]}`, arms "
                f"{', '.join(prov.get('arms') or [])}, {prov.get('trials')} trials", "", e2e_table([path]), ""]
        if e2e_plot_data(path) is None:
            from kda.e2e.inventory import FLAWED, readable

            method = prov.get("inventory")
            why = ("no workload has both arms' inventories" if readable(method)
                   else "the inventories of this file " + FLAWED.get(method, f"were taken by an unknown method "
                                                                            f"{method!r}"))
            out += [f"No inventory plot: {why} (docs/e2e.md).", ""]
        else:
            out += [f"![inventory](plots/{e2e_plot_name(path)})", "",
                    "Each workload's upstream and candidate bars split one block call's GPU time by owner (each "
                    "task's kernels at its call sites, then GEMM, attention, copies, other), as shares of the "
                    "upstream arm's total (profiler inventory, one call, not the timed calls).", ""]
    accuracy = e2e_error_table(paths)
    if accuracy:
        out += ["## Against the fp32 path", "", accuracy, ""]
    shares = e2e_family_table(paths)
    if shares:
        out += ["## Where the time goes", "", shares, ""]
    trajectories = trajectory_files(block_dir)
    if trajectories:
        out += ["## Trajectories", "", trajectory_table(trajectories), ""]
    return "\n".join(out)


def timing_method(results: dict[Path, list[ResultsFile]]) -> str:
    """Which of the listed files timed every call on its own rotated input set (provenance `rotate`, issue 34) and
    which on one hot set: their small rows are not measured alike (docs/harness.md, Threat model)."""
    files = [f for fs in results.values() for f in fs if not f.aa]
    rotated = [f for f in files if f.provenance.get("rotate")]
    if not files:
        return ""
    if not rotated:
        return ("Every file above timed its calls on one set of inputs, hot in L2 where it fits: measured before "
                "timed calls rotated over input sets (`bench.rotate`), so a row small enough to stay in L2 is timed "
                "at L2 rates, and a kernel that skipped unchanged work would not have shown. Runs from now on rotate.")
    names = ", ".join(f"{f.task} {f.gpu.upper()}" for f in rotated)
    return (f"Timed over rotated input sets (`bench.rotate`): {names}; every other file on one set of inputs, hot in "
            f"L2 where it fits, so their small rows are not measured alike.")


def detail_table(results: dict[Path, list[ResultsFile]]) -> str:
    """Every summary figure of every results file, one row each (docs/campaign.md)."""
    lines = ["| task | GPU | rows passed | device_us geomean [95% CI] | graph_us geomean | wall_us geomean | vs best peer (device_us) | min row (device_us) | rows CI < 1 vs baseline / best peer (device_us) | rows >= 256 MB at >= 85% copy BW | A/A noise floor (device_us) | device_us start | date, commit |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for task_dir, files in sorted(results.items(), key=lambda kv: kv[0].name):
        aa_by_gpu = {f.gpu: f for f in files if f.aa}
        for f in (f for f in files if not f.aa):
            s, m = f.summary, f.summary["metrics"]
            vb = {k: (m.get(k) or {}).get("vs_baseline") for k in METRICS}
            peer = (m.get("device_us") or {}).get("vs_best_peer")
            mn = vb["device_us"]["min"] if vb["device_us"] else None
            rel = task_dir.relative_to(repo_root())
            lines.append(
                f"| [{f.task}](../{rel}/docs/results.md) | {f.provenance['gpu']['name']} | {s['rows_passed']}/{s['rows_total']} "
                f"| {_ci(vb['device_us'])} | {_ci(vb['graph_us'])} | {_ci(vb['wall_us'])} | {_ci(peer)} "
                f"| {(_f(mn['median'], 3) + ' (' + mn['id'] + ')') if mn else '-'} "
                f"| {rows_below_one(vb['device_us'])} / {rows_below_one(peer)} "
                f"| {s.get('rows_256mb_at_85pct_copy', 0)}/{s.get('rows_256mb', 0)} "
                f"| {noise_floor_text(aa_by_gpu.get(f.gpu))} | {device_us_start(f.provenance)} | {f.provenance['time_utc'][:10]}, `{(f.provenance.get('commit') or '?')[:8]}`"
                f"{' (dirty)' if f.provenance.get('dirty') else ''} |")
    lines.append("")
    lines.append("Speedups are baseline time / candidate time (median of paired per-trial ratios per row, geomean over "
                 "passing production rows); intervals are 95% bootstrap intervals. Generated by `kda report` from "
                 "`*/kernels/*/results/*.jsonl.gz`.")
    return "\n".join(lines)


def lead_section(files: list[ResultsFile], note: str = "") -> list[str]:
    """What a task's results.md leads with: per GPU, the README's two figures and the rows a user who captures
    graphs would lose on (the worst named), then the README's reading of them."""
    bench = [f for f in files if not f.aa]
    if not bench:
        return []
    out = ["## At a glance", "", f"| GPU {LEAD_HEAD} worst row below 1 | over today's SGLang |",
           "|---|---|---|---|---|---|"]
    gaps = []
    for f in bench:
        m = f.summary["metrics"]
        kernel = (m.get("graph_us") or {}).get("vs_best_peer")
        eager = (m.get("device_us") or {}).get("vs_baseline")
        losses = graph_peer_losses(f.rows)
        worst = losses.below[0] if losses.below else None
        worst_text = f"{worst['id']}: {_speed(worst)} vs {worst['peer']}" if worst else "none"
        out.append(f"| {f.gpu.upper()} | {_ci(kernel)} | {_ci(eager)} | {len(losses.below)}/{losses.rows} "
                   f"| {worst_text} | {latest_cell(f, note)} |")
        gaps += [f"- {f.gpu.upper()}, {rid}: no graph_us interval over a peer, {why}" for rid, why in losses.unmeasured]
    if gaps:
        out += ["", "Production rows the count leaves out:", "", *gaps]
    exact = [f for f in bench if f.summary.get("bitexact", {}).get("rows")]
    if exact:  # issue 40's contract, on files written since rows record it
        out += ["", "Equal bits to SGLang's eager chain (kda.definition.eager_chains) on the candidate's first checked "
                "call, rows compared (contract in parentheses: `bitexact` requires every row):", ""]
        out += [f"- {f.gpu.upper()}: {f.summary['bitexact']['exact']}/{f.summary['bitexact']['rows']} "
                f"({f.summary.get('contract', 'close')})" for f in exact]
    return out + ["", READ_RIGHT, "", LATEST_TEXT, "", f"{GEOMEANS} The sections below give every figure, per GPU and per row.", ""]


def task_results_md(task_dir: Path, files: list[ResultsFile]) -> str:
    name = task_dir.name
    out = [f"<!-- generated by `kda report` from results/*.jsonl.gz; do not edit -->", f"# Results: {name}", ""]
    out += lead_section(files, latest_note(task_dir))
    for f in files:
        p, s = f.provenance, f.summary
        kind = "A/A (baseline against itself: the noise floor)" if f.aa else "baseline against candidate"
        out += [f"## {p['gpu']['name']} ({f.path.name}): {kind}", "",
                f"- run: {p['time_utc']}, commit `{(p.get('commit') or '?')[:12]}`{' (dirty tree)' if p.get('dirty') else ''}, "
                f"`{p['command']}`, {p.get('duration_s', '?')} s",
                f"- GPU: {p['gpu']['name']} (UUID {p['gpu'].get('uuid', '?')}), driver {(p.get('nvidia_smi_before') or {}).get('driver_version', '?')}, "
                f"torch {p['software']['torch']}, CUDA {p['software']['cuda']}, triton {p['software']['triton']}",
                f"- clocks SM/mem before {_smi(p, 'before')}, after {_smi(p, 'after')}",
                f"- measured copy bandwidth {_f(p.get('copy_tbps'), 2)} TB/s (datasheet {p.get('datasheet_tbps')}); L2 {p['l2']}; "
                f"baseline `{p['vendored']['package']}=={p['vendored']['version']}` (wheel sha256 `{p['vendored']['wheel_sha256'][:16]}...`)",
                f"- device_us start stamp: {device_us_start(p)} ([measurement](../../../../docs/harness.md#metrics))",
                f"- rows passed {s['rows_passed']}/{s['rows_total']} (production {s['production_passed']}/{s['production_total']})", ""]
        out += ["| metric | geomean over baseline [95% CI] | min row | over best peer | min row vs best peer | rows CI > 1 / < 1 | vs best peer: rows CI > 1 / < 1 |",
                "|---|---|---|---|---|---|---|"]
        for m in METRICS:
            e = s["metrics"].get(m) or {}
            vb, vp = e.get("vs_baseline"), e.get("vs_best_peer")
            out.append(f"| {m} | {_ci(vb)} | {_minrow(vb)} | {_ci(vp)} | {_minrow(vp)} | "
                       f"{vb['rows_ci_above_1'] if vb else '-'} / {vb['rows_ci_below_1'] if vb else '-'} | "
                       f"{vp['rows_ci_above_1'] if vp else '-'} / {vp['rows_ci_below_1'] if vp else '-'} |")
        out.append("")
        metric = s["headline_metric"]
        arms = [a for a in ARMS if any(a in r.get("arms", {}) for r in f.rows)]
        out += [f"### Per row, {metric}", "",
                "| row | prod | shapes | MB | " + " | ".join(f"{a} us" for a in arms) +
                " | speedup [95% CI] | vs best peer | base TB/s | cand TB/s | cand % copy | verdict |",
                "|---|---|---|---|" + "---|" * len(arms) + "---|---|---|---|---|---|"]
        for r in f.rows:
            a = r.get("arms", {})
            sp = (r.get("speedup") or {}).get(metric, {})
            times = " | ".join(_f((a.get(x, {}).get(metric) or {}).get("median"), 2) for x in arms)
            peer = sp.get("vs_best_peer")
            cand = (a.get("candidate", {}).get(metric) or {})
            verdict = r["status"] + (f" ({', '.join(r['reasons'])})" if r["reasons"] else "")
            out.append(f"| {r['id']} | {'yes' if r['production'] else 'no'} | {r['shapes']} | {r['bytes'] / 1e6:.1f} | {times} | "
                       f"{_speed(sp.get('vs_baseline'))} | {(_speed(peer) + ' (' + sp['best_peer'] + ')') if peer else '-'} | "
                       f"{_f((a.get('baseline', {}).get(metric) or {}).get('tbps'), 2)} | {_f(cand.get('tbps'), 2)} | "
                       f"{_f(100 * cand['copy_frac'], 0) if cand.get('copy_frac') else '-'} | {verdict} |")
        for other in (m for m in METRICS if m != metric):
            out += ["", f"### Per row, {other}", "",
                    "| row | " + " | ".join(f"{a} us" for a in arms) + " | speedup [95% CI] | vs best peer | cand TB/s | notes |",
                    "|---|" + "---|" * len(arms) + "---|---|---|---|"]
            for r in f.rows:
                a = r.get("arms", {})
                sp = (r.get("speedup") or {}).get(other, {})
                times = " | ".join(_f((a.get(x, {}).get(other) or {}).get("median"), 2) for x in arms)
                peer = sp.get("vs_best_peer")
                graph_err = (a.get("candidate") or {}).get("graph_error") if other == "graph_us" else None
                notes = "; ".join(([f"not capturable: {graph_err}"] if graph_err else []) + r.get("notes", [])[:1]).replace("|", "/")
                out.append(f"| {r['id']} | {times} | {_speed(sp.get('vs_baseline'))} | "
                           f"{(_speed(peer) + ' (' + sp['best_peer'] + ')') if peer else '-'} | "
                           f"{_f(((a.get('candidate') or {}).get(other) or {}).get('tbps'), 2)} | {notes} |")
        if not f.aa:
            out += large_rows_section(task_dir, f)
        speedup, roofline = plot_names(f)
        out += ["", f"![speedup per row](plots/{speedup})",
                f"![bandwidth against the roofline](plots/{roofline})", ""]
    return "\n".join(out) + "\n"


def _domain_text(p: dict) -> str:
    if p.get("choices") is not None:
        text = ", ".join(map(str, p["choices"]))
        return text + (f" (CPU: {', '.join(map(str, p['cpu_choices']))})" if p.get("cpu_choices") else "")
    text = f"{p['min']} .. {p['max']}, {p.get('scale') or 'log'}"
    text += f", multiples of {p['multiple_of']}" if p.get("multiple_of") else ""
    if p.get("cpu_max") is not None:
        text += f" (CPU: {p['min'] if p.get('cpu_min') is None else p['cpu_min']} .. {p['cpu_max']})"
    return text


def cold_section(colds: list[ResultsFile], hot: list[ResultsFile]) -> list[str]:
    """The production rows timed from a flushed L2 (one call per sample), beside the hot file of the same GPU: the
    two figures of the lead, cold and hot, so a reader sees how much of a win is L2 residency."""
    out = ["## Cold L2 beside hot", "",
           "Each sample starts from an L2 flushed by a write of twice its size and times one call (`kda bench "
           f"--cold`, results/cold/): what a kernel costs when its inputs come from DRAM.", "",
           f"| GPU | L2 {LEAD_HEAD} file |", "|---|---|---|---|---|---|"]
    hot_by_gpu = {f.gpu: f for f in hot if not f.aa}
    for f in colds:
        for label, g in (("cold", f), ("hot", hot_by_gpu.get(f.gpu))):
            if g is None:
                out.append(f"| {f.gpu.upper()} | hot | - | - | - | no hot file for this GPU |")
                continue
            m = g.summary["metrics"]
            kernel = (m.get("graph_us") or {}).get("vs_best_peer")
            eager = (m.get("device_us") or {}).get("vs_baseline")
            where = "cold/" if label == "cold" else ""
            out.append(f"| {f.gpu.upper()} | {label} | {_ci(kernel)} | {_ci(eager)} | {rows_below_one(kernel)} "
                       f"| results/{where}{g.path.name} (`{(g.provenance.get('commit') or '?')[:7]}`) |")
    return out + [""]


def sweep_section(f: ResultsFile) -> list[str]:
    """One sweep results file: its verdict against the target, the domain it drew from, and every row."""
    p, v, sw = f.provenance, f.summary["sweep"], f.provenance["sweep"]
    w = v["worst"]
    worst = (f"`{w['id']}` {w['median']:.3f} [{w['ci'][0]:.3f}, {w['ci'][1]:.3f}] vs {w['best_peer']}" if w
             else "none timed")
    out = [f"## Sweep on {p['gpu']['name']} (results/sweep/{f.path.name}): {sw['n']} rows drawn at random", "",
           f"- run: {p['time_utc']}, commit `{(p.get('commit') or '?')[:12]}`{' (dirty tree)' if p.get('dirty') else ''}, "
           f"`{p['command']}`, {p.get('duration_s', '?')} s",
           f"- drawn with seed {sw['seed']} from the domain below (`kda bench {f.task} --sweep {sw['n']} "
           f"--sweep-seed {sw['seed']}` draws the same rows)",
           f"- **target {'met' if v['passed'] else 'not met'}**: {v['held']}/{v['rows']} rows "
           f"({100 * v['share']:.0f}%) have a {v['metric']} interval over the best peer not wholly below 1 (target "
           f"{100 * v['min_share']:.0f}%); worst row {worst} (target: no median below {v['min_median']:.2f})"]
    for key, what in (("failed", "failed a check"), ("untimed", "have no graph_us interval")):
        if v[key]:
            out.append(f"- {len(v[key])} row(s) {what}: {', '.join(v[key])}")
    out += ["", "| parameter | domain | why |", "|---|---|---|"]
    out += [f"| {d['name']} | {_domain_text(d)} | {d['why']} |" for d in sw["domain"]]
    out += ["", "Where it holds, one parameter at a time (rows drawn in each group, how many hold, and the median of "
            "their graph_us over the best peer; a range parameter in groups of equal count):", "",
            "| parameter | drawn | rows | hold | median vs best peer |", "|---|---|---|---|---|"]
    for prm in sweep_verdict.by_parameter(f.rows, sw["domain"]):
        for i, g in enumerate(prm["groups"]):
            out.append(f"| {prm['name'] if i == 0 else ''} | {g['value']} | {g['rows']} | {g['held']} | "
                       f"{_f(g['median'], 3)} |")
    out += ["", "| row | status | graph_us vs best peer [95% CI] | best peer | candidate graph_us (us) | holds |",
            "|---|---|---|---|---|---|"]
    for r in f.rows:
        iv = sweep_verdict.interval(r)
        peer = ((r.get("speedup") or {}).get("graph_us") or {}).get("best_peer")
        cand = (((r.get("arms") or {}).get("candidate") or {}).get("graph_us") or {}).get("median")
        verdict = r["status"] + (f" ({', '.join(r['reasons'])})" if r.get("reasons") else "")
        out.append(f"| {r['id']} | {verdict} | {_speed(iv)} | {peer or '-'} | {_f(cand, 2)} | "
                   f"{'yes' if sweep_verdict.holds(r) else '**no**'} |")
    return out + [""]


LARGE_BYTES = 256e6   # the "rows moving at least 256 MB" (the runner's rows_256mb)
COPY_SHARE = 0.85     # ... "at 85% or more of the measured copy bandwidth"


def kernel_key(name: str) -> str:
    """A kernel's name without its return type, scope and parameter list: ncu and torch.profiler spell the rest
    differently (ncu writes `void <unnamed>::k<__half, 16>(P, D)` for torch's
    `void ns::(anonymous namespace)::k<__half, 16>(ns::P, ns::D)`), and only the rest; a bool template argument as
    1 or 0 (ncu's spelling of torch's true and false)."""
    s = name.strip()
    if s.endswith(")"):  # the parameter list: the outermost parenthesised group at the end
        depth = 0
        for i in range(len(s) - 1, -1, -1):
            depth += {")": 1, "(": -1}.get(s[i], 0)
            if depth == 0:
                s = s[:i]
                break
    depth, cut = 0, 0
    for i, ch in enumerate(s):  # the last '::' or space outside template brackets ends the scope / return type
        depth = max(0, depth + {"<": 1, ">": -1}.get(ch, 0))  # ncu's "unnamed>" closes nothing
        if depth == 0 and (ch == " " or s.startswith("::", i)):
            cut = i + (2 if ch == ":" else 1)
    return re.sub(r"\b(true|false)\b", lambda m: "1" if m.group(1) == "true" else "0", s[cut:].strip())


def slow_large_rows(task_dir: Path, f: ResultsFile) -> list[tuple[dict, float, Path, dict | None]]:
    """The production rows of at least LARGE_BYTES below COPY_SHARE of copy by device_us, as (row, candidate's copy
    share, path of its candidate profile summary, that summary or None). The summary is given only when it ran the
    kernels this results file recorded for the row: a profile of other kernels (an older candidate) is no evidence
    for this one."""
    slug = f.provenance.get("gpu_slug", "")
    out = []
    for r in f.rows:
        share = (((r.get("arms") or {}).get("candidate") or {}).get("device_us") or {}).get("copy_frac") or 0
        if not (r.get("production") and r["bytes"] >= LARGE_BYTES and share < COPY_SHARE):
            continue
        prof = task_dir / "docs" / "profile" / slug / f"{r['id']}-candidate.json"
        summary = json.loads(prof.read_text()) if prof.exists() else None
        names = sorted(k["name"] for k in (summary or {}).get("kernels", []))
        if summary is not None and sorted(map(kernel_key, names)) != sorted(map(kernel_key, r.get("kernels") or [])):
            summary = {"other_kernels": names}
        out.append((r, share, prof, summary))
    return out


def unprofiled_large_rows(task_dir: Path, results_path: Path) -> list[str]:
    """Ids of the rows slow_large_rows finds without a profile of their current kernels: what to profile next."""
    return [r["id"] for r, _, _, summary in slow_large_rows(task_dir, load_results(results_path))
            if summary is None or "other_kernels" in summary]


def large_rows_section(task_dir: Path, f: ResultsFile) -> list[str]:
    """slow_large_rows as a table: each row with the traffic and the bound its candidate's Nsight Compute summary
    names; a profile of other kernels is named as such. The share of copy splits into two factors the profile
    measures: the rate at which the kernels moved their DRAM bytes (as a share of the measured copy bandwidth), and
    the share of copy the row would reach if those bytes moved at the copy rate (its bytes over the DRAM bytes: below
    100% when the kernels move more than the row's nominal bytes, x read twice for instance)."""
    rows = slow_large_rows(task_dir, f)
    if not rows:
        return []
    out = ["", f"### Rows of {LARGE_BYTES / 1e6:.0f} MB or more below {100 * COPY_SHARE:.0f}% of copy (device_us)", "",
           "| row | cand % copy | candidate profile | DRAM MB (profile) / MB moved | DRAM rate, % of copy (profile) "
           "| % of copy at the copy rate with this traffic | bound named by the profile |",
           "|---|---|---|---|---|---|---|"]
    for r, share, prof, summary in rows:
        where, traffic, rate, ceiling, bound = "none", "-", "-", "-", "-"
        rel = prof.relative_to(task_dir / "docs").as_posix()
        if summary is not None and "other_kernels" in summary:
            where = f"[{prof.name}]({rel}): other kernels ({', '.join(summary['other_kernels'])}), not this file's candidate"
        elif summary is not None:
            where = f"[{prof.name}]({rel})"
            dram = summary.get("dram_bytes") or 0
            traffic = f"{dram / 1e6:.0f} / {r['bytes'] / 1e6:.0f}"
            if summary.get("pct_of_copy") is not None:
                rate = f"{summary['pct_of_copy']:.0f}"
            if dram > 0:
                ceiling = f"{100 * min(1.0, r['bytes'] / dram):.0f}"
            bound = str(summary.get("bound", "-")).replace("|", "/")
        out.append(f"| {r['id']} | {100 * share:.0f} | {where} | {traffic} | {rate} | {ceiling} | {bound} |")
    return out


def _smi(p: dict, when: str) -> str:
    s = p.get(f"nvidia_smi_{when}") or {}
    return f"{s.get('clocks.sm', '?')}/{s.get('clocks.mem', '?')} MHz, {s.get('temperature.gpu', '?')} C"


def _minrow(e):
    return f"{e['min']['median']:.3f} ({e['min']['id']})" if e else "-"


def _speed(e):
    return "-" if not e else f"{e['median']:.3f} [{e['ci'][0]:.3f}, {e['ci'][1]:.3f}]"


def campaign_md(results: dict[Path, list[ResultsFile]], e2e: list[Path] | None = None) -> str:
    """fast_p per GPU, every summary figure, and what torch.compile fuses that we lack (the blocks' files `e2e`,
    default every committed one)."""
    from kda.evidence.fusions import fusion_section

    out = ["<!-- generated by `kda report`; do not edit -->", "# Campaign summary", "",
           "`fast_p` (KernelBench): the share of tasks whose candidate is correct on every row and whose device_us "
           "geomean speedup over the baseline exceeds p. Per GPU, over the tasks with results on that GPU.", ""]
    by_gpu: dict[str, list[ResultsFile]] = {}
    for files in results.values():
        for f in files:
            if not f.aa:
                by_gpu.setdefault(f.provenance["gpu"]["name"], []).append(f)
    out += ["| GPU | tasks | " + " | ".join(f"fast_{p}" for p in FAST_P) + " |", "|---|---|" + "---|" * len(FAST_P)]
    for gpu, files in sorted(by_gpu.items()):
        cells = []
        for p in FAST_P:
            n = sum(1 for f in files if f.summary["rows_passed"] == f.summary["rows_total"]
                    and ((f.summary["metrics"].get("device_us") or {}).get("vs_baseline") or {}).get("geomean", 0) > p)
            cells.append(f"{n}/{len(files)}")
        out.append(f"| {gpu} | {len(files)} | " + " | ".join(cells) + " |")
    out += ["", "## Every summary figure", "", detail_table(results), "",
            fusion_section(e2e_files() if e2e is None else e2e).rstrip("\n")]
    return "\n".join(out) + "\n"


PLOT_SUFFIX = ".svg"
PLOT_MAX_BYTES = 60_000  # the tree travels to the GPU machine under a size limit; a PNG per plot had reached 300 KB
_DIGEST = re.compile(r"<!-- kda report: data sha256 ([0-9a-f]{64}), matplotlib (\S+) -->")
_SVG_NUMBER = re.compile(r"-?\d+\.\d+")
_SVG_COORDS = re.compile(r'\b(d|x|y|width|height|viewBox)="([^"]*)"')


def plot_names(f: ResultsFile) -> tuple[str, str]:
    """The file names of a results file's two plots in docs/plots/: `<run>-speedup.svg`, `<run>-roofline.svg`."""
    return f"{f.run}-speedup{PLOT_SUFFIX}", f"{f.run}-roofline{PLOT_SUFFIX}"


def plot_data(f: ResultsFile) -> dict[str, dict]:
    """What each plot draws, by file name: the figures are drawn from this alone, and its digest, written into the
    SVG, tells `--check` whether a committed plot shows the committed results."""
    rows = [r for r in f.rows if r.get("speedup")]
    ids = [r["id"] for r in rows]
    speedup = {m: [[e["median"], e["ci"][0], e["ci"][1]] if (e := (r["speedup"].get(m) or {}).get("vs_baseline"))
                   else None for r in rows] for m in METRICS}
    arms = [a for a in ARMS if any(a in (r.get("arms") or {}) for r in rows)]
    tbps = {a: [((r["arms"].get(a) or {}).get("graph_us") or {}).get("tbps") for r in rows] for a in arms}
    gpu = f.provenance["gpu"]["name"]
    names = plot_names(f)
    return {
        names[0]: {"kind": "speedup", "ids": ids, "series": speedup,
                   "title": f"{f.task}: candidate vs baseline on {gpu}" + (" (A/A)" if f.aa else "")},
        names[1]: {"kind": "roofline", "ids": ids, "series": tbps, "copy_tbps": f.provenance.get("copy_tbps"),
                   "datasheet_tbps": f.provenance.get("datasheet_tbps"),
                   "title": f"{f.task}: bandwidth against the roofline on {gpu}"},
    }


def data_digest(data: dict) -> str:
    return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()


def _segments(spans: list[tuple[float, float, float]]) -> tuple[list[float], list[float]]:
    """(xs, ys) of one line made of separate horizontal segments (x0 -> x1 at height y), NaN between them: one SVG
    path for a whole series instead of one element per row, which is what keeps a plot of 119 rows small."""
    xs, ys = [], []
    for x0, x1, y in spans:
        xs += [x0, x1, math.nan]
        ys += [y, y, math.nan]
    return xs, ys


def render_plot(data: dict) -> bytes:
    """One plot as SVG bytes, the same bytes for the same data and matplotlib: text kept as text (no glyph
    outlines), a fixed hash salt for the ids, no date or creator, coordinates to 0.1 pt."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rc = {"svg.hashsalt": "kda report", "svg.fonttype": "none", "font.family": "sans-serif",
          "font.sans-serif": ["DejaVu Sans"], "path.simplify": False}
    ids, n = data["ids"], len(data["ids"])
    with matplotlib.rc_context(rc):
        height = 0.2 * n + 1.1
        fig, ax = plt.subplots(figsize=(10, height))
        if data["kind"] == "inventory":
            colors = ["tab:purple", "tab:pink", "tab:brown", "tab:olive", "tab:cyan", "tab:red", "tab:blue",
                      "tab:orange", "tab:green", "tab:gray"]
            left = [0.0] * n
            for k, cat in enumerate(data["categories"]):
                widths = [row[k] for row in data["series"]]
                ax.barh(range(n), widths, left=left, height=0.7, color=colors[k % len(colors)], label=cat,
                        linewidth=0)
                left = [a + b for a, b in zip(left, widths)]
            ax.axvline(1.0, color="k", lw=0.8)
            ax.set_xlabel("GPU time per block call, as a share of the upstream arm's (profiler inventory)")
            ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))
        elif data["kind"] == "speedup":
            for k, (m, color) in enumerate(zip(METRICS, ("tab:blue", "tab:orange", "tab:green"))):
                points = [(v, i + (k - 1) * 0.25) for i, v in enumerate(data["series"][m]) if v]
                xs, ys = _segments([(lo, hi, y) for (_, lo, hi), y in points])
                ax.plot(xs, ys, color=color, lw=1, solid_capstyle="butt", label=f"{m} (95% CI)")
                # the median as a short vertical stroke on its interval
                mx = [x for (med, _, _), _ in points for x in (med, med, math.nan)]
                my = [y for _, yc in points for y in (yc - 0.11, yc + 0.11, math.nan)]
                ax.plot(mx, my, color=color, lw=1.6, solid_capstyle="butt")
            ax.axvline(1.0, color="k", lw=0.8)
            ax.set_xlabel("speedup over the baseline: median, 95% CI")
            ax.legend(fontsize=7)
        else:
            arms = list(data["series"])
            for k, arm in enumerate(arms):
                off = (k - (len(arms) - 1) / 2) * 0.2
                xs, ys = _segments([(0.0, x, i + off) for i, x in enumerate(data["series"][arm]) if x])
                ax.plot(xs, ys, lw=2.2, solid_capstyle="butt", label=f"{arm} (graph_us)")
            if data["copy_tbps"]:
                ax.axvline(data["copy_tbps"], color="k", ls="--", lw=1, label="measured copy")
                ax.axvline(0.85 * data["copy_tbps"], color="gray", ls=":", lw=1, label="85% of copy")
            if data["datasheet_tbps"]:
                ax.axvline(data["datasheet_tbps"], color="r", lw=1, label="datasheet")
            ax.set_xlim(left=0)
            ax.set_xlabel("achieved TB/s (bytes the row must move / graph_us median)")
            ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))
        # Row names as plain text beside the axes, not tick labels, and margins set from the longest name rather
        # than measured (tight_layout): measuring 119 labels made a plot take a second, and --check draws them all.
        left = (0.045 * max(map(len, ids), default=0) + 0.25) / 10
        right = 0.8 if data["kind"] in ("roofline", "inventory") else 0.97
        fig.subplots_adjust(left=left, right=right, top=1 - 0.45 / height, bottom=0.6 / height)
        ax.set_yticks([])
        ax.set_ylim(n - 0.5, -0.5)
        for i, name in enumerate(ids):
            ax.text(-0.01, i, name, fontsize=6, ha="right", va="center", transform=ax.get_yaxis_transform())
        ax.set_title(data["title"], fontsize=9, y=1.0)
        buf = io.BytesIO()
        fig.savefig(buf, format="svg", metadata={"Date": None, "Creator": None})
        plt.close(fig)
    svg = buf.getvalue().decode()
    svg = re.sub(r"\s*<metadata>.*?</metadata>", "", svg, flags=re.S)
    svg = re.sub(r' transform="rotate\(-?0 [^"]*\)"', "", svg)  # text turned by 0 degrees
    svg = _SVG_COORDS.sub(lambda m: f'{m.group(1)}="{_SVG_NUMBER.sub(_short, m.group(2))}"', svg)
    svg = re.sub(r"\n\s+", "\n", svg)
    head, sep, body = svg.partition("\n")  # after the XML declaration: what the plot shows, and what drew it
    return (f"{head}{sep}<!-- kda report: data sha256 {data_digest(data)}, matplotlib {matplotlib.__version__} -->"
            f"\n{body}").encode()


def _short(m: re.Match) -> str:
    v = round(float(m.group(0)), 1)
    return str(int(v)) if v == int(v) else f"{v:.1f}"


def plot_files(results: dict[Path, list[ResultsFile]]) -> dict[Path, dict]:
    """Every plot the results pages link, by path, with the data it draws (the blocks' inventories included)."""
    out = {task_dir / "docs" / "plots" / name: data
           for task_dir, files in results.items() for f in files for name, data in plot_data(f).items()}
    for block_dir, paths in e2e_by_block().items():
        for path in paths:
            data = e2e_plot_data(path)
            if data is not None:
                out[block_dir / "plots" / e2e_plot_name(path)] = data
    return out


def _plot_problem(path: Path, data: dict, render: bool) -> str | None:
    if not path.is_file():
        return "missing"
    raw = path.read_bytes()
    if len(raw) > PLOT_MAX_BYTES:
        return f"{len(raw)} bytes, over {PLOT_MAX_BYTES}"
    found = _DIGEST.search(raw[:400].decode(errors="replace"))
    if not found or found.group(1) != data_digest(data):
        return "drawn from other data than the results file's"
    if render:
        import matplotlib

        if found.group(2) == matplotlib.__version__ and raw != render_plot(data):
            return "not what `kda report` draws from this data"
    return None


def stray_plots(results: dict[Path, list[ResultsFile]]) -> list[Path]:
    """Files in a task's docs/plots/ that no results page links (older plots, other formats)."""
    wanted = set(plot_files(results))
    folders = [task_dir / "docs" / "plots" for task_dir in {*results, *all_task_dirs()}]
    folders += sorted((repo_root() / "diffusion" / "e2e").glob("*/plots"))
    return sorted(p for d in folders for p in d.glob("*") if p.is_file() and p not in wanted)


def generate(results: dict[Path, list[ResultsFile]] | None = None,
             sweeps: dict[Path, list[ResultsFile]] | None = None,
             colds: dict[Path, list[ResultsFile]] | None = None) -> dict[Path, str]:
    """Every generated markdown file and its text (README included)."""
    results = all_results() if results is None else results
    sweeps = all_sweeps() if sweeps is None else sweeps
    colds = all_colds() if colds is None else colds
    root = repo_root()
    texts = {}
    for task_dir in sorted({*results, *sweeps, *colds}):
        text = task_results_md(task_dir, results.get(task_dir, []))
        if colds.get(task_dir):
            text += "\n" + "\n".join(cold_section(colds[task_dir], results.get(task_dir, [])))
        for f in sweeps.get(task_dir, []):
            text += "\n" + "\n".join(sweep_section(f))
        texts[task_dir / "docs" / "results.md"] = text
    texts[root / "docs" / "campaign.md"] = campaign_md(results)
    readme = root / "README.md"
    text = readme.read_text()
    if START not in text or END not in text:
        raise KdaError(f"{readme}: missing the markers {START} and {END} around the results table")
    head, rest = text.split(START, 1)
    _, tail = rest.split(END, 1)
    text = f"{head}{START}\n{readme_table(results)}\n{END}{tail}"
    if E2E_START not in text or E2E_END not in text:
        raise KdaError(f"{readme}: missing the markers {E2E_START} and {E2E_END} around the end-to-end table")
    head, rest = text.split(E2E_START, 1)
    _, tail = rest.split(E2E_END, 1)
    from kda.evidence.e2e_targets import table as targets_table

    targets = targets_table(e2e_files())
    texts[readme] = (f"{head}{E2E_START}\n{e2e_table(e2e_files(), link=True)}\n\n"
                     + (f"**Issue 33's targets**, judged from these files:\n\n{targets}\n\n" if targets else "") +
                     f"**Trajectories** (`kda e2e BLOCK --trajectory`, issue 40):\n\n"
                     f"{trajectory_table(trajectory_files(), link=True)}\n{E2E_END}{tail}")
    for block_dir, paths in e2e_by_block().items():
        texts[block_dir / "results.md"] = e2e_block_md(block_dir, paths)
    return texts


def write() -> list[Path]:
    """Write every generated file and plot; delete the plots no page links. Returns what was written or deleted."""
    results = all_results()
    texts = generate(results)
    done = []
    for path, text in texts.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        done.append(path)
    for path, data in plot_files(results).items():
        svg = render_plot(data)
        if len(svg) > PLOT_MAX_BYTES:
            raise KdaError(f"{path}: {len(svg)} bytes, over {PLOT_MAX_BYTES}: draw fewer elements")
        path.parent.mkdir(parents=True, exist_ok=True)
        if not path.is_file() or path.read_bytes() != svg:
            path.write_bytes(svg)
            done.append(path)
    for path in stray_plots(results):
        path.unlink()
        done.append(path)
    return done


def check(render: bool = True) -> list[str]:
    """What differs from what the results files generate: markdown files whose text differs, and plots that are
    missing, over PLOT_MAX_BYTES, drawn from other data (the digest each SVG carries), not the bytes this machine
    draws (`render`, where the SVG was drawn by the same matplotlib), or linked by no page."""
    root = repo_root()
    results = all_results()
    stale = []
    for path, text in generate(results).items():
        if not path.is_file() or path.read_text() != text:
            stale.append(str(path.relative_to(root)))
    for path, data in plot_files(results).items():
        problem = _plot_problem(path, data, render)
        if problem:
            stale.append(f"{path.relative_to(root)} ({problem})")
    stale += [f"{p.relative_to(root)} (no results page links it)" for p in stray_plots(results)]
    return stale
