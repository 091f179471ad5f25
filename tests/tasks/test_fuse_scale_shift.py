"""fuse_scale_shift task folder, the select01 gate variants: production rows in SGLang's argument forms, the oracle
against PyTorch's own LayerNorm, and the candidate on argument forms no row can hold (the baseline mis-reads them).
Checks every task shares: tests/test_task_folders.py; the CPU gate: tests/test_cpu_gate.py."""
import textwrap
from types import SimpleNamespace

import pytest
import torch
import torch.nn.functional as F

from kda.definition.task import Task

TASK = Task.load("fuse_scale_shift")
SEL_LN = "fuse_layernorm_scale_shift_gate_select01_kernel"
SEL_RES = "fuse_residual_layernorm_scale_shift_gate_select01_kernel"


def test_entry_points_and_production_rows_cover_all_three_functions():
    fns = [e.split(":")[1] for e in TASK.cfg["task"]["entry_points"]]
    assert fns == ["fuse_scale_shift_kernel", SEL_LN, SEL_RES]
    prod = [r for r in TASK.rows if r.production]
    assert {r.function for r in prod} == set(fns)
    assert sum(r.function == "fuse_scale_shift_kernel" for r in prod) == 15  # the pilot's rows, untouched


@pytest.mark.parametrize("function,half", [(SEL_LN, 0), (SEL_RES, 1)])
def test_select01_production_rows_use_qwen_image_edit_argument_forms(function, half):
    (row,) = [r for r in TASK.rows if r.production and r.function == function]
    t = row.tensors
    C = 3072
    assert t["x"].shape == (1, 8424, C) and t["x"].dtype == "bfloat16"
    assert t["weight"] is None and t["bias"] is None and row.scalars == {"eps": 1e-6}
    assert t["index"].shape == (1, 8424) and t["index"].dtype == "int32" and t["index"].dist == "index01"
    if function == SEL_RES:
        assert t["residual"].shape == t["residual_gate"].shape == t["x"].shape
    # Each set is a [1, C] chunk of img_mod's [2, 6C] output: shift | scale | gate, norm2 in the upper half.
    for k, name in enumerate(("shift", "scale", "gate")):
        for s in (0, 1):
            spec = t[f"{name}{s}"]
            assert spec.shape == (1, C) and spec.stride == (6 * C, 1) and spec.dtype == "bfloat16"
            assert spec.storage_offset == s * 6 * C + half * 3 * C + k * C


def _inputs(B, L, C, residual, affine, gen):
    r = lambda *shape: torch.randn(*shape, generator=gen, dtype=torch.float64)  # noqa: E731
    inp = {"x": r(B, L, C), "weight": r(C) if affine else None, "bias": r(C) if affine else None,
           "index": torch.randint(0, 3, (B, L), generator=gen, dtype=torch.int32)}  # 2 counts as set 1 too
    inp.update({f"{n}{s}": r(B, C) for n in ("scale", "shift", "gate") for s in (0, 1)})
    if residual:
        inp.update({"residual": r(B, L, C), "residual_gate": r(B, L, C)})
    return inp


@pytest.mark.parametrize("residual", [False, True])
@pytest.mark.parametrize("affine", [False, True])
def test_oracle_select01_matches_torch_layer_norm(residual, affine):
    gen = torch.Generator().manual_seed(3)
    inp = _inputs(2, 9, 40, residual, affine, gen)
    row = SimpleNamespace(function=SEL_RES if residual else SEL_LN, scalars={"eps": 1e-6})
    got = TASK.oracle.reference(row, inp)
    v = inp["x"]
    if residual:
        v = inp["residual"] + inp["residual_gate"] * v
        torch.testing.assert_close(got["residual_out"], v)
    one = (inp["index"] != 0)[..., None]
    pick = {n: torch.where(one, inp[n + "1"][:, None], inp[n + "0"][:, None]) for n in ("scale", "shift", "gate")}
    n = F.layer_norm(v, (40,), inp["weight"], inp["bias"], eps=1e-6)
    torch.testing.assert_close(got["y"], n * (1 + pick["scale"]) + pick["shift"], rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(got["gate"], pick["gate"].expand_as(v))
    assert bool((inp["index"] == 2).any())  # the nonzero-means-set-1 rule was exercised


def test_oracle_takes_fp32_rows_in_fp64_and_16_bit_rows_in_fp32():
    # r = residual + gate * x under cancellation: fp32 rounds the product, then the sum; the truth rounds neither.
    gen = torch.Generator().manual_seed(4)
    wide = _inputs(1, 5, 64, True, False, gen)
    fp32 = {k: (v.float() if v is not None and v.is_floating_point() else v) for k, v in wide.items()}
    fp32["residual"] = -(fp32["residual_gate"] * fp32["x"]) + 1e-3 * fp32["residual"]
    row = SimpleNamespace(function=SEL_RES, scalars={"eps": 1e-6})
    got = TASK.oracle.reference(row, fp32)
    exact = TASK.oracle.reference(row, {k: (v.double() if v is not None and v.is_floating_point() else v)
                                        for k, v in fp32.items()})
    assert got["y"].dtype == got["residual_out"].dtype == torch.float64
    torch.testing.assert_close(got["residual_out"], exact["residual_out"], rtol=0, atol=0)
    rounded = fp32["residual"] + fp32["residual_gate"] * fp32["x"]  # what an fp32 oracle would call the truth
    assert not torch.equal(rounded.double(), exact["residual_out"])
    half = {k: (v.bfloat16() if v is not None and v.is_floating_point() else v) for k, v in fp32.items()}
    assert TASK.oracle.reference(row, half)["y"].dtype == torch.float32
    fuse = SimpleNamespace(function="fuse_scale_shift_kernel", scalars={"scale_constant": 1.0})
    x = fp32["x"]
    assert TASK.oracle.reference(fuse, {"x": x, "scale": x, "shift": x})["y"].dtype == torch.float64
    assert TASK.oracle.reference(fuse, {"x": x.half(), "scale": x, "shift": x})["y"].dtype == torch.float32


# The candidate under Triton's interpreter (a fresh process: the interpreter is chosen when kernels are defined) on
# the forms upstream copies with .contiguous() but then indexes with the original strides: sets that are [2B, 6C]
# chunk views at B = 2 and a transposed index. No workloads row can hold them (the baseline arm would read past
# its copies); the candidate must still match the oracle and return the buffers it was given.
_PROBE = textwrap.dedent("""
    import sys, types, torch
    from kda.definition.task import Task
    task = Task.load("fuse_scale_shift")
    sol = task.load_solution()
    g = torch.Generator().manual_seed(5)
    B, L = 2, 7
    # C = 96 packs rows per program (_ln_select01_kernel); C = 1030 runs the one-row kernel with its selected
    # base pointers and strides.
    for C, residual in ((96, False), (96, True), (1030, False), (1030, True)):
        mod = torch.randn(2 * B, 6 * C, generator=g, dtype=torch.float32).to(torch.bfloat16)
        half = mod[:, 3 * C:] if residual else mod[:, :3 * C]
        shift, scale, gate = half.chunk(3, dim=-1)
        sets = {"scale0": scale[:B], "shift0": shift[:B], "gate0": gate[:B],
                "scale1": scale[B:], "shift1": shift[B:], "gate1": gate[B:]}
        assert not any(t.is_contiguous() for t in sets.values())
        index = torch.randint(0, 2, (L, B), generator=g, dtype=torch.int32).t()
        assert not index.is_contiguous()
        x = torch.randn(B, L, C, generator=g).to(torch.bfloat16)
        inp = dict(x=x, weight=None, bias=None, index=index, **sets)
        if residual:
            inp["residual"] = torch.randn(B, L, C, generator=g).to(torch.bfloat16)
            inp["residual_gate"] = torch.randn(B, L, C, generator=g).to(torch.bfloat16)
            fn = sol.fuse_residual_layernorm_scale_shift_gate_select01_kernel
            names = ("y", "residual_out", "gate")
        else:
            fn = sol.fuse_layernorm_scale_shift_gate_select01_kernel
            names = ("y", "gate")
        bufs = {k: torch.full_like(x, float("nan")) for k in names}
        kw = {k: v for k, v in inp.items() if k != "x"}
        extra = {"out": bufs["y"], "gate_out": bufs["gate"]}
        if residual:
            extra["residual_out"] = bufs["residual_out"]
        ret = fn(x, **kw, eps=1e-6, **extra)
        assert all(a is bufs[k] for a, k in zip(ret, names)), "returned something other than its buffers"
        row = types.SimpleNamespace(function=fn.__name__, scalars={"eps": 1e-6})
        ref = task.oracle.reference(row, inp)
        for k in names:
            err = (bufs[k].float() - ref[k].float()).abs()
            tol = 2e-2 + 1e-2 * ref[k].float().abs()
            assert bool((err <= tol).all()), (fn.__name__, C, k, float(err.max()))
    print("ok")
""")


def test_candidate_select01_handles_non_contiguous_sets_and_index(interpreted):
    interpreted(_PROBE)


_FLAT_PROBE = textwrap.dedent("""
    import torch
    from kda.definition.task import Task
    task = Task.load("fuse_scale_shift")
    sol = task.load_solution()
    m = __import__(sol.__name__ + ".scale_shift", fromlist=["_flat_mode"])
    g = torch.Generator().manual_seed(7)

    def check(x, scale, shift, mode):
        B, L, C = x.shape
        got = m._flat_mode(scale, m._modulation_layout(scale, B, L, C, "scale"), B, L, C)[0]
        assert got == mode, (tuple(scale.shape), scale.stride(), got, mode)
        out = torch.full_like(x, float("nan"))
        assert sol.fuse_scale_shift_kernel(x, scale, shift, 1.0, out=out) is out
        ref = x.float() * (1.0 + scale.float()) + shift.float()
        err = (out.float() - ref).abs()
        assert bool((err <= 2e-2 + 1e-2 * ref.abs()).all()), (mode, float(err.max()))

    for B in (1, 2):
        L, C = 5, 48
        x = torch.randn(B, L, C, generator=g).to(torch.bfloat16)
        # Wan's form: scale and shift are the two halves of one fp32 [B, L, 2C] tensor (mode 3)
        mod = torch.randn(B, L, 2 * C, generator=g)
        check(x, mod[..., :C], mod[..., C:], 3)
        check(x, torch.randn(B, L, C, generator=g), torch.randn(B, L, C, generator=g), 1)
        check(x, torch.randn(1, 1, C, generator=g).to(torch.bfloat16), torch.randn(1, C, generator=g), 0)
        check(x, torch.tensor(0.5), torch.randn(1, 1, C, generator=g), 2)
    # batch stride that does not follow the row stride: no flat mode, the 2-D kernel
    mod = torch.randn(2, 5, 2 * 48, generator=g)[..., :48]
    wide = torch.randn(2, 9, 48, generator=g)[:, :5]
    x = torch.randn(2, 5, 48, generator=g).to(torch.bfloat16)
    check(x, wide, mod, None)
    print("ok")
""")


def test_candidate_flat_modes_match_the_expression(interpreted):
    interpreted(_FLAT_PROBE)
