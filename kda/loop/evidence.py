"""What an agent can read before it changes anything (issue 38): the evidence a task folder already holds, listed in
the agent's brief when a run starts. The card (prompt.md, committed) names the commands and folders only; the brief
is written per run, so it can count what is there today without a committed file drifting each time a ledger entry
or a profile lands.
"""
from __future__ import annotations

import json
from pathlib import Path

SHOWN = 8  # ids and rows listed per kind before "and N more"


def _listed(items: list[str]) -> str:
    more = f" and {len(items) - SHOWN} more" if len(items) > SHOWN else ""
    return ", ".join(items[:SHOWN]) + more


def _ledger(task_dir: Path) -> dict[str, list[str]]:
    """Decision entries by decision: {"NO-GO": ["L0013: hypothesis...", ...], "BLOCKED": [...]}."""
    path = task_dir / "docs" / "ledger.jsonl"
    out: dict[str, list[str]] = {}
    if not path.is_file():
        return out
    for line in path.read_text().splitlines():
        if not line.strip():
            continue
        e = json.loads(line)
        if e.get("decision") in ("NO-GO", "BLOCKED"):
            out.setdefault(e["decision"], []).append(e["id"])
    return out


def profile_rows(task_dir: Path) -> dict[str, list[str]]:
    """Rows with a committed Nsight Compute comparison (`kda profile --compare`), by GPU folder."""
    base = task_dir / "docs" / "profile"
    out: dict[str, list[str]] = {}
    for md in sorted(base.rglob("*-compare.md")) if base.is_dir() else []:
        gpu = md.parent.name if md.parent != base else "(no GPU folder)"
        out.setdefault(gpu, []).append(md.name.removesuffix("-compare.md"))
    return out


def lines(task_dir: Path, task_path: str, root: Path) -> list[str]:
    """The brief's evidence section: one bullet per kind that exists, each with the paths and the command behind it."""
    name = task_dir.name
    out = []
    profiles = profile_rows(task_dir)
    if profiles:
        per_gpu = "; ".join(f"{gpu}: {_listed(rows)}" for gpu, rows in sorted(profiles.items()))
        out.append(f"- Nsight Compute comparisons, candidate beside the baseline with the bound each hits, in "
                   f"`{task_path}/docs/profile/` ({per_gpu}). Profile another row with "
                   f"`kda profile {task_path} --row ROW --compare` (GPU).")
    else:
        out.append(f"- No committed profile yet: `kda profile {task_path} --row ROW --compare` (GPU) puts the "
                   "candidate beside the baseline under Nsight Compute and names the bound.")
    ledger = _ledger(task_dir)
    for decision, why in (("NO-GO", "tried and measured worse: read why before trying it again"),
                          ("BLOCKED", "a bound or a missing measurement recorded")):
        if ledger.get(decision):
            out.append(f"- {len(ledger[decision])} {decision} entries in `{task_path}/docs/ledger.md` ({why}): "
                       f"{_listed(ledger[decision])}.")
    sweep = task_dir / "results" / "sweep"
    if sweep.is_dir() and any(sweep.iterdir()):
        out.append(f"- The generalisation sweep's files in `{task_path}/results/sweep/` (shapes around the "
                   f"production rows); run one with `kda bench {task_path} --sweep N` (GPU).")
    ext = Path(root) / "external" / name
    notes = sorted(p.name for p in ext.glob("*.md")) if ext.is_dir() else []
    if notes:
        out.append(f"- Notes written for this task in `external/{name}/` ({', '.join(notes)}): what the ledger "
                   "taught, and the upstream kernel's history.")
    return out


def profile_pointers(task_dir: Path, task_ref: str, row_ids: list[str], gpu: str | None) -> list[str]:
    """For each row a speed gate named, where its profile is: the committed comparison (this GPU's first), or the
    command that makes one. The gate adds these to its notes, so a failing round says where to look."""
    base = task_dir / "docs" / "profile"
    out = []
    for rid in dict.fromkeys(row_ids):
        found = sorted(base.rglob(f"{rid}-compare.md"), key=lambda p: p.parent.name != gpu) if base.is_dir() else []
        if found:
            out.append(f"evidence for row {rid}: {found[0].relative_to(task_dir).as_posix()} (Nsight Compute, the "
                       "candidate beside the baseline, and the bound it hits)")
        else:
            out.append(f"evidence for row {rid}: no committed profile; `kda profile {task_ref} --row {rid} --compare` "
                       "(GPU) names its bound")
    return out
