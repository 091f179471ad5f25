"""config.toml of a task: the schema, validated on load. Every key here is read by code."""
from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

from kda.core.errors import KdaError
from kda.core.schema import Field, ListOf, MapOf, one_of, positive, validate

DTYPES = ("float32", "float16", "bfloat16", "float64", "int32", "int64", "int8", "uint8", "bool")
METRICS = ("device_us", "wall_us", "graph_us")
COMPARATORS = ("compile", "eager", "latest")


def _entry(v: str) -> str | None:
    return None if v.count(":") == 1 and all(v.split(":")) else f"expected 'module.path:function', got {v!r}"


def _sha(v: str) -> str | None:
    return None if len(v) == 64 and all(c in "0123456789abcdef" for c in v) else "expected 64 lowercase hex digits"


def _comparators(v: list) -> str | None:
    bad = [c for c in v if c not in COMPARATORS]
    return f"unknown comparator {bad[0]!r}; expected some of {', '.join(COMPARATORS)}" if bad else None


def _tolerances(v: dict) -> str | None:
    bad = [k for k in v if k not in DTYPES]
    return f"unknown dtype {bad[0]!r}; expected some of {', '.join(DTYPES)}" if bad else None


SWEEP_VALUE = (int, float, str, bool)
# One parameter of a sweep domain: `choices`, or an integer range `min`..`max`. The CPU keys give the domain's small
# end, drawn from under Triton's interpreter (`kda check TASK --cpu --sweep N`); they may lie below the GPU domain,
# since the interpreter takes seconds per thousand programs while a GPU row that small says nothing about speed.
PARAM_SPEC = {
    "name": Field(str, doc="the parameter's name, as the task's sweep_row reads it"),
    "why": Field(str, doc="why this domain: the production values it surrounds"),
    "choices": Field(ListOf(SWEEP_VALUE), required=False, doc="the values a draw picks from, uniformly"),
    "min": Field(int, required=False, doc="an integer range: least value"),
    "max": Field(int, required=False, doc="an integer range: greatest value"),
    "scale": Field(str, required=False, check=one_of("log", "linear"), doc="how a range is drawn (default log)"),
    "multiple_of": Field(int, required=False, check=positive, doc="a range's values are multiples of this"),
    "cpu_choices": Field(ListOf(SWEEP_VALUE), required=False, doc="on the CPU: the choices drawn from instead"),
    "cpu_min": Field(int, required=False, doc="on the CPU: the range's least value instead (default min)"),
    "cpu_max": Field(int, required=False, doc="on the CPU: the range's greatest value instead"),
}
RANGE_KEYS = ("min", "max", "scale", "multiple_of", "cpu_min", "cpu_max")


def _multiple_between(lo: int, hi: int, step: int | None) -> bool:
    step = step or 1
    return -(-lo // step) * step <= hi


def _param_problem(p: dict) -> str | None:
    """What is inconsistent in one parameter of the sweep domain, or None."""
    if p["choices"] is not None:
        extra = [k for k in RANGE_KEYS if p[k] is not None]
        if extra:
            return f"{extra[0]!r} belongs to a range (min, max), not to 'choices'"
        if not p["choices"] or p["cpu_choices"] == []:
            return "expected at least one value in 'choices'" + (" and 'cpu_choices'" if p["choices"] else "")
        return None
    if p["min"] is None or p["max"] is None:
        return "expected either 'choices' or both 'min' and 'max'"
    if p["cpu_choices"] is not None:
        return "'cpu_choices' belongs to 'choices', not to a range (use 'cpu_min' and 'cpu_max')"
    if not 0 < p["min"] <= p["max"]:
        return f"expected 0 < min <= max, got min {p['min']} and max {p['max']}"
    if not _multiple_between(p["min"], p["max"], p["multiple_of"]):
        return f"no multiple of {p['multiple_of']} lies between min {p['min']} and max {p['max']}"
    if p["cpu_min"] is not None and p["cpu_max"] is None:
        return "'cpu_min' needs 'cpu_max' (the CPU range)"
    if p["cpu_max"] is not None:
        lo = p["min"] if p["cpu_min"] is None else p["cpu_min"]
        if not 0 < lo <= p["cpu_max"]:
            return f"expected 0 < cpu_min <= cpu_max, got {lo} and {p['cpu_max']} (cpu_min defaults to min)"
        if not _multiple_between(lo, p["cpu_max"], p["multiple_of"]):
            return f"no multiple of {p['multiple_of']} lies between {lo} and cpu_max {p['cpu_max']}"
    return None


def _params(v: list) -> str | None:
    names = [p["name"] for p in v]
    dup = next((n for n in names if names.count(n) > 1), None)
    if dup:
        return f"parameter {dup!r} is declared twice"
    for i, p in enumerate(v):
        problem = _param_problem(p)
        if problem:
            return f"params[{i}] ({p['name']!r}): {problem}"
    return None


def _share(v: float) -> str | None:
    return None if 0 < v <= 1 else f"expected a share in (0, 1], got {v!r}"


SPEC = {
    "task": Field({
        "name": Field(str, doc="folder name of the task"),
        "campaign": Field(str, check=one_of("diffusion", "llm")),
        "description": Field(str),
        "language": Field(str, check=one_of("triton", "cuda", "cutedsl"), doc="language of the upstream baseline"),
        "candidate_language": Field(str, check=one_of("triton", "cuda", "cutedsl")),
        "entry_points": Field(ListOf(str), doc="upstream 'module:function' the task copies",
                              check=lambda v: next((e for e in map(_entry, v) if e), None) or (None if v else "expected at least one")),
        "candidate_entry": Field(str, doc="function name the solution exports with the upstream signature"),
    }),
    "upstream": Field({
        "package": Field(str),
        "version": Field(str),
        "files": Field(ListOf({"path": Field(str), "sha256": Field(str, check=_sha)}),
                       check=lambda v: None if v else "expected at least one file"),
        "shims": Field(ListOf(str), doc="outside modules the vendored files import, replaced by committed shims"),
    }),
    "upstream_latest": Field({
        "package": Field(str),
        "version": Field(str, doc="a later release of the package, or '' for none"),
        "files": Field(ListOf({"path": Field(str), "sha256": Field(str, check=_sha)})),
        "shims": Field(ListOf(str)),
        "entry_points": Field(ListOf(str), doc="'module:function' in the later release, by the baseline's names",
                              check=lambda v: next((e for e in map(_entry, v) if e), None)),
        "note": Field(str, required=False, default="",
                      doc="where none is pinned, why, in a few words (README's 'over today's SGLang' cell)",
                      check=lambda v: "at most 40 characters" if len(v) > 40 else None),
    }),
    "bench": Field({
        "metric": Field(str, check=one_of(*METRICS), doc="headline metric"),
        "trials": Field(int, check=positive),
        "warmup": Field(int, check=positive),
        "target_sample_us": Field(float, check=positive, doc="calibrated so one sample of N calls lasts this long"),
        "max_inner": Field(int, check=positive),
        "min_inner": Field(int, check=positive,
                           doc="at least this many calls per sample (l2 hot), so the synchronize ahead of each "
                               "sample's end stamp is shared by several calls where the baseline is slow"),
        "wall_repeats": Field(int, check=positive),
        "l2": Field(str, check=one_of("hot", "cold")),
        "row_timeout_s": Field(float, check=positive),
        "bootstrap_resamples": Field(int, check=positive),
        "comparators": Field(ListOf(str), check=_comparators),
        "seed": Field(int),
        "rotate": Field(bool, doc="timed calls rotate over input sets refilled before every sample"),
        "clean_baseline_samples": Field(int, check=lambda v: None if v >= 0 else "expected 0 or more",
                                        doc="baseline samples per row timed in a worker that never imported the "
                                            "candidate (0: off)"),
        "clean_baseline_max_ratio": Field(float, check=lambda v: None if v > 1 else "expected a ratio above 1",
                                          doc="baseline median beside the candidate over its median alone, above "
                                              "which the row fails with BASELINE_SLOWED"),
    }),
    "check": Field({
        "trials": Field(int, check=positive, doc="trials per row in `kda check`"),
        "k_error_ratio": Field(float, check=positive, doc="candidate error at most k times the baseline's"),
        "error_floor": Field(float, check=positive,
                             doc="tolerance-normalised error below which the ratio rule does not bite"),
        "inplace": Field(ListOf(str), doc="inputs the op is declared to modify"),
        "tolerance": Field(MapOf({"atol": Field(float), "rtol": Field(float)}), check=_tolerances),
        "contract": Field(str, required=False, default="close", check=one_of("close", "bitexact"),
                          doc="the candidate's numerical contract (issue 40): close (tolerance and error ratio) or "
                              "bitexact (also equal bits to SGLang's eager chain, kda.definition.eager_chains, on "
                              "every row)"),
    }),
    # Read by `kda gate`, the Stop hook of agent runs and `kda promote` (kda/loop/gate.py): what a candidate must show
    # before it can be promoted, and how many review rounds an agent run gets.
    "gates": Field({
        "min_geomean": Field(float, check=positive,
                             doc="least geomean speedup over the baseline (headline metric, production rows)"),
        "min_row": Field(float, check=positive, doc="least median speedup of the worst production row"),
        "ci_over_noise": Field(bool, doc="the geomean's 95% CI lower bound must exceed the A/A noise floor geomean "
                                         "(results/<gpu>-aa.jsonl.gz) when that file exists"),
        "min_graph_peer_row_ci": Field(float, check=positive,
                                       doc="a passing production row fails when its 95% interval of graph_us over "
                                           "the best peer lies wholly below this (upper end under it): a row where a "
                                           "user who captures graphs would lose to what they could run instead"),
        "max_rounds": Field(int, check=positive, doc="round budget of an agent run (Stop-hook rounds)"),
    }),
    # The generalisation sweep (`kda bench TASK --sweep N`, kda/definition/sweep.py): the domain that shapes are drawn
    # from at random around the production rows, and the target a sweep run is judged against (issue 34).
    "sweep": Field({
        "min_share": Field(float, check=_share,
                           doc="least share of sweep rows whose graph_us interval over the best peer is not wholly "
                               "below 1"),
        "min_median": Field(float, check=positive, doc="least graph_us median over the best peer of any sweep row"),
        "params": Field(ListOf(PARAM_SPEC), required=False, default=[], check=_params,
                        doc="the domain: each parameter the task's sweep_row (bench/make_workloads.py) reads; "
                            "empty: the task declares no sweep"),
    }),
}


@dataclass(frozen=True)
class TaskConfig:
    path: Path
    data: dict[str, Any]

    def __getitem__(self, section: str) -> dict[str, Any]:
        return self.data[section]

    def tolerance(self, dtype: str) -> tuple[float, float]:
        tol = self.data["check"]["tolerance"]
        if dtype not in tol:
            raise KdaError(f"{self.path}: check.tolerance has no entry for dtype {dtype!r} (has: {', '.join(tol)})")
        return tol[dtype]["atol"], tol[dtype]["rtol"]


def load_config(path: Path) -> TaskConfig:
    try:
        raw = tomllib.loads(path.read_text())
    except FileNotFoundError:
        raise KdaError(f"{path}: no such file (every task folder needs a config.toml)") from None
    except tomllib.TOMLDecodeError as e:
        raise KdaError(f"{path}: not valid TOML: {e}") from None
    data = validate(raw, SPEC, str(path))
    if data["task"]["name"] != path.parent.name:
        raise KdaError(f"{path}: key 'task.name' is {data['task']['name']!r} but the folder is {path.parent.name!r}")
    bench = data["bench"]
    if bench["min_inner"] > bench["max_inner"]:
        raise KdaError(f"{path}: key 'bench.min_inner' is {bench['min_inner']}, above bench.max_inner "
                       f"({bench['max_inner']}): expected at most max_inner")
    return TaskConfig(path, data)
