"""kda/definition/workloads.py: row validation, tensors built exactly as declared, seeded fills of the whole storage."""
import copy
import itertools
import json
import math
from pathlib import Path

import pytest
import torch
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from kda.core.errors import KdaError
from kda.definition.workloads import (
    TensorSpec, _layout_problem, build_inputs, build_tensor, contiguous_strides, fill_, load_rows, make_generator,
    parse_rows, refill_inputs, storage_of, trial_seed,
)

ROOT = Path(__file__).resolve().parents[2]
TASK = ROOT / "diffusion" / "kernels" / "fuse_scale_shift"


def row(rid="r0", **tensors):
    return {"id": rid, "production": False, "model": "m", "source": "regression: test", "function": "f",
            "tensors": tensors or {"x": {"shape": [2, 3], "dtype": "float32"}},
            "scalars": {"c": 1.0}, "seed": 1, "cpu": True}


def parse_err(raw) -> str:
    with pytest.raises(KdaError) as e:
        parse_rows(raw, "w.json")
    msg = str(e.value)
    assert msg.startswith("w.json"), msg
    return msg


# ---- parse_rows ------------------------------------------------------------------------------------------

def test_parse_defaults_contiguous_and_none_tensor():
    rows = parse_rows([row(x={"shape": [2, 3, 4], "dtype": "bfloat16"}, y=None)], "w.json")
    t = rows[0].tensors["x"]
    assert t.stride == (12, 4, 1) and t.storage_offset == 0 and t.dist == "normal"
    assert rows[0].tensors["y"] is None
    assert rows[0].describe() == "x[2, 3, 4]:bfloat16"


def test_parse_empty_or_not_a_list():
    assert "non-empty JSON list" in parse_err([])
    assert "non-empty JSON list" in parse_err({"id": "x"})


def test_duplicate_id_names_row():
    msg = parse_err([row("a"), row("b"), row("a")])
    assert "row 2 ('a')" in msg and "duplicate id 'a'" in msg


def test_schema_error_names_row_and_key():
    r = row("bad")
    r["tensors"]["x"]["dtype"] = "float8"
    msg = parse_err([row("ok"), r])
    assert "row 1 ('bad')" in msg and "tensors.x.dtype" in msg and "'float8'" in msg
    r = row("bad2")
    del r["seed"]
    assert "row 0 ('bad2')" in (msg := parse_err([r])) and "missing key 'seed'" in msg


def test_stride_length_mismatch_names_row_and_tensor():
    msg = parse_err([row("s", x={"shape": [2, 3], "dtype": "float32", "stride": [3]})])
    assert "row 0 ('s')" in msg and "'x'" in msg and "stride has 1 entries but shape has 2" in msg


def test_negative_stride():
    msg = parse_err([row("neg", x={"shape": [2, 3], "dtype": "float32", "stride": [3, -1]})])
    assert "row 0 ('neg')" in msg and "'x'" in msg and "strides must be >= 0" in msg


def test_negative_storage_offset():
    msg = parse_err([row("off", x={"shape": [2], "dtype": "float32", "storage_offset": -1})])
    assert "row 0 ('off')" in msg and "storage_offset must be >= 0" in msg


def test_overlapping_layout():
    msg = parse_err([row("ov", x={"shape": [4, 3], "dtype": "float32", "stride": [2, 1]})])
    assert "row 0 ('ov')" in msg and "'x'" in msg and "overlap" in msg


def test_index01_on_float():
    msg = parse_err([row("idx", mask={"shape": [4], "dtype": "float16", "dist": "index01"})])
    assert "row 0 ('idx')" in msg and "'mask'" in msg and "index01" in msg and "float16" in msg


def test_index01_on_int_ok():
    rows = parse_rows([row(mask={"shape": [4], "dtype": "int32", "dist": "index01"})], "w.json")
    assert rows[0].tensors["mask"].dist == "index01"


def test_unknown_dist():
    msg = parse_err([row(x={"shape": [4], "dtype": "float32", "dist": "gauss"})])
    assert "tensors.x.dist" in msg and "'gauss'" in msg


def test_broadcast_stride_zero_accepted():
    rows = parse_rows([row(x={"shape": [2, 5, 3], "dtype": "float32", "stride": [0, 0, 1]})], "w.json")
    assert rows[0].tensors["x"].stride == (0, 0, 1)


# ---- committed workloads ----------------------------------------------------------------------------------

def test_committed_workloads_parse():
    rows = load_rows(TASK / "bench" / "workloads.json")
    ids = [r.id for r in rows]
    assert len(ids) == len(set(ids)) > 0
    assert any(r.cpu for r in rows) and any(r.production for r in rows)
    wan = next(r for r in rows if r.id == "wan_ti2v_s18144_c3072_chunk_fp32")
    assert wan.tensors["shift"].storage_offset == 3072 and wan.tensors["shift"].stride == (18144 * 6144, 6144, 1)


def test_cpu_rows_build_as_declared():
    passed_none = []
    for r in load_rows(TASK / "bench" / "workloads.json"):
        if not r.cpu:
            continue
        # Built and filled as the worker does, so a tensor declared null (an optional argument passed as None, as
        # the select01 rows' weight and bias) arrives as None.
        inputs = build_inputs(r, "cpu")
        refill_inputs(r, inputs, r.seed)
        assert set(inputs) == set(r.tensors), r.id
        for name, spec in r.tensors.items():
            t = inputs[name]
            if spec is None:
                assert t is None, (r.id, name)
                passed_none.append((r.id, name))
                continue
            assert tuple(t.shape) == spec.shape and t.stride() == spec.stride, (r.id, name)
            assert t.storage_offset() == spec.storage_offset and t.dtype == spec.torch_dtype
            if spec.dist != "specials":
                assert bool(torch.isfinite(t.float()).all()), (r.id, name)
    assert passed_none, "no CPU row declares a None tensor: the None branch above went unexercised"


def test_load_rows_errors(tmp_path):
    with pytest.raises(KdaError, match="no such file"):
        load_rows(tmp_path / "missing.json")
    p = tmp_path / "w.json"
    p.write_text("[{")
    with pytest.raises(KdaError, match="not valid JSON") as e:
        load_rows(p)
    assert str(p) in str(e.value)


# ---- TensorSpec / build_tensor -----------------------------------------------------------------------------

def spec(shape, dtype="float32", stride=None, offset=0, dist="normal"):
    shape = tuple(shape)
    return TensorSpec(shape, dtype, tuple(stride) if stride is not None else contiguous_strides(shape), offset, dist)


def test_build_tensor_honours_stride_and_offset():
    s = spec([2, 61, 256], "bfloat16", [61 * 264, 264, 1], 5)
    t = build_tensor(s, "cpu")
    assert tuple(t.shape) == (2, 61, 256) and t.stride() == (61 * 264, 264, 1) and t.storage_offset() == 5
    assert t.dtype == torch.bfloat16
    assert storage_of(t).numel() == s.storage_numel == 5 + 1 + 61 * 264 + 60 * 264 + 255
    assert not t.is_contiguous()


def test_build_tensor_broadcast():
    t = build_tensor(spec([4, 3], stride=[0, 1], offset=2), "cpu")
    assert t.stride() == (0, 1) and t.storage_offset() == 2 and storage_of(t).numel() == 5


def test_nbytes_counts_broadcast_once():
    assert spec([2, 3, 4], "bfloat16").nbytes == 2 * 3 * 4 * 2
    assert spec([2, 3, 4], "bfloat16", [0, 4, 1]).nbytes == 3 * 4 * 2
    assert spec([8, 16, 4], "float32", [0, 0, 1]).nbytes == 4 * 4
    assert spec([], "float32").nbytes == 4
    # a padded layout still moves only its elements, not the gaps
    assert spec([2, 61, 256], "bfloat16", [61 * 264, 264, 1], 5).nbytes == 2 * 61 * 256 * 2


def test_empty_tensor():
    s = spec([0, 3], offset=4)
    assert s.numel == 0 and s.storage_numel == 4
    t = build_tensor(s, "cpu")
    assert tuple(t.shape) == (0, 3)
    fill_(t, s, make_generator("cpu", 0))


# ---- fill_ -----------------------------------------------------------------------------------------------

GAPPY = spec([3, 4], "float32", [7, 1], 3)  # storage 3 + 1 + 14 + 3 = 21, gaps between rows and before offset


def filled(seed, s=GAPPY, sentinel=12345.0):
    t = build_tensor(s, "cpu")
    storage_of(t).fill_(sentinel)
    fill_(t, s, make_generator("cpu", seed))
    return t


def test_fill_covers_whole_storage_including_gaps():
    t = filled(1)
    flat = storage_of(t)
    assert flat.numel() == GAPPY.storage_numel == 21
    assert not bool((flat == 12345.0).any())
    gap_positions = [0, 1, 2, 7, 8, 9, 14, 15, 16]
    assert bool(torch.isfinite(flat[gap_positions]).all())
    assert flat[gap_positions].abs().sum() > 0


def test_fill_deterministic_per_seed_and_differs_across_seeds():
    a, b, c = storage_of(filled(7)), storage_of(filled(7)), storage_of(filled(8))
    assert torch.equal(a, b)
    assert not torch.equal(a, c)


def test_fill_gap_values_depend_on_seed():
    a, c = storage_of(filled(7)), storage_of(filled(8))
    assert not torch.equal(a[:3], c[:3])


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16"])
def test_specials_has_nan_and_both_infs(dtype):
    s = spec([200_000], dtype, dist="specials")
    t = build_tensor(s, "cpu")
    fill_(t, s, make_generator("cpu", 3))
    f = t.float()
    n_nan, n_pinf, n_ninf = int(f.isnan().sum()), int((f == math.inf).sum()), int((f == -math.inf).sum())
    assert n_nan > 0 and n_pinf > 0 and n_ninf > 0
    assert n_nan + n_pinf + n_ninf < 0.01 * t.numel()  # specials are rare, the rest is normal data


@pytest.mark.parametrize("dtype, lo", [("float32", 1e4), ("bfloat16", 1e4), ("float16", 1e2)])
def test_large_is_large_and_finite(dtype, lo):
    s = spec([100_000], dtype, dist="large")
    t = build_tensor(s, "cpu")
    fill_(t, s, make_generator("cpu", 4))
    f = t.float()
    assert bool(torch.isfinite(f).all())
    assert float(f.abs().median()) > 0.3 * lo
    assert float(f.abs().max()) > 2 * lo


@pytest.mark.parametrize("dtype, mean", [("float32", 32.0), ("bfloat16", 32.0), ("float16", 256.0)])
def test_offset_has_a_mean_far_above_its_spread_that_survives_rounding(dtype, mean):
    s = spec([100_000], dtype, dist="offset")
    t = build_tensor(s, "cpu")
    fill_(t, s, make_generator("cpu", 8))
    f = t.double()
    assert abs(float(f.mean()) - mean) < 0.05
    # randn's spread is still there after the input's own rounding (a spacing of 1/4 in the 16-bit dtypes)
    assert 0.95 < float(f.std()) < 1.1
    assert len(torch.unique(f)) > 20


def test_every_layer_and_group_norm_task_has_offset_rows_in_each_of_its_dtypes():
    """Issue 34, attack 4: a variance taken as E[x^2] - mean^2 passes every zero-mean row; each task that subtracts
    a mean (LayerNorm, GroupNorm) carries rows whose normalised input has a mean far above its spread, an fp32 one
    small enough for the CPU gate among them. qknorm_rope and rotary_embedding subtract no mean."""
    norms = {"norm_infer": "x", "group_norm_silu": "x", "cutedsl_norm_scale_shift": "x", "cutedsl_norm_tanh_mul_add": "x"}
    for task, name in norms.items():
        rows = load_rows(ROOT / "diffusion" / "kernels" / task / "bench" / "workloads.json")
        offset = [r for r in rows if r.tensors.get(name) is not None and r.tensors[name].dist == "offset"]
        assert {r.tensors[name].dtype for r in offset} >= {"float32", "bfloat16"}, task
        assert any(r.cpu and r.tensors[name].dtype == "float32" for r in offset), task


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16"])
def test_heavy_is_finite_with_tails(dtype):
    s = spec([100_000], dtype, dist="heavy")
    t = build_tensor(s, "cpu")
    fill_(t, s, make_generator("cpu", 5))
    f = t.float()
    assert bool(torch.isfinite(f).all())
    assert float(f.abs().max()) > 100  # a Cauchy tail, far beyond any normal sample
    assert 0.5 < float(f.abs().median()) < 2  # median |Cauchy| = 1


def test_uniform_positive_index01_int_ranges():
    g = make_generator("cpu", 6)
    for dist, dtype, lo, hi in (("uniform", "float32", -1, 1), ("positive", "float32", 0.5, 1.5),
                                ("index01", "int64", 0, 1), ("normal", "int32", -100, 99), ("normal", "bool", 0, 1)):
        s = spec([10_000], dtype, dist=dist)
        t = build_tensor(s, "cpu")
        fill_(t, s, g)
        v = t.to(torch.float64)
        assert float(v.min()) >= lo and float(v.max()) <= hi, (dist, dtype)
        assert len(torch.unique(v)) >= 2, (dist, dtype)
    s = spec([10_000], "int8", dist="index01")
    t = build_tensor(s, "cpu")
    fill_(t, s, g)
    assert set(torch.unique(t).tolist()) == {0, 1}


def test_trial_seed_distinct():
    seeds = {trial_seed(9001, salt, trial, phase) for salt in (0, 1) for trial in range(5) for phase in (0, 1)}
    assert len(seeds) == 20
    assert all(0 <= s < 2**63 for s in seeds)


# ---- property: accepted layouts build exactly and never overlap -------------------------------------------

layouts = st.integers(0, 4).flatmap(lambda nd: st.tuples(
    st.lists(st.integers(0, 5), min_size=nd, max_size=nd),
    st.lists(st.integers(0, 40), min_size=nd, max_size=nd),
    st.integers(0, 10),
    st.sampled_from(["float32", "bfloat16", "int32", "uint8"]),
))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.filter_too_much])
@given(layouts)
def test_accepted_layouts_build_exactly(layout):
    shape, stride, offset, dtype = layout
    shape, stride = tuple(shape), tuple(stride)
    assume(_layout_problem(shape, stride) is None)
    s = TensorSpec(shape, dtype, stride, offset, "normal")
    t = build_tensor(s, "cpu")
    assert tuple(t.shape) == shape and tuple(t.stride()) == stride and t.storage_offset() == offset
    n = storage_of(t).numel()
    assert n == s.storage_numel
    if s.numel:
        # every addressed element lies in the storage, and distinct non-broadcast indices never alias
        addrs = {}
        for idx in itertools.product(*(range(k) for k in shape)):
            a = offset + sum(i * st_ for i, st_ in zip(idx, stride))
            assert 0 <= a < n
            key = tuple(i for i, st_ in zip(idx, stride) if st_ != 0)
            assert addrs.setdefault(a, key) == key, f"aliasing at {a}: {addrs[a]} vs {key}"
        fill_(t, s, make_generator("cpu", 0))
        assert storage_of(t).numel() == n


def test_write_or_check_writes_validates_and_detects_drift(tmp_path):
    from kda.definition.workloads import tensor_decl, write_or_check

    row = {"id": "r", "production": False, "model": "m", "source": "regression: t", "function": "f",
           "tensors": {"x": tensor_decl([2, 3], "float32", stride=[3, 1], offset=0)}, "scalars": {}, "seed": 1,
           "cpu": True}
    assert tensor_decl([2], "float16", dist="large") == {"shape": [2], "dtype": "float16", "dist": "large"}
    out = tmp_path / "workloads.json"
    write_or_check(out, [row], [])
    write_or_check(out, [row], ["--check"])  # in sync: returns quietly
    with pytest.raises(SystemExit, match="out of date"):
        write_or_check(out, [{**row, "seed": 2}], ["--check"])
    with pytest.raises(KdaError, match="duplicate id"):
        write_or_check(out, [row, row], [])


def test_arange_and_permutation_positions():
    """Positions for RoPE: arange is 0..n-1 whatever the seed; permutation holds the same values, shuffled per seed."""
    s = spec([64], "int64", dist="arange")
    t = build_tensor(s, "cpu")
    fill_(t, s, make_generator("cpu", 1))
    assert t.tolist() == list(range(64))
    p = spec([64], "int32", dist="permutation")
    a, b = build_tensor(p, "cpu"), build_tensor(p, "cpu")
    fill_(a, p, make_generator("cpu", 1))
    fill_(b, p, make_generator("cpu", 2))
    assert sorted(a.tolist()) == list(range(64)) and a.tolist() != list(range(64)) and a.tolist() != b.tolist()
    msg = parse_err([row(pos={"shape": [4], "dtype": "float32", "dist": "permutation"})])
    assert "'pos'" in msg and "permutation" in msg


# ---- rotated input sets (issue 34, attack 2) ---------------------------------------------------------------------

def test_input_sets_are_distinct_aligned_exact_and_refilled_whole():
    from kda.definition.workloads import SET_ALIGN_BYTES, build_input_sets, set_bytes

    raw = row(x={"shape": [3, 5], "dtype": "bfloat16", "stride": [8, 1], "storage_offset": 2},
              pos={"shape": [7], "dtype": "int64", "dist": "permutation"}, w=None)
    (r,) = parse_rows([raw], "w.json")
    found = build_input_sets(r, "cpu", 4, seed=11)
    assert found.count == 4 and all(one["w"] is None for one in found.sets)
    ptrs = set()
    for one in found.sets:
        x = one["x"]
        assert tuple(x.shape) == (3, 5) and x.stride() == (8, 1)
        assert sorted(one["pos"].tolist()) == list(range(7))  # each set its own permutation of its positions
        ptrs.add(x.data_ptr())
    assert len(ptrs) == 4
    starts = [one["x"].data_ptr() - one["x"].storage_offset() * 2 for one in found.sets]
    assert all((b - starts[0]) % SET_ALIGN_BYTES == 0 for b in starts)
    before = [one["x"].clone() for one in found.sets]
    positions = [one["pos"].clone() for one in found.sets]
    found.refill(12)
    assert all(not torch.equal(b, one["x"]) for b, one in zip(before, found.sets))
    assert all(torch.equal(p, one["pos"]) for p, one in zip(positions, found.sets))
    assert not torch.equal(found.sets[0]["x"], found.sets[1]["x"])
    assert set_bytes(r) == 2 * SET_ALIGN_BYTES  # each tensor's storage rounded up to the alignment
