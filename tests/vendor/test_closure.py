"""kda/vendor/closure.py: the include closure of a JIT-built kernel, and where its builds go."""
import hashlib
import os

import pytest

from kda.vendor import importer
from kda.vendor.closure import include_closure, toml_files

WHEEL = {
    "pkg/ops/k.py": b"import torch\n",
    "pkg/csrc/diffusion/k.cuh": b'#include <sgl_kernel/a.h>\n#include "local.cuh"\n#include <dlpack/dlpack.h>\n',
    "pkg/csrc/diffusion/local.cuh": b"#include <cstdint>\n",
    "pkg/include/sgl_kernel/a.h": b'  #  include "b.h"\n#include <sgl_kernel/a.h>\n',
    "pkg/include/sgl_kernel/b.h": b"// leaf\n",
    "pkg/include/sgl_kernel/unused.h": b"// never included\n",
}


def test_closure_follows_quoted_and_angle_includes_and_names_external_ones():
    paths, external = include_closure(WHEEL.__getitem__, set(WHEEL), ["pkg/ops/k.py", "pkg/csrc/diffusion/k.cuh"],
                                      ["pkg/include"])
    assert sorted(paths) == sorted(p for p in WHEEL if not p.endswith("unused.h"))
    assert external == ["cstdint", "dlpack/dlpack.h"]


def test_closure_refuses_a_root_missing_from_the_wheel():
    with pytest.raises(FileNotFoundError, match="nope.cuh"):
        include_closure(WHEEL.__getitem__, set(WHEEL), ["pkg/csrc/nope.cuh"], ["pkg/include"])


def test_toml_lines_pin_each_file_by_its_sha256():
    text = toml_files(WHEEL.__getitem__, ["pkg/include/sgl_kernel/b.h"])
    assert hashlib.sha256(b"// leaf\n").hexdigest() in text and text.startswith("files = [")


def test_jit_builds_go_to_the_ignored_cache_only_for_native_sources(tmp_path, monkeypatch):
    monkeypatch.setenv("KDA_CACHE", str(tmp_path / "c"))
    monkeypatch.delenv("TVM_FFI_CACHE_DIR", raising=False)
    assert importer.jit_cache_env(["pkg/ops/k.py"]) is None and "TVM_FFI_CACHE_DIR" not in os.environ
    assert importer.jit_cache_env(["pkg/ops/k.py", "pkg/csrc/diffusion/k.cuh"]) == str(tmp_path / "c" / "tvm-ffi")
    monkeypatch.setenv("TVM_FFI_CACHE_DIR", str(tmp_path / "mine"))
    assert importer.jit_cache_env(["pkg/csrc/diffusion/k.cuh"]) == str(tmp_path / "mine")
