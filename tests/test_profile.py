"""kda.profile parses Nsight Compute's raw CSV export (fixtures taken on an H200) into a named bound."""
from pathlib import Path

import pytest

from kda.errors import KdaError
from kda.profile import name_bound, parse_raw_csv, summarize, to_markdown

FIX = Path(__file__).parent / "fixtures" / "ncu"


def load(name):
    return parse_raw_csv((FIX / name).read_text())


def test_streaming_row_is_memory_bound():
    s = summarize(load("wan_t2v_s75600_c5120_fp32scale-candidate.csv"), copy_tbps=4.21)
    assert [k["name"] for k in s["kernels"]] == ["_scale_shift_kernel"]
    # 75600 x 5120 bf16 x, bf16 shift, bf16 y: about 2.32 GB must cross DRAM
    assert 2.2e9 < s["dram_bytes"] < 2.45e9
    assert 400 < s["duration_us"] < 800
    assert s["dram_tbps"] == pytest.approx(s["dram_bytes"] / s["duration_us"] / 1e6)
    assert s["pct_of_copy"] == pytest.approx(100 * s["dram_tbps"] / 4.21)
    assert s["bound"].startswith("memory")
    assert s["registers_per_thread"] > 0 and s["achieved_occupancy_pct"] > 0
    assert s["top_stalls"] and all(x["warps_per_issue"] >= 0 for x in s["top_stalls"])
    assert s["local_spill_insts"] == 0


def test_tiny_row_is_host_bound():
    s = summarize(load("qwen_image_s19_c3072_bcast11-baseline.csv"), copy_tbps=None)
    assert s["duration_us"] < 5
    assert s["bound"].startswith("host/launch")
    assert s["pct_of_copy"] is None


def test_markdown_side_by_side():
    a = summarize(load("wan_t2v_s75600_c5120_fp32scale-candidate.csv"), 4.21)
    b = summarize(load("qwen_image_s19_c3072_bcast11-baseline.csv"), 4.21)
    md = to_markdown("t", {"candidate": a, "baseline": b})
    assert "| metric | candidate | baseline |" in md
    assert md.count("\n|") >= 12


def test_bound_names():
    base = {"dram_pct_peak": 10, "sm_pct_peak": 10, "achieved_occupancy_pct": 50, "duration_us": 100, "top_stalls": [{"reason": "long_scoreboard"}]}
    assert name_bound({**base, "sm_pct_peak": 80}).startswith("compute")
    assert name_bound({**base, "achieved_occupancy_pct": 10}).startswith("occupancy")
    assert name_bound(base).startswith("latency")


def test_empty_export_is_an_error():
    with pytest.raises(KdaError, match="no kernel rows"):
        parse_raw_csv("==PROF== nothing\n")
