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
COMPARATORS = ("compile", "eager")


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
