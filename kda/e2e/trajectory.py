"""A stack of a block's copies under a flow-matching sampler: how far each arm's final latent drifts from the fp32
path over a whole denoising trajectory (issue 40: a per-step rounding difference grows over the steps; SGLang's
kernel README cites a single-pass norm fusion that moved a 50-step trajectory to 18.83 dB).

The stand-in model is `depth` copies of the block (each with its own random weights), chained through the outputs
`[trajectory] carry` names; its latent output is taken as the velocity (no trained head: the figure compares arms
on one dynamic, it is not a sample's quality). The sampler is the flow-matching Euler step SGLang's DiT pipelines
use: sigmas from 1 to 0 in `steps` equal steps, x <- x + (sigma_next - sigma) * v, with the latent kept in fp32
between steps and cast to the block's dtype for each call, as the pipelines do. Inputs other than the carried ones
(text, time embedding, RoPE tables) are the same at every step.

Each arm runs the same stack (the same weights, the same first latent) on its kernels; the fp32 path is the eager
PyTorch path of the fp32 twins. PSNR of an arm's final latent against the fp32 one, with the fp32 latent's largest
magnitude as the peak: 10 log10(peak^2 / MSE), infinite when equal.
"""
from __future__ import annotations

import copy
import math

import torch

from kda.core.errors import KdaError
from kda.e2e.block import BlockDef
from kda.e2e.check import upcast
from kda.e2e.kernels import after_arm, check_upstream, kernel_set, watch_upstream

STEPS, DEPTH = 50, 4
MAX_PSNR_DROP_DB = 0.5  # issue 40: a close candidate may lose at most this much against upstream's trajectory


def spec(block: BlockDef) -> dict:
    t = block.data.get("trajectory") or {}
    if not t:
        raise KdaError(f"{block.label}: no [trajectory] in block.toml (which input is the latent, which outputs "
                       "carry to the next block): not a block a sampler steps")
    if t["latent"] not in t["carry"]:
        raise KdaError(f"{block.label}: [trajectory] latent {t['latent']!r} is not among carry "
                       f"({', '.join(t['carry'])})")
    return t


def pick_workloads(block: BlockDef, workloads: list, ids: list[str] | None) -> list:
    """The production workloads a GPU trajectory runs: those named, else the smallest one (by the product of its
    sizes). 4 blocks x 50 steps x 4 arms is 800 block calls, the fp32 path's at the largest video sizes seconds
    each: a whole sweep of sizes would not fit a device call, and the drift is a property of the numerics."""
    if ids:
        by_id = {w.id: w for w in workloads}
        unknown = [i for i in ids if i not in by_id]
        if unknown:
            raise KdaError(f"{block.label}: no production workload {', '.join(map(repr, unknown))}; the block has "
                           f"{', '.join(by_id)}")
        return [by_id[i] for i in dict.fromkeys(ids)]

    def size(w) -> int:
        return math.prod(v for v in w.dims.values() if isinstance(v, int) and not isinstance(v, bool) and v > 0)

    return [min(workloads, key=size)]


def stack(block: BlockDef, dims: dict, depth: int, device: str):
    """`depth` copies of the block in its dtype, each seeded apart, and their fp32 twins."""
    dtype = getattr(torch, block.dtype)
    models, twins = [], []
    for i in range(depth):
        torch.manual_seed(block.data["block"]["seed"] + 1000 * (i + 1))
        m = block.module.Block(dims).to(dtype).eval().to(device)
        models.append(m)
        twins.append(copy.deepcopy(m).float())
    return models, twins


def sample(models, k, inputs: dict, t: dict, steps: int, dtype: torch.dtype) -> torch.Tensor:
    """The sampler's final latent (fp32) for one arm: `inputs` in the arm's dtype, the latent stepped in fp32."""
    latent, carry = t["latent"], t["carry"]
    x = inputs[latent].float()
    sigmas = [1.0 - i / steps for i in range(steps + 1)]
    for i in range(steps):
        h = dict(inputs)
        h[latent] = x.to(dtype)
        for m in models:
            out = m(k, **h)
            h = {**h, **{name: out[j] for name, j in carry.items()}}
        x = x + (sigmas[i + 1] - sigmas[i]) * h[latent].float()
    return x


def psnr(x: torch.Tensor, ref: torch.Tensor) -> float:
    mse = float(((x - ref) ** 2).mean())
    if mse == 0.0:
        return math.inf
    peak = float(ref.abs().max())
    return 10.0 * math.log10(peak * peak / mse)


def run(block: BlockDef, arms: list[str], dims: dict, device: str, steps: int = STEPS, depth: int = DEPTH,
        inputs: dict | None = None) -> dict:
    """Each arm's final-latent PSNR against the fp32 trajectory: {"psnr": {arm: dB}, "steps", "depth", "finite"}."""
    t = spec(block)
    dtype = getattr(torch, block.dtype)
    models, twins = stack(block, dims, depth, device)
    if inputs is None:
        gen = torch.Generator().manual_seed(block.data["block"]["seed"] + 1)
        inputs = {k: v.to(device) for k, v in block.module.make_inputs(dims, dtype, gen).items()}
    out = {"steps": steps, "depth": depth, "psnr": {}, "finite": {}}
    # upstream's modules watched as in a timing run: a candidate that made upstream's numbers worse would pass the
    # rule it is held to against upstream (docs/e2e.md)
    watch = watch_upstream(block, arms, kernel_set)
    with torch.no_grad():
        ref = sample(twins, kernel_set(block, "eager"), upcast(inputs), t, steps, torch.float32)
        for arm in arms:
            k = kernel_set(block, arm)
            check_upstream(watch, block, f"once the {arm} arm's kernels were loaded")
            x = sample(models, k, inputs, t, steps, dtype)
            after_arm(watch, block, arm, f"while the {arm} arm's trajectory ran")
            out["finite"][arm] = bool(torch.isfinite(x).all())
            out["psnr"][arm] = psnr(x, ref) if out["finite"][arm] else -math.inf
    return out


def verdict(result: dict, against: str = "upstream") -> str | None:
    """Why the candidate fails the trajectory rule against `against`'s PSNR, or None."""
    p = result["psnr"]
    if "candidate" not in p or against not in p:
        return None
    if not result["finite"]["candidate"]:
        return "the candidate's trajectory went non-finite"
    drop = p[against] - p["candidate"]
    if drop > MAX_PSNR_DROP_DB:
        return (f"the candidate's final latent is {drop:.2f} dB further from the fp32 trajectory than {against}'s "
                f"({p['candidate']:.2f} vs {p[against]:.2f} dB; at most {MAX_PSNR_DROP_DB} dB)")
    return None


def write(block: BlockDef, rows: list[dict], gpu: str, slug: str, commit_state: dict) -> Path:
    """diffusion/e2e/<block>/results/trajectory/<gpu>.jsonl.gz: provenance, one row per workload."""
    from datetime import datetime, timezone

    from kda.harness import results_file

    path = block.path / "results" / "trajectory" / results_file.file_name(slug)
    path.parent.mkdir(parents=True, exist_ok=True)
    prov = {"type": "provenance", "block": block.name, "gpu": gpu, "gpu_slug": slug, **commit_state,
            "torch": torch.__version__, "time_utc": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "sampler": "flow-matching Euler, sigmas 1 -> 0", "max_psnr_drop_db": MAX_PSNR_DROP_DB}
    return results_file.write(path, [prov, *rows, {"type": "summary", "rows": len(rows)}])
