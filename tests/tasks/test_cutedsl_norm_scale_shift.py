"""cutedsl_norm_scale_shift task folder: both entry points among the production rows, the oracle against PyTorch's
own norms for every modulation form, and the upstream affine quirks it keeps. Checks every task shares:
tests/test_task_folders.py; the CPU gate (candidate against the oracle): tests/test_cpu_gate.py."""
import textwrap

import torch
import torch.nn.functional as F

from kda.definition.task import Task

TASK = Task.load("cutedsl_norm_scale_shift")
NSS, SRN = "fused_norm_scale_shift", "fused_scale_residual_norm_scale_shift"


def _rn(g, *shape):
    """fp64 inputs: the oracle then works in fp64, and torch's own fp64 norms are the yardstick."""
    return torch.randn(*shape, generator=g, dtype=torch.float64)


def _row(function, norm_type="layer"):
    return next(r for r in TASK.rows if r.function == function and r.scalars["norm_type"] == norm_type)


def test_both_functions_in_production_and_upstream_limits_respected():
    prod = [r for r in TASK.rows if r.production]
    assert {r.function for r in prod} == {NSS, SRN}
    for r in TASK.rows:
        B, S, D = r.tensors["x"].shape
        assert D % 256 == 0 and D <= 8192, r.id
    # the largest production row must fit twice (both arms' buffers) on an 80 GB GPU
    assert max(TASK.adapter.bytes_moved(r) for r in prod) < 20e9


def test_oracle_layer_norm_with_every_modulation_form():
    g = torch.Generator().manual_seed(0)
    B, S, D = 2, 6, 256
    x = _rn(g, B, S, D)
    base = F.layer_norm(x, (D,), eps=1e-6)
    forms = {
        "scalar": _rn(g, 1),
        "vec": _rn(g, D),
        "bd": _rn(g, B, D),
        "b1d": _rn(g, B, 1, D),
        "bsd": _rn(g, B, S, D),
        "frames": _rn(g, B, 3, 1, D),
    }
    row = _row(NSS)
    for name, scale in forms.items():
        shift = _rn(g, 1, 1, D)
        if name == "frames":  # token s reads frame s // (S / F): tokens 0-1 frame 0, 2-3 frame 1, 4-5 frame 2
            full = scale[:, :, 0, :].repeat_interleave(2, dim=1)
        else:
            full = scale.reshape(B, 1, D) if name == "bd" else scale
        want = base * (1 + full) + shift
        got = TASK.oracle.reference(row, {"x": x, "weight": None, "bias": None, "scale": scale, "shift": shift})["y"]
        torch.testing.assert_close(got, want.expand(B, S, D), atol=1e-5, rtol=1e-5, msg=name)


def test_oracle_residual_form_returns_r_and_normalises_it():
    g = torch.Generator().manual_seed(1)
    B, S, D = 1, 5, 512
    res, x, gate = _rn(g, B, S, D), _rn(g, B, S, D), _rn(g, 1, 1, D)
    w, b = _rn(g, D), _rn(g, D)
    sc, sh = _rn(g, 1, 1, D), _rn(g, 1, 1, D)
    row = _row(SRN)
    out = TASK.oracle.reference(row, {"residual": res, "x": x, "gate": gate, "weight": w, "bias": b,
                                      "scale": sc, "shift": sh})
    r = res + gate * x
    torch.testing.assert_close(out["residual_out"], r)
    eps = float(row.scalars["eps"])
    torch.testing.assert_close(out["y"], F.layer_norm(r, (D,), w, b, eps) * (1 + sc) + sh, atol=1e-5, rtol=1e-5)
    no_gate = TASK.oracle.reference(row, {"residual": res, "x": x, "gate": None, "weight": w, "bias": b,
                                          "scale": sc, "shift": sh})
    torch.testing.assert_close(no_gate["residual_out"], res + x)


def test_oracle_keeps_upstreams_affine_rules():
    g = torch.Generator().manual_seed(2)
    x = _rn(g, 1, 4, 256)
    w, b = _rn(g, 256), _rn(g, 256)
    zero = torch.zeros(1)
    row = _row(NSS)
    plain = TASK.oracle.reference(row, {"x": x, "weight": None, "bias": None, "scale": zero, "shift": zero})["y"]
    lone_w = TASK.oracle.reference(row, {"x": x, "weight": w, "bias": None, "scale": zero, "shift": zero})["y"]
    torch.testing.assert_close(lone_w, plain)  # a LayerNorm weight without a bias is ignored upstream
    rms = _row(NSS, "rms")
    with_b = TASK.oracle.reference(rms, {"x": x, "weight": w, "bias": b, "scale": zero, "shift": zero})["y"]
    want = F.rms_norm(x, (256,), w, float(rms.scalars["eps"]))
    torch.testing.assert_close(with_b, want, atol=1e-5, rtol=1e-5)  # the RMS path never adds a bias


def test_oracle_takes_fp32_rows_in_fp64_and_16_bit_rows_in_fp32():
    g = torch.Generator().manual_seed(3)
    x = (300 + _rn(g, 1, 8, 512)).float()  # a large mean against the spread: the centring is where fp32 loses bits
    sc, sh = _rn(g, 1, 1, 512).float(), _rn(g, 1, 1, 512).float()
    row = _row(NSS)
    got = TASK.oracle.reference(row, {"x": x, "weight": None, "bias": None, "scale": sc, "shift": sh})["y"]
    exact = TASK.oracle.reference(row, {"x": x.double(), "weight": None, "bias": None, "scale": sc.double(),
                                        "shift": sh.double()})["y"]
    assert got.dtype == torch.float64
    torch.testing.assert_close(got, exact, rtol=0, atol=0)
    half = TASK.oracle.reference(row, {"x": x.bfloat16(), "weight": None, "bias": None, "scale": sc, "shift": sh})
    assert half["y"].dtype == torch.float32


# The candidate under Triton's interpreter (a fresh process: the interpreter is chosen when kernels are defined) on
# the layouts no CPU row reaches: the residual form without a gate at a D that is not a power of two (one masked
# block per row), per-row gate, scale and shift (loaded before the reduction), and a per-token fp32 gate with fp32
# weight and bias (Wan TI2V's self-attention form: 8 warps, weight and bias loaded with the row in the chunked form);
# with residual_out stored early (v5) and late (v6).
_PROBE = textwrap.dedent("""
    import torch
    from kda.definition.task import Task
    task = Task.load("cutedsl_norm_scale_shift")
    sol = task.load_solution()
    g = torch.Generator().manual_seed(6)
    B, S, D = 2, 3, 768
    rn = lambda *shape: torch.randn(*shape, generator=g).to(torch.bfloat16)
    row = next(r for r in task.rows if r.function == "fused_scale_residual_norm_scale_shift"
               and r.scalars["norm_type"] == "layer")
    cases = {"no gate, shared fp32 scale/shift": dict(gate=None, scale=rn(1, 1, D).float(), shift=rn(1, 1, D).float(),
                                                      weight=None, bias=None),
             "per-row gate, scale, shift": dict(gate=rn(B, S, D), scale=rn(B, S, D), shift=rn(B, S, D), weight=None,
                                                bias=None),
             "per-token fp32 gate, fp32 affine": dict(gate=rn(B, S, D).float(), scale=rn(1), shift=rn(1),
                                                      weight=rn(D).float(), bias=rn(D).float())}
    import sys
    impl = sys.modules[sol.__name__ + ".norm_scale_shift"]
    # with the gated rows chunked too (no padded block for them: _PADDED_RES_MAX_ROWS 0), residual_out stored early
    # (v5) or late (v6)
    for late, padded_max in ((True, 4096), (True, 0), (False, 0)):
        impl._RES_OUT_LATE, impl._PADDED_RES_MAX_ROWS = late, padded_max
        impl._plans.clear()
        for name, mod in cases.items():
            inp = dict(residual=rn(B, S, D), x=rn(B, S, D), **mod)
            y, r = sol.fused_scale_residual_norm_scale_shift(inp["residual"], inp["x"], inp["gate"], inp["weight"],
                                                             inp["bias"], inp["scale"], inp["shift"], "layer",
                                                             float(row.scalars["eps"]))
            ref = task.oracle.reference(row, inp)
            for k, got in (("y", y), ("residual_out", r)):
                err = (got.float() - ref[k]).abs()
                assert bool((err <= 2e-2 + 1e-2 * ref[k].abs()).all()), (late, padded_max, name, k, float(err.max()))
            if name.startswith("per-token") and padded_max == 0:
                plan = list(impl._plans.values())[-1][0]
                # chunked, 8 warps; weight and bias with the row exactly when residual_out is stored late
                names = impl._nss_kernel.arg_names
                early_wb = plan.constexprs[names.index("EARLY_WB") - names.index("IS_LN")]
                assert plan.num_warps == 8 and early_wb is late, (plan.num_warps, plan.constexprs)
    print("ok")
""")


def test_candidate_residual_layouts_no_row_reaches(interpreted):
    interpreted(_PROBE)


def test_the_candidates_plan_cache_keeps_at_most_plans_max_signatures_first_in_first_out(monkeypatch):
    """Issue 37's bounded caches: a sweep of shapes must not grow the plan cache without bound (nothing launches:
    the plan is stubbed to None)."""
    import sys

    impl = sys.modules[TASK.load_solution().__name__ + ".norm_scale_shift"]
    monkeypatch.setattr(impl, "_plans", {})
    monkeypatch.setattr(impl, "_PLANS_MAX", 3)
    monkeypatch.setattr(impl, "_plan", lambda *a: (None, False, False))
    shapes = [(1, n, 256) for n in range(1, 6)]
    for shape in shapes:
        x = torch.zeros(shape)
        impl.fused_norm_scale_shift(x, None, None, x, x, "layer")
    assert [k[0][0] for k in impl._plans] == [torch.Size(s) for s in shapes[-3:]]
