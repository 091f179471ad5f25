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
        for attr, value in patch.items():
            assert hasattr(module, attr), f"{task} variant {name}: the candidate has no {attr}"
            old = getattr(module, attr)
            assert callable(old) == callable(value), f"{task} variant {name}: {attr} changes kind"
            if isinstance(old, tuple):
                assert len(old) == len(value), f"{task} variant {name}: {attr} {value} vs {old}"


def test_group_norm_variants_cover_both_split_layouts():
    module, variants = SWEEP.VARIANTS["group_norm_silu"]()
    lays = {v["_SPLIT_FLAT"] for v in variants.values() if "_SPLIT_FLAT" in v}
    assert module._SPLIT_FLAT in lays and module._SPLIT_CONTIGUOUS in lays
