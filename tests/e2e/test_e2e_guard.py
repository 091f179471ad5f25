"""The end-to-end tier runs every arm of a block in one process, candidates beside upstream's and 0.5.23's kernels:
a candidate that reaches those modules could slow the arms it is compared with and forge a block's speedup. Blocks
load only candidates that keep the static rules; the exploit zoo's fakes (written against a task's bench) are
refused here too, before anything of theirs is imported."""
from pathlib import Path

import pytest

from kda.core.errors import KdaError
from kda.e2e.block import load_block
from kda.e2e.kernels import kernel_set

ZOO = Path(__file__).resolve().parents[1] / "zoo"


@pytest.mark.parametrize("fake", ["slows_baseline.py", "slows_latest_quietly.py", "patches_timer.py",
                                  "static_os_sys.py"])
@pytest.mark.parametrize("arm", ["candidate", "only-fuse_scale_shift"])
def test_a_block_refuses_a_candidate_that_breaks_the_static_rules(fake, arm, monkeypatch):
    from kda.definition import eager_chains
    from kda.e2e import kernels

    # the one-task arm loads wan's other task from upstream, a CuTe DSL kernel (GPU only): the PyTorch path stands
    # in for it, the subject here is the candidate's loading
    monkeypatch.setattr(kernels, "_upstream", lambda task: dict(eager_chains.PATHS))
    with pytest.raises(KdaError, match="fuse_scale_shift: its candidate breaks the static rules"):
        kernel_set(load_block("wan"), arm, {"fuse_scale_shift": ZOO / fake})


def test_an_honest_candidate_file_loads_in_its_place():
    block = load_block("wan")
    own = Path(__file__).resolve().parents[2] / "diffusion" / "kernels" / "fuse_scale_shift" / "solution" / \
        "__init__.py"
    ks = kernel_set(block, "candidate", {"fuse_scale_shift": own})
    assert set(ks.sources) == {s.name for s in block.sites}
    # the other arms do not load candidates: the override changes nothing there
    assert kernel_set(block, "eager", {"fuse_scale_shift": ZOO / "slows_baseline.py"}).sources


@pytest.mark.parametrize("shape, dtype", [((8, 4, 3, 3, 3), "bfloat16"), ((5,), "float16"), ((3, 3), "bfloat16"),
                                          ((), "float32"), ((2, 3), "bool"), ((0, 3), "bfloat16")])
def test_weight_prints_take_every_shape_and_dtype_a_block_holds_and_see_a_rewrite(shape, dtype):
    """A VAE's conv weight ends in a dim of 3: in bf16 its rows are 6 bytes, which have no int32 view (both VAE
    blocks failed on it on the H200). Every tensor is printed, and a write that goes around the version counter
    still changes its print."""
    import torch

    from kda.e2e.kernels import WeightPrint

    t = torch.ones(shape, dtype=getattr(torch, dtype))
    wp = WeightPrint("the block's weights", {"w": t})
    assert wp.changed() == []
    if t.numel():
        t.data.view(-1)[0] = 0  # through .data: the version counter does not move, the bytes do
        assert wp.changed() == ["the block's weights rewritten: w"]
