"""rotary_embedding task folder: both entry points among the production rows, and the oracle against independent
formulations (complex multiplication; LTX-2's own PyTorch reference in bf16). Checks every task shares:
tests/test_task_folders.py; the CPU gate: tests/test_cpu_gate.py."""

import torch

from kda.definition.task import Task

TASK = Task.load("rotary_embedding")


def _row(function, **scalars):
    return next(r for r in TASK.rows if r.function == function and
                all(r.scalars.get(k) == v for k, v in scalars.items()))



def test_production_rows_carry_provenance_and_both_functions_are_covered():
    prod = [r for r in TASK.rows if r.production]
    assert prod and all(r.source.startswith(("captured:", "derived:")) for r in prod)
    assert {r.function for r in prod} == {"apply_rotary_embedding", "apply_ltx2_split_rotary_emb"}
    assert all(r.source.startswith("regression:") for r in TASK.rows if not r.production)
    assert not any(r.cpu for r in prod)


def test_oracle_interleaved_pairs_is_complex_multiplication():
    g = torch.Generator().manual_seed(0)
    B, T, H, D = 2, 5, 3, 16
    x = torch.randn(B, T, H, D, generator=g)
    theta = torch.rand(T, D // 2, generator=g) * 6.28
    got = TASK.oracle.reference(_row("apply_rotary_embedding", interleaved=False),
                                {"x": x, "cos": theta.cos(), "sin": theta.sin()})["out"]
    z = torch.view_as_complex(x.reshape(B, T, H, D // 2, 2).contiguous()) * torch.polar(torch.ones_like(theta), theta)[:, None, :]
    torch.testing.assert_close(got, torch.view_as_real(z).reshape(B, T, H, D), atol=1e-5, rtol=1e-5)
    # interleaved=True with full-width cos/sin (each frequency repeated twice) gives the same result.
    full = _row("apply_rotary_embedding", interleaved=True)
    wide = {"x": x, "cos": theta.cos().repeat_interleave(2, -1), "sin": theta.sin().repeat_interleave(2, -1)}
    torch.testing.assert_close(TASK.oracle.reference(full, wide)["out"], got, atol=0, rtol=0)


def test_oracle_ltx2_split_matches_sglangs_pytorch_reference_in_bf16():
    """sglang ltx_2.py apply_split_rotary_emb (non-Triton branch), re-typed: out = x*cos in bf16, then addcmul_."""
    g = torch.Generator().manual_seed(1)
    B, S, H, half = 2, 7, 4, 32
    x = torch.randn(B, S, H * 2 * half, generator=g).to(torch.bfloat16)
    cos = (torch.rand(B, S, H, half, generator=g) * 2 - 1).to(torch.bfloat16).swapaxes(1, 2)
    sin = (torch.rand(B, S, H, half, generator=g) * 2 - 1).to(torch.bfloat16).swapaxes(1, 2)
    xs = x.reshape(B, S, H, -1).swapaxes(1, 2).reshape(B, H, S, 2, half)
    out = xs * cos.unsqueeze(-2)
    out[..., :1, :].addcmul_(-sin.unsqueeze(-2), xs[..., 1:, :])
    out[..., 1:, :].addcmul_(sin.unsqueeze(-2), xs[..., :1, :])
    want = out.reshape(B, H, S, 2 * half).swapaxes(1, 2).reshape(B, S, -1)
    got = TASK.oracle.reference(_row("apply_ltx2_split_rotary_emb"), {"x": x, "cos": cos, "sin": sin})["out"]
    assert torch.equal(got.to(torch.bfloat16), want)
