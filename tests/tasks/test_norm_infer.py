"""norm_infer task folder: both entry points among the production rows, and the oracle against PyTorch's own
norms. Checks every task shares: tests/test_task_folders.py; the CPU gate: tests/test_cpu_gate.py."""

import textwrap

import torch
import torch.nn.functional as F

from kda.definition.task import Task

TASK = Task.load("norm_infer")



def test_production_rows_carry_provenance_and_both_functions_are_covered():
    prod = [r for r in TASK.rows if r.production]
    assert prod and all(r.source.startswith(("captured:", "derived:")) for r in prod)
    assert {r.function for r in prod} == {"norm_infer", "triton_one_pass_rms_norm"}
    assert all(r.source.startswith("regression:") for r in TASK.rows if not r.production)


def _row(function, **scalars):
    return next(r for r in TASK.rows if r.function == function and
                all(r.scalars.get(k) == v for k, v in scalars.items()))


def test_oracle_layer_norm_matches_torch():
    g = torch.Generator().manual_seed(0)
    x, w, b = torch.randn(6, 300, generator=g), torch.randn(300, generator=g), torch.randn(300, generator=g)
    row = _row("norm_infer", is_rms_norm=False)
    eps = float(row.scalars["eps"])
    # fp32 rows are judged against fp64 math; the peers run it in fp32, as a PyTorch user would
    ref = TASK.oracle.reference(row, {"x": x, "weight": w, "bias": b})["y"]
    assert ref.dtype == torch.float64
    torch.testing.assert_close(ref, F.layer_norm(x.double(), (300,), w.double(), b.double(), eps))
    peer = TASK.oracle.peer_reference(row, {"x": x, "weight": w, "bias": b})["y"]
    assert peer.dtype == torch.float32
    torch.testing.assert_close(peer, F.layer_norm(x, (300,), w, b, eps), atol=1e-5, rtol=1e-5)
    none = TASK.oracle.reference(row, {"x": x, "weight": None, "bias": None})["y"]
    torch.testing.assert_close(none, F.layer_norm(x.double(), (300,), None, None, eps))


def test_fp32_truth_is_not_the_fp32_formula():
    """reg_ln_fp32_m16_n5120_large's distributions (x near 1e4, Cauchy-tailed weight): the fp32 formula is off the
    truth by a visible share of the fp32 tolerance, so a candidate with wider statistics is not ranked by how well
    it repeats that rounding."""
    row = next(r for r in TASK.rows if r.id == "reg_ln_fp32_m16_n5120_large")
    g = torch.Generator().manual_seed(4)
    x = torch.randn(16, 5120, generator=g) * 1e4
    w = torch.tan(torch.pi * (torch.rand(5120, generator=g).clamp(1e-4, 1 - 1e-4) - 0.5))
    b = torch.randn(5120, generator=g)
    inputs = {"x": x, "weight": w, "bias": b}
    truth = TASK.oracle.reference(row, inputs)["y"]
    fp32 = TASK.oracle.peer_reference(row, inputs)["y"].double()
    norm_err = ((fp32 - truth).abs() / (1e-5 + 1e-5 * truth.abs())).max()
    assert 0.01 < float(norm_err) < 1.0


def test_oracle_rms_norms_match_torch():
    g = torch.Generator().manual_seed(1)
    x, w = torch.randn(9, 128, generator=g).to(torch.bfloat16), torch.randn(128, generator=g).to(torch.bfloat16)
    row = _row("triton_one_pass_rms_norm")
    eps = float(row.scalars["eps"])
    want = F.rms_norm(x.float(), (128,), w.float(), eps)
    torch.testing.assert_close(TASK.oracle.reference(row, {"x": x, "w": w})["y"], want, atol=1e-5, rtol=1e-5)
    rms = _row("norm_infer", is_rms_norm=True)
    got = TASK.oracle.reference(rms, {"x": x, "weight": w, "bias": None})["y"]
    torch.testing.assert_close(got, F.rms_norm(x.float(), (128,), w.float(), float(rms.scalars["eps"])),
                               atol=1e-5, rtol=1e-5)



_CHUNKED_PROBE = textwrap.dedent("""
    import torch
    from kda.definition.task import Task
    sol = Task.load("norm_infer").load_solution()
    m = __import__(sol.__name__ + ".norm", fromlist=["_layout"])
    g = torch.Generator().manual_seed(3)
    m._layout = lambda rows, N, block_n: (1, 2, False, 1)
    # (N, chunks): 1280 = 5 x 256 (no tail), 1100 = 5 x 256 with a masked tail, 600 = 3 x 256 with a tail
    for N, dtype, rms in ((1280, torch.float32, False), (1100, torch.bfloat16, True), (600, torch.float16, False)):
        m._plans.clear()
        x = (torch.randn(5, N, generator=g) * 3 + 1).to(dtype)
        w = torch.randn(N, generator=g).to(dtype)
        b = None if rms else torch.randn(N, generator=g).to(dtype)
        out = torch.full_like(x, float("nan"))
        sol.norm_infer(x, w, b, 1e-6, is_rms_norm=rms, out=out)
        assert next(iter(m._plans.values()))[1] is m._launch_chunked, "the chunked kernel did not run"
        xf = x.double()
        if rms:
            ref = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + 1e-6) * w.double()
        else:
            ref = torch.nn.functional.layer_norm(xf, (N,), w.double(), b.double(), 1e-6)
        tol = 1e-5 if dtype == torch.float32 else 2e-2
        err = (out.double() - ref).abs()
        assert bool((err <= tol + tol * ref.abs()).all()), (N, dtype, float(err.max()))
    assert m._chunks(5120) == (1024, 5) and m._chunks(3072) == (1024, 3) and m._chunks(1100) == (256, 5)
    print("ok")
""")


def test_chunked_kernel_matches_layer_and_rms_norm(interpreted):
    """The wide-row kernel that holds a row as unpadded chunks, forced on small rows with and without a tail."""
    interpreted(_CHUNKED_PROBE)


_MEAN_ULP_PROBE = textwrap.dedent("""
    import torch
    from kda.definition.task import Task
    sol = Task.load("norm_infer").load_solution()
    # An fp32 LayerNorm row whose mean sits 0.4 ulp from the nearest fp32 value, and a weight of 3000 on the element
    # nearest the mean: centring on an fp32-rounded mean puts the error times weight / std on that output.
    g = torch.Generator().manual_seed(0)
    x = (torch.randn(1, 5120, generator=g, dtype=torch.float64) * 1e4).float()
    def off(x):
        m = x.double().mean()
        return float((m - m.float().double()) / (torch.finfo(torch.float32).eps * 2 ** torch.floor(torch.log2(m.abs()))))
    step = torch.nextafter(x[0, 0], torch.tensor(float("inf"))) - x[0, 0]
    while abs(off(x)) < 0.4:
        x[0, 0] += step
    m = x.double().mean()
    j = int((x.double() - m).abs().argmin())
    w = torch.ones(5120)
    w[j] = 3000.0
    y = sol.norm_infer(x, w, torch.zeros(5120), 1e-6, False)
    xc = x.double() - m
    ref = xc / torch.sqrt((xc * xc).mean() + 1e-6) * w.double()
    err = float(((y.double() - ref).abs() / (1e-5 + 1e-5 * ref.abs())).max())
    assert err < 0.03, err  # centred on the fp32 mean: 0.079
    print("ok")
""")


def test_fp32_rows_are_centred_on_the_unrounded_mean(interpreted):
    interpreted(_MEAN_ULP_PROBE)
