"""scripts/layout_sweep.py on a CPU: every variant it can sweep patches knobs the candidate really has (a renamed
knob would otherwise make a sweep time the default under another name)."""
import importlib.util

import pytest

from kda.paths import repo_root


def _load():
    spec = importlib.util.spec_from_file_location("layout_sweep", repo_root() / "scripts" / "layout_sweep.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


SWEEP = _load()


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
            if isinstance(old, tuple):
                assert len(old) == len(value), f"{task} variant {name}: {attr} {value} vs {old}"


def test_group_norm_variants_cover_both_split_layouts():
    module, variants = SWEEP.VARIANTS["group_norm_silu"]()
    lays = {v["_SPLIT_FLAT"] for v in variants.values() if "_SPLIT_FLAT" in v}
    assert module._SPLIT_FLAT in lays and module._SPLIT_CONTIGUOUS in lays


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
