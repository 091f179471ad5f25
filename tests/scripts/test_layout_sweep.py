"""scripts/layout_sweep.py on a CPU: every variant it can sweep patches knobs the candidate really has (a renamed
knob would otherwise make a sweep time the default under another name), and the error measure that sweep and
graph_placement check variants with."""

import pytest
import torch

from script_support import load_script


SWEEP = load_script("layout_sweep")


@pytest.mark.parametrize("task", sorted(SWEEP.VARIANTS))
def test_every_variant_patches_existing_knobs(task):
    module, variants = SWEEP.VARIANTS[task]()
    assert variants.get("default") == {}
    assert len(variants) > 1
    for name, patch in variants.items():
        for key, value in patch.items():
            mod, attr = SWEEP._target(module, key)
            assert hasattr(mod, attr), f"{task} variant {name}: the candidate has no {attr}"
            old = getattr(mod, attr)
            assert callable(old) == callable(value), f"{task} variant {name}: {attr} changes kind"
            # A layout tuple (numbers by position) keeps its arity; a set of choices (dtypes) need not.
            if isinstance(old, tuple) and all(isinstance(v, int) for v in old):
                assert isinstance(value, tuple) and len(old) == len(value), \
                    f"{task} variant {name}: {attr} {value} vs {old}"


@pytest.mark.parametrize("task", ["norm_infer", "rotary_embedding", "fuse_scale_shift"])
def test_layout_variants_return_what_the_default_returns(task):
    """A layout function's replacement answers in the default's shape (a sweep would otherwise crash on a GPU)."""
    module, variants = SWEEP.VARIANTS[task]()
    probes = {"_layout": [(4096, 128, 128), (8640, 5120, 8192)], "_split_layout": [(1536, 32, 64)],
              "_flat_config": [(1 << 20,)]}
    seen = 0
    for name, patch in variants.items():
        for key, value in patch.items():
            mod, attr = SWEEP._target(module, key)
            for args in probes.get(attr, []):
                new, old = value(*args), getattr(mod, attr)(*args)
                assert new is None or len(new) == len(old), (name, attr, new, old)
                seen += 1
    assert seen > 0


def test_worst_norm_err_scales_by_the_dtype_tolerance_and_skips_non_finite():
    tol = {"bfloat16": {"atol": 0.01, "rtol": 0.1}, "float32": {"atol": 1e-5, "rtol": 1e-5}}
    ref = {"y": torch.tensor([1.0, 2.0, float("nan")], dtype=torch.float64),
           "z": torch.tensor([0.0, 0.0], dtype=torch.float64)}
    specs = {"y": ((3,), torch.bfloat16), "z": ((2,), torch.float32)}
    out = {"y": torch.tensor([1.0, 2.25, 0.0], dtype=torch.bfloat16), "z": torch.tensor([0.0, 5e-6])}
    # y: |2.25 - 2| / (0.01 + 0.1 * 2) = 1.19 (the NaN reference is skipped); z: 5e-6 / 1e-5 = 0.5
    assert abs(SWEEP.worst_norm_err(out, ref, specs, tol) - 0.25 / 0.21) < 1e-6
    out["y"] = ref["y"].to(torch.bfloat16)
    assert abs(SWEEP.worst_norm_err(out, ref, specs, tol) - 0.5) < 1e-3
    assert SWEEP.worst_norm_err({"z": torch.zeros(2)}, ref, {"z": specs["z"]}, tol) == 0.0


def test_copy_share_is_the_harness_copy_fraction():
    # 302 MB in 151.5 us against 2.85 TB/s: the harness's copy_frac of 0.70 for that row and rate
    assert abs(SWEEP.copy_share(301_991_936, 151.5, 2.85) - 301_991_936 / 151.5e-6 / 2.85e12) < 1e-12
    assert 0.69 < SWEEP.copy_share(301_991_936, 151.5, 2.85) < 0.71


def test_rounds_rotate_the_variants_so_each_goes_first_once():
    names = ["a", "b", "c"]
    orders = [SWEEP.round_order(names, r) for r in range(4)]
    assert orders[:3] == [["a", "b", "c"], ["b", "c", "a"], ["c", "a", "b"]]
    assert orders[3] == orders[0]
    assert all(sorted(o) == names for o in orders)  # every variant timed every round
    assert SWEEP.round_order(["only"], 5) == ["only"]
