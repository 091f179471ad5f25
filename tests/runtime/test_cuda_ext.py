"""kda/runtime/cuda_ext.py: the shared CUDA extension loader names each build after its sources and puts it where asked."""
import re

import pytest

from kda.runtime.cuda_ext import CudaExtension, build_dir


def test_module_name_follows_every_source_and_header(tmp_path):
    (tmp_path / "csrc").mkdir()
    for name in ("a.cu", "b.cpp", "c.h"):
        (tmp_path / "csrc" / name).write_text(f"// {name}\n")
    ext = CudaExtension("kda_demo", str(tmp_path / "solution.py"), "csrc", ("a.cu", "b.cpp"), ("c.h",))
    assert ext.sources == ("a.cu", "b.cpp", "c.h") and ext.csrc == (tmp_path / "csrc").resolve()
    before = ext.module_name()
    assert re.fullmatch(r"kda_demo_[0-9a-f]{12}", before)
    (tmp_path / "csrc" / "c.h").write_text("// edited\n")
    assert ext.module_name() != before


def test_build_dir_honours_torch_extensions_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("TORCH_EXTENSIONS_DIR", str(tmp_path))
    assert build_dir("x") == tmp_path / "x" and (tmp_path / "x").is_dir()
    monkeypatch.delenv("TORCH_EXTENSIONS_DIR")
    assert build_dir("y").parent.parts[-2:] == (".kda-cache", "torch-ext")


def test_a_build_with_macros_is_a_module_of_its_own_and_passes_them_to_both_compilers(tmp_path, monkeypatch):
    (tmp_path / "a.cu").write_text("// a\n")
    ext = CudaExtension("kda_demo", str(tmp_path / "solution.py"), ".", ("a.cu",))
    traced = ext.with_defines("KDA_TRACE")
    assert traced.defines == ("KDA_TRACE",) and ext.defines == ()
    assert traced.module_name() != ext.module_name()
    assert traced.with_defines("X").module_name() not in (traced.module_name(), ext.module_name())
    seen = {}
    import torch.utils.cpp_extension as cpp

    monkeypatch.setenv("TORCH_EXTENSIONS_DIR", str(tmp_path / "ext"))
    monkeypatch.setattr(cpp, "load", lambda **kw: seen.update(kw) or "module")
    assert traced.load() == "module"
    assert "-DKDA_TRACE" in seen["extra_cflags"] and "-DKDA_TRACE" in seen["extra_cuda_cflags"]
    assert seen["name"] == traced.module_name()


@pytest.mark.parametrize("prefix, folder, source", [
    ("../escape", "csrc", "a.cu"), ("kda demo", "csrc", "a.cu"), ("kda_demo", "../elsewhere", "a.cu"),
    ("kda_demo", "/proc/self", "a.cu"), ("kda_demo", "csrc", "../../a.cu"), ("kda_demo", "csrc", "/etc/passwd"),
])
def test_the_sources_stay_below_the_module_folder_and_the_prefix_is_a_name(tmp_path, prefix, folder, source):
    with pytest.raises(ValueError):
        CudaExtension(prefix, str(tmp_path / "solution.py"), folder, (source,))
