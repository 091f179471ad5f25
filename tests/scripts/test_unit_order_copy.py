"""scripts/unit_order_copy.py on a CPU: the unit widths it offers and its copy kernel under Triton's interpreter."""
import os
import subprocess
import sys

import pytest

from kda.core.paths import repo_root
from script_support import load_script

UOC = load_script("unit_order_copy")


def test_a_shape_needs_five_sizes():
    assert UOC.parse_shape("1x512x9x128x128") == (1, 512, 9, 128, 128)
    with pytest.raises(SystemExit, match="five sizes"):
        UOC.parse_shape("1x512x9x128")


def test_unit_widths_keep_16_byte_pieces_and_units_that_fit():
    # C=128, G=32: a group is 4 channels, 8 bytes of fp16 a position: one group alone is below a 16-byte piece
    assert UOC.unit_widths((1, 128, 1, 8, 8), 32, 2, 1e6) == [8, 16, 32, 64, 128]
    # C=512: 16 channels a group; 147456 positions x 32 B = 4.7 MB a group, so 24 MB allows 1, 2 and 4 groups
    assert UOC.unit_widths((1, 512, 9, 128, 128), 32, 2, 24.0) == [16, 32, 64]
    assert UOC.unit_widths((1, 256, 17, 256, 256), 32, 2, 10.0) == []  # 17.8 MB for one group
    with pytest.raises(SystemExit, match="multiple of --groups"):
        UOC.unit_widths((1, 100, 1, 4, 4), 32, 2, 24.0)


def test_tile_copy_copies_in_both_orders_under_the_interpreter():
    code = (
        "import torch, sys\n"
        "sys.path.insert(0, 'scripts')\n"
        "import unit_order_copy as u\n"
        "x = torch.randn(300, 64, dtype=torch.float16)\n"
        "for width in (8, 16, 64):\n"
        "    for major in (True, False):\n"
        "        y = torch.zeros_like(x)\n"
        "        u.tile_copy(x, y, width, major, tile_bytes=512)\n"
        "        assert torch.equal(x, y), (width, major)\n"
        "try:\n"
        "    u.tile_copy(x, torch.zeros_like(x), 24, True)\n"
        "except ValueError as e:\n"
        "    assert 'width 24' in str(e)\n"
        "else:\n"
        "    raise AssertionError('width 24 accepted')\n"
        "print('ok')\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "TRITON_INTERPRET": "1"}, cwd=repo_root())
    assert proc.returncode == 0 and proc.stdout.strip().endswith("ok"), proc.stdout + proc.stderr
