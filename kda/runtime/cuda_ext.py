"""Builds and loads a candidate's CUDA sources through torch's extension loader (nvcc for .cu, the host compiler for
.cpp), shared by every task's solution like kda.runtime.lean_launch.

The module name carries a hash of every source and header, so an edited kernel is never served from a stale build.
Builds live in TORCH_EXTENSIONS_DIR when it is set, else in the repository's ignored .kda-cache/torch-ext/. A first
build takes about a minute on the GPU machine; later processes load the cached .so in milliseconds.
"""
import hashlib
import os
from pathlib import Path


def build_dir(name: str) -> Path:
    root = os.environ.get("TORCH_EXTENSIONS_DIR")
    base = Path(root) if root else Path(__file__).resolve().parents[2] / ".kda-cache" / "torch-ext"
    path = base / name
    path.mkdir(parents=True, exist_ok=True)
    return path


def _plain(name: str, what: str) -> str:
    """A relative path below the solution's folder: never absolute, never through '..'."""
    parts = Path(name).parts
    if not name or Path(name).is_absolute() or ".." in parts:
        raise ValueError(f"CudaExtension: {what} {name!r} must be a relative path below the module's folder")
    return name


class CudaExtension:
    """`module_file` is the solution module's own `__file__` and `folder` the folder beside it holding the sources
    (`CudaExtension("kda_x", __file__, "csrc", ...)`): a solution names no other path, so it needs no file-system
    access of its own (the static rules refuse pathlib and open). `compiled` are the .cu/.cpp files handed to the
    compiler; `headers` are hashed too; `defines` are macros defined for both compilers (a diagnostic build of the
    same sources: they are part of the module's name). `prefix` names the module and its build folder."""

    def __init__(self, prefix: str, module_file: str | Path, folder: str, compiled: tuple[str, ...],
                 headers: tuple[str, ...] = (), defines: tuple[str, ...] = ()):
        if not prefix.isidentifier():
            raise ValueError(f"CudaExtension: prefix {prefix!r} must be an identifier (it names the module)")
        self.prefix, self.module_file, self.folder = prefix, module_file, _plain(folder, "folder")
        self.csrc = Path(module_file).resolve().parent / folder
        self.compiled = tuple(_plain(s, "source") for s in compiled)
        self.headers = tuple(_plain(s, "header") for s in headers)
        self.defines = tuple(defines)
        self._module = None

    def with_defines(self, *defines: str) -> "CudaExtension":
        """The same sources built with these macros defined as well, as a module of its own."""
        return CudaExtension(self.prefix, self.module_file, self.folder, self.compiled, self.headers,
                             self.defines + tuple(defines))

    @property
    def sources(self) -> tuple[str, ...]:
        return self.compiled + self.headers

    def module_name(self) -> str:
        digest = hashlib.sha256()
        for name in self.sources:
            digest.update(name.encode() + b"\0" + (self.csrc / name).read_bytes())
        for macro in self.defines:
            digest.update(b"-D" + macro.encode() + b"\0")
        return f"{self.prefix}_{digest.hexdigest()[:12]}"

    def load(self):
        """The compiled module (built on first use in its build directory)."""
        if self._module is None:
            from torch.utils import cpp_extension

            name = self.module_name()
            flags = [f"-D{m}" for m in self.defines]
            self._module = cpp_extension.load(
                name=name, sources=[str(self.csrc / s) for s in self.compiled],
                extra_cflags=["-O3", "-std=c++17"] + flags, extra_cuda_cflags=["-O3", "-std=c++17", "-lineinfo"] + flags,
                build_directory=str(build_dir(name)), verbose=False)
        return self._module
