"""`kda profile`: one arm of one row under Nsight Compute, summarised into a named bound.

The raw report (.ncu-rep) and its CSV export stay out of git; the summary is saved as
docs/profile/<gpu>/<row>-<arm>.{json,md}, and that summary is all `kda report` reads. Parsing works on ncu's raw CSV
export (`ncu --import R --csv --page raw`), so it is tested on a CPU against CSV fixtures taken on a GPU
(tests/fixtures/ncu/). `--save-csv DIR` keeps the export outside the tree (scripts/gpu_tasks.sh returns it in
logs.tar) for `--from-csv DIR`, which rebuilds summaries without a GPU; the exports once committed under
docs/profile/ are in git history (each task's docs/profile/README.md says where).
"""
from __future__ import annotations

import csv
import io
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from kda.core.errors import KdaError
from kda.harness import results_file

SECTIONS = ("SpeedOfLight", "MemoryWorkloadAnalysis", "Occupancy", "LaunchStats", "WarpStateStats")
EXTRA_METRICS = ("dram__bytes_read.sum", "dram__bytes_write.sum", "smsp__sass_inst_executed_op_local_ld.sum",
                 "smsp__sass_inst_executed_op_local_st.sum")
M_DURATION = "gpu__time_duration.sum"
M_DRAM_PCT = ("gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed", "dram__throughput.avg.pct_of_peak_sustained_elapsed")
M_SM_PCT = "sm__throughput.avg.pct_of_peak_sustained_elapsed"
M_OCC = "sm__warps_active.avg.pct_of_peak_sustained_active"
M_REGS = "launch__registers_per_thread"
M_GRID = "launch__grid_size"
M_BLOCK = "launch__block_size"
STALL_PREFIX = "smsp__average_warps_issue_stalled_"
STALL_SUFFIX = "_per_issue_active.ratio"
# ncu picks a unit per metric for the whole export ("usecond" or "us", "ms" when the longest kernel lasts
# milliseconds), so every value is scaled by its own column's unit; an unknown unit is an error, not a guess.
UNIT_SCALE = {"us": {"nsecond": 1e-3, "ns": 1e-3, "usecond": 1.0, "us": 1.0, "msecond": 1e3, "ms": 1e3,
                     "second": 1e6, "s": 1e6},
              "bytes": {"byte": 1, "B": 1, "Kbyte": 1e3, "KB": 1e3, "Mbyte": 1e6, "MB": 1e6, "Gbyte": 1e9,
                        "GB": 1e9, "Tbyte": 1e12, "TB": 1e12}}


# Raw Nsight Compute exports: kept out of the tree (.gitignore) and out of what `kda intake` copies.
RAW_EXPORT_SUFFIXES = (".csv", ".csv.gz", ".ncu-rep")


def is_raw_export(path: Path | str) -> bool:
    return Path(path).name.endswith(RAW_EXPORT_SUFFIXES)


def find_ncu() -> str:
    for cand in (shutil.which("ncu"), "/usr/local/cuda/bin/ncu"):
        if cand and Path(cand).exists():
            return cand
    raise KdaError("ncu (Nsight Compute) not found on PATH or in /usr/local/cuda/bin")


def parse_raw_csv(text: str) -> list[dict]:
    """Rows of `ncu --csv --page raw`: first line metric names, second line units, then one line per kernel."""
    lines = [ln for ln in text.splitlines() if ln.startswith('"')]
    if len(lines) < 2:
        raise KdaError("ncu CSV has no kernel rows (did the profiled range launch any kernel?)")
    reader = list(csv.reader(io.StringIO("\n".join(lines))))
    header, units, data = reader[0], reader[1], reader[2:]
    kernels = []
    for values in data:
        rec = {}
        for name, unit, value in zip(header, units, values):
            rec[name] = (value, unit)
        kernels.append(rec)
    return kernels


def _num(rec: dict, name, scale_to: str | None = None) -> float | None:
    if isinstance(name, tuple):  # metric renamed across Nsight Compute versions: first one present wins
        name = next((n for n in name if n in rec), name[0])
    if name not in rec:
        return None
    value, unit = rec[name]
    try:
        v = float(value.replace(",", ""))
    except ValueError:
        return None
    if scale_to is not None:
        scales = UNIT_SCALE[scale_to]
        if unit not in scales:
            raise KdaError(f"ncu CSV: metric {name} is in unit {unit!r}; expected one of {sorted(scales)}")
        v *= scales[unit]
    return v


def summarize(kernels: list[dict], copy_tbps: float | None) -> dict:
    per_kernel = []
    stalls: dict[str, float] = {}
    for rec in kernels:
        dur = _num(rec, M_DURATION, "us") or 0.0
        rd = _num(rec, "dram__bytes_read.sum", "bytes") or 0.0
        wr = _num(rec, "dram__bytes_write.sum", "bytes") or 0.0
        k = {"name": rec.get("Kernel Name", ("?",))[0], "duration_us": dur, "dram_bytes": rd + wr,
             "dram_pct_peak": _num(rec, M_DRAM_PCT), "sm_pct_peak": _num(rec, M_SM_PCT),
             "achieved_occupancy_pct": _num(rec, M_OCC), "registers_per_thread": _num(rec, M_REGS),
             "grid": _num(rec, M_GRID), "block": _num(rec, M_BLOCK),
             "local_spill_insts": (_num(rec, "smsp__sass_inst_executed_op_local_ld.sum") or 0)
             + (_num(rec, "smsp__sass_inst_executed_op_local_st.sum") or 0)}
        per_kernel.append(k)
        for name in rec:
            if name.startswith(STALL_PREFIX) and name.endswith(STALL_SUFFIX):
                reason = name[len(STALL_PREFIX):-len(STALL_SUFFIX)]
                stalls[reason] = stalls.get(reason, 0.0) + (_num(rec, name) or 0.0) * dur
    total = sum(k["duration_us"] for k in per_kernel)
    dram = sum(k["dram_bytes"] for k in per_kernel)
    weighted = lambda key: (sum((k[key] or 0) * k["duration_us"] for k in per_kernel) / total) if total else None  # noqa: E731
    tbps = dram / total / 1e6 if total else None
    top = sorted(((r, v / total) for r, v in stalls.items() if total), key=lambda kv: -kv[1])[:4]
    s = {"kernels": per_kernel, "duration_us": total, "dram_bytes": dram, "dram_tbps": tbps,
         "copy_tbps": copy_tbps, "pct_of_copy": (tbps / copy_tbps * 100) if tbps and copy_tbps else None,
         "dram_pct_peak": weighted("dram_pct_peak"), "sm_pct_peak": weighted("sm_pct_peak"),
         "achieved_occupancy_pct": weighted("achieved_occupancy_pct"),
         "registers_per_thread": max((k["registers_per_thread"] or 0) for k in per_kernel),
         "local_spill_insts": sum(k["local_spill_insts"] for k in per_kernel),
         "top_stalls": [{"reason": r, "warps_per_issue": round(v, 3)} for r, v in top]}
    s["bound"] = name_bound(s)
    return s


def name_bound(s: dict) -> str:
    dram, sm, occ, dur = s["dram_pct_peak"] or 0, s["sm_pct_peak"] or 0, s["achieved_occupancy_pct"] or 0, s["duration_us"]
    if dur and dur < 5.0:
        return f"host/launch: the kernels last {dur:.1f} us, less than a launch through the Python path costs"
    if dram >= 60 and dram >= sm:
        return f"memory: DRAM at {dram:.0f}% of peak"
    if sm >= 60:
        return f"compute: SM throughput at {sm:.0f}% of peak"
    if occ and occ < 25:
        return f"occupancy: {occ:.0f}% achieved occupancy with DRAM at {dram:.0f}%"
    return f"latency: DRAM at {dram:.0f}% and SM at {sm:.0f}% of peak; stalls: " + \
        ", ".join(x["reason"] for x in s["top_stalls"][:2])


def to_markdown(title: str, summaries: dict[str, dict]) -> str:
    arms = list(summaries)
    rows = [("kernels", lambda s: ", ".join(k["name"][:40] for k in s["kernels"])),
            ("duration (us)", lambda s: f"{s['duration_us']:.2f}"),
            ("DRAM bytes (MB)", lambda s: f"{s['dram_bytes'] / 1e6:.2f}"),
            ("achieved DRAM TB/s", lambda s: f"{s['dram_tbps']:.2f}" if s["dram_tbps"] else "-"),
            ("% of measured copy bandwidth", lambda s: f"{s['pct_of_copy']:.0f}" if s["pct_of_copy"] else "-"),
            ("DRAM throughput, % of peak", lambda s: _pct(s["dram_pct_peak"])),
            ("SM throughput, % of peak", lambda s: _pct(s["sm_pct_peak"])),
            ("achieved occupancy, %", lambda s: _pct(s["achieved_occupancy_pct"])),
            ("registers per thread", lambda s: f"{s['registers_per_thread']:.0f}"),
            ("local-memory (spill) instructions", lambda s: f"{s['local_spill_insts']:.0f}"),
            ("top warp stalls", lambda s: ", ".join(f"{x['reason']} {x['warps_per_issue']}" for x in s["top_stalls"][:3])),
            ("bound", lambda s: s["bound"])]
    out = [f"<!-- generated by `kda profile`; do not edit -->", f"# {title}", "",
           "| metric | " + " | ".join(arms) + " |", "|---|" + "---|" * len(arms)]
    for label, fn in rows:
        out.append(f"| {label} | " + " | ".join(fn(summaries[a]) for a in arms) + " |")
    return "\n".join(out) + "\n"


def _pct(v):
    return "-" if v is None else f"{v:.0f}"


def latest_copy_tbps(task_dir: Path, slug: str) -> float | None:
    path = results_file.find(Path(task_dir) / "results", slug)
    if path is None:
        return None
    return results_file.read_records(path)[0].get("copy_tbps")


def run_profile(task, row_id: str, arm: str, slug: str, raw_dir: Path) -> tuple[dict, str]:
    """Profile one arm; return (summary, raw csv text). The .ncu-rep is written to raw_dir (not in git)."""
    ncu = find_ncu()
    raw_dir.mkdir(parents=True, exist_ok=True)
    rep = raw_dir / f"{row_id}-{arm}"
    cmd = [ncu, "--clock-control", "none", "--profile-from-start", "off", "--target-processes", "all", "-f",
           "-o", str(rep), *[a for s in SECTIONS for a in ("--section", s)], "--metrics", ",".join(EXTRA_METRICS),
           sys.executable, "-m", "kda.harness.profile_one", "--task", str(task.path), "--row", row_id, "--arm", arm]
    env = dict(os.environ)
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        raise KdaError(f"ncu failed for {row_id}/{arm}:\n{(proc.stdout + proc.stderr)[-3000:]}")
    csv_text = subprocess.run([ncu, "--import", f"{rep}.ncu-rep", "--csv", "--page", "raw"],
                              capture_output=True, text=True).stdout
    summary = summarize(parse_raw_csv(csv_text), latest_copy_tbps(task.path, slug))
    # Recorded without machine paths: the report location and interpreter differ per machine.
    shown = ["ncu", *cmd[1:cmd.index("-o")], *cmd[cmd.index("-o") + 2:cmd.index(sys.executable)],
             "python3 -m kda.harness.profile_one", "--task", task.name, "--row", row_id, "--arm", arm]
    summary.update({"task": task.name, "row": row_id, "arm": arm, "gpu": slug, "command": " ".join(shown)})
    return summary, csv_text


def resummarize(task, row_id: str, csv_dir: Path, slug: str) -> dict[str, dict]:
    """Summaries rebuilt from the raw CSVs `--save-csv` kept (<row>-<arm>.csv), without a GPU: how a summary is
    corrected after a parsing fix. Each keeps the ncu command and the copy bandwidth of the summary it replaces,
    and a CSV whose kernels are not that summary's (a later profile replaced the summary but not the CSV) is an
    error."""
    summaries = {}
    for arm in ("baseline", "compile", "eager", "candidate"):  # the order `--compare` writes: the peer, then the candidate
        path = csv_dir / f"{row_id}-{arm}.csv"
        if not path.is_file():
            continue
        old_path = task.path / "docs" / "profile" / slug / f"{row_id}-{arm}.json"
        old = json.loads(old_path.read_text()) if old_path.is_file() else {}
        copy = old["copy_tbps"] if "copy_tbps" in old else latest_copy_tbps(task.path, slug)
        summary = summarize(parse_raw_csv(path.read_text()), copy)
        names, old_names = [k["name"] for k in summary["kernels"]], [k["name"] for k in old.get("kernels", [])]
        if old and names != old_names:
            raise KdaError(f"{path}: its kernels {names} are not those of {old_path} {old_names}: the CSV is from "
                           "another profile")
        summary.update({"task": task.name, "row": row_id, "arm": arm, "gpu": slug, "command": old.get("command")})
        summaries[arm] = summary
    if not summaries:
        raise KdaError(f"no raw CSV for row {row_id} in {csv_dir} (expected {row_id}-<arm>.csv, arm one of "
                       "baseline, candidate, compile, eager)")
    return summaries


def save(task, slug: str, row_id: str, summaries: dict[str, dict]) -> list[Path]:
    out_dir = task.path / "docs" / "profile" / slug
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for arm, s in summaries.items():
        j = out_dir / f"{row_id}-{arm}.json"
        j.write_text(json.dumps(s, indent=1) + "\n")
        m = out_dir / f"{row_id}-{arm}.md"
        m.write_text(to_markdown(f"{task.name} / {row_id} / {arm} ({slug})", {arm: s}))
        written += [j, m]
    if len(summaries) > 1:
        c = out_dir / f"{row_id}-compare.md"
        c.write_text(to_markdown(f"{task.name} / {row_id}: {' vs '.join(summaries)} ({slug})", summaries))
        written.append(c)
    return written
