"""Run a block's arms once and hold each output to the fp32 path: shapes, dtypes, finite values, relative error.

The reference is the same block on the PyTorch path (kda.definition.eager_chains) in fp32: the arm's own weights (already
rounded to the block's dtype) and inputs, upcast, so the only difference left is the arm's arithmetic. The error
of an output is ||arm - ref|| / ||ref|| (RMS over the whole tensor): one number per output that a block of GEMMs,
norms and attention keeps near the dtype's rounding (bf16: about 1e-2) unless a kernel is wrong.
"""
from __future__ import annotations

import copy
import os
from dataclasses import dataclass, field

import torch

from kda.core.errors import KdaError
from kda.e2e.block import BlockDef
from kda.e2e.kernels import kernel_set

CPU_ARMS = ("eager", "compile", "candidate")  # upstream kernels include CUDA and CuTe DSL: GPU only


@dataclass
class ArmResult:
    arm: str
    errors: list[float] = field(default_factory=list)  # relative RMS error per output
    problems: list[str] = field(default_factory=list)  # wrong shape, dtype, non-finite, over tolerance

    @property
    def passed(self) -> bool:
        return not self.problems


def build(block: BlockDef, dims: dict, device: str):
    """The block at `dims` in its dtype, its fp32 twin, and one input set (seeded by block.toml)."""
    dtype = getattr(torch, block.dtype)
    torch.manual_seed(block.data["block"]["seed"])
    model = block.module.Block(dims).to(dtype).eval().to(device)
    ref_model = copy.deepcopy(model).float()
    gen = torch.Generator().manual_seed(block.data["block"]["seed"] + 1)
    inputs = {k: v.to(device) for k, v in block.module.make_inputs(dims, dtype, gen).items()}
    return model, ref_model, inputs


def fresh(inputs: dict) -> dict:
    """A private copy: in-place call sites (qknorm_rope) write into tensors the block derives, never the inputs,
    but an arm must not see what another left."""
    return {k: v.clone() for k, v in inputs.items()}


def upcast(inputs: dict) -> dict:
    return {k: v.float() if v.is_floating_point() else v.clone() for k, v in inputs.items()}


def check_cpu(block: BlockDef, arms: list[str]) -> tuple[dict, list[ArmResult]]:
    """`arms` at the block's CPU sizes; the candidate arm needs TRITON_INTERPRET=1 (set before Triton loads)."""
    for arm in arms:
        if arm not in CPU_ARMS:
            raise KdaError(f"{block.label}: arm {arm!r} does not run on the CPU (there: {', '.join(CPU_ARMS)}); "
                           "the upstream kernels include CUDA and CuTe DSL ones")
        if arm == "candidate" and os.environ.get("TRITON_INTERPRET") != "1":
            raise KdaError(f"{block.label}: the candidate arm runs on the CPU only through Triton's interpreter "
                           "(TRITON_INTERPRET=1; `kda e2e BLOCK --cpu` sets it)")
    dims = block.cpu_dims()
    model, ref_model, inputs = build(block, dims, "cpu")
    with torch.no_grad():
        ref = ref_model(kernel_set(block, "eager"), **upcast(inputs))
        return dims, [_run_arm(block, dims, model, arm, inputs, ref) for arm in arms]


def _run_arm(block: BlockDef, dims: dict, model, arm: str, inputs: dict, ref, fn=None, ks=None) -> ArmResult:
    """`fn`: the callable to check in place of `model` (the timing passes the compiled block it then times); `ks`:
    the arm's kernel set to check (the timing passes the one it then times)."""
    if fn is None:
        fn = torch.compile(model) if arm == "compile" else model
    out = fn(ks if ks is not None else kernel_set(block, arm), **fresh(inputs))
    return judge(block, dims, arm, out, ref)


def judge(block: BlockDef, dims: dict, arm: str, out, ref) -> ArmResult:
    """One block call's outputs against the fp32 path's: shapes, dtypes, finiteness, relative error."""
    res = ArmResult(arm)
    want = block.module.output_shapes(dims)
    dtype = getattr(torch, block.dtype)
    if len(out) != len(want):
        res.problems.append(f"{len(out)} outputs, expected {len(want)}")
        return res
    for i, (o, shape, r) in enumerate(zip(out, want, ref)):
        if tuple(o.shape) != tuple(shape) or o.dtype != dtype:
            res.problems.append(f"output {i}: {tuple(o.shape)} {o.dtype}, expected {tuple(shape)} {dtype}")
            continue
        if not torch.isfinite(o).all():
            res.problems.append(f"output {i}: non-finite values")
            continue
        err = float((o.float() - r).norm() / r.norm().clamp_min(1e-30))
        res.errors.append(err)
        if err > block.data["block"]["tolerance"]:
            res.problems.append(f"output {i}: relative error {err:.3g} > tolerance {block.data['block']['tolerance']}")
    return res
