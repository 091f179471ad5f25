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


class CudaExtension:
    """`compiled` are the .cu/.cpp files handed to the compiler; `headers` are hashed too; `defines` are macros
    defined for both compilers (a diagnostic build of the same sources: they are part of the module's name)."""

    def __init__(self, prefix: str, csrc: Path, compiled: tuple[str, ...], headers: tuple[str, ...] = (),
                 defines: tuple[str, ...] = ()):
        self.prefix, self.csrc, self.compiled, self.headers = prefix, Path(csrc), tuple(compiled), tuple(headers)
        self.defines = tuple(defines)
        self._module = None

    def with_defines(self, *defines: str) -> "CudaExtension":
        """The same sources built with these macros defined as well, as a module of its own."""
        return CudaExtension(self.prefix, self.csrc, self.compiled, self.headers, self.defines + tuple(defines))

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
