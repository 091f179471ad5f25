"""group_norm_silu's solution on GPUs it was not written for (issue 37): below sm_90 the planner never reaches the
CUDA extension (whose held kernel traps there) and takes its Triton plan; its plan cache keeps at most _PLANS_MAX
signatures. The planner runs on stand-ins for CUDA tensors: nothing launches."""
import sys
from types import SimpleNamespace

import pytest
import torch

from kda.definition.task import Task

TASK = Task.load("group_norm_silu")
IMPL = sys.modules[TASK.load_solution().__name__ + ".group_norm_silu"]


def _cuda_like(shape, dtype=torch.bfloat16):
    """What _plan reads of a contiguous CUDA tensor (its Triton plan is stubbed: no strides or pointers needed)."""
    n = 1
    for d in shape:
        n *= d
    return SimpleNamespace(shape=torch.Size(shape), dtype=dtype, is_cuda=True, device=torch.device("cuda", 0),
                           is_contiguous=lambda: True, numel=lambda: n, element_size=lambda: 2, dim=lambda: len(shape))


@pytest.mark.parametrize("capability", [(8, 0), (8, 9)])
def test_below_sm90_every_input_takes_the_triton_plan_without_loading_the_extension(monkeypatch, capability):
    monkeypatch.setattr(IMPL, "_triton_plan", lambda *a: ("fused", "triton"))
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: capability)

    def no_extension(device):
        raise AssertionError("the extension was loaded below sm_90")

    monkeypatch.setattr(IMPL, "_device_limits", no_extension)
    for shape in ((1, 128, 5, 32, 32), (1, 512, 9, 128, 128), (1, 256, 17, 256, 256)):  # resident, held, team sizes
        assert IMPL._plan(_cuda_like(shape), None, None, 32) == ("fused", "triton")


def test_from_sm90_the_planner_reads_the_devices_limits_for_its_extension_paths(monkeypatch):
    monkeypatch.setattr(IMPL, "_triton_plan", lambda *a: ("fused", "triton"))
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: (9, 0))
    asked = []
    monkeypatch.setattr(IMPL, "_device_limits", lambda device: asked.append(device) or (132, 227 << 10))
    plan = IMPL._plan(_cuda_like((1, 128, 5, 32, 32)), None, None, 32)
    assert asked and plan[0] == "resident" and plan[2] == ("fused", "triton")


def test_the_plan_cache_keeps_at_most_plans_max_signatures_first_in_first_out(monkeypatch):
    monkeypatch.setattr(IMPL, "_plans", {})
    monkeypatch.setattr(IMPL, "_PLANS_MAX", 4)
    monkeypatch.setattr(IMPL, "_plan", lambda *a: None)  # an empty plan: nothing launches
    shapes = [(1, 32, n) for n in range(1, 7)]
    for shape in shapes:
        IMPL._group_norm_silu(torch.empty(shape), None, None, 32, 1e-5, None)
    kept = [k[0] for k in IMPL._plans]
    assert kept == [torch.Size(s) for s in shapes[-4:]]
