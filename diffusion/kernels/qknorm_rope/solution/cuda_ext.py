"""Builds and loads the CUDA kernel of qknorm_rope v2 (csrc/) through torch's extension loader.

The module name carries a hash of the sources, so an edited kernel is never served from a stale build; builds live
in TORCH_EXTENSIONS_DIR when it is set, else in the repository's ignored .kda-cache/torch-ext/. A first build takes
about a minute (nvcc and the torch headers), later processes load the cached .so in milliseconds.
"""
import hashlib
import os
from pathlib import Path

CSRC = Path(__file__).resolve().with_name("csrc")
SOURCES = ("binding.cpp", "qknorm_rope.cu", "qknorm_rope.h")

_loaded = []


def module_name() -> str:
    digest = hashlib.sha256()
    for name in SOURCES:
        digest.update(name.encode() + b"\0" + (CSRC / name).read_bytes())
    return f"kda_qknorm_rope_{digest.hexdigest()[:12]}"


def build_dir(name: str) -> Path:
    root = os.environ.get("TORCH_EXTENSIONS_DIR")
    base = Path(root) if root else Path(__file__).resolve().parents[4] / ".kda-cache" / "torch-ext"
    path = base / name
    path.mkdir(parents=True, exist_ok=True)
    return path


def load():
    """The compiled extension (built on first use in this build directory)."""
    if not _loaded:
        from torch.utils import cpp_extension

        name = module_name()
        _loaded.append(cpp_extension.load(
            name=name, sources=[str(CSRC / "binding.cpp"), str(CSRC / "qknorm_rope.cu")],
            extra_cflags=["-O3", "-std=c++17"], extra_cuda_cflags=["-O3", "-std=c++17", "-lineinfo"],
            build_directory=str(build_dir(name)), verbose=False))
    return _loaded[0]
