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


# One site per block whose work is dropped: the gated residual add returning its residual alone (qwen_image, wan),
# the tanh-gated FFN residual returning its residual (zimage), a RoPE site returning q as it came (ltx2,
# hunyuanvideo_double), a QK RMSNorm returning its input unnormalised (hunyuanvideo_single), a GroupNorm +
# SiLU returning its input (the VAE stages).
DROPS = {
    "qwen_image": ("img_mul_add", lambda x, scale, shift, scale_constant=1.0: shift.clone()),
    "zimage": ("ffn_norm2", lambda x, weight, bias, scale, shift, norm_type, eps=1e-5: shift.clone()),
    "ltx2": ("video_q_rope", lambda x, cos, sin: x.clone()),
    "hunyuanvideo_double": ("img_q_rope", lambda x, cos, sin, interleaved=False: x.clone()),
    "hunyuanvideo_single": ("q_norm", lambda x, w, eps=1e-6: x.clone()),
    "wan": ("mlp_residual", lambda x, scale, shift, scale_constant=1.0: shift.clone()),
    "hunyuanvae_up_block": ("resnet1_norm2", lambda x, norm, activation, out=None: x.clone()),
    "ltx2_latent_upsampler": ("res2_norm1", lambda x, norm, activation, out=None: x.clone()),
}


def test_every_block_has_a_dropped_site_check():
    assert set(DROPS) == set(all_blocks())


@pytest.mark.parametrize("name", sorted(DROPS))
def test_a_site_that_drops_its_work_is_caught(monkeypatch, name):
    """A site's work dropped: the block's output error leaves the tolerance."""
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
    assert not res.passed and any("relative error" in p for p in res.problems), (res.errors, res.problems)


def test_wan_per_token_modulation_matches_the_fp32_path():
    """TI2V-5B's form (temb [B, S, 6, D]: per-token fp32 chunks, a non-contiguous gate into MulAdd) at CPU sizes."""
    block = load_block("wan")
    block.data["cpu"] = dict(block.data["cpu"], per_token_mod=1)
    dims, (res,) = check.check_cpu(block, ["eager"])
    assert res.passed, res.problems


def test_eager_chains_of_the_hunyuanvideo_kernels_match_their_tasks_oracles():
    """The eager arm and the fp32 reference share the eager chains (kda.definition.eager_chains), so each path is held to its task's oracle here."""
    from types import SimpleNamespace

    from kda.definition.task import Task, load_module
    from kda.definition import eager_chains

    g = torch.Generator().manual_seed(7)
    x = torch.randn(1, 6, 2, 128, generator=g).to(torch.bfloat16)
    ang = torch.rand(6, 64, generator=g) * 6
    rope = load_module(Task.load("rotary_embedding").path / "oracle.py", "e2e_rope_oracle")
    row = SimpleNamespace(function="apply_rotary_embedding", scalars={"interleaved": False}, id="t")
    want = rope.reference(row, {"x": x, "cos": ang.cos(), "sin": ang.sin()})["out"]
    got = eager_chains.apply_rotary_embedding(x, ang.cos(), ang.sin(), False)
    assert got.dtype == x.dtype and torch.allclose(got.float(), want, atol=2e-2, rtol=1e-2)

    rms = load_module(Task.load("norm_infer").path / "oracle.py", "e2e_rms_oracle")
    x2, w = torch.randn(12, 128, generator=g).to(torch.bfloat16), (1 + 0.1 * torch.randn(128, generator=g))
    row = SimpleNamespace(function="triton_one_pass_rms_norm", scalars={"eps": 1e-6}, id="t")
    want = rms.reference(row, {"x": x2, "w": w.to(torch.bfloat16)})["y"]
    got = eager_chains.triton_one_pass_rms_norm(x2, w.to(torch.bfloat16), 1e-6)
    assert got.dtype == x2.dtype and torch.allclose(got.float(), want, atol=3e-2, rtol=1e-2)


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


INTERPRETED = sorted(all_blocks(), key=lambda n: n != "qwen_image")  # qwen_image first: the case always run


@pytest.mark.slow
@pytest.mark.parametrize("name", [n for n in INTERPRETED if load_block(n).data["block"]["interpret"]])
def test_kda_e2e_cpu_runs_the_candidate_through_the_interpreter(name):
    """Each block marked interpret = true end to end through the CLI: eager and candidate both PASS (about 4-5 s
    each; the default run keeps qwen_image and a sample of the others)."""
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    proc = subprocess.run([sys.executable, "-m", "kda", "e2e", name, "--cpu"], cwd=repo_root(), env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"{name}: follows " in proc.stdout
    assert proc.stdout.count("eager      PASS") == proc.stdout.count("candidate  PASS") == 1, proc.stdout
    assert max(len(line) for line in proc.stdout.splitlines()) <= 80
