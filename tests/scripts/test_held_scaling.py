"""scripts/held_scaling.py on a CPU: its shape parsing and the line it fits through a family's times."""
import pytest

from script_support import load_script

SCALING = load_script("held_scaling")


def test_shapes_parse_and_bad_ones_name_themselves():
    assert SCALING.parse_shape("2x512x9x128x128") == (2, 512, 9, 128, 128)
    with pytest.raises(SystemExit, match="1x512xnine"):
        SCALING.parse_shape("1x512xnine")
    with pytest.raises(SystemExit, match="at least"):
        SCALING.parse_shape("1x512")


def test_line_fit_recovers_a_fixed_cost_and_a_rate():
    # 5 us a call, then 4 TB/s (4 MB a microsecond)
    pts = [(mb, 5.0 + mb / 4.0) for mb in (302.0, 604.0, 1208.0)]
    a, s = SCALING.line_fit(pts)
    assert a == pytest.approx(5.0) and 1 / s == pytest.approx(4.0)
    assert SCALING.line_fit([(302.0, 80.0), (302.0, 81.0)]) == (None, None)  # one size: no line


def test_families_share_everything_but_the_batch():
    assert SCALING.family_key((1, 512, 9, 128, 128)) == SCALING.family_key((4, 512, 9, 128, 128))
    assert SCALING.family_key((1, 512, 9, 128, 128)) != SCALING.family_key((1, 512, 18, 128, 128))
