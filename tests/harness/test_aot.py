"""kda.harness.aot on a CPU: a Plan maps to the signature LaunchCache launches with, and a kernel compiles for sm_90 through
ptxas without a GPU (the lowering the interpreter never does)."""
import types

import pytest
import torch
import triton
import triton.language as tl

from kda.harness.aot import HOPPER, compile_plan, compile_task, occupancy, resource_usage, signature
from kda.runtime.lean_launch import LaunchCache, Plan
from kda.core.paths import all_task_dirs
from kda.definition.task import Task


@triton.jit
def _scale_kernel(x_ptr, y_ptr, n, stride, big, alpha, BLOCK: tl.constexpr, EVEN: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs * stride, mask=mask, other=0.0).to(tl.float32)
    tl.store(y_ptr + offs + big * 0, (x * alpha).to(y_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _branch_types_kernel(x_ptr, FLAG: tl.constexpr):
    acc = 0.0
    for i in range(4):
        if FLAG:
            acc = tl.load(x_ptr + i)  # a loop-carried fp32 that becomes an fp16
    tl.store(x_ptr, acc)


def _plan(n=4096, stride=1, big=2**33):
    return Plan((4, 1, 1), (torch.float16, torch.bfloat16), (n, stride, big), (1024, True), 4)


def test_signature_follows_the_launch_order_and_runtime_specialisations():
    sig, consts, attrs = signature(_scale_kernel, _plan())
    assert sig == {"x_ptr": "*fp16", "y_ptr": "*bf16", "n": "i32", "stride": "constexpr", "big": "i64",
                   "alpha": "fp32", "BLOCK": "constexpr", "EVEN": "constexpr"}
    assert consts == {"stride": 1, "BLOCK": 1024, "EVEN": True}
    div16 = [["tt.divisibility", 16]]
    assert attrs == {(0,): div16, (1,): div16, (2,): div16, (4,): div16}
    sig, consts, attrs = signature(_scale_kernel, _plan(n=4095, stride=3))
    assert sig["n"] == sig["stride"] == "i32" and "stride" not in consts and (2,) not in attrs and (3,) not in attrs


def test_a_plan_compiles_for_hopper_without_a_gpu():
    k = compile_plan(_scale_kernel, _plan())
    assert k.asm["cubin"] and ".target sm_90" in k.asm["ptx"]
    assert "ld.global.v4" in k.asm["ptx"] or "ld.global.nc.v4" in k.asm["ptx"]  # unit stride and alignment known
    assert HOPPER == 90


def test_a_plan_compiles_with_its_launch_options():
    """A plan's launch options are compile options (a cooperative grid, a register cap): the binary checked here must
    be the one the launch would get."""
    p = _plan()
    dtypes = (torch.float16, torch.bfloat16)
    plain = compile_plan(_scale_kernel, p)
    coop = compile_plan(_scale_kernel, Plan(p.grid, dtypes, p.ints, p.constexprs, 4,
                                            (("launch_cooperative_grid", True), ("maxnreg", 24))))
    assert plain.metadata.launch_cooperative_grid is False and plain.metadata.maxnreg is None
    assert coop.metadata.launch_cooperative_grid is True and coop.metadata.maxnreg == 24


def test_a_kernel_that_does_not_lower_fails_here():
    with pytest.raises(Exception, match="[Ll]oop-carried|type"):
        compile_plan(_branch_types_kernel, Plan((1, 1, 1), (torch.float16,), (), (True,), 1))


def test_a_plan_that_does_not_fit_the_kernel_is_refused():
    with pytest.raises(ValueError, match="takes 8 parameters"):
        signature(_scale_kernel, Plan((1, 1, 1), (torch.float16,) * 3, (1, 2, 3, 4), (1, 2, 3), 4))
    with pytest.raises(ValueError, match="no Triton pointer"):
        signature(_scale_kernel, Plan((1, 1, 1), (torch.complex64, torch.float16), (1, 2, 3), (1, 2), 4))


def _fake_task(call_candidate, n_rows=2):
    rows = [types.SimpleNamespace(id=f"r{i}", production=True, tensors={}) for i in range(n_rows)]
    adapter = types.SimpleNamespace(output_specs=lambda row, inputs: {}, call_candidate=call_candidate)
    return types.SimpleNamespace(name="fake", rows=rows, load_solution=lambda: None, adapter=adapter)


def test_compile_task_reports_rows_it_cannot_call_and_launches_that_do_not_lower():
    good, bad = LaunchCache(_scale_kernel), LaunchCache(_branch_types_kernel)
    x = torch.empty(4096, dtype=torch.float16, device="meta")

    def call(solution, row, inputs, out):
        if row.id == "r1":
            raise RuntimeError("needs a CUDA tensor")
        good.run(_plan(), (x, x.to(torch.bfloat16)), (2.0,))
        good.run(_plan(), (x, x.to(torch.bfloat16)), (3.0,))  # same launch: compiled once
        bad.run(Plan((1, 1, 1), (torch.float16,), (), (True,), 1), (x,), ())

    rep = compile_task(_fake_task(call))
    assert (rep["rows"], rep["launches"], rep["compiled"]) == (2, 2, 1)
    assert [(u["kernel"], u["row"], u["warps"]) for u in rep["usage"]] == [("_scale_kernel", "r0", 4)]
    assert list(rep["trace_failures"]) == ["r1"] and "needs a CUDA tensor" in rep["trace_failures"]["r1"]
    assert [(k, r) for k, r, _ in rep["compile_failures"]] == [("_branch_types_kernel", "r0")]


@pytest.mark.parametrize("task", [p.name for p in all_task_dirs()])
def test_every_candidate_launch_compiles_for_hopper(task):
    """Each candidate's Triton launches for its production rows lower for sm_90 (what `kda compile` checks)."""
    rep = compile_task(Task.load(task))
    assert rep["launches"] >= 1 and rep["compiled"] == rep["launches"], rep
    assert not rep["trace_failures"] and not rep["compile_failures"], rep


def test_kda_compile_refuses_interpreted_kernels(monkeypatch, capsys):
    from kda.cli import main
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    assert main(["compile", "norm_infer"]) == 2
    assert "TRITON_INTERPRET" in capsys.readouterr().err


@pytest.mark.parametrize("regs, shared, warps, want", [
    (128, 0, 1, (16, 0.25)),      # registers: 4096 a warp
    (64, 33792, 8, (4, 0.5)),     # registers again (shared memory would allow 6)
    (255, 0, 8, (1, 0.125)),      # 255 rounds up to 256 a thread
    (32, 100000, 4, (2, 0.125)),  # shared memory, with 1 KB a CTA for the system
    (32, 0, 4, (16, 1.0)),        # the SM's 64 warps
    (16, 0, 1, (32, 0.5)),        # the SM's 32 CTAs
])
def test_occupancy_takes_the_tightest_sm90_limit(regs, shared, warps, want):
    assert occupancy(regs, shared, warps) == want


def test_resource_usage_reads_the_cubin():
    u = resource_usage(compile_plan(_scale_kernel, _plan()))
    assert 8 <= u["registers"] <= 255 and u["local"] == 0 and u["warps"] == 4 and u["shared"] >= 0


def test_kda_compile_prints_each_launch(capsys):
    from kda.cli import main
    assert main(["compile", "rotary_embedding", "--launches"]) == 0
    out = capsys.readouterr().out
    assert "compiled for sm_90" in out and "each launch" in out and "rotary_embedding" in out
