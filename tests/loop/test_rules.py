"""kda/loop/rules.py on a CPU: the architecture rule's nvcc builds with nvcc replaced by a stub (the real builds take
minutes: `kda rules` runs them), the Triton half on one small task for real, and the page it writes."""
import os
import textwrap

import pytest

from kda.core.paths import resolve_task
from kda.loop import rules

STUB = textwrap.dedent("""\
    #!/usr/bin/env bash
    case "$*" in
      *-arch=sm_80*) echo "ptxas /tmp/x.ptx, line 9; error   : Feature 'cp.async.bulk' requires .target sm_90 or higher" >&2; exit 255 ;;
    esac
    echo "$*" >> "$(dirname "$0")/calls.log"
    """)


@pytest.fixture
def nvcc(tmp_path):
    path = tmp_path / "nvcc"
    path.write_text(STUB)
    path.chmod(0o755)
    return str(path)


def test_a_cuda_source_that_needs_a_newer_architecture_fails_with_its_first_error(nvcc, tmp_path):
    src = resolve_task("group_norm_silu") / "solution" / "csrc" / "gn_held.cu"
    bad = rules.nvcc_check(src, 80, nvcc, ["/inc"])
    assert not bad.ok and bad.task == "group_norm_silu" and bad.kind == "cuda"
    assert bad.detail == "error: Feature 'cp.async.bulk' requires .target sm_90 or higher"  # no temporary path
    good = rules.nvcc_check(src, 90, nvcc, ["/inc"])
    assert good.ok
    call = (tmp_path / "calls.log").read_text()
    assert "-arch=sm_90" in call and str(src) in call and "-I/inc" in call and "-std=c++17" in call


def test_every_cuda_source_at_every_architecture_and_no_nvcc_is_a_failure_not_a_pass(monkeypatch, nvcc):
    monkeypatch.setattr(rules, "triton_check", lambda task, arch: rules.Result(task.name, arch, "triton", "0 launches",
                                                                               True, "stub"))
    dirs = [resolve_task("qknorm_rope"), resolve_task("norm_infer")]
    got = rules.check(dirs, (80, 90), nvcc=nvcc, jobs=2)
    cuda = [r for r in got if r.kind == "cuda"]
    assert {(r.task, r.arch, r.what) for r in cuda} == {("qknorm_rope", 80, "qknorm_rope.cu"),
                                                       ("qknorm_rope", 90, "qknorm_rope.cu")}
    assert [r.ok for r in sorted(cuda, key=lambda r: r.arch)] == [False, True]
    assert sum(r.kind == "triton" for r in got) == 4  # two tasks x two architectures
    monkeypatch.setattr(rules.shutil, "which", lambda name: None)
    none = [r for r in rules.check(dirs[:1], (90,)) if r.kind == "cuda"]
    assert none and not none[0].ok and "nvcc not found" in none[0].detail


def test_the_triton_half_compiles_a_small_task_for_ampere_here():
    from kda.definition.task import Task

    if os.environ.get("TRITON_INTERPRET") == "1":
        pytest.skip("the interpreter compiles nothing")
    r = rules.triton_check(Task.load("norm_infer"), 80)
    assert r.ok and r.kind == "triton" and r.what.endswith("launches") and int(r.what.split()[0]) > 0


def test_the_page_has_a_column_per_architecture_and_names_each_failure():
    rs = [rules.Result("a", 80, "cuda", "k.cu", False, "error: sm_90 only"), rules.Result("a", 90, "cuda", "k.cu",
                                                                                            True, "compiled"),
          rules.Result("a", 80, "triton", "3 launches", True, "3 compiled"),
          rules.Result("b", 80, "triton", "1 launches", True, "1 compiled")]
    page = rules.markdown(rs, (80, 90), "0123456789abcdef")
    assert "| task | sm_80 | sm_90 |" in page and "`0123456789ab`" in page
    assert "| a | cuda k.cu: error: sm_90 only | ok |" in page and "| b | ok | - |" in page


def _task(candidate):
    """A task of one production row whose adapter calls `candidate(x, out)`."""
    from types import SimpleNamespace

    from kda.definition.workloads import parse_rows

    row = parse_rows([{"id": "r", "production": True, "model": "m", "source": "test", "seed": 1, "function": "f",
                       "scalars": {}, "cpu": False, "tensors": {"x": {"shape": [4, 8], "dtype": "bfloat16"}}}], "test")[0]
    adapter = SimpleNamespace(output_specs=lambda row, inputs: {"y": ((4, 8), inputs["x"].dtype)},
                              call_candidate=lambda sol, row, inputs, out: sol.fn(inputs["x"], out["y"]))
    return SimpleNamespace(name="t", rows=[row], adapter=adapter,
                           load_solution=lambda: SimpleNamespace(fn=candidate))


def test_a_custom_op_with_a_fake_implementation_traces_and_a_raw_launch_does_not():
    import torch

    @torch.library.custom_op("kda_rules_test::scale", mutates_args=("out",))
    def scale(x: torch.Tensor, out: torch.Tensor) -> None:
        out.copy_(x * 2)

    @scale.register_fake
    def _(x, out):
        return None

    assert rules.traceable_check(_task(scale)).ok

    def raw_launch(x, out):  # what a Triton launcher does first: read the device pointer
        x.untyped_storage().data_ptr() + out.untyped_storage().data_ptr()
        raise AssertionError("unreachable on fake tensors")

    bad = rules.traceable_check(_task(raw_launch))
    assert not bad.ok and bad.kind == "trace" and bad.detail.startswith("row r: ")
    assert "sm_" not in bad.line()


CACHES = textwrap.dedent("""\
    import functools
    from collections import OrderedDict

    _plans = {}                      # written, never evicted: unbounded
    _lru = OrderedDict()             # evicted: bounded
    _sized = dict()                  # size-checked: bounded
    _per_device = {}  # bounded: one entry per CUDA device
    _table = {"a": 1}                # read only: not a cache
    _escapes = {}                    # handed to a helper that may write it: counted as written

    def plan(key):
        p = _plans.get(key)
        if p is None:
            p = _plans[key] = object()
        _lru[key] = p
        if len(_lru) > 8:
            _lru.popitem(last=False)
        if len(_sized) < 4:
            _sized.setdefault(key, p)
        _per_device[key] = p
        _fill(_escapes, key)
        return _table["a"]

    def _fill(t, k):
        t[k] = 1

    @functools.cache
    def forever(n):
        return n

    @functools.lru_cache(maxsize=None)
    def also_forever(n):
        return n

    @functools.lru_cache(maxsize=64)
    def fine(n):
        return n
    """)


def test_the_cache_rule_names_every_unbounded_cache_and_shows_declared_bounds():
    bad, declared = rules.unbounded_caches(CACHES, "m.py")
    line = {text: i for i, text in enumerate(CACHES.splitlines(), 1)}  # each finding names its decorator's line
    assert sorted(bad) == sorted([f"m.py:{line['@functools.cache']} forever (@cache without a maxsize)",
                                  f"m.py:{line['@functools.lru_cache(maxsize=None)']} also_forever "
                                  "(@lru_cache without a maxsize)", "m.py:4 _plans", "m.py:9 _escapes"])
    assert declared == ["m.py:7 _per_device (one entry per CUDA device)"]


def test_the_cache_rule_on_a_task_and_on_the_page(tmp_path):
    sol = tmp_path / "t" / "solution"
    sol.mkdir(parents=True)
    (sol / "a.py").write_text("_ok = {}  # bounded: the two dtypes\ndef f(k):\n    _ok[k] = 1\n")
    ok = rules.cache_check(tmp_path / "t")
    assert ok.ok and ok.detail == "declared bounded: a.py:1 _ok (the two dtypes)"
    (sol / "b.py").write_text("_grows = {}\ndef g(k):\n    _grows[k] = 1\n")
    bad = rules.cache_check(tmp_path / "t")
    assert not bad.ok and bad.detail == "unbounded: b.py:1 _grows"
    page = rules.markdown([ok, rules.Result("u", 0, "caches", "1 files", False, bad.detail)], (80,), "0" * 12)
    assert "| t | yes | declared bounded: a.py:1 _ok (the two dtypes) |" in page
    assert "| u | **no** | unbounded: b.py:1 _grows |" in page
