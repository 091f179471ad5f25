"""The parent's verdict on one row: reason codes from raw checks, statistics from raw samples, roofline columns."""
from __future__ import annotations

import statistics

from kda.harness import checks as C
from kda.harness.stats import paired_speedup, summary

METRICS = ("device_us", "wall_us", "graph_us")
PEERS = ("baseline", "compile", "eager", "latest")


def _arm_checks(raw: dict, arm: str) -> list[dict]:
    return [c for c in raw.get("checks", []) if c["arm"] == arm]


def arm_correct(raw: dict, arm: str) -> bool:
    recs = _arm_checks(raw, arm)
    return bool(recs) and all(not C.check_reasons(s) for r in recs for s in r["outputs"].values())


def bitexact_problem(bits: dict | str) -> str | None:
    """Why a checked call's outputs are not SGLang's eager chain's bits (the worker's `bits_differ`: per output the
    bytes that differ, None where not comparable, or a string where the chain could not run), or None."""
    if isinstance(bits, str):
        return bits
    for name, n in bits.items():
        if n is None:
            return f"output {name!r} cannot be compared with the eager chain's (shape, dtype or type differ)"
        if n:
            return f"output {name!r}: {n} bytes differ from SGLang's eager chain"
    return None


def bitexact_row(raw: dict) -> bool | None:
    """The row's bit-exactness to the eager chain, from the candidate's compared calls: None where none was (no
    chain for the row's function, or it failed: the row says nothing either way)."""
    compared = [r["bits_differ"] for r in _arm_checks(raw, "candidate") if isinstance(r.get("bits_differ"), dict)]
    return None if not compared else all(bitexact_problem(b) is None for b in compared)


def candidate_reasons(raw: dict, cfg, static: list[str]) -> tuple[list[str], list[str]]:
    """(reason codes, human details) for the candidate on one row."""
    reasons: list[str] = []
    details: list[str] = []

    def add(code: str, why: str) -> None:
        if code not in reasons:
            reasons.append(code)
        if len(details) < 12:
            details.append(f"{code}: {why}")

    if static:
        add(C.STATIC, static[0] + (f" (+{len(static) - 1} more)" if len(static) > 1 else ""))
    if raw.get("timeout"):
        add(C.TIMEOUT, raw["timeout"])
        return reasons, details
    if raw.get("forged"):
        add(C.FORGED, raw["forged"])
        return reasons, details
    if raw.get("crash"):
        lines = raw["crash"].strip().splitlines()
        add(C.CRASH, lines[-1][:300] if lines else "the worker crashed without a message")
        return reasons, details
    for why in raw.get("contradicted", []):  # the parent's own check of the outputs (recheck.py) disagreed
        add(C.FORGED, f"the worker's report contradicted: {why}")
    base_by_trial = {r["trial"]: r for r in _arm_checks(raw, "baseline")}
    k, floor = cfg["check"]["k_error_ratio"], cfg["check"]["error_floor"]
    for rec in _arm_checks(raw, "candidate"):
        at = f"trial {rec['trial']} phase {rec['phase']}"
        for name, s in rec["outputs"].items():
            for code in C.check_reasons(s):
                why = s.get("why") or (f"{s['unwritten']} elements unwritten, " if s["unwritten"] else "") + \
                    f"{s['bad']} beyond tolerance, {s['specials_mismatch']} NaN/Inf misplaced, worst normalised error {s['max_norm_err']:.3g}"
                add(code, f"output {name!r} at {at}: {why}")
            if rec["phase"] == 4 and s["layout_ok"] and s["unwritten"]:
                # the poison's private payload survived the second call: no kernel that wrote the element leaves it
                add(C.STALE_REPEAT, f"output {name!r} at {at}: called again on the same inputs, it left "
                                    f"{s['unwritten']} element(s) the harness had poisoned between the calls")
            base = base_by_trial.get(rec["trial"]) if rec["phase"] == 0 else None
            if base is not None and s["layout_ok"]:
                problem = C.error_ratio_problem(s, base["outputs"].get(name), k, floor, s["atol"])
                if problem:
                    add(C.PRECISION, f"output {name!r} at {at}: {problem}")
        if rec.get("mutated"):
            add(C.INPUT_MUTATED, f"inputs {', '.join(rec['mutated'])} changed at {at}")
        if rec.get("forbidden_calls"):
            add(C.FORBIDDEN_CALL, f"{rec['forbidden_calls'][0]} at {at}")
        if rec.get("tampered"):
            add(C.TAMPER, f"{_tamper_text(rec['tampered'])} at {at}")
        if rec.get("return_problem"):
            add(C.RETURN, f"{rec['return_problem']} at {at}")
        if cfg["check"].get("contract") == "bitexact" and "bits_differ" in rec:
            problem = bitexact_problem(rec["bits_differ"])
            if problem:
                add(C.NOT_BITEXACT, f"{problem} at {at}")
    for key in ("warmup_tampered", "timed_tampered"):
        if raw.get(key):
            add(C.TAMPER, f"{_tamper_text(sorted(set(raw[key])))} while {key.split('_')[0]}")
    # Upstream's state, after any arm's call: a thread of the candidate's can change it while another arm runs.
    for rec in raw.get("checks", []):
        if rec.get("upstream_tampered"):
            add(C.UPSTREAM_TAMPERED, f"changed {', '.join(rec['upstream_tampered'][:4])} at the {rec['arm']} arm's "
                                     f"trial {rec['trial']} phase {rec['phase']}")
    for key in ("warmup_upstream_tampered", "timed_upstream_tampered"):
        if raw.get(key):
            add(C.UPSTREAM_TAMPERED, f"changed {', '.join(sorted(set(raw[key]))[:4])} while {key.split('_')[0]}")
    if raw.get("baseline_slowed"):
        add(C.BASELINE_SLOWED, raw["baseline_slowed"])
    if raw.get("latest_slowed"):
        add(C.PEER_SLOWED, raw["latest_slowed"])
    if raw.get("torch_kernels"):
        add(C.TORCH_KERNEL, f"PyTorch kernels ran on the candidate's path: {', '.join(raw['torch_kernels'][:3])}")
    if not _arm_checks(raw, "candidate"):
        add(C.CRASH, "no candidate check ran")
    return reasons, details


def _tamper_text(items: list[str]) -> str:
    """Harness names replaced, and threads the candidate left running (guards.candidate_threads says so itself)."""
    return ", ".join(i if i.startswith("thread ") else f"replaced {i}" for i in items)


def row_statistics(raw: dict, bytes_moved: int, copy_tbps: float | None, datasheet: float | None,
                   resamples: int, seed: int, l2_resident: bool = False) -> dict:
    """Per-arm summaries, speedups over the baseline and over the best correct peer, roofline columns.

    `l2_resident`: the row's bytes fit in L2 and the cache is hot, so repeated calls are served from L2 and rates
    above the DRAM datasheet are expected, not impossible; such rows are never INVALID (an A/A run found one)."""
    arms = raw.get("arms", {})
    out = {"arms": {}, "speedup": {}, "invalid": [], "l2_resident": l2_resident}
    for arm, samples in arms.items():
        entry = {}
        for m in METRICS:
            entry[m] = summary(samples.get(m, []))
            med = entry[m]["median"]
            if med:
                tbps = bytes_moved / med / 1e6
                entry[m]["tbps"] = tbps
                entry[m]["copy_frac"] = tbps / copy_tbps if copy_tbps else None
                if datasheet and tbps > datasheet and m != "wall_us" and not l2_resident:
                    out["invalid"].append(f"{arm} {m}: {tbps:.2f} TB/s exceeds the datasheet {datasheet} TB/s")
        entry["graph_error"] = samples.get("graph_error")
        out["arms"][arm] = entry
    if "candidate" not in arms:
        return out
    cand = arms["candidate"]
    correct_peers = [p for p in PEERS if p in arms and (p == "baseline" or arm_correct(raw, p))]
    for m in METRICS:
        s = {"vs_baseline": None, "vs_best_peer": None, "best_peer": None}
        if "baseline" in arms:
            s["vs_baseline"] = paired_speedup(arms["baseline"][m], cand[m], resamples, seed)
        medians = {p: out["arms"][p][m]["median"] for p in correct_peers if out["arms"][p][m]["median"]}
        if medians:
            best = min(medians, key=medians.get)
            s["best_peer"] = best
            s["vs_best_peer"] = paired_speedup(arms[best][m], cand[m], resamples, seed)
        out["speedup"][m] = s
    return out


def clean_baseline(beside: dict, alone: dict, max_ratio: float, arm: str = "the baseline") -> tuple[dict, str | None]:
    """The baseline beside the candidate against the baseline alone (a worker that never imported the candidate).

    beside: the row's raw baseline samples; alone: the clean worker's reply. Returns ({metric: {"beside", "alone",
    "ratio"}}, the problem or None): ratios of medians above max_ratio on both device_us and graph_us mean something
    in the candidate's process slowed the baseline arm's device work (issue 34, attack 3), whatever the mechanism.
    Both, because one metric alone moves too far between two honest processes: on an H100 (fuse_scale_shift, 40
    rows, 5 samples alone) device_us ratios ran 0.50-1.77 on host-bound rows and graph_us ratios 0.81-1.48 on rows
    under 10 us, never both above 1.6; a baseline launching twice measured 1.94 and 2.01. A slowdown of the host path
    alone, or of less than max_ratio, passes this rule: the state watch (guards.UpstreamWatch) is the finer guard."""
    record, problems = {}, []
    for m in ("device_us", "graph_us"):
        b = [v for v in beside.get(m) or [] if v is not None]
        a = [v for v in alone.get(m) or [] if v is not None]
        if not b or not a:
            continue
        mb, ma = statistics.median(b), statistics.median(a)
        ratio = mb / ma if ma > 0 else None
        record[m] = {"beside": mb, "alone": ma, "ratio": ratio}
        if ratio is not None and ratio > max_ratio:
            problems.append(f"{m} {mb:.2f} us beside the candidate, {ma:.2f} us alone ({ratio:.2f}x, limit "
                            f"{max_ratio:g}x)")
    slowed = len(problems) == 2
    return record, (f"{arm} timed alone ran faster: " + "; ".join(problems)) if slowed else None
