"""The decision ledger of a task: `docs/ledger.jsonl`, one JSON object per line, append-only.

Every measurement and every decision about a candidate (kept, dropped, blocked, promoted) is a line here, failed
attempts included, so a reviewer can follow what was tried, what was predicted and what the numbers said. Lines are
schema-checked when read and before they are appended; an error names the file, the line number and the key. Earlier
lines are never rewritten: `append` opens the file for appending only, under a lock. `docs/ledger.md` is a generated
view (`kda ledger TASK`).
"""
from __future__ import annotations

import fcntl
import getpass
import hashlib
import json
import os
import re
import subprocess
from datetime import datetime, timezone
from pathlib import Path

from kda.core.errors import KdaError
from kda.core.schema import Field, ListOf, one_of, validate
# The candidate's source hash, from its files or from a results file's provenance: in the harness, since kda e2e (a
# layer below this one) compares the two as well. Re-exported here, where the ledger has always named them.
from kda.harness.provenance import SOURCE_SUFFIXES, hash_of_provenance, hash_pairs, solution_hash  # noqa: F401
from kda.harness.results_file import read_bytes  # a compressed file is referred to by its decompressed bytes

KINDS = ("measurement", "decision")
DECISIONS = ("IMPROVEMENT", "NO-GO", "BLOCKED", "PROMOTED")
NONE = type(None)


def _id(v: str) -> str | None:
    return None if re.fullmatch(r"L\d{4,}", v) else f"expected an id like 'L0001', got {v!r}"


def _utc(v: str) -> str | None:
    return None if re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", v) else f"expected UTC time 'YYYY-mm-ddTHH:MM:SSZ', got {v!r}"


def _sha(v: str) -> str | None:
    return None if re.fullmatch(r"[0-9a-f]{64}", v) else "expected 64 lowercase hex digits"


def _commit(v: str) -> str | None:
    return None if re.fullmatch(r"[0-9a-f]{40}", v) else "expected a full commit id (40 lowercase hex digits)"


def _nonneg(v: int) -> str | None:
    return None if v >= 0 else f"expected a round number >= 0, got {v}"


def _text(v: str) -> str | None:
    return None if v.strip() else "expected a non-empty text"


def _opt(kind, doc: str = "") -> Field:
    return Field((kind, NONE), required=False, doc=doc)


# Metrics are optional one by one (a CPU check has no timing); a key not listed here is an error, so a typo cannot
# silently drop a number.
METRICS = {
    "device_us_geomean": _opt(float, "geomean speedup over the baseline, device_us, passing production rows"),
    "device_us_ci": Field((ListOf((float, NONE)), NONE), required=False, doc="its 95% bootstrap interval [lo, hi]"),
    "graph_us_geomean": _opt(float),
    "wall_us_geomean": _opt(float),
    "vs_best_peer_device_us": _opt(float, "geomean speedup over the fastest of baseline, torch.compile, eager"),
    "min_row": _opt(float, "median speedup of the worst production row (device_us)"),
    "min_row_id": _opt(str),
    "rows_passed": _opt(int),
    "rows_total": _opt(int),
    "gpu": _opt(str, "GPU slug of the run, 'cpu' for the interpreter gate"),
    "noise_floor_device_us": _opt(float, "A/A geomean of the same GPU, when measured"),
}

RESULTS_REF = {
    "path": Field(str, doc="results file, relative to the task folder when inside it"),
    "lines": Field(int, doc="its line count when the entry was written"),
    "sha256": Field(str, required=False, check=_sha, doc="its content hash, of the decompressed bytes (results files "
                    "are overwritten by later runs)"),
    "commit": Field(str, required=False, check=_commit, doc="for a file superseded since (no longer in the work tree, "
                    "or overwritten): a commit that holds it at `path`; read with `git show COMMIT:TASK/PATH` "
                    "(kda.harness.results_file.ref_bytes)"),
}

ENTRY = {
    "id": Field(str, check=_id),
    "parent": Field((str, NONE), doc="id of the entry this one builds on, or null"),
    "round": Field(int, check=_nonneg, doc="agent round (0 outside an agent run)"),
    "time_utc": Field(str, check=_utc),
    "kind": Field(str, check=one_of(*KINDS)),
    "hypothesis": Field(str, doc="what was tried and the predicted effect (may be empty for measurements)"),
    "change": Field(str),
    "source_hash": Field(str, check=_sha, doc="sha256 over the sorted solution files"),
    "results_ref": Field((RESULTS_REF, NONE)),
    "metrics": Field(METRICS),
    "decision": Field((str, NONE), check=lambda v: None if v is None else one_of(*DECISIONS)(v)),
    "reason": Field(str),
    "author": Field(str, check=_text),
    # Optional, added for review: the commit the entry is about and a reviewer's verdict.
    "commit": _opt(str, "git commit measured or promoted"),
    "review": _opt(str, "the reviewer command's verdict (KDA_REVIEWER_CMD)"),
}


def ledger_path(task_dir: Path) -> Path:
    return Path(task_dir) / "docs" / "ledger.jsonl"


def _check_entry(raw: object, where: str, earlier: list[dict]) -> dict:
    e = validate(raw, ENTRY, where)
    if e["kind"] == "decision" and e["decision"] is None:
        raise KdaError(f"{where}: key 'decision': a decision entry needs one of {', '.join(DECISIONS)}")
    if e["kind"] == "measurement" and e["decision"] is not None:
        raise KdaError(f"{where}: key 'decision': a measurement entry has decision null, got {e['decision']!r}")
    if e["kind"] == "decision" and not e["hypothesis"].strip():
        raise KdaError(f"{where}: key 'hypothesis': a decision entry must state the hypothesis and its predicted effect")
    if e["kind"] == "decision" and not e["reason"].strip():
        raise KdaError(f"{where}: key 'reason': a decision entry must say why")
    ids = [x["id"] for x in earlier]
    if e["id"] in ids:
        raise KdaError(f"{where}: key 'id': {e['id']!r} is already used by an earlier line")
    if ids and int(e["id"][1:]) <= max(int(i[1:]) for i in ids):
        raise KdaError(f"{where}: key 'id': {e['id']!r} is not after the earlier ids (the ledger is append-only)")
    if e["parent"] is not None and e["parent"] not in ids:
        raise KdaError(f"{where}: key 'parent': {e['parent']!r} is not the id of an earlier line")
    return e


def _parse(text: str, path: Path) -> list[dict]:
    entries: list[dict] = []
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            raise KdaError(f"{path}:{n}: empty line (every line of the ledger is one JSON entry)")
        try:
            raw = json.loads(line)
        except json.JSONDecodeError as e:
            raise KdaError(f"{path}:{n}: not valid JSON: {e}") from None
        entries.append(_check_entry(raw, f"{path}:{n}", entries))
    if text and not text.endswith("\n"):
        raise KdaError(f"{path}:{len(text.splitlines())}: the last line has no newline (a write was cut short?)")
    return entries


def read(task_dir: Path) -> list[dict]:
    """All entries of the task's ledger, validated ([] when there is none yet)."""
    path = ledger_path(task_dir)
    return _parse(path.read_text(), path) if path.is_file() else []


def parse_text(text: str, where: str) -> list[dict]:
    """Entries from ledger text read elsewhere (e.g. `git show REF:...`); errors name `where`."""
    return _parse(text, Path(where))


def now_utc() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def default_author() -> str:
    if os.environ.get("KDA_AUTHOR"):
        return os.environ["KDA_AUTHOR"]
    try:
        name = subprocess.run(["git", "config", "user.name"], capture_output=True, text=True, timeout=5).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        name = ""
    return name or getpass.getuser() or "unknown"


def append(task_dir: Path, fields: dict) -> dict:
    """Validate and append one entry; assigns `id` and `time_utc`. Returns the entry as written.

    Defaults: parent null, round 0, empty hypothesis/change/reason, metrics {}, results_ref null, decision null,
    source_hash of the task's solution files now, author from KDA_AUTHOR or git.
    """
    given = set(fields) - {"id", "time_utc"}
    unknown = sorted(given - set(ENTRY))
    if unknown:
        raise KdaError(f"{ledger_path(task_dir)}: unknown key {unknown[0]!r} in a new entry (known: {', '.join(ENTRY)})")
    path = ledger_path(task_dir)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+") as f:
        fcntl.flock(f, fcntl.LOCK_EX)  # two writers (the hook and a person) must not pick the same id
        f.seek(0)
        entries = _parse(f.read(), path)
        last = max((int(e["id"][1:]) for e in entries), default=0)
        entry = {"id": f"L{last + 1:04d}", "parent": None, "round": 0, "time_utc": now_utc(), "kind": "measurement",
                 "hypothesis": "", "change": "", "source_hash": None, "results_ref": None, "metrics": {},
                 "decision": None, "reason": "", "author": None}
        entry.update({k: v for k, v in fields.items() if k in given})
        if entry["source_hash"] is None:
            entry["source_hash"] = solution_hash(task_dir)
        if entry["author"] is None:
            entry["author"] = default_author()
        entry["metrics"] = {k: v for k, v in (entry["metrics"] or {}).items() if v is not None}
        line = f"{path}:{len(entries) + 1}"
        _check_entry(entry, f"{line} (new entry)", entries)
        f.seek(0, os.SEEK_END)
        f.write(json.dumps(entry, sort_keys=False) + "\n")
        f.flush()
        os.fsync(f.fileno())
    return validate(entry, ENTRY, line)


# ---- from a run ----------------------------------------------------------------------------------------------


def metrics_from_summary(summary: dict, provenance: dict | None = None) -> dict:
    m = summary.get("metrics") or {}

    def vs(metric: str, kind: str = "vs_baseline") -> dict:
        return (m.get(metric) or {}).get(kind) or {}

    dev = vs("device_us")
    return {
        "device_us_geomean": dev.get("geomean"), "device_us_ci": dev.get("ci"),
        "graph_us_geomean": vs("graph_us").get("geomean"), "wall_us_geomean": vs("wall_us").get("geomean"),
        "vs_best_peer_device_us": vs("device_us", "vs_best_peer").get("geomean"),
        "min_row": (dev.get("min") or {}).get("median"), "min_row_id": (dev.get("min") or {}).get("id"),
        "rows_passed": summary.get("rows_passed"), "rows_total": summary.get("rows_total"),
        "gpu": (provenance or {}).get("gpu_slug"),
        "noise_floor_device_us": (summary.get("noise_floor") or {}).get("geomean"),
    }


def results_ref(task_dir: Path, results_path: Path) -> dict:

    results_path = Path(results_path).resolve()
    data = read_bytes(results_path)
    try:
        rel = results_path.relative_to(Path(task_dir).resolve()).as_posix()
    except ValueError:
        rel = str(results_path)
    return {"path": rel, "lines": data.count(b"\n"), "sha256": hashlib.sha256(data).hexdigest()}


def append_bench(task_dir: Path, results_path: Path | None, run_output: dict, **fields) -> dict:
    """A `measurement` entry from what run_task returned (its provenance and summary)."""
    prov, summ = run_output["provenance"], run_output["summary"]
    aa = bool(prov.get("aa"))
    entry = {
        "kind": "measurement", "decision": None,
        "change": ("A/A run: the baseline timed against itself (noise floor)" if aa else
                   f"{prov.get('mode', 'bench')} of the solution on {prov.get('gpu_slug', '?')}"),
        "reason": (f"{summ.get('rows_passed')}/{summ.get('rows_total')} rows passed; "
                   f"command `{prov.get('command', '?')}`"),
        "source_hash": hash_of_provenance(prov),
        "results_ref": results_ref(task_dir, results_path) if results_path else None,
        "metrics": metrics_from_summary(summ, prov),
        "commit": prov.get("commit"),
        "author": os.environ.get("KDA_AUTHOR") or "kda bench",
    }
    entry.update(fields)
    return append(task_dir, entry)


def record_bench(task, out: dict) -> dict | None:
    """Hook for the end of `kda bench`: record the run as a measurement and refresh docs/ledger.md.

    `task` is a kda.definition.task.Task, `out` what run_task returned. Runs that wrote no results file are not recorded (a
    figure without a file behind it is not evidence). The round comes from the agent run's state, if any.
    """
    if out.get("provenance", {}).get("mode") != "bench" or not out.get("path"):
        return None
    entry = append_bench(task.path, Path(out["path"]), out, round=current_round(task.path))
    write_markdown(task.path)
    return entry


def current_round(task_dir: Path) -> int:
    for d in (Path(task_dir).resolve(), *Path(task_dir).resolve().parents):
        state = d / ".kda" / "rounds.json"
        if state.is_file():
            try:
                return int(json.loads(state.read_text()).get("rounds", 0))
            except (ValueError, OSError, AttributeError):
                return 0
    return 0


# ---- views ---------------------------------------------------------------------------------------------------


def _num(v, digits=3) -> str:
    return "-" if v is None else f"{v:.{digits}f}"


def metrics_text(m: dict) -> str:
    parts = []
    if m.get("device_us_geomean") is not None:
        ci = m.get("device_us_ci") or []
        ci_txt = f" [{_num(ci[0])}, {_num(ci[1])}]" if len(ci) == 2 else ""
        parts.append(f"device_us {_num(m['device_us_geomean'])}x{ci_txt}")
    if m.get("graph_us_geomean") is not None:
        parts.append(f"graph_us {_num(m['graph_us_geomean'])}x")
    if m.get("wall_us_geomean") is not None:
        parts.append(f"wall_us {_num(m['wall_us_geomean'])}x")
    if m.get("vs_best_peer_device_us") is not None:
        parts.append(f"vs best peer {_num(m['vs_best_peer_device_us'])}x")
    if m.get("min_row") is not None:
        parts.append(f"min row {_num(m['min_row'])} ({m.get('min_row_id') or '?'})")
    if m.get("rows_total") is not None:
        parts.append(f"rows {m.get('rows_passed')}/{m['rows_total']}")
    if m.get("gpu"):
        parts.append(m["gpu"])
    return ", ".join(parts) or "-"


def render_table(entries: list[dict], title: str = "ledger"):
    from rich.markup import escape
    from rich.table import Table

    t = Table(title=escape(title), show_lines=True)
    for col in ("id", "parent", "round", "time (UTC)", "kind", "decision", "metrics", "hypothesis", "change",
                "reason", "author"):
        t.add_column(col, overflow="fold")
    style = {"NO-GO": "red", "BLOCKED": "yellow", "IMPROVEMENT": "green", "PROMOTED": "bold green"}
    for e in entries:
        # free text is escaped: a "[...]" in a hypothesis or an interval must print, not be read as rich markup
        t.add_row(e["id"], e["parent"] or "-", str(e["round"]), e["time_utc"], e["kind"],
                  f"[{style.get(e['decision'], '')}]{e['decision']}[/]" if e["decision"] else "-",
                  escape(metrics_text(e["metrics"])), escape(e["hypothesis"] or "-"), escape(e["change"] or "-"),
                  escape(e["reason"] + (f"\nreview: {e['review']}" if e.get("review") else "")), escape(e["author"]))
    return t


def cell(text: str | None, limit: int = 120) -> str:
    s = " ".join((text or "").split()).replace("|", "/")
    return (s[: limit - 3] + "...") if len(s) > limit else (s or "-")


def render_markdown(entries: list[dict], task_name: str = "", path: Path | None = None) -> str:
    """The ledger as markdown: a summary table, then every entry in full. Writes it to `path` when given."""
    counts = {d: sum(e["decision"] == d for e in entries) for d in DECISIONS}
    out = ["<!-- generated by `kda ledger` from docs/ledger.jsonl; do not edit -->",
           f"# Ledger{': ' + task_name if task_name else ''}", "",
           f"{len(entries)} entries: {sum(e['kind'] == 'measurement' for e in entries)} measurements, "
           + ", ".join(f"{n} {d}" for d, n in counts.items()) + ". Failed attempts stay in the ledger.", "",
           "| id | parent | round | time (UTC) | kind | decision | metrics | hypothesis | reason |",
           "|---|---|---|---|---|---|---|---|---|"]
    for e in entries:
        out.append(f"| {e['id']} | {e['parent'] or '-'} | {e['round']} | {e['time_utc']} | {e['kind']} | "
                   f"{e['decision'] or '-'} | {cell(metrics_text(e['metrics']))} | {cell(e['hypothesis'])} | "
                   f"{cell(e['reason'])} |")
    out += ["", "## Entries", ""]
    for e in entries:
        out += [f"### {e['id']}: {e['decision'] or e['kind']} (round {e['round']}, {e['time_utc']}, {e['author']})", ""]
        for key in ("hypothesis", "change", "reason", "review"):
            if e.get(key):
                out.append(f"- **{key}**: " + e[key].strip().replace("\n", "\n  "))
        out.append(f"- **metrics**: {metrics_text(e['metrics'])}")
        ref = e["results_ref"]
        out.append(f"- **source**: `{e['source_hash'][:16]}`" + (f", commit `{e['commit'][:12]}`" if e.get("commit") else "")
                   + (f", results `{ref['path']}` ({ref['lines']} lines"
                      + (f", in git at `{ref['commit'][:12]}`)" if ref.get("commit") else ")") if ref else "")
                   + (f", parent {e['parent']}" if e["parent"] else ""))
        out.append("")
    text = "\n".join(out).rstrip("\n") + "\n"
    if path is not None:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_text(text)
    return text


def write_markdown(task_dir: Path) -> Path:
    path = Path(task_dir) / "docs" / "ledger.md"
    render_markdown(read(task_dir), Path(task_dir).name, path)
    return path
