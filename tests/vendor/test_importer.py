"""kda/vendor/importer.py: the guarded import root answers every import of the upstream top-level package."""
import importlib
import sys
import uuid
from pathlib import Path

import pytest

from kda.definition.config import TaskConfig
from kda.core.errors import KdaError
from kda.vendor.fetch import VendorInfo
from kda.vendor.importer import SHIM_DIR, SHIMS, GuardedUpstreamFinder, install_finder, load_entry_points, module_name


def _purge(top: str) -> None:
    sys.meta_path[:] = [f for f in sys.meta_path if not (isinstance(f, GuardedUpstreamFinder) and f.top == top)]
    for name in list(sys.modules):
        if name == top or name.startswith(top + "."):
            del sys.modules[name]
    importlib.invalidate_caches()


@pytest.fixture
def fake_tree(tmp_path):
    """A fake upstream package `fakeup_<hex>` with two vendored files and one shim, outside sys.path."""
    top = f"fakeup_{uuid.uuid4().hex[:10]}"
    root = tmp_path / "vendor"
    pkg = root / top / "kernels" / "triton"
    pkg.mkdir(parents=True)
    (pkg / "ops.py").write_text(
        f"from {top}.runtime.platforms import current_platform\n"
        f"from {top}.kernels.triton import util\n"
        "def entry(x):\n    return util.twice(x) + current_platform.bonus\n")
    (pkg / "util.py").write_text("def twice(x):\n    return 2 * x\n")
    (pkg / "greedy.py").write_text(f"import {top}.not_vendored.helpers\n")
    shim = tmp_path / "shim_platforms.py"
    shim.write_text("class _P:\n    bonus = 100\ncurrent_platform = _P()\n")
    files = [f"{top}/kernels/triton/ops.py", f"{top}/kernels/triton/util.py", f"{top}/kernels/triton/greedy.py"]
    yield top, root, files, shim
    _purge(top)
    assert not any(isinstance(f, GuardedUpstreamFinder) and f.top == top for f in sys.meta_path)
    assert not any(n == top or n.startswith(top + ".") for n in sys.modules)


def finder_for(top, root, files, shim):
    mods = {module_name(p): root / p for p in files}
    f = GuardedUpstreamFinder(top, mods, {f"{top}.runtime.platforms": shim})
    sys.meta_path.insert(0, f)
    return f


def test_module_name():
    assert module_name("sglang/jit_kernel/diffusion/triton/scale_shift.py") == \
        "sglang.jit_kernel.diffusion.triton.scale_shift"


def test_vendored_file_and_shim_import(fake_tree):
    top, root, files, shim = fake_tree
    f = finder_for(top, root, files, shim)
    ops = importlib.import_module(f"{top}.kernels.triton.ops")
    assert ops.entry(5) == 110
    assert Path(ops.__file__) == root / top / "kernels" / "triton" / "ops.py"
    plat = sys.modules[f"{top}.runtime.platforms"]
    assert Path(plat.__file__) == shim
    assert set(f.loaded) == {f"{top}.kernels.triton.ops", f"{top}.runtime.platforms", f"{top}.kernels.triton.util"}
    # parents are empty packages
    assert sys.modules[top].__path__ == [] and sys.modules[f"{top}.runtime"].__path__ == []


def test_unexpected_import_raises_naming_module(fake_tree):
    top, root, files, shim = fake_tree
    finder_for(top, root, files, shim)
    with pytest.raises(ImportError, match=rf"'{top}\.not_vendored'") as e:
        importlib.import_module(f"{top}.kernels.triton.greedy")
    assert "upstream.files" in str(e.value) and "shim" in str(e.value)
    with pytest.raises(ImportError, match=rf"'{top}\.kernels\.cuda'"):
        importlib.import_module(f"{top}.kernels.cuda")


def test_from_import_of_missing_name_raises(fake_tree):
    top, root, files, shim = fake_tree
    finder_for(top, root, files, shim)
    with pytest.raises(ImportError, match="neither a vendored file"):
        exec(f"from {top}.kernels.triton import nope", {})


def test_finder_ignores_other_packages(fake_tree):
    top, root, files, shim = fake_tree
    f = GuardedUpstreamFinder(top, {}, {})
    assert f.find_spec("json") is None
    assert f.find_spec(top + "x") is None  # same prefix, different package


def test_install_finder_first_on_meta_path_and_idempotent(fake_tree):
    top, root, files, _ = fake_tree
    f = install_finder(top, root, files, [])
    assert sys.meta_path[0] is f
    assert install_finder(top, root, files, []) is f
    assert sum(isinstance(x, GuardedUpstreamFinder) and x.top == top for x in sys.meta_path) == 1
    util = importlib.import_module(f"{top}.kernels.triton.util")
    assert util.twice(4) == 8
    with pytest.raises(ImportError, match=rf"'{top}\.runtime'"):
        importlib.import_module(f"{top}.kernels.triton.ops")  # needs the shim, which was not installed


def test_install_finder_refuses_real_package_already_imported(fake_tree, tmp_path):
    top, root, files, _ = fake_tree
    real = tmp_path / "site" / top
    real.mkdir(parents=True)
    (real / "__init__.py").write_text("REAL = True\n")
    sys.path.insert(0, str(tmp_path / "site"))
    try:
        mod = importlib.import_module(top)
        assert mod.REAL
        with pytest.raises(KdaError, match=rf"the real '{top}' package"):
            install_finder(top, root, files, [])
    finally:
        sys.path.remove(str(tmp_path / "site"))


def test_install_finder_shadows_an_installed_package(fake_tree, tmp_path):
    """With the real package on sys.path (but not imported), the vendored tree still wins."""
    top, root, files, _ = fake_tree
    real = tmp_path / "site" / top / "kernels" / "triton"
    real.mkdir(parents=True)
    for d in (real.parent.parent, real.parent, real):
        (d / "__init__.py").write_text("")
    (real / "util.py").write_text("def twice(x):\n    return 'real package'\n")
    sys.path.insert(0, str(tmp_path / "site"))
    try:
        install_finder(top, root, files, [])
        util = importlib.import_module(f"{top}.kernels.triton.util")
        assert util.twice(3) == 6
    finally:
        sys.path.remove(str(tmp_path / "site"))


def cfg_for(top, entry, path):
    return TaskConfig(path, {"task": {"name": "fake", "entry_points": [entry]},
                             "upstream": {"package": top, "version": "0", "files": [], "shims": []}})


def test_load_entry_points(fake_tree, tmp_path):
    top, root, files, _ = fake_tree
    info = VendorInfo(top, "0", "w.whl", "0" * 64, root, {files[1]: "0" * 64})
    fns = load_entry_points(cfg_for(top, f"{top}.kernels.triton.util:twice", tmp_path / "c.toml"), info)
    assert fns["twice"](21) == 42
    with pytest.raises(KdaError, match="has no 'thrice'") as e:
        load_entry_points(cfg_for(top, f"{top}.kernels.triton.util:thrice", tmp_path / "c.toml"), info)
    assert str(tmp_path / "c.toml") in str(e.value)
    with pytest.raises(KdaError, match="is not in a vendored file"):
        load_entry_points(cfg_for(top, f"{top}.kernels.triton.other:f", tmp_path / "c.toml"), info)


def test_committed_shims_exist():
    for mod, fname in SHIMS.items():
        assert mod.startswith("sglang.") and (SHIM_DIR / fname).is_file()


ROOT = Path(__file__).resolve().parents[2]
CACHE = ROOT / ".kda-cache" / "vendor" / "sglang-0.5.15"


@pytest.mark.skipif(not (CACHE / "MANIFEST.json").is_file(), reason="vendored sglang cache not present (run kda vendor)")
def test_real_entry_point_loads_through_shim(monkeypatch):
    from kda.definition.config import load_config
    from kda.vendor.fetch import vendor_task

    if any(n == "sglang" or n.startswith("sglang.") for n in sys.modules):
        pytest.skip("sglang already imported in this process")
    monkeypatch.setenv("KDA_CACHE", str(ROOT / ".kda-cache"))
    cfg = load_config(ROOT / "diffusion" / "kernels" / "fuse_scale_shift" / "config.toml")
    try:
        info = vendor_task(cfg, allow_download=False)
        fns = load_entry_points(cfg, info)
        assert callable(fns["fuse_scale_shift_kernel"])
        assert Path(sys.modules[fns["fuse_scale_shift_kernel"].__module__].__file__).is_relative_to(CACHE)
        plat = sys.modules["sglang.multimodal_gen.runtime.platforms"]
        assert Path(plat.__file__) == SHIM_DIR / "sglang_platforms.py"
    finally:
        _purge("sglang")


def test_a_second_task_of_the_same_process_extends_the_finder_and_a_conflicting_pin_is_refused(fake_tree, tmp_path):
    """kda e2e loads several tasks' upstream files into one process: the second task's files join the first's
    finder (the first GPU run of the blocks failed every upstream arm when they did not), but one module vendored
    from two different files is refused."""
    top, root, files, _ = fake_tree
    f = install_finder(top, root, files[1:2], [])  # task A: util only
    with pytest.raises(ImportError, match="neither a vendored file"):
        importlib.import_module(f"{top}.kernels.triton.greedy")
    assert install_finder(top, root, files[2:], []) is f  # task B: greedy, same release
    assert f.files[f"{top}.kernels.triton.util"] == root / files[1]
    with pytest.raises(ImportError, match=rf"'{top}\.not_vendored"):  # B's file is now answered (and imports on)
        importlib.import_module(f"{top}.kernels.triton.greedy")
    other = tmp_path / "elsewhere"
    with pytest.raises(KdaError, match="already vendored from"):
        install_finder(top, other, files[1:2], [])  # the same module from another tree: two different pins


def test_the_triton_tasks_baselines_load_side_by_side_in_one_process():
    """The real case: four tasks' pinned SGLang 0.5.15 files in one interpreter, as an e2e block's upstream arm
    loads them (each task vendors its own subset of the one release)."""
    import os
    import subprocess
    import textwrap

    from kda.core.paths import repo_root

    code = textwrap.dedent("""\
        from kda.harness.worker import _interpreter_autotune, _interpreter_device_module
        _interpreter_autotune(); _interpreter_device_module()
        from kda.definition.task import Task
        from kda.vendor import load_entry_points, vendor_task
        names = []
        for t in ("fuse_scale_shift", "norm_infer", "rotary_embedding", "group_norm_silu"):
            task = Task.load(t)
            names += sorted(load_entry_points(task.cfg, vendor_task(task.cfg)))
        print(" ".join(names))
        """)
    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": str(repo_root())}
    proc = subprocess.run([sys.executable, "-O", "-c", code], cwd=repo_root(), env=env, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    loaded = proc.stdout.split()
    assert {"fuse_scale_shift_kernel", "norm_infer", "apply_rotary_embedding"} <= set(loaded) and len(loaded) >= 8


@pytest.mark.parametrize("order", ["module_first", "submodule_first"])
def test_one_task_vendors_a_module_another_a_module_below_it(fake_tree, order):
    """0.5.23's fuse_scale_shift shims `sglang.srt.utils` and norm_infer shims `sglang.srt.utils.custom_op`; the
    HunyuanVideo blocks load both (the H200 run of 2026-11-28 failed their `latest` arm in either order): the module
    must also be a package, and an empty parent package the first task imported must get the second task's source,
    in the very object the first task's modules hold."""
    top, root, _, _ = fake_tree
    (root / top / "srt" / "utils").mkdir(parents=True)
    (root / top / "srt" / "utils.py").write_text("flag = 7\n")
    (root / top / "srt" / "utils" / "custom_op.py").write_text("def op():\n    return 3\n")
    mod, sub = f"{top}/srt/utils.py", f"{top}/srt/utils/custom_op.py"
    first, second = (mod, sub) if order == "module_first" else (sub, mod)
    f = install_finder(top, root, [first], [])
    importlib.import_module(module_name(first))
    held = sys.modules[f"{top}.srt.utils"]
    assert install_finder(top, root, [second], []) is f
    assert importlib.import_module(f"{top}.srt.utils.custom_op").op() == 3
    assert importlib.import_module(f"{top}.srt.utils") is held and held.flag == 7
