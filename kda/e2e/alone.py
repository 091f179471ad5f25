"""The peers timed alone: upstream's (and 0.5.23's) arms run again in a process that never imported a candidate.

A block run times every arm in one process, so a candidate's native code (which the static rules never read) can
reach the peers' kernel sets and make them slower or do more work: tests/zoo/e2e_native_doubles_peers.py wraps
every upstream site to run twice, and the watch over upstream's modules sees nothing. A task's bench answers this
with BASELINE_SLOWED (the baseline timed again in a worker that never imported the candidate); this is the same
backstop for the blocks.

After the run, the peer arms (and `eager`, so the samples alternate arms as beside the candidate) are timed again
in a child process: `python -m kda.e2e.alone_child BLOCK ...`, the same timing code with no candidate arm, so
nothing of a candidate is ever imported there. Per workload and peer arm, two comparisons:

- calls: the number of kernel launches of each task's sites in one profiled block call (the inventory's site
  windows), beside the candidate and alone. Exact: work added at a site (a site run twice, an extra kernel) shows
  whatever it costs in time, down to the smallest.
- time: each metric's median beside the candidate over its median alone, at most MAX_RATIO. This bounds what a
  slowdown without extra launches (a kernel given other arguments, the host path delayed) can forge; the bound is
  loose because two processes differ by more than noise on a host-bound block.

A workload that fails either has its speedups withheld (`speedup_withheld`) and an `error` naming the arm, site and
figures; one the child could not time has them withheld too. The samples stay in the file.
"""
from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Callable

from kda.harness import results_file

PEERS = ("upstream", "latest")
# beside the candidate over alone, median of each metric, above which a peer counts as slowed
MAX_RATIO = {"graph_us": 1.15, "eager_us": 1.5}
TIMEOUT_S = 3600


def needed(arms: list[str]) -> list[str]:
    """The arms the child times: the peers that ran beside a candidate-bearing arm, with `eager` where it ran (so
    the samples alternate arms there too); none where no candidate ran."""
    if not any(a == "candidate" or a.startswith("only-") for a in arms):
        return []
    peers = [a for a in PEERS if a in arms]
    return peers + (["eager"] if peers and "eager" in arms else [])


def command(block: str, arms: list[str], trials: int, out: Path) -> list[str]:
    return [sys.executable, "-m", "kda.e2e.alone_child", block, "--arms", ",".join(arms), "--trials", str(trials),
            "--out", str(out)]


def run_child(block: str, arms: list[str], trials: int, log: Callable[[str], None],
              cmd: Callable[..., list[str]] = command) -> dict[str, dict]:
    """The child's rows by workload id. Raises RuntimeError with the child's last output if it failed."""
    with tempfile.TemporaryDirectory(prefix="kda-alone-") as tmp:
        proc = subprocess.run(cmd(block, arms, trials, Path(tmp)), capture_output=True, text=True,
                              timeout=TIMEOUT_S, env=child_env(Path(tmp)))
        for line in proc.stderr.splitlines()[-3:]:
            log(f"  alone: {line}")
        files = results_file.list_files(Path(tmp))
        if proc.returncode != 0 or not files:
            raise RuntimeError(f"the peers alone exited {proc.returncode}: {(proc.stderr or proc.stdout)[-600:]}")
        return {r["id"]: r for r in results_file.read_records(files[0]) if r.get("type") == "row"}


# The on-disk caches of compiled kernels the child must not share with the parent: a candidate imported there
# could have written a slower binary under the key of an upstream kernel (Triton's cache, the tvm-ffi JIT builds
# of upstream's CUDA sources). The parent would load it for a shape it compiles after the import, and so would a
# child reading the same cache, so the two would agree on a slowed peer. The child builds its own from the
# verified sources instead (seconds per Triton kernel, about half a minute for a JIT build).
FRESH_CACHES = ("TRITON_CACHE_DIR", "TVM_FFI_CACHE_DIR")


def child_env(tmp: Path) -> dict[str, str]:
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    for var in FRESH_CACHES:
        env[var] = str(tmp / "cache" / var.lower())
    return env


def site_calls(inv: dict | None) -> dict[str, int] | None:
    """Kernel launches per task at its sites in one profiled call (None without an inventory that counted them)."""
    if not inv or "task_calls" not in inv:
        return None
    return dict(inv["task_calls"])


def _median(xs: list[float]) -> float | None:
    return statistics.median(xs) if xs else None


def compare(beside: dict, alone: dict | None, arms: list[str]) -> tuple[dict, list[str]]:
    """(the comparison recorded in the row, the problems found) for one workload's row beside the candidate and the
    child's row of the same workload."""
    if alone is None:
        return {}, ["the peers were not timed alone for this workload"]
    record, problems = {}, []
    for arm in (a for a in arms if a in PEERS):
        b, a = (beside.get("arms") or {}).get(arm) or {}, (alone.get("arms") or {}).get(arm) or {}
        if not b.get("eager_us"):
            continue  # the arm was not timed beside the candidate: nothing to compare
        rec = {}
        for metric, limit in MAX_RATIO.items():
            mb, ma = _median(b.get(metric) or []), _median(a.get(metric) or [])
            if mb is None:
                continue
            if ma is None:
                problems.append(f"{arm} {metric}: not timed alone")
                continue
            rec[metric] = {"beside": mb, "alone": ma, "ratio": mb / ma}
            if mb / ma > limit:
                problems.append(f"{arm} {metric}: {mb / ma:.2f}x its time alone (at most {limit})")
        cb, ca = site_calls(b.get("inventory")), site_calls(a.get("inventory"))
        if cb is not None and ca is not None:
            rec["site_calls"] = {"beside": cb, "alone": ca}
            if cb != ca:
                diff = ", ".join(f"{t} {cb.get(t, 0)} beside, {ca.get(t, 0)} alone"
                                 for t in sorted({*cb, *ca}) if cb.get(t, 0) != ca.get(t, 0))
                problems.append(f"{arm}: its sites launched other work beside the candidate ({diff})")
        elif cb is not None or ca is not None:
            problems.append(f"{arm}: site launches counted in one process only")
        record[arm] = rec
    return record, problems


def judge_rows(rows: list[dict], alone_rows: dict[str, dict] | None, arms: list[str], error: str = "") -> None:
    """Each timed row gets `alone` (the comparison); a row with a problem has its speedups withheld and an error."""
    for row in rows:
        if not row.get("speedup"):
            continue
        if alone_rows is None:
            rec, problems = {}, [f"the peers could not be timed alone: {error}"]
        else:
            rec, problems = compare(row, alone_rows.get(row["id"]), arms)
        row["alone"] = rec
        if problems:
            row["speedup_withheld"] = row.pop("speedup")
            row["speedup"] = {}
            row["error"] = "peers alone: " + "; ".join(problems)
