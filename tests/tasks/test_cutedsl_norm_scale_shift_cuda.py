"""cutedsl_norm_scale_shift v8: which calls the CUDA row kernel takes (the gated residual form at the D of
_CUDA_ROW_D), that its sources are hashed and pass the static rules, and that it builds for sm_90 without spills.
Its arithmetic is checked on a GPU only (the harness's correctness gate and `kda check`): no CPU path runs it."""
import sys

import pytest
import torch

from kda.harness.guards import static_violations
from kda.task import Task

TASK = Task.load("cutedsl_norm_scale_shift")
SOLUTION = TASK.load_solution()
IMPL = sys.modules[SOLUTION.__name__ + ".norm_scale_shift"]
BF16, F32 = torch.bfloat16, torch.float32


def test_sources_are_hashed_as_solution_code_and_pass_the_static_rules():
    names = {p.name for p in TASK.solution_files()}
    assert set(IMPL._EXT.sources) <= names
    assert all((IMPL._EXT.csrc / s).is_file() for s in IMPL._EXT.sources)
    assert static_violations(TASK.solution_files()) == []


def test_row_kernel_builds_for_hopper_without_spills(hopper_build):
    # layer and RMS statistics for bf16 and fp16 rows
    assert hopper_build(IMPL._EXT.csrc / "nss_row.cu") == 4


def test_only_the_gated_form_at_a_chosen_d_takes_the_row_kernel(monkeypatch):
    monkeypatch.setattr(IMPL, "_CUDA_ROW_D", (3072,))
    per_row, one, shared = IMPL._PER_ROW, IMPL._ONE, IMPL._SHARED
    assert IMPL._cuda_row(3072, BF16, per_row, F32, one, one)
    assert IMPL._cuda_row(3072, torch.float16, per_row, F32, one, one)
    assert not IMPL._cuda_row(5120, BF16, per_row, F32, one, one)       # a D not chosen
    assert not IMPL._cuda_row(3072, F32, per_row, F32, one, one)        # fp32 rows: the two-pass Triton path
    assert not IMPL._cuda_row(3072, BF16, shared, BF16, shared, shared)  # HunyuanVideo's shared bf16 gate
    assert not IMPL._cuda_row(3072, BF16, per_row, BF16, one, one)      # a 16-bit gate
    assert not IMPL._cuda_row(3072, BF16, per_row, F32, per_row, one)   # a per-token scale
    assert not IMPL._cuda_row(3072, BF16, IMPL._NONE, None, one, one)   # no gate


def test_every_chosen_d_launches_whole_warps_within_a_block():
    # one thread per 8 values: D a multiple of 256 gives whole warps, and at most 1024 threads a block
    for D in IMPL._CUDA_ROW_D:
        assert D % 256 == 0 and D // 8 <= 1024


def test_cpu_calls_never_take_the_row_kernel(monkeypatch):
    """_plan asks for a CUDA tensor before the form: the CPU gate and the interpreter keep the Triton kernel."""
    monkeypatch.setattr(IMPL, "_CUDA_ROW_D", (256,))
    x = torch.zeros((1, 4, 256), dtype=BF16)
    gate = torch.zeros((1, 4, 256), dtype=F32)
    w = torch.ones(256, dtype=F32)
    one = torch.zeros(1, dtype=BF16)
    assert IMPL._cuda_row(256, BF16, IMPL._PER_ROW, F32, IMPL._ONE, IMPL._ONE)
    plan = IMPL._plan(x, x, gate, w, w, one, one, "layer", x.clone(), x.clone())
    assert plan[3] is False and plan[0] is not None
