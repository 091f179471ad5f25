"""Ahead-of-time compilation of a candidate's Triton launches for a GPU architecture, on a machine without one.

The interpreter (TRITON_INTERPRET=1) runs a kernel's Python on the CPU and checks its numbers, but it never lowers
the kernel: a change the interpreter accepts can still fail Triton's code generator or ptxas on the GPU machine
(a value whose type differs between branches, a loop-carried value that changes type, too much shared memory), and
that failure would cost a benchmark call. Triton compiles for any target it is told of, with the ptxas its wheel
ships, so CI compiles the `Plan`s a candidate builds for its production rows for sm_90 and fails there instead.

Pointers are taken as 16-byte aligned and integers as the plan keyed them (equal to 1, divisible by 16, 32 or 64
bits): the specialisations Triton's launcher derives at run time, so the code compiled here is the code a GPU run
builds for aligned tensors.
"""
import torch
import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource

from kda.lean_launch import Plan

_POINTER = {torch.float16: "*fp16", torch.bfloat16: "*bf16", torch.float32: "*fp32", torch.float64: "*fp64",
            torch.int8: "*i8", torch.uint8: "*u8", torch.int16: "*i16", torch.int32: "*i32", torch.int64: "*i64",
            torch.bool: "*i1"}
HOPPER = 90


def signature(kernel, plan: Plan) -> tuple[dict, dict, dict]:
    """(signature, constexprs, attrs) of `kernel` launched by `plan` the way `LaunchCache` launches it: the tensors,
    the integers, the floats (whatever parameters are left) and the constexprs, in that order."""
    names = list(kernel.arg_names)
    dtypes, int_keys = plan.key[0], plan.key[1]
    n_t, n_i, n_c = len(dtypes), len(int_keys), len(plan.constexprs)
    n_f = len(names) - n_t - n_i - n_c
    if n_f < 0:
        raise ValueError(f"{kernel.__name__} takes {len(names)} parameters; the plan passes {n_t} tensors, {n_i} "
                         f"integers and {n_c} constexprs")
    sig, consts, attrs = {}, {}, {}
    for i, (name, dt) in enumerate(zip(names, dtypes)):
        if dt not in _POINTER:
            raise ValueError(f"{kernel.__name__}: parameter {name} is a tensor of {dt}, which has no Triton pointer")
        sig[name] = _POINTER[dt]
        attrs[(i,)] = [["tt.divisibility", 16]]
    for i, (name, (one, div16, fits32)) in enumerate(zip(names[n_t:], int_keys), start=n_t):
        if one:  # Triton's launcher makes an integer equal to 1 a constant (a unit stride: contiguous accesses)
            sig[name], consts[name] = "constexpr", 1
            continue
        sig[name] = "i32" if fits32 else "i64"
        if div16:
            attrs[(i,)] = [["tt.divisibility", 16]]
    for name in names[n_t + n_i:n_t + n_i + n_f]:
        sig[name] = "fp32"
    for name, value in zip(names[n_t + n_i + n_f:], plan.constexprs):
        sig[name] = "constexpr"
        consts[name] = value
    return sig, consts, attrs


def compile_plan(kernel, plan: Plan, arch: int = HOPPER):
    """Compile `kernel` as `plan` launches it, for sm_`arch`, through ptxas: the CompiledKernel (its `asm` holds
    ttgir, ptx and cubin). Raises what Triton raises when the kernel does not lower."""
    sig, consts, attrs = signature(kernel, plan)
    src = ASTSource(fn=kernel, signature=sig, constexprs=consts, attrs=attrs)
    return triton.compile(src, target=GPUTarget("cuda", arch, 32), options={"num_warps": plan.num_warps})


def trace_launches(task, rows=None):
    """Every distinct Triton launch the candidate of `task` makes for `rows` (default: the production rows), found by
    calling it through the task's adapter on inputs of the meta device (shapes, strides and dtypes, no memory) with
    LaunchCache recording instead of launching. Paths a candidate takes only on a CUDA device (its CUDA C++ kernels)
    are not seen. Returns ({(kernel, plan key): (plan, first row id)}, {row id: error text} for rows it could not
    call)."""
    from unittest import mock

    from kda import lean_launch
    from kda.workloads import build_inputs

    rows = [r for r in task.rows if r.production] if rows is None else rows
    solution, adapter = task.load_solution(), task.adapter
    launches, failures = {}, {}
    current = [None]

    def record(cache, plan, tensors, floats):
        launches.setdefault((cache.kernel, plan.key), (plan, current[0]))

    with mock.patch.object(lean_launch.LaunchCache, "run", record), torch.no_grad():
        for row in rows:
            current[0] = row.id
            try:
                inputs = build_inputs(row, "meta")
                specs = adapter.output_specs(row, inputs)
                out = {k: torch.empty(s[0], dtype=s[1], device="meta") for k, s in specs.items()}
                adapter.call_candidate(solution, row, inputs, out)
            except Exception as e:  # a row the candidate cannot take on meta tensors: reported, not fatal
                failures[row.id] = f"{type(e).__name__}: {e}"
    return launches, failures


def compile_task(task, arch: int = HOPPER, progress=None):
    """trace_launches(task), then compile_plan of each launch for sm_`arch`. Returns a dict: rows, launches,
    compiled, trace_failures {row: error}, compile_failures [(kernel name, first row, error)]. `progress(i, n)` is
    called after each compile."""
    launches, trace_failures = trace_launches(task)
    compiled, compile_failures = 0, []
    for i, ((kernel, _), (plan, row_id)) in enumerate(launches.items()):
        try:
            compile_plan(kernel, plan, arch)
            compiled += 1
        except Exception as e:  # Triton's code generator and ptxas raise several types
            compile_failures.append((getattr(kernel, "__name__", str(kernel)), row_id, f"{type(e).__name__}: {e}"))
        if progress is not None:
            progress(i + 1, len(launches))
    return {"rows": sum(r.production for r in task.rows), "launches": len(launches), "compiled": compiled,
            "trace_failures": trace_failures, "compile_failures": compile_failures}
