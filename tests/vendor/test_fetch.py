"""kda/vendor/fetch.py: extract pinned files from a (locally built, never downloaded) wheel and verify them."""
import hashlib
import json
import zipfile
from pathlib import Path

import pytest

from kda.definition.config import TaskConfig
from kda.core.errors import KdaError
from kda.vendor import fetch
from kda.vendor.fetch import download_wheel, sha256_file, vendor_root, vendor_task, write_baseline_source

PKG, VER = "fakepkg", "1.2.3"
FILES = {
    "fakepkg/ops/kernel.py": b"def kernel(x):\n    return x + 1\n",
    "fakepkg/ops/util.py": b"ONE = 1\n",
}
EXTRA = {"fakepkg/__init__.py": b"", "fakepkg-1.2.3.dist-info/METADATA": b"Name: fakepkg\n"}


def sha(b: bytes) -> str:
    return hashlib.sha256(b).hexdigest()


@pytest.fixture
def cache(tmp_path, monkeypatch):
    c = tmp_path / "cache"
    monkeypatch.setenv("KDA_CACHE", str(c))

    def no_network(*a, **k):
        raise AssertionError(f"network access attempted: {a}")

    monkeypatch.setattr(fetch.subprocess, "run", no_network)
    return c


def make_wheel(cache: Path, files=None) -> Path:
    d = cache / "wheels" / f"{PKG}-{VER}"
    d.mkdir(parents=True, exist_ok=True)
    w = d / f"{PKG}-{VER}-py3-none-any.whl"
    with zipfile.ZipFile(w, "w") as zf:
        for name, data in {**EXTRA, **(files or FILES)}.items():
            zf.writestr(name, data)
    return w


def make_cfg(tmp_path: Path, pins=None, shims=()) -> TaskConfig:
    pins = pins if pins is not None else {p: sha(b) for p, b in FILES.items()}
    path = tmp_path / "task" / "fake_task" / "config.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    return TaskConfig(path, {
        "task": {"name": "fake_task", "entry_points": ["fakepkg.ops.kernel:kernel"]},
        "upstream": {"package": PKG, "version": VER, "files": [{"path": p, "sha256": h} for p, h in pins.items()],
                     "shims": list(shims)},
    })


def test_sha256_file(tmp_path):
    p = tmp_path / "f"
    p.write_bytes(b"abc" * 1000)
    assert sha256_file(p) == sha(b"abc" * 1000)


def test_download_wheel_uses_cached_wheel(cache):
    w = make_wheel(cache)
    assert download_wheel(PKG, VER) == w


def test_vendor_task_extracts_verifies_and_writes_manifest(cache, tmp_path):
    wheel = make_wheel(cache)
    info = vendor_task(make_cfg(tmp_path))
    root = cache.resolve() / "vendor" / f"{PKG}-{VER}"
    assert info.root == root == vendor_root(PKG, VER)
    assert info.package == PKG and info.version == VER
    assert info.files == {p: sha(b) for p, b in FILES.items()}
    for p, b in FILES.items():
        assert (root / p).read_bytes() == b
    assert not (root / "fakepkg" / "__init__.py").exists()  # only the pinned files are extracted
    manifest = json.loads((root / "MANIFEST.json").read_text())
    assert manifest == {"wheel": wheel.name, "wheel_sha256": sha(wheel.read_bytes())}
    assert info.wheel == wheel.name and info.wheel_sha256 == manifest["wheel_sha256"]
    assert info.as_dict()["files"] == info.files


def test_vendor_task_offline_from_carried_cache(cache, tmp_path):
    wheel = make_wheel(cache)
    vendor_task(make_cfg(tmp_path))
    wheel.unlink()  # the GPU machine gets the extracted tree and manifest, not the wheel
    info = vendor_task(make_cfg(tmp_path), allow_download=False)
    assert info.wheel == wheel.name and set(info.files) == set(FILES)


def test_vendor_task_hash_mismatch_names_file_and_config(cache, tmp_path):
    make_wheel(cache)
    pins = {p: sha(b) for p, b in FILES.items()}
    pins["fakepkg/ops/util.py"] = "0" * 64
    cfg = make_cfg(tmp_path, pins)
    with pytest.raises(KdaError) as e:
        vendor_task(cfg)
    msg = str(e.value)
    assert str(cfg.path) in msg and "fakepkg/ops/util.py" in msg
    assert sha(FILES["fakepkg/ops/util.py"]) in msg and "0" * 64 in msg


def test_vendor_task_detects_edited_cache(cache, tmp_path):
    make_wheel(cache)
    vendor_task(make_cfg(tmp_path))
    target = vendor_root(PKG, VER) / "fakepkg" / "ops" / "kernel.py"
    target.write_bytes(b"def kernel(x):\n    return x\n")
    with pytest.raises(KdaError, match=r"fakepkg/ops/kernel\.py has sha256") as e:
        vendor_task(make_cfg(tmp_path), allow_download=False)
    assert "delete the cache" in str(e.value)


def test_vendor_task_file_not_in_wheel(cache, tmp_path):
    make_wheel(cache, files={"fakepkg/ops/kernel.py": FILES["fakepkg/ops/kernel.py"]})
    cfg = make_cfg(tmp_path)
    with pytest.raises(KdaError, match=r"upstream file 'fakepkg/ops/util.py' is not in fakepkg-1\.2\.3-py3") as e:
        vendor_task(cfg)
    assert str(cfg.path) in str(e.value)


def test_vendor_task_new_pin_reextracts(cache, tmp_path):
    make_wheel(cache)
    only_one = {"fakepkg/ops/kernel.py": sha(FILES["fakepkg/ops/kernel.py"])}
    vendor_task(make_cfg(tmp_path, only_one))
    assert not (vendor_root(PKG, VER) / "fakepkg/ops/util.py").exists()
    info = vendor_task(make_cfg(tmp_path))  # a file added to the pins is extracted from the cached wheel
    assert set(info.files) == set(FILES)


def test_vendor_task_offline_without_cache(cache, tmp_path):
    with pytest.raises(KdaError, match=r"upstream files missing .*run `kda vendor fake_task`"):
        vendor_task(make_cfg(tmp_path), allow_download=False)


def test_vendor_task_unknown_shim(cache, tmp_path):
    make_wheel(cache)
    cfg = make_cfg(tmp_path, shims=["fakepkg.platforms"])
    with pytest.raises(KdaError, match=r"upstream\.shims names 'fakepkg\.platforms'") as e:
        vendor_task(cfg)
    assert str(cfg.path) in str(e.value)


def test_download_failure_is_a_kda_error(cache, monkeypatch):
    class Proc:
        returncode = 1
        stderr = "ERROR: No matching distribution found for fakepkg==1.2.3"

    calls = []
    monkeypatch.setattr(fetch.subprocess, "run", lambda cmd, **k: calls.append(cmd) or Proc())
    with pytest.raises(KdaError, match="could not download fakepkg==1.2.3") as e:
        download_wheel(PKG, VER)
    assert "No matching distribution" in str(e.value) and "carry" in str(e.value)
    assert calls and "--no-deps" in calls[0] and f"{PKG}=={VER}" in calls[0]


def test_write_baseline_source(cache, tmp_path):
    wheel = make_wheel(cache)
    cfg = make_cfg(tmp_path, shims=["sglang.utils"])
    info = vendor_task(cfg)
    out = write_baseline_source(cfg, info)
    assert out == cfg.path.parent / "docs" / "baseline_source.md"
    text = out.read_text()
    assert text.startswith("<!-- generated by `kda vendor`; do not edit -->")
    assert f"`{PKG}=={VER}`" in text and wheel.name in text and info.wheel_sha256 in text
    for p, b in FILES.items():
        assert f"| `{p}` | `{sha(b)}` |" in text
    assert "- `sglang.utils` -> `kda/vendor/shims/sglang_utils.py`" in text
