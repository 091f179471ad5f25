"""kda/harness/checks.py: poison, compare, the error-ratio rule, input integrity, reason codes."""
import math

import pytest
import torch

from kda.harness import checks as C
from kda.definition.workloads import build_tensor, contiguous_strides, fill_, make_generator, storage_of, TensorSpec

INF, NAN = math.inf, math.nan


def cmp(out, ref, atol=1e-3, rtol=1e-3, shape=None, dtype=None):
    return C.compare(out, ref, shape if shape is not None else tuple(ref.shape),
                     dtype if dtype is not None else out.dtype, atol, rtol)


# ---- poison_ -------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16, torch.float64])
def test_poison_float_is_nan(dtype):
    t = torch.zeros(5, dtype=dtype)
    C.poison_(t)
    assert bool(torch.isnan(t).all())


def test_poison_int_and_bool():
    t = torch.zeros(5, dtype=torch.int32)
    C.poison_(t)
    assert t.tolist() == [C.INT_POISON] * 5
    b = torch.zeros(3, dtype=torch.bool)
    C.poison_(b)
    assert b.tolist() == [True] * 3


def test_poison_strided_view_only_touches_view():
    base = torch.zeros(10)
    v = base[::2]
    C.poison_(v)
    assert bool(torch.isnan(base[::2]).all()) and bool((base[1::2] == 0).all())


# ---- compare ---------------------------------------------------------------------------------------------

def test_compare_exact_match():
    ref = torch.randn(4, 8, generator=torch.Generator().manual_seed(0))
    r = cmp(ref.clone(), ref)
    assert r["layout_ok"] and r["unwritten"] == r["specials_mismatch"] == r["bad"] == 0
    assert r["max_norm_err"] == 0.0 and r["numel"] == 32
    assert C.check_reasons(r) == []


def poisoned_like(ref, dtype=torch.float32):
    out = torch.empty(ref.shape, dtype=dtype)
    C.poison_(out)
    return out


def test_compare_unwritten_counts():
    ref = torch.arange(10, dtype=torch.float32)
    out = poisoned_like(ref)
    keep = [0, 2, 3, 5, 6, 8, 9]
    out[keep] = ref[keep]
    r = cmp(out, ref)
    assert r["unwritten"] == 3 and r["specials_mismatch"] == 0 and r["bad"] == 0
    assert C.check_reasons(r) == [C.UNWRITTEN]


def test_computed_nan_is_not_unwritten_but_misplaced():
    ref = torch.arange(4, dtype=torch.float32)
    out = ref.clone()
    out[1] = NAN  # a NaN the candidate computed: canonical payload, not the poison
    r = cmp(out, ref)
    assert r["unwritten"] == 0 and r["specials_mismatch"] == 1
    assert C.check_reasons(r) == [C.SPECIALS]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.float64])
def test_poison_payload_survives_clone_and_is_detected(dtype):
    out = torch.empty(5, dtype=dtype)
    C.poison_(out)
    assert torch.isnan(out.float()).all()
    assert bool(C.unwritten_mask(out.clone()).all())
    assert not bool(C.unwritten_mask(torch.full((5,), float("nan"), dtype=dtype)).any())


def test_finite_poison_looks_like_data():
    out = torch.empty(1000)
    C.poison_(out, finite=torch.Generator().manual_seed(1))
    assert torch.isfinite(out).all() and out.abs().max() > 10


def test_compare_nan_where_oracle_has_nan_is_fine():
    ref = torch.tensor([1.0, NAN, INF, -INF])
    out = ref.clone()
    r = cmp(out, ref)
    assert r["unwritten"] == 0 and r["specials_mismatch"] == 0 and C.check_reasons(r) == []


def test_compare_nan_where_oracle_has_inf_is_specials_not_unwritten():
    ref = torch.tensor([1.0, INF, 3.0])
    out = torch.tensor([1.0, NAN, 3.0])
    r = cmp(out, ref)
    assert r["unwritten"] == 0 and r["specials_mismatch"] == 1
    assert C.check_reasons(r) == [C.SPECIALS]


def test_compare_inf_sign_mismatch():
    ref = torch.tensor([1.0, INF, -INF])
    out = torch.tensor([1.0, -INF, -INF])
    r = cmp(out, ref)
    assert r["specials_mismatch"] == 1 and C.SPECIALS in C.check_reasons(r)


def test_compare_finite_where_oracle_is_nan():
    ref = torch.tensor([1.0, NAN, 3.0, 4.0])
    out = torch.tensor([1.0, 2.0, INF, 4.0])
    r = cmp(out, ref)
    assert r["specials_mismatch"] == 2 and r["unwritten"] == 0 and r["bad"] == 0
    assert C.check_reasons(r) == [C.SPECIALS]


def test_compare_unwritten_plus_misplaced_special_reports_both():
    ref = torch.tensor([1.0, NAN, 3.0])
    out = poisoned_like(ref)
    out[1:] = torch.tensor([2.0, 3.0])
    r = cmp(out, ref)
    assert r["unwritten"] == 1 and r["specials_mismatch"] == 1
    assert C.check_reasons(r) == [C.UNWRITTEN, C.SPECIALS]


def test_compare_bad_counts_and_errors():
    ref = torch.ones(100, dtype=torch.float64)
    out = ref.clone()
    out[:5] += 0.01   # beyond atol + rtol*1 = 2e-3
    out[5:10] += 1e-3  # within tolerance
    r = cmp(out, ref)
    assert r["bad"] == 5
    assert r["max_abs_err"] == pytest.approx(0.01)
    assert r["max_norm_err"] == pytest.approx(0.01 / 2e-3)
    assert r["mean_abs_err"] == pytest.approx((5 * 0.01 + 5 * 1e-3) / 100)
    assert C.check_reasons(r) == [C.MISMATCH]


def test_compare_low_precision_output_against_fp32_oracle():
    ref = torch.randn(64, generator=torch.Generator().manual_seed(1))
    out = ref.to(torch.bfloat16)
    assert cmp(out, ref, atol=2e-2, rtol=1e-2)["bad"] == 0
    assert cmp(out, ref, atol=1e-6, rtol=1e-6)["bad"] > 0


def test_compare_integer_output_unwritten():
    # the oracle contract: references are fp32/fp64, outputs may be integer
    ref = torch.tensor([1, 2, 3, 4], dtype=torch.float64)
    out = torch.tensor([1, C.INT_POISON, 3, C.INT_POISON], dtype=torch.int64)
    r = cmp(out, ref, atol=0.5, rtol=0)
    assert r["unwritten"] == 2 and r["bad"] == 0  # unwritten elements are reported once, as UNWRITTEN
    assert C.check_reasons(r) == [C.UNWRITTEN]
    r = cmp(torch.tensor([1, 2, 3, 4]), ref, atol=0.5, rtol=0)
    assert C.check_reasons(r) == [] and r["unwritten"] == 0


def test_compare_integer_reference_does_not_crash():
    ref = torch.tensor([1, 2, 3], dtype=torch.int64)
    r = cmp(ref.clone(), ref, atol=0.5, rtol=0)
    assert r["bad"] == 0


@pytest.mark.parametrize("out, shape, dtype", [
    (torch.zeros(3, 4), (4, 3), torch.float32),
    (torch.zeros(12), (3, 4), torch.float32),
    (torch.zeros(3, 4, dtype=torch.float16), (3, 4), torch.float32),
])
def test_compare_layout_mismatch(out, shape, dtype):
    r = C.compare(out, torch.zeros(3, 4), shape, dtype, 1e-3, 1e-3)
    assert not r["layout_ok"] and "expected" in r["why"]
    assert C.check_reasons(r) == [C.LAYOUT]


def test_compare_rejects_tensor_subclass_and_non_tensors():
    class Sneaky(torch.Tensor):
        pass

    ref = torch.zeros(3)
    sub = ref.clone().as_subclass(Sneaky)
    r = C.compare(sub, ref, (3,), torch.float32, 1e-3, 1e-3)
    assert not r["layout_ok"] and "Sneaky" in r["why"]
    assert C.check_reasons(r) == [C.LAYOUT]
    p = torch.nn.Parameter(ref.clone())
    assert not C.compare(p, ref, (3,), torch.float32, 1e-3, 1e-3)["layout_ok"]
    for bad in (None, [0.0, 0.0, 0.0], ref.numpy()):
        r = C.compare(bad, ref, (3,), torch.float32, 1e-3, 1e-3)
        assert not r["layout_ok"]


def test_compare_empty():
    r = cmp(torch.empty(0, 3), torch.empty(0, 3))
    assert r["layout_ok"] and r["numel"] == 0 and C.check_reasons(r) == []


def test_compare_values_are_plain_python():
    ref = torch.randn(8)
    r = cmp(ref + 1, ref)
    assert all(isinstance(v, (bool, int, float, str)) for v in r.values())


# ---- error_ratio_problem ---------------------------------------------------------------------------------

def stats(max_norm=0.1, mean_abs=1e-4, bad=0, unwritten=0, specials=0, layout_ok=True):
    return {"layout_ok": layout_ok, "unwritten": unwritten, "specials_mismatch": specials, "bad": bad,
            "max_norm_err": max_norm, "mean_abs_err": mean_abs}


def test_error_ratio_within_k_passes():
    assert C.error_ratio_problem(stats(0.19), stats(0.1), k=2, floor=0.05, atol=1e-2) is None


def test_error_ratio_k_rule_bites_on_worst_error():
    msg = C.error_ratio_problem(stats(0.25), stats(0.1), k=2, floor=0.05, atol=1e-2)
    assert msg and "worst normalised error" in msg and "0.25" in msg


def test_error_ratio_k_rule_bites_on_mean_error():
    msg = C.error_ratio_problem(stats(0.1, mean_abs=5e-3), stats(0.1, mean_abs=1e-3), k=2, floor=0.05, atol=1e-2)
    assert msg and "mean abs error" in msg


def test_error_ratio_floor():
    # baseline exact: the candidate may still use k * floor of the tolerance
    assert C.error_ratio_problem(stats(0.09, 4e-4), stats(0.0, 0.0), k=2, floor=0.05, atol=1e-2) is None
    assert C.error_ratio_problem(stats(0.11, 0.0), stats(0.0, 0.0), k=2, floor=0.05, atol=1e-2)
    assert C.error_ratio_problem(stats(0.0, 1.1e-3), stats(0.0, 0.0), k=2, floor=0.05, atol=1e-2)


@pytest.mark.parametrize("base", [None, stats(bad=1), stats(unwritten=1), stats(specials=1), stats(layout_ok=False)])
def test_error_ratio_skipped_when_baseline_out_of_tolerance(base):
    assert C.error_ratio_problem(stats(50.0, 1.0), base, k=2, floor=0.05, atol=1e-2) is None


def test_error_ratio_on_real_compare_output():
    ref = torch.linspace(-1, 1, 1000, dtype=torch.float64)
    base = cmp(ref + 1e-4, ref, atol=1e-3, rtol=0)
    cand = cmp(ref + 5e-4, ref, atol=1e-3, rtol=0)
    assert base["bad"] == cand["bad"] == 0
    assert C.error_ratio_problem(cand, base, k=2, floor=0.05, atol=1e-3)
    assert C.error_ratio_problem(cand, base, k=6, floor=0.05, atol=1e-3) is None


# ---- snapshots and mutated inputs ------------------------------------------------------------------------

def gappy_inputs():
    spec = TensorSpec((3, 4), "bfloat16", (7, 1), 2, "normal")
    x = build_tensor(spec, "cpu")
    fill_(x, spec, make_generator("cpu", 1))
    yspec = TensorSpec((5,), "float32", contiguous_strides((5,)), 0, "normal")
    y = build_tensor(yspec, "cpu")
    fill_(y, yspec, make_generator("cpu", 2))
    return {"x": x, "y": y, "none": None}


def test_untouched_inputs_not_mutated():
    inputs = gappy_inputs()
    snaps = C.snapshot_inputs(inputs)
    assert set(snaps) == {"x", "y"}
    assert C.mutated_inputs(inputs, snaps, []) == []


def test_write_into_gap_bytes_detected():
    inputs = gappy_inputs()
    snaps = C.snapshot_inputs(inputs)
    flat = storage_of(inputs["x"])
    flat[6] = flat[6] + 1  # between row 0 (2..5) and row 1 (9..12): not part of the view
    assert torch.equal(inputs["x"], C.restore_views(inputs, snaps)["x"])  # the view itself is unchanged
    assert C.mutated_inputs(inputs, snaps, []) == ["x"]


def test_write_before_storage_offset_detected():
    inputs = gappy_inputs()
    snaps = C.snapshot_inputs(inputs)
    storage_of(inputs["x"])[0] = 99.0
    assert C.mutated_inputs(inputs, snaps, []) == ["x"]


def test_write_into_view_detected_and_allowed_list():
    inputs = gappy_inputs()
    snaps = C.snapshot_inputs(inputs)
    inputs["x"][1, 2] = 1234.0
    inputs["y"].zero_()
    assert C.mutated_inputs(inputs, snaps, []) == ["x", "y"]
    assert C.mutated_inputs(inputs, snaps, ["x"]) == ["y"]


def test_bitwise_nan_payload_change_detected():
    x = torch.full((4,), NAN)
    inputs = {"x": x}
    snaps = C.snapshot_inputs(inputs)
    x.view(torch.int32)[0] = 0x7FC00001  # still NaN, different bits
    assert bool(torch.isnan(x).all())
    assert C.mutated_inputs(inputs, snaps, []) == ["x"]


def test_snapshot_is_a_copy_and_restore_views_keeps_layout():
    inputs = gappy_inputs()
    snaps = C.snapshot_inputs(inputs)
    views = C.restore_views(inputs, snaps)
    assert views["none"] is None
    assert views["x"].stride() == inputs["x"].stride() and views["x"].storage_offset() == 2
    assert torch.equal(views["x"], inputs["x"])
    inputs["x"].fill_(0)
    assert not torch.equal(views["x"], inputs["x"])


# ---- check_reasons / finite_or_none ----------------------------------------------------------------------

def test_check_reasons_layout_short_circuits():
    assert C.check_reasons(stats(layout_ok=False, bad=3, unwritten=2)) == [C.LAYOUT]


def test_check_reasons_all():
    assert C.check_reasons(stats(bad=1, unwritten=2, specials=3)) == [C.UNWRITTEN, C.SPECIALS, C.MISMATCH]
    assert C.check_reasons(stats(unwritten=2)) == [C.UNWRITTEN]
    assert C.check_reasons(stats()) == []


def test_finite_or_none():
    assert C.finite_or_none(1.5) == 1.5
    assert C.finite_or_none(INF) is None and C.finite_or_none(NAN) is None and C.finite_or_none(None) is None


def test_shift_floats_scales_and_shifts_floating_inputs_in_place_and_keeps_integers():
    x = torch.tensor([0.0, 1.0, -2.0])
    xv = x[1:]  # a view: shifted through its own storage, in place
    half = torch.tensor([4.0], dtype=torch.float16)
    pos = torch.tensor([3, 7])
    inputs = {"x": xv, "half": half, "positions": pos, "absent": None}
    C.shift_floats_(inputs)
    assert inputs["x"] is xv and torch.equal(x, torch.tensor([0.0, 1.75, -2.75]))
    assert half.dtype == torch.float16 and half.item() == 6.25
    assert torch.equal(pos, torch.tensor([3, 7]))  # indices keep their meaning


def test_the_shift_changes_a_standard_normal_inputs_statistics():
    # the point of phase 3: a result computed from a previous call's statistics must be far off
    g = torch.Generator().manual_seed(0)
    x = torch.randn(1 << 16, generator=g)
    before = (x.mean().item(), x.std().item())
    C.shift_floats_({"x": x})
    assert abs(x.mean().item() - before[0]) > 0.2 and abs(x.std().item() / before[1] - 1.5) < 1e-3


def test_shift_floats_shifts_a_broadcast_input_once_per_memory_location():
    # a scale vector expanded over tokens (stride 0): an in-place op on the view itself is refused by torch
    base = torch.tensor([1.0, -2.0, 4.0])
    scale = base.expand(5, 3)
    C.shift_floats_({"scale": scale})
    assert torch.equal(base, torch.tensor([1.75, -2.75, 6.25]))  # once, not five times
    assert torch.equal(scale, base.expand(5, 3))


def test_shift_floats_leaves_the_gaps_of_a_strided_view_alone():
    buf = torch.arange(12, dtype=torch.float32).view(3, 4)
    C.shift_floats_({"x": buf[:, ::2]})
    expect = torch.arange(12, dtype=torch.float32).view(3, 4)
    expect[:, ::2] = expect[:, ::2] * C.SHIFT_SCALE + C.SHIFT_OFFSET
    assert torch.equal(buf, expect)


def _has_broadcast(spec) -> bool:
    return spec is not None and any(s == 0 and n > 1 for n, s in zip(spec.shape, spec.stride))


def test_every_broadcast_row_of_every_task_takes_the_phase_3_shift():
    # Phase 3 runs on a GPU only; this runs its input shift on a CPU over each task's rows with a broadcast input,
    # which crashed fuse_scale_shift's and rotary_embedding's benches on 2026-11-27 (reg_sel_ln_fp32_b3_s31_c130_bcast,
    # reg_ltx2_batch_broadcast_cos)
    from kda.core.paths import all_task_dirs
    from kda.definition.task import Task
    from kda.definition.workloads import build_inputs, refill_inputs
    seen = set()
    for task_dir in all_task_dirs():
        task = Task.load(task_dir.name)
        for row in task.rows:
            if not any(_has_broadcast(s) for s in row.tensors.values()):
                continue
            if sum(math.prod(s.shape) for s in row.tensors.values() if s is not None) > 1 << 22:
                continue  # a production row's full size: the small regression rows cover the same layouts
            inputs = build_inputs(row, "cpu")
            refill_inputs(row, inputs, 7)
            before = {k: t.clone() for k, t in inputs.items() if t is not None}
            C.shift_floats_(inputs)
            for k, t in inputs.items():
                if t is None:
                    continue
                want = before[k].double() * C.SHIFT_SCALE + C.SHIFT_OFFSET if t.is_floating_point() else before[k]
                assert torch.allclose(t.double(), want.double(), rtol=1e-2, atol=1e-2), (task_dir.name, row.id, k)
            seen.add(row.id)
    assert {"reg_sel_ln_fp32_b3_s31_c130_bcast", "reg_ltx2_batch_broadcast_cos"} <= seen
