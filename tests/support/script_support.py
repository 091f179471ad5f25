"""Import a file of scripts/, or of a task's tools/ folder, as a module, for the tests (neither is a package)."""
import importlib.util
import sys

from kda.core.paths import repo_root, resolve_task


def load_script(name: str, task: str | None = None):
    """scripts/NAME.py, or TASK/tools/NAME.py when `task` is given. scripts/ goes on sys.path either way
    (graph_placement and a task's tools import layout_sweep from it), and so does the task's tools/ folder (its tools
    import each other)."""
    scripts = str(repo_root() / "scripts")
    folder = resolve_task(task) / "tools" if task else repo_root() / "scripts"
    for path in dict.fromkeys((str(folder), scripts)):
        if path not in sys.path:
            sys.path.insert(0, path)
    spec = importlib.util.spec_from_file_location(name, folder / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod  # as an import would: dataclasses look their module up there
    spec.loader.exec_module(mod)
    return mod
