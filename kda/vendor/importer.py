"""Load vendored upstream files under a guarded import root.

A meta-path finder placed first on sys.meta_path answers every import of the upstream top-level package: a
vendored file of the task, a committed shim, an empty parent package, or an ImportError naming the module. The
real upstream package, if installed, is never reached.
"""
from __future__ import annotations

import ast
import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import os
import sys
from pathlib import Path
from typing import Callable

from kda.core.errors import KdaError
from kda.core.paths import cache_dir

SHIM_DIR = Path(__file__).resolve().parent / "shims"
SHIMS = {
    "sglang.multimodal_gen.runtime.platforms": "sglang_platforms.py",
    "sglang.srt.utils.custom_op": "sglang_custom_op.py",
    "sglang.kernel_api_logging": "sglang_kernel_api_logging.py",
    "sglang.utils": "sglang_utils.py",
    "sglang.srt.utils": "sglang_srt_utils.py",  # 0.5.23's diffusion kernels (upstream_latest)
    "sglang.kernels.jit.utils": "sglang_kernels_jit_utils.py",  # 0.5.23's Blackwell-only native norm path
}


class _EmptyPackage(importlib.abc.Loader):
    def create_module(self, spec):
        return None

    def exec_module(self, module):
        module.__path__ = []


class GuardedUpstreamFinder(importlib.abc.MetaPathFinder):
    def __init__(self, top: str, files: dict[str, Path], shims: dict[str, Path]):
        self.top = top
        self.files: dict[str, Path] = {}
        self.shims: dict[str, Path] = {}
        self.packages = {top}
        self.loaded: list[str] = []
        self.extend(files, shims)

    def extend(self, files: dict[str, Path], shims: dict[str, Path]) -> None:
        """Answer for more modules of the same release: a model block (kda e2e) loads several tasks' vendored files
        into one process, each task naming only the files its own entry points import. A module already answered
        by another file, or by a shim on one side and a file on the other, is a conflict between two pins."""
        for name, source in (*files.items(), *shims.items()):
            known = self.files.get(name) or self.shims.get(name)
            if known is not None and Path(known) != Path(source):
                raise KdaError(f"{name}: already vendored from {known}, now also from {source}; two tasks that "
                               f"share a process must pin the same {self.top} files and shims")
        self.files.update(files)
        self.shims.update(shims)
        for name in (*files, *shims):
            parts = name.split(".")
            self.packages.update(".".join(parts[:i]) for i in range(1, len(parts)))

    def search_path(self, name: str, source: Path) -> list | None:
        """A package's search path (empty: its submodules still come from this finder), None for a plain module. A
        shim or file with modules below it is a package too: 0.5.23's fuse_scale_shift shims `sglang.srt.utils` and
        norm_infer shims `sglang.srt.utils.custom_op`, and a HunyuanVideo block loads both."""
        return [] if _is_package(source) or name in self.packages else None

    def find_spec(self, fullname, path=None, target=None):
        if fullname != self.top and not fullname.startswith(self.top + "."):
            return None
        source = self.files.get(fullname) or self.shims.get(fullname)
        if source is not None:
            self.loaded.append(fullname)
            # a package's __init__ gets a (empty) search path: its submodules still come from this finder
            return importlib.util.spec_from_file_location(
                fullname, source, submodule_search_locations=self.search_path(fullname, source))
        if fullname in self.packages:
            return importlib.machinery.ModuleSpec(fullname, _EmptyPackage(), is_package=True)
        raise ImportError(
            f"vendored upstream code imported {fullname!r}, which is neither a vendored file of this task nor a "
            f"committed shim; add the file to upstream.files (with its sha256) or write a shim in kda/vendor/shims/"
        )


def module_name(wheel_path: str) -> str:
    """`a/b/c.py` -> `a.b.c`; a vendored `a/b/__init__.py` is the package `a.b` itself (0.5.23's
    `kda_kernels/__init__.py` defines the helper its kernels import from the package)."""
    name = wheel_path[: -len(".py")].replace("/", ".")
    return name[: -len(".__init__")] if name.endswith(".__init__") else name


def _is_package(source: Path) -> bool:
    return Path(source).name == "__init__.py"


def _settle(finder, names, key: Callable[[str], str]) -> None:
    """After a second task extended a finder, fix what the first task's imports already put in sys.modules: a module
    imported as an empty parent package that the new task vendors or shims gets that source run into it (the modules
    that imported it hold that object), and a plain module that now has modules below it becomes a package."""
    for name in names:
        parts = name.split(".")
        for parent in (".".join(parts[:i]) for i in range(1, len(parts))):
            mod = sys.modules.get(key(parent))
            if mod is not None and not hasattr(mod, "__path__"):
                mod.__path__ = []
                if mod.__spec__ is not None:
                    mod.__spec__.submodule_search_locations = []
        mod = sys.modules.get(key(name))
        if mod is not None and isinstance(getattr(mod.__spec__, "loader", None), _EmptyPackage):
            spec = finder.find_spec(key(name))
            mod.__spec__, mod.__loader__, mod.__file__ = spec, spec.loader, spec.origin
            spec.loader.exec_module(mod)


def install_finder(top: str, root: Path, wheel_paths: list[str], shims: list[str]) -> GuardedUpstreamFinder:
    for existing in list(sys.modules):
        if existing == top or existing.startswith(top + "."):
            mod = sys.modules[existing]
            if not isinstance(getattr(mod, "__spec__", None) and mod.__spec__.loader, _EmptyPackage) and \
                    not str(getattr(mod, "__file__", "") or "").startswith((str(root), str(SHIM_DIR))):
                raise KdaError(f"the real {top!r} package ({existing}) is already imported in this process; "
                               f"the harness refuses to mix it with the vendored baseline")
    files = {module_name(p): root / p for p in wheel_paths if p.endswith(".py")}
    shim_files = {m: SHIM_DIR / SHIMS[m] for m in shims}
    for f in sys.meta_path:
        if isinstance(f, GuardedUpstreamFinder) and f.top == top:
            f.extend(files, shim_files)  # another task of the same process (kda e2e): one finder answers for both
            _settle(f, (*files, *shim_files), lambda name: name)
            return f
    finder = GuardedUpstreamFinder(top, files, shim_files)
    sys.meta_path.insert(0, finder)
    return finder


NATIVE_SOURCES = (".cuh", ".cu", ".h", ".hpp", ".cpp", ".cc", ".inl")


def jit_cache_env(wheel_paths) -> str | None:
    """Where upstream JIT builds (tvm-ffi, via `sglang/jit_kernel/utils.py`) put their shared objects.

    Their default is the user's home (~/.cache/tvm-ffi), outside the working tree: a carried tree would rebuild on
    every machine and an old build could outlive its sources there. Tasks that vendor native sources build into the
    ignored `.kda-cache/tvm-ffi` instead, unless TVM_FFI_CACHE_DIR was set on purpose. Upstream keys each build
    by a hash of its sources, the GPU arch and the tvm-ffi version, so a stale build is never reused."""
    if not any(p.endswith(NATIVE_SOURCES) for p in wheel_paths):
        return None
    os.environ.setdefault("TVM_FFI_CACHE_DIR", str(cache_dir() / "tvm-ffi"))
    return os.environ["TVM_FFI_CACHE_DIR"]


def load_entry_points(cfg, info) -> dict[str, Callable]:
    """Import each `module:function` entry point of the task from the vendored files."""
    top = cfg["upstream"]["package"]
    jit_cache_env(info.files)
    install_finder(top, info.root, list(info.files), cfg["upstream"]["shims"])
    out = {}
    for entry in cfg["task"]["entry_points"]:
        mod_name, fn_name = entry.split(":")
        if mod_name not in {module_name(p) for p in info.files}:
            raise KdaError(f"{cfg.path}: entry point {entry!r} is not in a vendored file (upstream.files)")
        mod = importlib.import_module(mod_name)
        if not hasattr(mod, fn_name):
            raise KdaError(f"{cfg.path}: vendored module {mod_name} has no {fn_name!r}")
        out[fn_name] = getattr(mod, fn_name)
    return out


# -- a second pinned release beside the first (issue 40: today's SGLang as a peer) -------------------------------
# Two releases of one package cannot share its top-level name in one interpreter, and the arms are timed in one
# process. The later release is imported under an alias (`sglang` -> `sglang_0_5_23`): its vendored files, verified
# by sha256 like the first's, are compiled with every import of the package (and every string naming one of its
# modules, for import_module calls) renamed to the alias. Line numbers are kept, so tracebacks and Triton's reading
# of kernel sources point into the vendored files.

def alias_name(top: str, version: str) -> str:
    return f"{top}_{version.replace('.', '_').replace('-', '_')}"


class _Renamer(ast.NodeTransformer):
    def __init__(self, top: str, alias: str):
        self.top, self.alias = top, alias

    def _name(self, name: str | None) -> str | None:
        if name is not None and (name == self.top or name.startswith(self.top + ".")):
            return self.alias + name[len(self.top):]
        return name

    def _op(self, name: str) -> str:
        """A torch.library name "sglang::op" of the later release into the alias's namespace: both releases register
        `sglang::fused_norm_scale_shift`, and torch refuses a second registration of one name in a process."""
        if name.startswith(self.top + "::"):
            return self.alias + name[len(self.top):]
        return self._name(name)

    def visit_Import(self, node):
        binds_top = False
        for a in node.names:
            renamed = self._name(a.name)
            # `import sglang.x.y` binds `sglang` (the top package) in the importing module: bind it again below
            binds_top |= renamed != a.name and a.asname is None
            a.name = renamed
        if not binds_top:
            return node
        rebind = ast.Assign(targets=[ast.Name(self.top, ast.Store())], value=ast.Name(self.alias, ast.Load()))
        return [node, ast.copy_location(rebind, node)]

    def visit_ImportFrom(self, node):
        if node.level == 0:
            node.module = self._name(node.module)
        return node

    def visit_Constant(self, node):
        if isinstance(node.value, str):
            node.value = self._op(node.value)
        return node


class _AliasLoader(importlib.abc.SourceLoader):
    def __init__(self, fullname: str, path: Path, top: str, alias: str):
        self.fullname, self.path, self.top, self.alias = fullname, path, top, alias

    def get_filename(self, fullname):
        return str(self.path)

    def get_data(self, path):
        return Path(path).read_bytes()

    def source_to_code(self, data, path, *, _optimize=-1):
        tree = _Renamer(self.top, self.alias).visit(ast.parse(data, filename=str(path)))
        return compile(ast.fix_missing_locations(tree), str(path), "exec", dont_inherit=True)


class AliasedUpstreamFinder(importlib.abc.MetaPathFinder):
    """Answers every import of `alias` and `alias.*` from the vendored files of the later release (named as the
    package names them), its shims, empty parent packages, or an ImportError naming the module."""

    def __init__(self, alias: str, top: str, files: dict[str, Path], shims: dict[str, Path]):
        self.alias, self.top = alias, top
        self.inner = GuardedUpstreamFinder(top, files, shims)
        self.loaded: list[str] = []

    def find_spec(self, fullname, path=None, target=None):
        if fullname != self.alias and not fullname.startswith(self.alias + "."):
            return None
        name = self.top + fullname[len(self.alias):]
        source = self.inner.files.get(name) or self.inner.shims.get(name)
        if source is not None:
            self.loaded.append(fullname)
            return importlib.util.spec_from_file_location(
                fullname, source, loader=_AliasLoader(fullname, source, self.top, self.alias),
                submodule_search_locations=self.inner.search_path(name, source))
        if name in self.inner.packages:
            return importlib.machinery.ModuleSpec(fullname, _EmptyPackage(), is_package=True)
        raise ImportError(f"vendored upstream code of {self.alias} imported {name!r}, which is neither a vendored "
                          f"file of this task's upstream_latest nor a committed shim")


def install_alias_finder(top: str, version: str, root: Path, wheel_paths: list[str],
                         shims: list[str]) -> AliasedUpstreamFinder:
    alias = alias_name(top, version)
    files = {module_name(p): root / p for p in wheel_paths if p.endswith(".py")}
    shim_files = {m: SHIM_DIR / SHIMS[m] for m in shims}
    for f in sys.meta_path:
        if isinstance(f, AliasedUpstreamFinder) and f.alias == alias:
            # another task of the same process (kda e2e): one finder answers for both. Returning it unextended
            # left the second task's files unknown (the H200 run of 2026-11-28: cutedsl_norm_scale_shift's 0.5.23
            # kernel failed to import beside fuse_scale_shift's in every DiT block)
            f.inner.extend(files, shim_files)
            _settle(f, (*files, *shim_files), lambda name: alias + name[len(top):])
            return f
    finder = AliasedUpstreamFinder(alias, top, files, shim_files)
    sys.meta_path.insert(0, finder)
    return finder


def load_latest_entry_points(cfg, info) -> dict[str, Callable]:
    """Each `module:function` of `[upstream_latest] entry_points`, imported under the alias, by function name."""
    latest = cfg["upstream_latest"]
    top = latest["package"]
    finder = install_alias_finder(top, latest["version"], info.root, list(info.files), latest["shims"])
    out = {}
    for entry in latest["entry_points"]:
        mod_name, fn_name = entry.split(":")
        if mod_name not in {module_name(p) for p in info.files}:
            raise KdaError(f"{cfg.path}: upstream_latest entry point {entry!r} is not in a vendored file "
                           "(upstream_latest.files)")
        mod = importlib.import_module(finder.alias + mod_name[len(top):])
        if not hasattr(mod, fn_name):
            raise KdaError(f"{cfg.path}: vendored module {mod_name} ({latest['version']}) has no {fn_name!r}")
        out[fn_name] = getattr(mod, fn_name)
    return out
