"""The CPU tier: every block builds at reduced sizes, its eager arm matches the fp32 path with the right shapes, and
a broken kernel at one site is caught. The small block's candidate arm runs through Triton's interpreter in a
subprocess (as `kda e2e BLOCK --cpu`), so this process never imports Triton kernels in interpreter mode."""
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


# One site per block whose work is dropped: the gated residual add returning its residual alone (qwen_image), the
# tanh-gated FFN residual returning its residual (zimage), the video query's RoPE returning q unrotated (ltx2).
DROPS = {
    "qwen_image": ("img_mul_add", lambda x, scale, shift, scale_constant=1.0: shift.clone()),
    "zimage": ("ffn_norm2", lambda x, weight, bias, scale, shift, norm_type, eps=1e-5: shift.clone()),
    "ltx2": ("video_q_rope", lambda x, cos, sin: x.clone()),
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
        fns = dict(ks._fns, **{site: drop})
        return KernelSet(arm, fns, ks.sources)

    broken.armed = False
    monkeypatch.setattr(check, "kernel_set", broken)
    dims = block.cpu_dims()
    model, ref_model, inputs = check.build(block, dims, "cpu")
    with torch.no_grad():
        ref = ref_model(kernel_set(block, "eager"), **check.upcast(inputs))
        broken.armed = True
        res = check._run_arm(block, dims, model, "eager", inputs, ref)
    assert not res.passed and "relative error" in res.problems[0]


def test_the_candidate_arm_refuses_to_run_without_the_interpreter(monkeypatch):
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    with pytest.raises(Exception, match="TRITON_INTERPRET=1"):
        check.check_cpu(load_block("qwen_image"), ["candidate"])


def test_upstream_does_not_run_on_the_cpu():
    with pytest.raises(Exception, match="does not run on the CPU"):
        check.check_cpu(load_block("qwen_image"), ["upstream"])


# qwen_image runs in every default run; the others are slow cases, sampled there (the first listed always runs, so
# the cheapest, zimage, comes first) and all run under `-m slow`.
CLI_ORDER = ("qwen_image", "zimage", "ltx2")


@pytest.mark.parametrize("name", [n if n == "qwen_image" else pytest.param(n, marks=pytest.mark.slow)
                                  for n in sorted(all_blocks(), key=lambda n: (CLI_ORDER + (n,)).index(n))])
def test_kda_e2e_cpu_runs_the_candidate_through_the_interpreter(name):
    """Each block end to end through the CLI: eager and candidate both PASS (qwen_image about 4 s, zimage about
    2 s, ltx2 about 3 s)."""
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    proc = subprocess.run([sys.executable, "-m", "kda", "e2e", name, "--cpu"], cwd=repo_root(), env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "eager      PASS" in proc.stdout and "candidate  PASS" in proc.stdout
    assert max(len(line) for line in proc.stdout.splitlines()) <= 80
