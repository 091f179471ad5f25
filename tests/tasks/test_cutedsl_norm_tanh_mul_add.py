"""cutedsl_norm_tanh_mul_add task folder: both entry points among the production rows, the Z-Image call shapes, and
the oracle against PyTorch's own RMS/LayerNorm. Checks every task shares: tests/test_task_folders.py; the CPU gate
(candidate against the oracle): tests/test_cpu_gate.py."""
import textwrap

import torch
import torch.nn.functional as F

from kda.definition.task import Task

TASK = Task.load("cutedsl_norm_tanh_mul_add")
TMA, TMAN = "fused_norm_tanh_mul_add", "fused_norm_tanh_mul_add_norm_scale"


def _rn(g, *shape):
    """fp64 inputs: the oracle then works in fp64, and torch's own fp64 norms are the yardstick."""
    return torch.randn(*shape, generator=g, dtype=torch.float64)


def _row(function, norm_type="rms"):
    return next(r for r in TASK.rows if r.function == function and r.scalars["norm_type"] == norm_type)


def test_production_rows_are_the_zimage_calls():
    prod = [r for r in TASK.rows if r.production]
    assert {r.function for r in prod} == {TMA, TMAN}
    for r in prod:
        B, S, D = r.tensors["x"].shape
        assert (B, D) == (1, 3840) and S in (4096, 4128)
        assert r.scalars == {"norm_type": "rms", "eps": 1e-5} and r.tensors["bias"] is None
        assert tuple(r.tensors["scale"].shape) == (1, 1, 3840) and tuple(r.tensors["shift"].shape) == (1, S, 3840)


def test_oracle_matches_torch_for_both_forms():
    g = torch.Generator().manual_seed(0)
    B, S, D = 2, 3, 512
    x, w, w2 = _rn(g, B, S, D), _rn(g, D), _rn(g, D)
    sc, sh, sc2 = _rn(g, 1, 1, D), _rn(g, B, S, D), _rn(g, B, 1, D)
    row = _row(TMAN)
    eps = float(row.scalars["eps"])
    y = F.rms_norm(x, (D,), w, eps) * torch.tanh(sc) + sh
    out = TASK.oracle.reference(row, {"x": x, "weight": w, "bias": None, "scale": sc, "shift": sh,
                                      "weight2": w2, "bias2": None, "scale2": sc2})
    torch.testing.assert_close(out["y"], y, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(out["y2"], F.rms_norm(y, (D,), w2, eps) * (1 + sc2), atol=1e-5, rtol=1e-5)
    one = TASK.oracle.reference(_row(TMA), {"x": x, "weight": w, "bias": None, "scale": sc, "shift": sh})
    assert set(one) == {"y"}


def test_oracle_layer_norm_affine_only_with_both():
    g = torch.Generator().manual_seed(1)
    x, w, b = _rn(g, 1, 4, 256), _rn(g, 256), _rn(g, 256)
    sc, sh = _rn(g, 1, 1, 256), _rn(g, 1, 4, 256)
    row = _row(TMA, "layer")
    eps = float(row.scalars["eps"])
    both = TASK.oracle.reference(row, {"x": x, "weight": w, "bias": b, "scale": sc, "shift": sh})["y"]
    torch.testing.assert_close(both, F.layer_norm(x, (256,), w, b, eps) * torch.tanh(sc) + sh, atol=1e-5, rtol=1e-5)
    lone = TASK.oracle.reference(row, {"x": x, "weight": w, "bias": None, "scale": sc, "shift": sh})["y"]
    torch.testing.assert_close(lone, F.layer_norm(x, (256,), eps=eps) * torch.tanh(sc) + sh, atol=1e-5, rtol=1e-5)


def test_oracle_takes_fp32_rows_in_fp64_and_16_bit_rows_in_fp32():
    g = torch.Generator().manual_seed(3)
    x, sh, sc = _rn(g, 2, 4, 512).float(), _rn(g, 2, 4, 512).float(), (1e-3 * _rn(g, 2, 1, 512)).float()
    inp = {"x": x, "weight": None, "bias": None, "scale": sc, "shift": sh, "weight2": None, "bias2": None,
           "scale2": sc}
    got = TASK.oracle.reference(_row(TMAN), inp)
    exact = TASK.oracle.reference(_row(TMAN), {k: (None if v is None else v.double()) for k, v in inp.items()})
    assert got["y"].dtype == got["y2"].dtype == torch.float64
    torch.testing.assert_close(got["y2"], exact["y2"], rtol=0, atol=0)
    half = TASK.oracle.reference(_row(TMAN), {**inp, "x": x.bfloat16()})
    assert half["y"].dtype == half["y2"].dtype == torch.float32


# The candidate's untimed variant with scale and shift loaded ahead of the first reduction (_EARLY_LOADS, off by
# default; scripts/layout_sweep.py times it as `early*`), under Triton's interpreter in a fresh process: both forms,
# both norms, 16-bit and fp32 rows, per-row and broadcast scale, must match the oracle as the default path does.
_EARLY_PROBE = textwrap.dedent("""
    import sys
    import torch
    from kda.definition.task import Task
    task = Task.load("cutedsl_norm_tanh_mul_add")
    sol = task.load_solution()
    mod = sys.modules[sol.__name__ + ".norm_tanh_mul_add"]
    g = torch.Generator().manual_seed(9)
    B, S, D = 2, 3, 768
    def run(function, norm_type, dtype, per_row):
        rn = lambda *shape: torch.randn(*shape, generator=g).to(dtype)
        row = next(r for r in task.rows if r.function == function and r.scalars["norm_type"] == norm_type)
        eps = float(row.scalars["eps"])
        inp = dict(x=rn(B, S, D), weight=rn(D), bias=rn(D) if norm_type == "layer" else None,
                   scale=rn(B, S, D) if per_row else rn(1, 1, D), shift=rn(B, S, D))
        if function.endswith("norm_scale"):
            inp.update(weight2=rn(D), bias2=inp["bias"], scale2=rn(1, 1, D))
            got = dict(zip(("y", "y2"), sol.fused_norm_tanh_mul_add_norm_scale(
                inp["x"], inp["weight"], inp["bias"], inp["scale"], inp["shift"], inp["weight2"], inp["bias2"],
                inp["scale2"], norm_type, eps)))
        else:
            got = {"y": sol.fused_norm_tanh_mul_add(inp["x"], inp["weight"], inp["bias"], inp["scale"], inp["shift"],
                                                    norm_type, eps)}
        ref = task.oracle.reference(row, inp)
        atol, rtol = task.cfg.tolerance(str(dtype).split(".")[-1])
        for k, v in got.items():
            err = (v.to(ref[k].dtype) - ref[k]).abs()
            assert bool((err <= atol + rtol * ref[k].abs()).all()), (function, norm_type, dtype, k, float(err.max()))
        return got
    for function in ("fused_norm_tanh_mul_add", "fused_norm_tanh_mul_add_norm_scale"):
        for norm_type in ("rms", "layer"):
            for dtype, per_row in ((torch.bfloat16, False), (torch.float32, True)):
                mod._EARLY_LOADS = False
                state = g.get_state()
                default = run(function, norm_type, dtype, per_row)
                mod._EARLY_LOADS = True
                g.set_state(state)
                early = run(function, norm_type, dtype, per_row)
                for k in default:  # the same math in another order of loads: the same bits
                    assert torch.equal(default[k], early[k]), (function, norm_type, dtype, k)
    print("ok")
""")


def test_early_loads_variant_matches_the_oracle_and_the_default(interpreted):
    interpreted(_EARLY_PROBE)

