"""Loads the real qknorm_rope candidate (solution/ package) under a private name, for the in-place fakes."""
import importlib.util
import sys
from pathlib import Path

SOLUTION = Path(__file__).resolve().parents[3] / "diffusion/kernels/qknorm_rope/solution"
_NAME = "kda_zoo_inplace_real_solution"


def real():
    mod = sys.modules.get(_NAME)
    if mod is None:
        spec = importlib.util.spec_from_file_location(_NAME, SOLUTION / "__init__.py",
                                                      submodule_search_locations=[str(SOLUTION)])
        mod = importlib.util.module_from_spec(spec)
        sys.modules[_NAME] = mod
        spec.loader.exec_module(mod)
    return mod
