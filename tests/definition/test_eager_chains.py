"""The PyTorch paths added for the Z-Image and LTX-2 blocks agree with their tasks' oracles (written from the math,
independently of kda/definition/eager_chains.py) in fp32."""
from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from kda.definition.task import Task, load_module
from kda.definition import eager_chains


def _oracle(task: str):
    t = Task.load(task)
    return load_module(t.path / "oracle.py", f"kda_e2e_test_oracle_{task}")


@pytest.mark.parametrize("norm_type", ["rms", "layer"])
def test_norm_tanh_mul_add_paths_match_the_oracle(norm_type):
    g = torch.Generator().manual_seed(0)
    B, S, D = 2, 5, 256
    x, shift = torch.randn(B, S, D, generator=g), torch.randn(B, S, D, generator=g)
    scale, scale2 = torch.randn(B, 1, D, generator=g), torch.randn(1, 1, D, generator=g)
    w, b = 1 + 0.1 * torch.randn(D, generator=g), 0.1 * torch.randn(D, generator=g)
    w2, b2 = 1 + 0.1 * torch.randn(D, generator=g), 0.1 * torch.randn(D, generator=g)
    oracle = _oracle("cutedsl_norm_tanh_mul_add")
    inputs = dict(x=x, weight=w, bias=b, scale=scale, shift=shift, weight2=w2, bias2=b2, scale2=scale2)
    scalars = {"norm_type": norm_type, "eps": 1e-5}

    want = oracle.reference(SimpleNamespace(function="fused_norm_tanh_mul_add", scalars=scalars), inputs)
    got = eager_chains.fused_norm_tanh_mul_add(x, w, b, scale, shift, norm_type, 1e-5)
    torch.testing.assert_close(got, want["y"].float(), rtol=1e-5, atol=1e-5)

    want = oracle.reference(SimpleNamespace(function="fused_norm_tanh_mul_add_norm_scale", scalars=scalars), inputs)
    y, y2 = eager_chains.fused_norm_tanh_mul_add_norm_scale(x, w, b, scale, shift, w2, b2, scale2, norm_type, 1e-5)
    torch.testing.assert_close(y, want["y"].float(), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(y2, want["y2"].float(), rtol=1e-5, atol=1e-5)


def test_ltx2_split_rotary_path_matches_the_oracle_on_the_swapaxes_layout():
    g = torch.Generator().manual_seed(1)
    B, T, H, D = 2, 7, 4, 64
    x = torch.randn(B, T, H * D, generator=g)
    ang = torch.randn(B, T, H, D // 2, generator=g)
    cos, sin = ang.cos().swapaxes(1, 2), ang.sin().swapaxes(1, 2)  # [B, H, T, D/2], not contiguous
    assert not cos.is_contiguous()
    want = _oracle("rotary_embedding").reference(SimpleNamespace(function="apply_ltx2_split_rotary_emb", scalars={}),
                                                 {"x": x, "cos": cos, "sin": sin})
    want = want["out"] if isinstance(want, dict) else want
    got = eager_chains.apply_ltx2_split_rotary_emb(x, cos, sin)
    # the oracle rounds x * cos to bf16 as the upstream kernel does; the fp32 path does not
    torch.testing.assert_close(got, want.float(), rtol=0, atol=2e-2)
    # the rotation itself, written out: each head's halves (x1, x2) -> (x1 cos - x2 sin, x2 cos + x1 sin)
    xv = x.view(B, T, H, D)
    x1, x2 = xv[..., : D // 2], xv[..., D // 2:]
    c, s = ang.cos(), ang.sin()
    torch.testing.assert_close(got.view(B, T, H, D), torch.cat([x1 * c - x2 * s, x2 * c + x1 * s], -1))
