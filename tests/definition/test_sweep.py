"""kda/definition/sweep.py and config.toml's [sweep]: draws are deterministic by seed, ids distinct, every task's
domain draws rows that parse (its CPU end rows small enough for the interpreter), and a malformed domain is a
KdaError naming the file, the key and what was expected."""
import math
import re
from pathlib import Path

import pytest

from kda.core.errors import KdaError
from kda.core.paths import all_task_dirs
from kda.definition import sweep
from kda.definition.config import load_config
from kda.definition.task import Task

ROOT = Path(__file__).resolve().parents[2]
TASKS = [p.name for p in all_task_dirs()]
CPU_ELEMENTS = 100_000  # the largest CPU row's elements over all its tensors: seconds under the interpreter


@pytest.fixture(scope="module")
def task():
    return Task.load("fuse_scale_shift")


def test_same_seed_same_rows_and_a_prefix_of_a_longer_sweep(task):
    a, b = sweep.build(task, 6, seed=11), sweep.build(task, 6, seed=11)
    assert a.rows == b.rows and a.params == b.params
    assert sweep.build(task, 3, seed=11).rows == a.rows[:3]  # draw i depends on (seed, i) alone
    assert sweep.build(task, 6, seed=12).params != a.params


def test_default_seed_is_the_bench_seed_and_rows_say_where_they_come_from(task):
    s = sweep.build(task, 4)
    assert s.seed == task.cfg["bench"]["seed"] == sweep.default_seed(task)
    assert [r["id"].split("_")[:2] for r in s.rows] == [["sweep", str(i)] for i in range(4)]
    assert len({r["id"] for r in s.rows}) == 4
    assert all(not r["production"] and r["model"] == "sweep" and not r["cpu"] for r in s.rows)
    assert [r["source"] for r in s.rows] == [f"sweep: seed {s.seed} draw {i}" for i in range(4)]
    assert len({r["seed"] for r in s.rows}) == 4
    rec = s.record()
    assert rec["seed"] == s.seed and rec["n"] == 4 and rec["domain"] == task.cfg["sweep"]["params"]
    assert [d["params"] for d in rec["draws"]] == s.params


@pytest.mark.parametrize("name", TASKS)
def test_every_task_domain_draws_rows_that_parse(name):
    task = Task.load(name)
    gpu, cpu = sweep.build(task, 24), sweep.build(task, 8, cpu=True)
    for s in (gpu, cpu):
        rows = s.parsed()
        assert len({r.id for r in rows}) == len(rows) and all(re.fullmatch(r"sweep_\d+_[a-z0-9_]+", r.id) for r in rows)
        assert all(r.function in [e.split(":")[1] for e in task.cfg["task"]["entry_points"]] for r in rows)
    assert all(r.cpu for r in cpu.parsed())
    for r in cpu.parsed():
        assert sum(t.storage_numel for t in r.tensors.values() if t) <= CPU_ELEMENTS, r.id
    # Every drawn value lies in its declared domain.
    for p in gpu.params:
        for d in task.cfg["sweep"]["params"]:
            v = p[d["name"]]
            if d["choices"] is not None:
                assert v in d["choices"]
            else:
                assert d["min"] <= v <= d["max"] and v % (d["multiple_of"] or 1) == 0


def test_ranges_stay_inside_and_the_cpu_end_is_drawn_on_the_cpu():
    dom = [{"name": "S", "why": "", "choices": None, "cpu_choices": None, "min": 100, "max": 10_000,
            "scale": None, "multiple_of": 64, "cpu_min": 1, "cpu_max": 200},
           {"name": "T", "why": "", "choices": None, "cpu_choices": None, "min": 1, "max": 5, "scale": "linear",
            "multiple_of": None, "cpu_min": None, "cpu_max": None},
           {"name": "d", "why": "", "choices": ["a", "b"], "cpu_choices": ["c"], "min": None, "max": None,
            "scale": None, "multiple_of": None, "cpu_min": None, "cpu_max": None}]
    gpu, cpu = sweep.draw_params(dom, 200, 3), sweep.draw_params(dom, 200, 3, cpu=True)
    assert all(128 <= p["S"] <= 9984 and p["S"] % 64 == 0 for p in gpu)
    assert {p["T"] for p in gpu} == {1, 2, 3, 4, 5} and {p["d"] for p in gpu} == {"a", "b"}
    assert {p["S"] for p in cpu} == {64, 128, 192} and {p["T"] for p in cpu} <= {1, 2, 3, 4, 5}
    assert {p["d"] for p in cpu} == {"c"}
    logs = sorted(math.log(p["S"]) for p in gpu)
    assert logs[len(logs) // 2] < math.log(2000)  # log-uniform: the median sits near the geometric middle


def test_a_task_without_a_domain_or_a_builder_says_so(task, monkeypatch, tmp_path):
    empty = dict(task.cfg.data, sweep={**task.cfg["sweep"], "params": []})
    t = Task(task.path, type(task.cfg)(task.cfg.path, empty), task.rows)
    with pytest.raises(KdaError, match=r"config\.toml: key 'sweep\.params' is empty"):
        sweep.build(t, 2)
    with pytest.raises(KdaError, match="expected at least one row"):
        sweep.build(task, 0)
    monkeypatch.setattr(sweep, "BUILDER", "no_such_builder")
    with pytest.raises(KdaError, match=r"make_workloads\.py: must define no_such_builder\(params, seed\)"):
        sweep.build(task, 1)


REAL = ROOT / "diffusion" / "kernels" / "fuse_scale_shift" / "config.toml"
PARAM = '  { name = "Z", why = "production widths", min = 1024, max = 6144, multiple_of = 64, cpu_min = 64, cpu_max = 512 },\n'


@pytest.mark.parametrize("line, expected", [
    (PARAM.replace("min = 1024, max = 6144", "choices = [1, 2]"), "'multiple_of' belongs to a range (min, max), not to 'choices'"),
    (PARAM.replace("min = 1024", "min = 7000"), "expected 0 < min <= max, got min 7000 and max 6144"),
    (PARAM.replace("min = 1024, ", ""), "expected either 'choices' or both 'min' and 'max'"),
    (PARAM.replace(", cpu_max = 512", ""), "'cpu_min' needs 'cpu_max'"),
    (PARAM.replace("cpu_min = 64, cpu_max = 512", "cpu_min = 65, cpu_max = 100"),
     "no multiple of 64 lies between 65 and cpu_max 100"),
    (PARAM.replace("cpu_max = 512", "cpu_max = 32"), "expected 0 < cpu_min <= cpu_max, got 64 and 32"),
    (PARAM.replace("multiple_of = 64", "multiple_of = 8000"), "no multiple of 8000 lies between min 1024"),
    (PARAM.replace('name = "Z"', 'name = "S"'), "parameter 'S' is declared twice"),
    (PARAM.replace('why = "production widths", ', ""), "missing key 'sweep.params[0].why'"),
    (PARAM.replace("cpu_min", "cpu_low"), "unknown key 'sweep.params[0].cpu_low'"),
    (PARAM.replace("multiple_of = 64", 'scale = "cubic"'), "expected one of log, linear"),
])
def test_domain_errors_name_the_file_and_key(tmp_path, line, expected):
    text = REAL.read_text()
    start = text.index("params = [\n") + len("params = [\n")
    text = text[:start] + line + text[start:]
    d = tmp_path / "fuse_scale_shift"
    d.mkdir()
    (d / "config.toml").write_text(text)
    with pytest.raises(KdaError) as e:
        load_config(d / "config.toml")
    msg = str(e.value)
    assert str(d / "config.toml") in msg and "sweep.params" in msg and expected in msg, msg


def test_target_must_be_a_share(tmp_path):
    d = tmp_path / "fuse_scale_shift"
    d.mkdir()
    (d / "config.toml").write_text(REAL.read_text().replace("min_share = 0.9", "min_share = 90.0"))
    with pytest.raises(KdaError, match=r"key 'sweep\.min_share': expected a share in \(0, 1\], got 90\.0"):
        load_config(d / "config.toml")
