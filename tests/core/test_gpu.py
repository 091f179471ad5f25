"""kda/core/gpu.py: GPU name -> slug -> datasheet bandwidth (the impossibility line)."""
import pytest

from kda.core.gpu import DATASHEET_TBPS, datasheet_tbps, gpu_slug


@pytest.mark.parametrize("name, slug, tbps", [
    ("NVIDIA H200", "h200", 4.8),
    ("NVIDIA H100 80GB HBM3", "h100", 3.35),
    ("NVIDIA H100 PCIe", "h100-pcie", 2.0),
    ("NVIDIA A100-SXM4-80GB", "a100", 2.039),
    ("NVIDIA B200", "b200", 8.0),
    ("NVIDIA H20", "h20", 4.0),
])
def test_known_gpus(name, slug, tbps):
    assert gpu_slug(name) == slug
    assert datasheet_tbps(slug) == pytest.approx(tbps)


def test_h20_is_not_h200_and_vice_versa():
    assert gpu_slug("NVIDIA H20") != gpu_slug("NVIDIA H200")
    assert gpu_slug("NVIDIA H200 NVL") == "h200"


def test_unknown_gpu_slug_is_filename_safe_and_has_no_datasheet():
    slug = gpu_slug("NVIDIA GeForce RTX 4090")
    assert slug == "nvidia-geforce-rtx-4090"
    assert datasheet_tbps(slug) is None
    assert gpu_slug("???") == "unknown"


def test_every_datasheet_entry_is_a_plausible_bandwidth():
    assert all(1.0 < v < 10.0 for v in DATASHEET_TBPS.values())
    assert DATASHEET_TBPS["h200"] > DATASHEET_TBPS["h100"] > DATASHEET_TBPS["h100-pcie"]


def test_h100_nvl_is_not_the_sxm_datasheet():
    slug = gpu_slug("NVIDIA H100 NVL")
    assert datasheet_tbps(slug) is None or datasheet_tbps(slug) >= 3.9
