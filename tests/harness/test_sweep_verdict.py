"""kda/harness/sweep_verdict.py on synthetic row records: the share of holding rows, the worst row, the target, and
the printed lines within 80 columns; runner.sweep_path keeps sweep files apart from the production ones."""
from pathlib import Path

from kda.harness import sweep_verdict
from kda.harness.runner import sweep_path


def rec(i, median, lo, hi, status="PASS", peer="compile"):
    r = {"id": f"sweep_{i}_row", "status": status, "speedup": {}}
    if median is not None:
        r["speedup"]["graph_us"] = {"vs_best_peer": {"median": median, "ci": [lo, hi]}, "best_peer": peer}
    return r


def test_share_worst_row_and_target_met():
    rows = [rec(i, 1.1, 1.05, 1.15) for i in range(9)] + [rec(9, 0.95, 0.93, 0.99, peer="baseline")]
    v = sweep_verdict.verdict(rows, 0.9, 0.9)
    assert (v["held"], v["rows"], v["share"]) == (9, 10, 0.9)
    assert v["worst"] == {"id": "sweep_9_row", "median": 0.95, "ci": [0.93, 0.99], "best_peer": "baseline"}
    assert v["below_1"] == ["sweep_9_row"] and v["passed"]


def test_an_interval_touching_1_holds_and_a_low_median_fails_the_target():
    rows = [rec(0, 0.97, 0.9, 1.0), rec(1, 0.85, 0.8, 1.2)]
    v = sweep_verdict.verdict(rows, 0.9, 0.9)
    assert v["held"] == 2 and v["share"] == 1.0  # neither interval lies wholly below 1
    assert v["below_min_median"] == ["sweep_1_row"] and not v["passed"]


def test_failed_and_untimed_rows_count_against_the_share():
    rows = [rec(0, 1.2, 1.1, 1.3), rec(1, 1.2, 1.1, 1.3, status="FAIL"), rec(2, None, 0, 0)]
    v = sweep_verdict.verdict(rows, 0.5, 0.9)
    assert v["held"] == 1 and v["failed"] == ["sweep_1_row"] and v["untimed"] == ["sweep_2_row"]
    assert v["worst"]["id"] == "sweep_0_row" and not v["passed"]
    assert not sweep_verdict.verdict([], 0.9, 0.9)["passed"]


def test_lines_fit_80_columns_and_say_the_verdict():
    rows = [rec(i, 0.5 + i / 10, 0.4, 0.6 + i / 10, status="FAIL" if i == 3 else "PASS") for i in range(8)]
    rows[0]["id"] = "sweep_0_" + "x" * 120
    text = sweep_verdict.lines(sweep_verdict.verdict(rows, 0.9, 0.9))
    assert all(len(line) <= 80 for line in text)
    assert text[0].startswith("sweep: ") and text[-1] == "  target NOT met"
    assert any("failed a check" in line for line in text)


def test_sweep_results_live_in_a_folder_of_their_own():
    class T:
        def results_dir(self):
            return Path("/t/results")

    assert sweep_path(T(), "h200") == Path("/t/results/sweep/h200.jsonl.gz")


def test_by_parameter_groups_choices_in_domain_order_and_ranges_in_groups_of_equal_count():
    from kda.harness.sweep_verdict import by_parameter

    def row(i, dtype, s, med, lo):
        return {"id": f"r{i}", "status": "PASS", "params": {"dtype": dtype, "S": s},
                "speedup": {"graph_us": {"vs_best_peer": {"median": med, "ci": [lo, med + 0.1]}}}}

    rows = [row(0, "bf16", 10, 1.2, 1.1), row(1, "fp32", 20, 0.5, 0.4), row(2, "bf16", 30, 0.8, 0.7),
            row(3, "fp32", 40, 1.0, 0.95), {"id": "r4", "status": "FAIL", "params": {"dtype": "fp32", "S": 50}}]
    domain = [{"name": "dtype", "choices": ["fp32", "bf16", "fp16"]}, {"name": "S", "choices": None, "min": 1,
                                                                        "max": 64}]
    got = {p["name"]: p["groups"] for p in by_parameter(rows, domain)}
    # choices in the domain's order, only those drawn; a failed row counts as drawn, never as holding
    assert [(g["value"], g["rows"], g["held"]) for g in got["dtype"]] == [("fp32", 3, 1), ("bf16", 2, 1)]
    assert got["dtype"][0]["median"] == 0.75 and got["dtype"][1]["median"] == 1.0  # over the timed rows only
    # five drawn values in four groups of (almost) equal count, labelled by the values they span
    assert [g["rows"] for g in got["S"]] == [1, 1, 2, 1]
    assert [g["value"] for g in got["S"]] == ["10", "20", "30 .. 40", "50"]
    assert got["S"][2]["median"] == 0.9 and got["S"][2]["held"] == 1
    assert got["S"][3] == {"value": "50", "rows": 1, "held": 0, "median": None}  # drawn, failed, never timed
