"""The verdict on a sweep run (issue 34): how many sweep rows a user who captures graphs would not lose on.

A row holds when it passed every check and its graph_us interval over the best peer (the fastest correct one of
upstream, torch.compile, eager and `latest` where pinned) does not lie wholly below 1. A row that failed, or has no such interval (not
capturable, crashed), does not hold: a sweep cannot be passed by rows it could not measure. The target is a share
of holding rows of at least `min_share` and no row's median below `min_median` (config.toml's [sweep]).
"""
from __future__ import annotations

METRIC = "graph_us"


def interval(row: dict) -> dict | None:
    """The row's graph_us speedup over the best peer ({median, ci}), or None."""
    return ((row.get("speedup") or {}).get(METRIC) or {}).get("vs_best_peer")


def holds(row: dict) -> bool:
    iv = interval(row)
    return row.get("status") == "PASS" and iv is not None and iv["ci"][1] >= 1.0


def verdict(rows: list[dict], min_share: float, min_median: float) -> dict:
    """The summary of a sweep's row records (as the results file holds them)."""
    timed = [r for r in rows if r.get("status") == "PASS" and interval(r)]
    worst = min(timed, key=lambda r: interval(r)["median"], default=None)
    held = sum(holds(r) for r in rows)
    share = held / len(rows) if rows else 0.0
    low = [r["id"] for r in timed if interval(r)["median"] < min_median]
    out = {"metric": METRIC, "rows": len(rows), "held": held, "share": share,
           "failed": [r["id"] for r in rows if r.get("status") != "PASS"],
           "untimed": [r["id"] for r in rows if r.get("status") == "PASS" and not interval(r)],
           "below_1": [r["id"] for r in timed if interval(r)["ci"][1] < 1.0],
           "below_min_median": low, "min_share": min_share, "min_median": min_median,
           "worst": None if worst is None else {"id": worst["id"], "median": interval(worst)["median"],
                                                 "ci": interval(worst)["ci"],
                                                 "best_peer": worst["speedup"][METRIC].get("best_peer")}}
    out["passed"] = bool(rows) and share >= min_share and not low and not out["failed"]
    return out


def lines(v: dict) -> list[str]:
    """The verdict in a few lines of at most 80 columns (the end of `kda bench --sweep`, the report)."""
    out = [f"sweep: {v['held']}/{v['rows']} rows ({100 * v['share']:.0f}%) with {v['metric']} over the best peer",
           f"  not wholly below 1 (target {100 * v['min_share']:.0f}%)"]
    w = v["worst"]
    if w:
        out.append(f"  worst row: {w['median']:.3f} [{w['ci'][0]:.3f}, {w['ci'][1]:.3f}] vs {w['best_peer']}"
                   f" (target: no median below {v['min_median']:.2f})")
        out.append(f"    {w['id']}")
    for key, what in (("failed", "failed a check"), ("untimed", "without a graph_us interval"),
                      ("below_min_median", f"with a median below {v['min_median']:.2f}")):
        if v[key]:
            out.append(f"  {len(v[key])} row(s) {what}: {', '.join(v[key][:3])}" + (", ..." if len(v[key]) > 3 else ""))
    out.append("  target met" if v["passed"] else "  target NOT met")
    return [line if len(line) <= 80 else line[:77] + "..." for line in out]


BINS = 4  # a range parameter's drawn values in this many groups of equal count


def by_parameter(rows: list[dict], domain: list[dict]) -> list[dict]:
    """Where a sweep holds, one parameter at a time: for each of the domain's parameters, its drawn values in groups
    (each choice; a range in BINS groups of equal count by value), with the rows drawn there, how many hold, and the
    median over those rows of the graph_us median over the best peer. A reviewer reads which widths, token counts or
    dtypes a candidate loses on without reading 64 rows; the groups are of rows drawn at random, so a small group
    says little (its n is shown)."""
    out = []
    for p in domain:
        name = p["name"]
        drawn = [(r["params"][name], r) for r in rows if name in (r.get("params") or {})]
        if not drawn:
            continue
        if p.get("choices") is not None:
            order = {c: i for i, c in enumerate(p["choices"])}
            groups = {}
            for v, r in drawn:
                groups.setdefault(v, []).append(r)
            parts = [(str(v), groups[v]) for v in sorted(groups, key=lambda v: order.get(v, len(order)))]
        else:
            drawn.sort(key=lambda vr: vr[0])
            k = min(BINS, len(drawn))
            cuts = [round(i * len(drawn) / k) for i in range(k + 1)]
            parts = []
            for a, b in zip(cuts, cuts[1:]):
                chunk = drawn[a:b]
                lo, hi = chunk[0][0], chunk[-1][0]
                parts.append((f"{lo}" if lo == hi else f"{lo} .. {hi}", [r for _, r in chunk]))
        groups_out = []
        for label, group in parts:
            medians = sorted(interval(r)["median"] for r in group if r.get("status") == "PASS" and interval(r))
            mid = medians[len(medians) // 2] if len(medians) % 2 else (
                (medians[len(medians) // 2 - 1] + medians[len(medians) // 2]) / 2 if medians else None)
            groups_out.append({"value": label, "rows": len(group), "held": sum(holds(r) for r in group),
                               "median": mid})
        out.append({"name": name, "groups": groups_out})
    return out
