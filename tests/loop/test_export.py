"""kda/loop/export.py: `kda export` writes a package that runs without kda, builds its wheel with pip, and the wheel's
install()/uninstall() swap SGLang's entry points (checked in a fresh virtualenv against a fake sglang tree laid out
like the pinned release, whose own entry modules are checked to exist in the vendored 0.5.15 files)."""
from __future__ import annotations

import ast
import json
import os
import re
import site
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path

import pytest

from kda.cli import main
from kda.core.errors import KdaError
from kda.definition.config import load_config
from kda.loop import export as ex

VERSION = "0.0.1+test"


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """Every task exported once for the whole file (copying plus one pip wheel: a few seconds)."""
    lines: list[str] = []
    result = ex.export(None, out=tmp_path_factory.mktemp("export"), version=VERSION, progress=lines.append)
    return result, lines


def package_tasks(source: Path) -> dict[str, list[str]]:
    """TASKS as the built package holds it, read without importing the package."""
    tree = ast.parse((source / ex.PACKAGE / "_tasks.py").read_text())
    return next(ast.literal_eval(n.value) for n in tree.body
                if isinstance(n, ast.Assign) and n.targets[0].id == "TASKS")


def imported_modules(path: Path) -> list[tuple[int, str]]:
    """Every absolute import in a file (the test's own walker, not the one under test)."""
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            out.append((node.lineno, node.module))
    return out


def test_source_tree_holds_every_task_and_imports_nothing_from_kda(built):
    result, lines = built
    pkg = result.source / ex.PACKAGE
    assert [t.name for t in result.tasks] == list(ex.known_tasks())
    for task in result.tasks:
        wanted = ex.solution_files(task.solution)
        assert wanted, task.name
        for src in wanted:
            assert (pkg / task.name / src.relative_to(task.solution)).is_file(), src
        assert not list((pkg / task.name).rglob("__pycache__"))
    assert {p.name for p in (pkg / "runtime").iterdir()} == {"__init__.py", "lean_launch.py", "cuda_ext.py"}
    pys = sorted(pkg.rglob("*.py"))
    bad = [f"{p}:{line} {mod}" for p in pys for line, mod in imported_modules(p) if mod == "kda" or mod.startswith("kda.")]
    assert not bad, bad
    runtime_users = [p for p in pys for _, mod in imported_modules(p) if mod.startswith(f"{ex.PACKAGE}.runtime")]
    assert any(p.parent.name == "group_norm_silu" for p in runtime_users)  # the rewrite happened, not a deletion
    cuda_ext = (pkg / "runtime" / "cuda_ext.py").read_text()
    assert ".kda-cache" not in cuda_ext.split('"""')[-1]  # builds go to the user's cache, not next to site-packages
    assert any("group_norm_silu" in line for line in lines) and "entry points of sglang==0.5.15" in lines[0]


def test_tasks_table_is_each_configs_entry_points(built):
    result, _ = built
    expected = {t: load_config(p / "config.toml")["task"]["entry_points"] for t, p in ex.known_tasks().items()}
    assert package_tasks(result.source) == expected
    assert "SGLANG_VERSION = '0.5.15'" in (result.source / ex.PACKAGE / "_tasks.py").read_text()


def test_wheel_holds_the_csrc_sources_and_depends_on_torch_and_triton_only(built):
    result, _ = built
    assert result.wheel.name == f"{ex.PACKAGE}-{VERSION}-py3-none-any.whl"
    with zipfile.ZipFile(result.wheel) as z:
        names = set(z.namelist())
        meta = z.read(f"{ex.PACKAGE}-{VERSION}.dist-info/METADATA").decode()
    for task in result.tasks:
        for src in ex.solution_files(task.solution):
            assert f"{ex.PACKAGE}/{task.name}/{src.relative_to(task.solution).as_posix()}" in names
    csrc = [n for n in names if "/csrc/" in n]
    assert {n.split("/")[1] for n in csrc} == {"group_norm_silu", "qknorm_rope"}
    assert any(n.endswith(".cu") for n in csrc) and any(n.endswith(".cuh") for n in csrc)
    assert {f"{ex.PACKAGE}/_patch.py", f"{ex.PACKAGE}/_tasks.py", f"{ex.PACKAGE}/runtime/lean_launch.py"} <= names
    assert sorted(re.findall(r"^Requires-Dist: (\S+)", meta, re.M)) == ["torch", "triton"]
    assert "sglang==0.5.15" in meta and "compiled at first use" in meta  # the package README is its description


def test_every_patched_entry_point_exists_in_the_vendored_release(built):
    """install() targets modules and functions of SGLang 0.5.15's layout: each one is a top-level def in the
    vendored file (read with ast, nothing imported)."""
    from kda.vendor.fetch import vendor_task

    result, _ = built
    roots = {t.name: vendor_task(load_config(t.solution.parent / "config.toml")).root for t in result.tasks}
    checked = 0
    for task, entries in package_tasks(result.source).items():
        for entry in entries:
            module, fn = entry.split(":")
            path = roots[task] / (module.replace(".", "/") + ".py")
            assert path.is_file(), f"{entry}: no {path}"
            defs = {n.name for n in ast.parse(path.read_text()).body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
            assert fn in defs, f"{entry}: {path} defines no top-level {fn}"
            checked += 1
    assert checked == sum(len(t.entry_points) for t in result.tasks) == 14


OPS = ("fused_norm_scale_shift", "fused_scale_residual_norm_scale_shift")  # custom ops in the fake tree


def write_fake_sglang(root: Path, tasks: dict[str, list[str]]) -> None:
    """A plain sglang tree: one module per entry module, each entry function returning its own name; a model layer
    importing every entry function by name (as SGLang's layers do), and one imported only after install()."""
    by_module: dict[str, list[str]] = {}
    for entries in tasks.values():
        for entry in entries:
            module, fn = entry.split(":")
            by_module.setdefault(module, []).append(fn)
    for module, fns in by_module.items():
        path = root / (module.replace(".", "/") + ".py")
        for parent in path.relative_to(root).parents:
            if parent != Path("."):
                (root / parent).mkdir(parents=True, exist_ok=True)
                (root / parent / "__init__.py").touch()
        # the norm-scale-shift entries are custom ops upstream (torch.library.custom_op, as 0.5.15's CuTe DSL file)
        path.write_text("import torch\n\n" + "".join(
            f"@torch.library.custom_op('sglang::{fn}', mutates_args=())\n"
            f"def {fn}(x: torch.Tensor) -> torch.Tensor:\n    return x + 1\n\n" if fn in OPS else
            f"def {fn}(*args, **kwargs):\n    return 'upstream {fn}'\n\n" for fn in fns))
    layer = "".join(f"from {m} import {', '.join(fns)}\n" for m, fns in by_module.items())
    (root / "sglang" / "fake_model_layer.py").write_text(layer)
    (root / "sglang" / "fake_late_layer.py").write_text(
        "from sglang.jit_kernel.diffusion.triton.rotary import apply_rotary_embedding\n")


CHECK_SCRIPT = textwrap.dedent('''
    OPS = ('fused_norm_scale_shift', 'fused_scale_residual_norm_scale_shift')
    import importlib, importlib.abc, json, sys
    from pathlib import Path

    fake, venv = sys.argv[1], Path(sys.argv[2]).resolve()
    blocked = {"kda"}

    class Block(importlib.abc.MetaPathFinder):
        """kda must never be imported; sglang only when the test says it is installed."""
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in blocked:
                raise ImportError(f"No module named {name!r} (blocked by the test)")
            return None

    sys.meta_path.insert(0, Block())
    import kda_diffusion_kernels as k
    assert Path(k.__file__).resolve().is_relative_to(venv), k.__file__

    # without sglang: ImportError naming the entry module, nothing left patched
    blocked.add("sglang")
    try:
        k.install(["qknorm_rope"])
        raise AssertionError("install() without sglang did not raise")
    except ImportError as e:
        assert "sglang.jit_kernel.diffusion.qknorm_rope" in str(e) and "0.5.15" in str(e), e
    k.uninstall()
    blocked.discard("sglang")
    sys.path.insert(0, fake)

    layer = importlib.import_module("sglang.fake_model_layer")
    entries = [(t, *e.split(":")) for t, es in k.TASKS.items() for e in es]
    orig = {(m, f): getattr(importlib.import_module(m), f) for _, m, f in entries}
    new = {(m, f): getattr(importlib.import_module(f"kda_diffusion_kernels.{t}"), f) for t, m, f in entries}
    assert all(getattr(layer, f) is orig[m, f] for _, m, f in entries)

    def state(m, f):
        pair = (getattr(sys.modules[m], f), getattr(layer, f))
        if pair == (new[m, f], new[m, f]): return "kernel"
        if pair == (orig[m, f], orig[m, f]): return "upstream"
        return f"mixed {pair}"

    import torch
    ops = [f"sglang::{f}" for _, m, f in entries if hasattr(torch.ops.sglang, f)]
    kernel_for = lambda key: [torch._C._dispatch_has_kernel_for_dispatch_key(op, key) for op in ops]
    ops_before = kernel_for("CUDA")
    first = k.install()
    again = k.install()
    ops_installed = kernel_for("CUDA")
    after_install = {f"{m}:{f}": state(m, f) for _, m, f in entries}
    assert all(new[key] is not orig[key] for key in orig)
    installed = k.installed()
    k.uninstall()
    ops_after = kernel_for("CUDA")
    after_uninstall = {f"{m}:{f}": state(m, f) for _, m, f in entries}
    # on the CPU: the op dispatches to the kernel while installed (an honest stand-in here: a CuTe DSL kernel
    # cannot run on a CPU), and to upstream's implementation again after uninstall()
    k._patch.DISPATCH_KEY = "CPU"
    stand_in = lambda x: x + 7
    setattr(k.cutedsl_norm_scale_shift, OPS[0], stand_in)
    k.install(["cutedsl_norm_scale_shift"])
    op_calls = [float(getattr(torch.ops.sglang, OPS[0])(torch.zeros(1)))]
    k.uninstall()
    op_calls.append(float(getattr(torch.ops.sglang, OPS[0])(torch.zeros(1))))

    k.install("norm_infer")  # one task (a bare name): only its entry points move
    one_task = sorted(f"{m}:{f}" for _, m, f in entries if state(m, f) == "kernel")
    k.uninstall(["norm_infer"])

    k.install(["rotary_embedding"])  # a layer imported after install gets the kernel; uninstall takes it back
    late = importlib.import_module("sglang.fake_late_layer")
    key = ("sglang.jit_kernel.diffusion.triton.rotary", "apply_rotary_embedding")
    late_installed = late.apply_rotary_embedding is new[key]
    k.uninstall()
    late_restored = late.apply_rotary_embedding is orig[key]

    try:
        k.install(["nope"])
        unknown = None
    except ValueError as e:
        unknown = str(e)

    # a partial install: norm_infer's second module is missing; the first stays patched until uninstall()
    gone = "sglang.jit_kernel.diffusion.triton.rmsnorm_onepass"
    Path(fake, *gone.split(".")).with_suffix(".py").unlink()
    del sys.modules[gone]
    importlib.invalidate_caches()
    try:
        k.install(["norm_infer"])
        partial_error = None
    except ImportError as e:
        partial_error = str(e)
    norm = ("sglang.jit_kernel.diffusion.triton.norm", "norm_infer")
    partial_state = state(*norm)
    k.uninstall(["norm_infer"])
    print(json.dumps({"first": sorted(first), "again": again, "after_install": after_install,
                      "installed": installed, "after_uninstall": after_uninstall, "one_task": one_task,
                      "late": [late_installed, late_restored], "unknown": unknown, "partial_error": partial_error,
                      "partial": [partial_state, state(*norm)], "kda_loaded": "kda" in sys.modules,
                      "ops": ops, "ops_cuda": [ops_before, ops_installed, ops_after], "op_calls": op_calls}))
''')


def test_wheel_installs_in_a_fresh_virtualenv_and_patches_sglang(built, tmp_path):
    result, _ = built
    tasks = package_tasks(result.source)
    env = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(env)], check=True, timeout=120)
    py = env / "bin" / "python"
    # --system-site-packages reaches the base installation's packages; when the test runs in a virtualenv itself,
    # torch and triton live in that one's site-packages: a .pth adds them (after the new venv's own site-packages).
    purelib = subprocess.run([py, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             capture_output=True, text=True, check=True).stdout.strip()
    Path(purelib, "zz_test_interpreter.pth").write_text("\n".join(site.getsitepackages()) + "\n")
    pip = subprocess.run([env / "bin" / "pip", "install", "--no-deps", "--no-index", "-q", result.wheel],
                         capture_output=True, text=True, timeout=180, env={**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1"})
    assert pip.returncode == 0, pip.stderr
    fake = tmp_path / "fake"
    write_fake_sglang(fake, tasks)
    (tmp_path / "check.py").write_text(CHECK_SCRIPT)
    proc = subprocess.run([py, tmp_path / "check.py", fake, env], cwd=tmp_path, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    entries = [e for es in tasks.values() for e in es]
    patched = {e.replace(":", ".") for e in entries} | {f"sglang.fake_model_layer.{e.split(':')[1]}" for e in entries}
    patched |= {f"sglang::{op} (CUDA)" for op in OPS}  # each op's CUDA kernel too
    assert set(got["first"]) == patched and len(got["first"]) == 2 * len(entries) + len(OPS) == 30
    assert got["ops"] == [f"sglang::{op}" for op in OPS]
    assert got["ops_cuda"] == [[False, False], [True, True], [False, False]]  # registered, then gone again
    assert got["op_calls"] == [7.0, 1.0]  # torch.ops.sglang reaches the kernel, then upstream's again
    assert got["again"] == []  # a second install() changes nothing
    assert got["after_install"] == {e: "kernel" for e in entries}
    assert got["installed"] == list(tasks)
    assert got["after_uninstall"] == {e: "upstream" for e in entries}
    assert got["one_task"] == sorted(tasks["norm_infer"])
    assert got["late"] == [True, True]
    assert "'nope'" in got["unknown"] and all(t in got["unknown"] for t in tasks)
    assert "sglang.jit_kernel.diffusion.triton.rmsnorm_onepass" in got["partial_error"]
    assert got["partial"] == ["kernel", "upstream"]  # half-installed, then restored
    assert got["kda_loaded"] is False


def write_task(root: Path, name: str, files: dict[str, str]) -> Path:
    (root / "pyproject.toml").touch()
    task = root / "diffusion" / "kernels" / name
    (task / "solution").mkdir(parents=True)
    (task / "config.toml").touch()
    for rel, text in files.items():
        (task / "solution" / rel).write_text(text)
    return task


def test_unknown_task_and_solution_without_init_are_clear_errors(tmp_path, monkeypatch):
    with pytest.raises(KdaError, match=r"no task named 'nope'.*known tasks: .*fuse_scale_shift"):
        ex.export(["nope"], out=tmp_path)
    monkeypatch.setenv("KDA_ROOT", str(tmp_path))
    write_task(tmp_path, "bare", {"kernel.py": "def f():\n    pass\n"})
    with pytest.raises(KdaError, match=r"bare/solution has no __init__.py"):
        ex.export(["bare"], out=tmp_path / "out")
    assert not (tmp_path / "out").exists()  # nothing written before the check


def test_an_import_of_kda_beyond_runtime_names_file_and_line(tmp_path):
    task = write_task(tmp_path, "leaky", {
        "__init__.py": "from kda.runtime.lean_launch import cdiv\nfrom kda.runtime import cuda_ext\n",
        "k.py": '"""doc"""\nimport torch\n\ndef f():\n    from kda.harness import checks\n'})
    item = ex.ExportTask("leaky", task / "solution", ["m:f"], "sglang==0.5.15")
    with pytest.raises(KdaError, match=r"leaky/solution/k\.py:5 imports kda\.harness"):
        ex.copy_solution(item, tmp_path / "pkg")
    (task / "solution" / "k.py").write_text("import importlib\nmod = importlib.import_module('kda.core.paths')\n")
    with pytest.raises(KdaError, match=r"k\.py:2 imports kda\.core\.paths"):
        ex.copy_solution(item, tmp_path / "pkg2")
    (task / "solution" / "k.py").unlink()
    ex.copy_solution(item, tmp_path / "pkg3")  # kda.runtime alone is rewritten, not refused
    assert (tmp_path / "pkg3" / "__init__.py").read_text() == (
        "from kda_diffusion_kernels.runtime.lean_launch import cdiv\nfrom kda_diffusion_kernels.runtime import cuda_ext\n")


def test_versions():
    assert re.fullmatch(r"0\.1\.0\+g[0-9a-f]{7,}(\.dirty)?", ex.default_version())
    assert ex.check_version("0.2.0+gABC") == "0.2.0+gabc"
    with pytest.raises(KdaError, match="not a PEP 440 version"):
        ex.check_version("one point oh")


def test_cli_builds_the_wheel_and_names_it(tmp_path, capsys):
    assert main(["export", "norm_infer", "--out", str(tmp_path), "--version", "0.3.0"]) == 0
    out = capsys.readouterr().out.strip().splitlines()
    wheel = tmp_path / f"{ex.PACKAGE}-0.3.0-py3-none-any.whl"
    assert out[-1] == f"kda export: wrote {wheel}" and wheel.is_file()
    with zipfile.ZipFile(wheel) as z:
        assert {n.split("/")[1] for n in z.namelist() if n.startswith(f"{ex.PACKAGE}/") and n.count("/") == 2} == \
            {"norm_infer", "runtime"}
    assert main(["export", "nope", "--out", str(tmp_path)]) == 2
    assert "known tasks" in capsys.readouterr().err
