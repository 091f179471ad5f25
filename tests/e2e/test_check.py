"""The CPU tier: every block builds at reduced sizes, its eager arm matches the fp32 path with the right shapes, and
a broken kernel at one site is caught; the VAE stages' call sites get the layouts the wheel passes. The candidate
arms run through Triton's interpreter in a subprocess (as `kda e2e BLOCK... --cpu`), so this process never imports
Triton kernels in interpreter mode."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest
import torch

from kda.core.paths import repo_root
from kda.e2e import check
from kda.e2e.block import all_blocks, load_block
from kda.e2e.kernels import KernelSet, kernel_set


@pytest.mark.parametrize("name", all_blocks())
def test_eager_arm_matches_the_fp32_path(name):
    block = load_block(name)
    dims, (res,) = check.check_cpu(block, ["eager"])
    assert res.passed, res.problems
    assert len(res.errors) == len(block.module.output_shapes(dims))


# Per block, one call site broken so that it drops its work: the gated residual add returning its residual alone
# (qwen_image), a GroupNorm + SiLU returning its input (the VAE stages). Every block needs an entry.
DROPS = {
    "qwen_image": ("img_mul_add", lambda x, scale, shift, scale_constant=1.0: shift.clone()),
    "hunyuanvae_up_block": ("resnet1_norm2", lambda x, norm, activation, out=None: x.clone()),
    "ltx2_latent_upsampler": ("res2_norm1", lambda x, norm, activation, out=None: x.clone()),
}


@pytest.mark.parametrize("name", all_blocks())
def test_a_site_that_drops_its_work_is_caught(monkeypatch, name):
    """The block's output error leaves the tolerance when one site drops its work."""
    block = load_block(name)
    site, drop = DROPS[name]
    real = check.kernel_set

    def broken(b, arm):
        ks = real(b, arm)
        if arm != "eager" or not broken.armed:
            return ks
        return KernelSet(arm, dict(ks._fns, **{site: drop}), ks.sources)

    broken.armed = False
    monkeypatch.setattr(check, "kernel_set", broken)
    dims = block.cpu_dims()
    model, ref_model, inputs = check.build(block, dims, "cpu")
    with torch.no_grad():
        ref = ref_model(kernel_set(block, "eager"), **check.upcast(inputs))
        broken.armed = True
        res = check._run_arm(block, dims, model, "eager", inputs, ref)
    assert not res.passed and "relative error" in res.problems[0]


def _layouts(block, dims) -> dict:
    """site -> (shape, 'contiguous' | 'cl3d' | 'other') of the x each call site receives, on the eager arm."""
    seen = {}

    def spy(site, fn):
        def call(x, *args, **kwargs):
            layout = ("contiguous" if x.is_contiguous() else
                      "cl3d" if x.is_contiguous(memory_format=torch.channels_last_3d) else "other")
            seen[site] = (tuple(x.shape), layout)
            return fn(x, *args, **kwargs)
        return call

    ks = kernel_set(block, "eager")
    model, _, inputs = check.build(block, dims, "cpu")
    with torch.no_grad():
        model(KernelSet("eager", {n: spy(n, f) for n, f in ks._fns.items()}, ks.sources), **inputs)
    return seen


@pytest.mark.parametrize("up_block, cl3d", [(3, 1), (0, 0)])
def test_hunyuanvae_sites_get_the_layouts_the_wheel_passes(up_block, cl3d):
    """norm1 after hidden_states.contiguous(); norm2 and conv_norm_out on conv outputs, channels_last_3d under
    channels_last_3d conv weights (as cuDNN returns them); conv_norm_out only after the final up block."""
    block = load_block("hunyuanvae_up_block")
    dims = dict(block.cpu_dims(), up_block=up_block, out_cl3d=cl3d)
    seen = _layouts(block, dims)
    conv_out = "cl3d" if cl3d else "contiguous"
    want = {f"resnet{i}_{n}": "contiguous" if n == "norm1" else conv_out for i in range(3) for n in ("norm1", "norm2")}
    if up_block == 3:
        want["conv_norm_out"] = conv_out
    assert {site: layout for site, (_, layout) in seen.items()} == want
    assert seen["resnet0_norm1"][0][1] == dims["x_C"] and seen["resnet1_norm1"][0][1] == dims["out_C"]


def test_ltx2_upsampler_sites_get_contiguous_inputs_before_and_after_the_upsampler():
    block = load_block("ltx2_latent_upsampler")
    dims = block.cpu_dims()
    seen = _layouts(block, dims)
    assert {layout for _, layout in seen.values()} == {"contiguous"} and len(seen) == 9
    B, M, F, H, W = (dims[n] for n in ("batch", "mid_channels", "latent_frames", "latent_height", "latent_width"))
    assert seen["res3_norm1"][0] == (B, M, F, H, W) and seen["post0_norm1"][0] == (B, M, F, 2 * H, 2 * W)


def test_the_candidate_arm_refuses_to_run_without_the_interpreter(monkeypatch):
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    with pytest.raises(Exception, match="TRITON_INTERPRET=1"):
        check.check_cpu(load_block("qwen_image"), ["candidate"])


def test_upstream_does_not_run_on_the_cpu():
    with pytest.raises(Exception, match="does not run on the CPU"):
        check.check_cpu(load_block("qwen_image"), ["upstream"])


def test_kda_e2e_cpu_runs_the_candidate_through_the_interpreter():
    """Every block marked interpret = true end to end through the CLI, in one process (the import costs more than
    the small blocks): eager and candidate both PASS for each (about 6 s)."""
    names = [n for n in all_blocks() if load_block(n).data["block"]["interpret"]]
    assert "qwen_image" in names
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    proc = subprocess.run([sys.executable, "-m", "kda", "e2e", *names, "--cpu"], cwd=repo_root(), env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    for name in names:
        assert f"{name}: follows " in proc.stdout
    assert proc.stdout.count("eager      PASS") == proc.stdout.count("candidate  PASS") == len(names), proc.stdout
    assert max(len(line) for line in proc.stdout.splitlines()) <= 80
