"""kda.harness.table: the end-of-run table stays inside an 80-column terminal and keeps what a reader needs."""
import io

from rich.console import Console

from kda.harness.table import print_run


def _out(bench: bool) -> dict:
    row = {"id": "hyvae_c256_t17_256x256_channels_last_3d_row", "production": True, "status": "FAIL",
           "bytes": 570_000_000, "notes": ["fits in L2 with a hot cache: TB/s here are L2 rates"],
           "arm_errors": {}, "details": ["MISMATCH: output 'y' at trial 0 phase 1: 3 beyond tolerance"],
           "checks": {"candidate": {"worst_norm_err": 1.26}, "baseline": {"worst_norm_err": 0.08}}}
    summary = {"rows_passed": 0, "rows_total": 1, "production_passed": 0, "production_total": 1}
    if bench:
        stats = {"median": 2.5, "ci": [2.4, 2.6]}
        row["arms"] = {"candidate": {"device_us": {"copy_frac": 0.83}}}
        row["speedup"] = {"device_us": {"vs_baseline": stats, "vs_best_peer": {"median": 1.2}, "best_peer": "compile"},
                          "graph_us": {"vs_baseline": {"median": 3.1}}}
        summary.update(headline_metric="device_us", metrics={})
    prov = {"task": "group_norm_silu", "aa": False, "mode": "bench" if bench else "check",
            "gpu": {"name": "NVIDIA H200"} if bench else None}
    return {"provenance": prov, "rows": [row], "summary": summary}


def _render(out) -> str:
    buf = io.StringIO()
    print_run(out, Console(file=buf, width=80, force_terminal=False, color_system=None))
    return buf.getvalue()


def test_bench_and_check_tables_fit_80_columns():
    for bench in (True, False):
        text = _render(_out(bench))
        wide = [l for l in text.splitlines() if len(l) > 80]
        assert not wide, wide
        assert "FAIL" in text and "MISMATCH: output 'y'" in text  # the reason, on a line of its own
        assert "fits in L2" in text  # a row's note is not dropped
        if bench:
            assert "2.50 [2.40, 2.60]" in text and "1.20 comp" in text and "3.10" in text and "83" in text
        else:
            assert "1.260 / 0.080" in text
