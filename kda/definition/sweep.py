"""The generalisation sweep's rows: N parameter sets drawn at random from the domain a task declares (config.toml's
`[sweep]`, from task.toml), each built into a row by the task's own generator (`sweep_row` in
bench/make_workloads.py, with the helpers its production rows use).

Production rows are what a candidate is tuned on; sweep rows are how a reviewer sees whether it overfits them. The
draw is deterministic: draw i depends only on (seed, i), so `--sweep 8` is the first 8 rows of `--sweep 64` with the
same seed, and a results file names the seed that reproduces it. On the CPU (Triton interpreter) every range stops at
its `cpu_max` and every choice comes from `cpu_choices` where the domain gives them: the domain's small end.
"""
from __future__ import annotations

import math
import random
import re
from dataclasses import dataclass
from typing import Any

from kda.core.errors import KdaError
from kda.definition.task import Task, load_module
from kda.definition.workloads import Row, parse_rows

GENERATOR = "bench/make_workloads.py"
BUILDER = "sweep_row"
MODEL = "sweep"


@dataclass(frozen=True)
class Sweep:
    task: str
    seed: int
    cpu: bool
    domain: list[dict]  # the [[sweep.params]] drawn from, as config.toml declares them
    params: list[dict]  # one parameter set per draw, in draw order
    rows: list[dict]  # the rows built from them, as workloads.json would hold them

    @property
    def n(self) -> int:
        return len(self.rows)

    def parsed(self) -> list[Row]:
        return parse_rows(self.rows, f"sweep rows of {self.task} (seed {self.seed})")

    def record(self) -> dict:
        """What a results file keeps of the sweep: enough to draw the same rows again and to read them."""
        return {"seed": self.seed, "n": self.n, "cpu": self.cpu, "domain": self.domain,
                "draws": [{"id": r["id"], "params": p} for r, p in zip(self.rows, self.params)]}


def default_seed(task: Task) -> int:
    """The task's bench.seed: a sweep without --sweep-seed draws the same rows every time, on every machine."""
    return task.cfg["bench"]["seed"]


def _range_value(p: dict, rng: random.Random, cpu: bool) -> int:
    step = p["multiple_of"] or 1
    lo, hi = p["min"], p["max"]
    if cpu and p["cpu_max"] is not None:
        lo, hi = (p["min"] if p["cpu_min"] is None else p["cpu_min"]), p["cpu_max"]
    lo_units, hi_units = -(-lo // step), hi // step  # the multiples of step inside [lo, hi]
    if (p["scale"] or "log") == "linear" or lo_units == hi_units:
        return rng.randint(lo_units, hi_units) * step
    # Log-uniform: token counts and widths span decades, and every decade matters as much as the next.
    v = math.exp(rng.uniform(math.log(lo_units), math.log(hi_units)))
    return min(max(round(v), lo_units), hi_units) * step


def draw_one(domain: list[dict], seed: int, i: int, cpu: bool = False) -> dict[str, Any]:
    """Parameter set i of the sweep with this seed; a string seed is hashed the same way on every platform."""
    rng = random.Random(f"kda-sweep:{seed}:{i}")
    out = {}
    for p in domain:
        if p["choices"] is not None:
            out[p["name"]] = rng.choice(p["cpu_choices"] if cpu and p["cpu_choices"] else p["choices"])
        else:
            out[p["name"]] = _range_value(p, rng, cpu)
    return out


def draw_params(domain: list[dict], n: int, seed: int, cpu: bool = False) -> list[dict[str, Any]]:
    return [draw_one(domain, seed, i, cpu) for i in range(n)]


def row_seed(seed: int, i: int) -> int:
    """The seed of sweep row i (its inputs' values): apart from the draw of its shape, below 2**31."""
    return random.Random(f"kda-sweep-row:{seed}:{i}").randrange(2**31)


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", str(text).lower()).strip("_") or "row"


def build(task: Task, n: int, seed: int | None = None, cpu: bool = False) -> Sweep:
    """Draw n parameter sets and build each into a row with the task's `sweep_row(params, seed)`; the rows are
    validated as workloads.json's are. Ids are `sweep_<i>_<what sweep_row named the row>`."""
    where = task.path / "config.toml"
    if n < 1:
        raise KdaError(f"--sweep {n}: expected at least one row")
    domain = task.cfg["sweep"]["params"]
    if not domain:
        raise KdaError(f"{where}: key 'sweep.params' is empty, so {task.name} declares no sweep domain (add "
                       "[[sweep.params]] to its task.toml and run `kda render`)")
    seed = default_seed(task) if seed is None else seed
    gen = task.path / GENERATOR
    builder = getattr(load_module(gen, f"kda_task_{task.name}_make_workloads"), BUILDER, None)
    if not callable(builder):
        raise KdaError(f"{gen}: must define {BUILDER}(params, seed) -> row dict, to build the rows of its "
                       f"[sweep] domain")
    params = draw_params(domain, n, seed, cpu)
    rows = []
    for i, p in enumerate(params):
        try:
            row = dict(builder(dict(p), row_seed(seed, i)))
        except Exception as e:  # noqa: BLE001 - name the draw that the task's builder refused
            raise KdaError(f"{gen}: {BUILDER} failed on sweep draw {i} (seed {seed}) {p}: "
                           f"{type(e).__name__}: {e}") from None
        row.update(id=f"sweep_{i}_{_slug(row.get('id', 'row'))}", production=False, model=MODEL,
                   source=f"sweep: seed {seed} draw {i}", seed=row_seed(seed, i), cpu=cpu)
        rows.append(row)
    sweep = Sweep(task.name, seed, cpu, domain, params, rows)
    sweep.parsed()  # a row that cannot be built as declared fails here, naming it, before any worker starts
    return sweep
