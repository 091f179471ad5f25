"""Import a file of scripts/ as a module, for the tests of this folder (scripts/ is not a package)."""
import importlib.util
import sys

from kda.core.paths import repo_root


def load_script(name: str):
    scripts = str(repo_root() / "scripts")
    if scripts not in sys.path:
        sys.path.insert(0, scripts)  # graph_placement imports layout_sweep from its own folder
    spec = importlib.util.spec_from_file_location(name, repo_root() / "scripts" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod
