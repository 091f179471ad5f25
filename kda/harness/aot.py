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

from kda.runtime.lean_launch import Plan

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
    return triton.compile(src, target=GPUTarget("cuda", arch, 32),
                          options={"num_warps": plan.num_warps, **dict(plan.options)})


def trace_launches(task, rows=None):
    """Every distinct Triton launch the candidate of `task` makes for `rows` (default: the production rows), found by
    calling it through the task's adapter on inputs of the meta device (shapes, strides and dtypes, no memory) with
    LaunchCache recording instead of launching. Paths a candidate takes only on a CUDA device (its CUDA C++ kernels)
    are not seen. Returns ({(kernel, plan key): (plan, first row id)}, {row id: error text} for rows it could not
    call)."""
    from unittest import mock

    from kda.runtime import lean_launch
    from kda.definition.workloads import build_inputs

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


def compile_task(task, arch: int = HOPPER, progress=None, with_usage: bool = True):
    """trace_launches(task), then compile_plan of each launch for sm_`arch`. Returns a dict: rows, launches,
    compiled, trace_failures {row: error}, compile_failures [(kernel name, first row, error)], and for sm_90 the
    usage of each compiled launch (resource_usage plus its theoretical occupancy). `progress(i, n)` is called after
    each compile."""
    launches, trace_failures = trace_launches(task)
    compiled, compile_failures, usage = 0, [], []
    for i, ((kernel, _), (plan, row_id)) in enumerate(launches.items()):
        name = getattr(kernel, "__name__", str(kernel))
        try:
            k = compile_plan(kernel, plan, arch)
            compiled += 1
        except Exception as e:  # Triton's code generator and ptxas raise several types
            compile_failures.append((name, row_id, f"{type(e).__name__}: {e}"))
        else:
            if arch == HOPPER and with_usage:
                u = resource_usage(k)
                usage.append({"kernel": name, "row": row_id, **u,
                              "occupancy": occupancy(u["registers"], u["shared"], u["warps"])[1]})
        if progress is not None:
            progress(i + 1, len(launches))
    return {"rows": sum(r.production for r in task.rows), "launches": len(launches), "compiled": compiled,
            "trace_failures": trace_failures, "compile_failures": compile_failures, "usage": usage}


# sm_90 (H100, H200) limits per SM, from NVIDIA's CUDA occupancy calculator: 64K 32-bit registers allocated per warp in
# units of 256, 64 warps, 32 CTAs, 228 KB of shared memory of which each CTA also takes 1 KB for the system.
_SM90 = {"registers": 65536, "register_unit": 256, "warps": 64, "ctas": 32, "shared": 233472, "cta_shared": 1024}


def resource_usage(compiled) -> dict:
    """Registers per thread, local memory (spills) and static shared bytes of a CompiledKernel's cubin, read with
    the cuobjdump that ships beside Triton's ptxas; the dynamic shared memory its launch asks for; the warps."""
    import re
    import subprocess
    import tempfile
    from pathlib import Path

    from triton.backends.nvidia.compiler import get_ptxas

    tool = Path(get_ptxas(HOPPER).path).with_name("cuobjdump")
    with tempfile.TemporaryDirectory() as tmp:
        cubin = Path(tmp) / "kernel.cubin"
        cubin.write_bytes(compiled.asm["cubin"])
        text = subprocess.run([str(tool), "-res-usage", str(cubin)], capture_output=True, text=True, check=True).stdout
    m = re.search(r"REG:(\d+) STACK:(\d+) SHARED:(\d+) LOCAL:(\d+)", text)
    if m is None:
        raise RuntimeError(f"cuobjdump -res-usage printed no resource line:\n{text}")
    regs, stack, static_shared, local = (int(v) for v in m.groups())
    return {"registers": regs, "stack": stack, "local": local, "warps": compiled.metadata.num_warps,
            "shared": static_shared + compiled.metadata.shared}


def occupancy(registers: int, shared: int, warps: int, limits: dict = _SM90) -> tuple[int, float]:
    """(CTAs per SM, theoretical occupancy as a fraction of the SM's warps) of a kernel using `registers` per
    thread, `shared` bytes per CTA and `warps` per CTA, the smallest of the register, shared-memory, warp and CTA
    limits (the occupancy calculator's arithmetic; what runs is what ncu's achieved occupancy measures)."""
    unit = limits["register_unit"]
    per_warp = -(-max(registers, 1) * 32 // unit) * unit
    by_regs = limits["registers"] // (per_warp * warps)
    by_shared = limits["shared"] // (shared + limits["cta_shared"])
    ctas = min(by_regs, by_shared, limits["warps"] // warps, limits["ctas"])
    return ctas, ctas * warps / limits["warps"]
