"""The parent's own check of a row's outputs: correctness decided outside the process that imported the candidate.

The worker reports error statistics, but it runs the candidate's code, so what it reports is only as good as that
process is clean. Where the parent asks for them (CPU runs: `Worker` in runner.py), the worker hands over every checked
call's output copies and the inputs' whole storages right after the call, in a file the parent named (its sha256 in
the authenticated row answer). Here the parent, which never imports the candidate, rebuilds each call's inputs from the
row's seed (the same `build_inputs`, `refill_inputs` and `trial_seed`), runs the oracle (loaded before the worker
started) and compares with the same functions of `checks`. Its statistics replace the worker's; where the worker's
report says otherwise (an output clean that is not, an input untouched that changed), the row is also FORGED. A
hand-over that is missing, altered, or lacks a call the row must have made fails the row as FORGED.

What the parent can rebuild: phases 0 and 1 (fresh inputs from a seed) and the non-in-place phase 2 (the inputs of
phase 0, untouched since). Phase 3 and the in-place phase 2 run on inputs a replay produced: GPU only, not handed over.
"""
from __future__ import annotations

import hashlib
import io
from pathlib import Path

import torch

from kda.harness import checks as C
from kda.definition.workloads import build_inputs, refill_inputs, trial_seed

CHECKED_ARMS = ("candidate", "baseline")


def _seed_phase(phase: int, inplace: bool) -> int | None:
    """The refill phase whose values a checked call of `phase` ran on, or None if no seed alone gives them."""
    if phase in (0, 1):
        return phase
    if phase == 2 and not inplace:
        return 0
    if phase == 4 and not inplace:
        return 4  # the repeat check: a second call on the same fresh inputs
    return None


def expected_candidate_checks(mode: str, cfg, aa: bool = False) -> set[tuple[int, int]]:
    """(trial, phase) of the candidate calls every row checks on the CPU: phases 0 and 1 of each trial (and 2 in a
    benchmark), and the repeat check (trial 0, phase 4) where a candidate is judged and the op is not in place.
    Phase 3 runs on a GPU only."""
    trials = cfg["bench"]["trials"] if mode == "bench" else cfg["check"]["trials"]
    phases = (0, 1, 2) if mode == "bench" else (0, 1)
    repeat = set() if cfg["check"]["inplace"] or aa else {(0, 4)}  # the repeat check, once per row
    return {(t, p) for t in range(trials) for p in phases} | repeat


def _load(path: Path, sha256: str | None) -> list[dict]:
    if not isinstance(sha256, str):
        raise ValueError("the row answer names no hand-over of its outputs")
    data = path.read_bytes()
    if hashlib.sha256(data).hexdigest() != sha256:
        raise ValueError("the outputs handed over are not the bytes the worker's answer vouches for")
    kept = torch.load(io.BytesIO(data), map_location="cpu", weights_only=True)
    if not isinstance(kept, list) or not all(isinstance(k, dict) for k in kept):
        raise ValueError("the outputs handed over are not a list of calls")
    return kept


class _Inputs:
    """The row's inputs rebuilt in the parent per (trial, refill phase), and the output specs the adapter gives."""

    def __init__(self, task, row, salt: int):
        self.task, self.row, self.salt = task, row, salt
        self.cache: dict[tuple[int, int], dict] = {}

    def get(self, trial: int, phase: int) -> dict:
        key = (trial, phase)
        if key not in self.cache:
            inputs = build_inputs(self.row, "cpu")
            refill_inputs(self.row, inputs, trial_seed(self.row.seed, self.salt, trial, phase))
            self.cache = {key: inputs}  # one at a time: a row's checks come trial by trial
        return self.cache[key]


def _codes(stats) -> list[str] | None:
    try:
        return sorted(C.check_reasons(stats))
    except (KeyError, TypeError):
        return None


def recheck_row(task, row, raw: dict, path: Path, salt: int, mode: str, aa: bool = False) -> dict:
    """raw with the candidate's and baseline's check statistics replaced by the parent's own; `forged` set when the
    hand-over is unusable, `contradicted` listing where the worker's report differs from what the parent found."""
    cfg = task.cfg
    try:
        kept = _load(path, raw.get("outputs_sha256"))
    except Exception as e:  # noqa: BLE001 - any failure to read it is the worker's
        return {"type": "row", "id": row.id, "checks": [], "arms": {},
                "forged": f"the parent could not check the outputs itself: {type(e).__name__}: {str(e)[:300]}"}
    inplace = list(cfg["check"]["inplace"])
    rebuilt = _Inputs(task, row, salt)
    by_key = {(k.get("arm"), k.get("trial"), k.get("phase")): k for k in kept}
    contradicted: list[str] = []
    checks = []
    for rec in raw.get("checks", []):
        key = (rec.get("arm"), rec.get("trial"), rec.get("phase"))
        at = f"{key[0]} trial {key[1]} phase {key[2]}"
        seed_phase = _seed_phase(key[2], bool(inplace)) if isinstance(key[2], int) else None
        if key[0] not in CHECKED_ARMS or seed_phase is None or not isinstance(key[1], int):
            checks.append(rec)
            continue
        call = by_key.pop(key, None)
        if call is None:
            contradicted.append(f"{at}: reported, but its outputs were not handed over")
            continue
        try:
            mine = _check_call(task, row, rebuilt.get(key[1], seed_phase), call, inplace, cfg)
        except ValueError as e:
            return {"type": "row", "id": row.id, "checks": [], "arms": {},
                    "forged": f"the parent could not check the outputs itself: {at}: {str(e)[:300]}"}
        for name, stats in mine["outputs"].items():
            theirs = (rec.get("outputs") or {}).get(name)
            if _codes(theirs) != _codes(stats):
                contradicted.append(f"{at}: output {name!r} reported {_codes(theirs)}, the parent found {_codes(stats)}")
        if bool(rec.get("mutated")) != bool(mine["mutated"]):
            contradicted.append(f"{at}: inputs reported changed {rec.get('mutated')}, the parent found {mine['mutated']}")
        checks.append({**rec, **mine})
    seen = {(c["trial"], c["phase"]) for c in checks if c.get("arm") == "candidate"}
    if not raw.get("crash"):
        missing = sorted(expected_candidate_checks(mode, cfg, aa) - seen)
        if missing:
            contradicted.append(f"candidate calls not checked: (trial, phase) {missing[:6]}")
    if by_key:
        contradicted.append(f"outputs handed over for calls not reported: {sorted(map(str, by_key))[:4]}")
    return {**raw, "checks": checks, "contradicted": contradicted}


def _check_call(task, row, before: dict, call: dict, inplace: list[str], cfg) -> dict:
    """One handed-over call checked as the worker checks it: `before` are the inputs the call got (rebuilt here),
    call["inputs"] their storages after it, call["outputs"] the output copies."""
    after_storages = call.get("inputs") or {}
    snaps = C.snapshot_inputs(before)
    for k in snaps:
        t = after_storages.get(k)
        if not isinstance(t, torch.Tensor) or t.dtype != snaps[k].dtype or t.numel() != snaps[k].numel():
            raise ValueError(f"the storage of input {k!r} handed over does not match the row's")
    after = C.restore_views(before, after_storages)
    mutated = C.mutated_inputs(after, snaps, inplace) + C.written_outside_views(after, snaps, inplace)
    specs = {k: (tuple(shape), dt) for k, (shape, dt) in task.adapter.output_specs(row, before).items()}
    ref = task.oracle.reference(row, before)
    outs = call.get("outputs") or {}
    stats = {}
    for k, (shape, dt) in specs.items():
        atol, rtol = cfg.tolerance(str(dt).replace("torch.", ""))
        stats[k] = C.compare(outs.get(k), ref[k], shape, dt, atol, rtol)
        stats[k]["atol"], stats[k]["rtol"] = atol, rtol
    return {"outputs": stats, "mutated": mutated}
