"""group_norm_silu: the Python side's calls into its CUDA extension against the C++ signatures in csrc/binding.cpp.

A call with one argument too many or too few fails only when the extension runs, on a GPU; here a stand-in extension
records each call, made with CPU tensors and a plan put in the plan cache by hand, and its arguments are counted
against the parameters binding.cpp declares."""
import math
import re
import sys
import types

import pytest
import torch

from kda.definition.task import Task

TASK = Task.load("group_norm_silu")
IMPL = sys.modules[TASK.load_solution().__name__ + ".group_norm_silu"]
BINDING = (IMPL._EXT.csrc / "binding.cpp").read_text()
H200 = (132, 232448)  # multiprocessors, opt-in shared memory per block


def _parameters(function: str) -> list[str]:
    """The parameter declarations of `bool function(...)` in binding.cpp."""
    m = re.search(rf"\nbool {function}\((.*?)\)\s*\{{", BINDING, re.S)
    assert m, f"binding.cpp declares no bool {function}(...)"
    return [p.strip() for p in m.group(1).split(",")]


class _Recorder:
    """An extension that takes every call and records its arguments."""

    def __init__(self):
        self.calls = []

    def __getattr__(self, name):
        def call(*args):
            self.calls.append((name, args))
            return True
        return call


@pytest.fixture
def recorder(monkeypatch):
    rec = _Recorder()
    monkeypatch.setattr(IMPL, "_EXT", types.SimpleNamespace(load=lambda: rec))
    monkeypatch.setattr(IMPL, "_plans", {})
    return rec


def _call_with_plan(shape, kind, plan):
    x = torch.empty(shape, dtype=torch.float16)
    w = torch.ones(shape[1], dtype=torch.float16)
    b = torch.zeros(shape[1], dtype=torch.float16)
    IMPL._plans[IMPL._plan_key(x, w, b, 32)] = (kind, plan, None)
    out = IMPL._group_norm_silu(x, w, b, 32, 1e-6, None)
    assert out.shape == x.shape


def _geometry(shape):
    S = math.prod(shape[2:])
    return shape[0] * 32, (shape[1] // 32) * S, S, 2


@pytest.mark.parametrize("shape, team", [((1, 512, 5, 32, 10), 4), ((1, 512, 2, 12, 10), 1)])
def test_resident_calls_match_run_and_pass_the_devices_generations_to_team_plans_only(recorder, monkeypatch, shape,
                                                                                       team):
    counters = torch.zeros(128, dtype=torch.int32)
    monkeypatch.setattr(IMPL, "_resident_counters", lambda device, units: counters)
    plan = IMPL.resident_plan(*_geometry(shape), *H200)
    assert plan[0] == team
    _call_with_plan(shape, "resident", plan)
    (name, args), = recorder.calls
    assert name == "run" and len(args) == len(_parameters("run"))
    *_, passed, early_wb = args
    assert (passed is counters) if team > 1 else passed is None
    assert early_wb is True  # v29: weight and bias loaded while the slice loads


def test_held_calls_match_run_held(recorder, monkeypatch):
    epoch = torch.zeros(1, dtype=torch.int32)
    monkeypatch.setattr(IMPL, "_held_epoch", lambda device: epoch)
    shape = (1, 512, 9, 128, 128)
    plan = IMPL.held_plan(*_geometry(shape), *H200)
    _call_with_plan(shape, "held", plan)
    (name, args), = recorder.calls
    assert name == "run_held" and len(args) == len(_parameters("run_held"))
    assert args[-1] is epoch


def test_the_parameter_parser_reads_the_declarations_it_counts():
    # the count above is only as good as the parse: run's last parameters are the counters and the early-load flag
    params = _parameters("run")
    assert params[0].endswith("x") and "counters" in params[-2] and params[-1] == "bool early_wb"
