"""kda/e2e/trajectory.py on a CPU: the sampler over a stack of a block's copies, PSNR against the fp32 trajectory,
and the rule (the candidate at most 0.5 dB below upstream), with a fake arm whose per-call error is small but
biased, which the trajectory exposes."""
import math

import pytest
import torch

from kda.core.errors import KdaError
from kda.e2e import trajectory as T
from kda.e2e.block import load_block
from kda.e2e.kernels import KernelSet, kernel_set

DIT_BLOCKS = ["wan", "qwen_image", "hunyuanvideo_double", "hunyuanvideo_single", "zimage", "ltx2"]


def test_psnr_is_infinite_for_equal_latents_and_falls_20_db_per_tenfold_error():
    ref = torch.tensor([1.0, -2.0, 0.5, 2.0])
    assert T.psnr(ref.clone(), ref) == math.inf
    a, b = T.psnr(ref + 0.01, ref), T.psnr(ref + 0.1, ref)
    assert a == pytest.approx(10 * math.log10(4.0 / 1e-4)) and a - b == pytest.approx(20.0)


def test_the_rule_allows_half_a_db_against_upstream_and_names_the_gap():
    ok = {"psnr": {"upstream": 30.0, "candidate": 29.6}, "finite": {"upstream": True, "candidate": True}}
    assert T.verdict(ok) is None
    bad = {"psnr": {"upstream": 30.0, "candidate": 29.0}, "finite": {"upstream": True, "candidate": True}}
    assert "1.00 dB further" in T.verdict(bad)
    nan = {"psnr": {"upstream": 30.0, "candidate": -math.inf}, "finite": {"upstream": True, "candidate": False}}
    assert "non-finite" in T.verdict(nan)


@pytest.mark.parametrize("name", DIT_BLOCKS)
def test_every_dit_block_steps_its_latent_through_a_stack_on_the_pytorch_path(name):
    """Two copies, two steps at the CPU sizes: the carried outputs feed the next block with the right shapes, and
    the bf16 eager path stays finite and close to the fp32 trajectory."""
    block = load_block(name)
    r = T.run(block, ["eager"], block.cpu_dims(), "cpu", steps=2, depth=2)
    assert r["finite"]["eager"] and 25.0 < r["psnr"]["eager"] < math.inf, r


def test_a_biased_arm_close_on_one_call_loses_over_the_trajectory_and_fails_the_rule(monkeypatch):
    """The fake: the eager path with a 0.2% bias added to every site's output (a per-call error an output check
    with bf16 tolerances would pass); as `candidate` against the honest path as `upstream`."""
    block = load_block("wan")
    real = kernel_set

    def biased(block, arm):
        ks = real(block, "eager")
        if arm != "candidate":
            return KernelSet(arm, ks._fns, ks.sources)

        def bias(fn):
            def call(*args, **kwargs):
                out = fn(*args, **kwargs)
                if isinstance(out, tuple):
                    return tuple(o * 1.002 if torch.is_tensor(o) and o.is_floating_point() else o for o in out)
                return out * 1.002 if torch.is_tensor(out) and out.is_floating_point() else out
            return call
        return KernelSet(arm, {s: bias(f) for s, f in ks._fns.items()}, ks.sources)

    monkeypatch.setattr(T, "kernel_set", biased)
    r = T.run(block, ["upstream", "candidate"], block.cpu_dims(), "cpu", steps=4, depth=2)
    assert r["psnr"]["upstream"] - r["psnr"]["candidate"] > T.MAX_PSNR_DROP_DB, r
    assert "further from the fp32 trajectory than upstream" in T.verdict(r)


def test_a_block_a_sampler_does_not_step_is_refused_before_anything_is_built():
    with pytest.raises(KdaError, match="no \\[trajectory\\]"):
        T.run(load_block("hunyuanvae_up_block"), ["eager"], {}, "cpu")


def test_the_cli_runs_a_trajectory_on_the_cpu_within_80_columns(capsys, monkeypatch):
    from kda import cli

    # `--cpu` sets TRITON_INTERPRET=1 in this process; monkeypatch takes it away again afterwards, or every later
    # test of the session would see Triton's interpreter (the first CI run of this test failed five others so)
    monkeypatch.setenv("TRITON_INTERPRET", "1")

    assert cli.main(["e2e", "zimage", "--cpu", "--trajectory", "--steps", "2", "--depth", "1",
                     "--skip-arm", "candidate"]) == 0
    out = capsys.readouterr().out
    assert "zimage cpu sizes: 1 blocks x 2 steps, arms eager" in out and "PSNR" in out
    assert all(len(line) <= 80 for line in out.splitlines())


def test_a_gpu_trajectory_takes_the_smallest_workload_unless_named():
    """800 block calls at wan's 75,600 tokens (the fp32 path's attention seconds each) would not fit a device call:
    by default the smallest production workload, else the named ones; an unknown name lists the block's."""
    block = load_block("wan")
    ws = block.workloads()
    assert [w.id for w in T.pick_workloads(block, ws, None)] == ["wan_ti2v_s18144"]
    assert [w.id for w in T.pick_workloads(block, ws, ["wan_t2v_s37800", "wan_t2v_s37800"])] == ["wan_t2v_s37800"]
    with pytest.raises(KdaError, match="no production workload 'wan_8k'.*wan_t2v_720p_81f"):
        T.pick_workloads(block, ws, ["wan_8k"])


def test_workload_is_refused_where_it_would_be_ignored(monkeypatch, capsys):
    from kda import cli

    monkeypatch.setenv("TRITON_INTERPRET", "1")
    for argv in (["e2e", "wan", "--workload", "wan_ti2v_s18144"],
                 ["e2e", "wan", "--cpu", "--trajectory", "--workload", "wan_ti2v_s18144"]):
        assert cli.main(argv) != 0
        assert "--workload picks a GPU trajectory" in capsys.readouterr().err
