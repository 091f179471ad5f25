"""Load vendored upstream files under a guarded import root.

A meta-path finder placed first on sys.meta_path answers every import of the upstream top-level package: a
vendored file of the task, a committed shim, an empty parent package, or an ImportError naming the module. The
real upstream package, if installed, is never reached.
"""
from __future__ import annotations

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
}


class _EmptyPackage(importlib.abc.Loader):
    def create_module(self, spec):
        return None

    def exec_module(self, module):
        module.__path__ = []


class GuardedUpstreamFinder(importlib.abc.MetaPathFinder):
    def __init__(self, top: str, files: dict[str, Path], shims: dict[str, Path]):
        self.top = top
        self.files = files
        self.shims = shims
        self.packages = {top}
        for name in (*files, *shims):
            parts = name.split(".")
            self.packages.update(".".join(parts[:i]) for i in range(1, len(parts)))
        self.loaded: list[str] = []

    def find_spec(self, fullname, path=None, target=None):
        if fullname != self.top and not fullname.startswith(self.top + "."):
            return None
        source = self.files.get(fullname) or self.shims.get(fullname)
        if source is not None:
            self.loaded.append(fullname)
            return importlib.util.spec_from_file_location(fullname, source)
        if fullname in self.packages:
            return importlib.machinery.ModuleSpec(fullname, _EmptyPackage(), is_package=True)
        raise ImportError(
            f"vendored upstream code imported {fullname!r}, which is neither a vendored file of this task nor a "
            f"committed shim; add the file to upstream.files (with its sha256) or write a shim in kda/vendor/shims/"
        )


def module_name(wheel_path: str) -> str:
    return wheel_path[: -len(".py")].replace("/", ".")


def install_finder(top: str, root: Path, wheel_paths: list[str], shims: list[str]) -> GuardedUpstreamFinder:
    for existing in list(sys.modules):
        if existing == top or existing.startswith(top + "."):
            mod = sys.modules[existing]
            if not isinstance(getattr(mod, "__spec__", None) and mod.__spec__.loader, _EmptyPackage) and \
                    not str(getattr(mod, "__file__", "") or "").startswith((str(root), str(SHIM_DIR))):
                raise KdaError(f"the real {top!r} package ({existing}) is already imported in this process; "
                               f"the harness refuses to mix it with the vendored baseline")
    for f in sys.meta_path:
        if isinstance(f, GuardedUpstreamFinder) and f.top == top:
            return f
    files = {module_name(p): root / p for p in wheel_paths if p.endswith(".py")}
    finder = GuardedUpstreamFinder(top, files, {m: SHIM_DIR / SHIMS[m] for m in shims})
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
