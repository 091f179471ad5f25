"""kda/harness/verdict.py: reason codes from raw worker rows, per-arm statistics, speedups, INVALID rows."""
import copy

import pytest

from kda.harness import checks as C
from kda.harness.verdict import arm_correct, candidate_reasons, row_statistics

CFG = {"check": {"k_error_ratio": 2.0, "error_floor": 0.05}}


def out_stats(**kw):
    s = {"layout_ok": True, "unwritten": 0, "specials_mismatch": 0, "bad": 0, "max_norm_err": 0.1,
         "mean_abs_err": 1e-4, "max_abs_err": 1e-3, "numel": 100, "atol": 1e-2, "rtol": 1e-2}
    s.update(kw)
    return s


def rec(arm, trial=0, phase=0, **kw):
    r = {"arm": arm, "trial": trial, "phase": phase, "outputs": {"y": out_stats()}}
    if arm == "candidate":
        r.update({"mutated": [], "forbidden_calls": [], "tampered": [], "return_problem": None})
    else:
        r.update({"mutated": [], "tampered": []})
    r.update(kw)
    return r


def good_raw(trials=2):
    checks = []
    for t in range(trials):
        checks += [rec("candidate", t, 0), rec("baseline", t, 0)]
        if t == 0:
            checks += [rec("compile", 0, 0), rec("eager", 0, 0)]
        checks.append(rec("candidate", t, 1))
    return {"type": "row", "id": "r", "checks": checks, "arms": {}, "notes": [], "arm_errors": {}}


def reasons(raw, static=()):
    return candidate_reasons(raw, CFG, list(static))


# ---- candidate_reasons -----------------------------------------------------------------------------------

def test_clean_row_has_no_reasons():
    assert reasons(good_raw()) == ([], [])


def test_unwritten_and_mismatch_named_with_trial_phase_and_output():
    raw = good_raw()
    raw["checks"][-1]["outputs"]["y"] = out_stats(unwritten=7, bad=3, max_norm_err=9.0)
    codes, details = reasons(raw)
    assert codes == [C.UNWRITTEN, C.MISMATCH]
    assert any("output 'y' at trial 1 phase 1" in d and "7 elements unwritten" in d for d in details)


def test_a_baseline_outside_tolerance_excuses_nothing():
    """Where the baseline fails its own tolerance (upstream's group norm on rows with a large mean), the error-ratio
    rule has no yardstick and is not applied, but the candidate is still held to the tolerance against the oracle."""
    raw = good_raw()
    for r in raw["checks"]:
        if r["arm"] == "baseline":
            r["outputs"]["y"] = out_stats(bad=40, max_norm_err=5.0)
    assert reasons(raw) == ([], [])  # within tolerance itself: no rule left to fail
    raw["checks"][0]["outputs"]["y"] = out_stats(bad=3, max_norm_err=30.0)  # the candidate, trial 0 phase 0
    codes, details = reasons(raw)
    assert codes == [C.MISMATCH] and "worst normalised error 30" in details[0]


def test_layout_reason_uses_why():
    raw = good_raw()
    raw["checks"][0]["outputs"]["y"] = out_stats(layout_ok=False, why="output is Sneaky, not a plain torch.Tensor")
    codes, details = reasons(raw)
    assert codes == [C.LAYOUT] and "Sneaky" in details[0]


def test_precision_rule_against_baseline_of_same_trial():
    raw = good_raw()
    raw["checks"][0]["outputs"]["y"] = out_stats(max_norm_err=0.5)  # candidate trial 0 phase 0; baseline 0.1
    codes, details = reasons(raw)
    assert codes == [C.PRECISION] and "trial 0 phase 0" in details[0]


def test_precision_not_applied_on_phase_1_or_when_baseline_out_of_tolerance():
    raw = good_raw()
    raw["checks"][-1]["outputs"]["y"] = out_stats(max_norm_err=0.5)  # phase 1: no paired baseline
    assert reasons(raw)[0] == []
    raw = good_raw()
    raw["checks"][0]["outputs"]["y"] = out_stats(max_norm_err=0.5)
    raw["checks"][1]["outputs"]["y"] = out_stats(bad=1, max_norm_err=1.5)  # baseline itself out of tolerance
    assert reasons(raw)[0] == []


@pytest.mark.parametrize("key, value, code, text", [
    ("mutated", ["x", "scale"], C.INPUT_MUTATED, "inputs x, scale changed"),
    ("forbidden_calls", ["secret in /v/sglang/x.py"], C.FORBIDDEN_CALL, "secret in /v/sglang/x.py"),
    ("tampered", ["time.perf_counter"], C.TAMPER, "replaced time.perf_counter"),
    ("return_problem", "returned dict instead of the out buffers it was given", C.RETURN, "returned dict"),
])
def test_record_level_reasons(key, value, code, text):
    raw = good_raw()
    raw["checks"][0][key] = value  # the first candidate record: trial 0, phase 0
    codes, details = reasons(raw)
    assert codes == [code] and text in details[0] and "trial 0 phase 0" in details[0]


def test_peer_records_do_not_fail_the_candidate():
    raw = good_raw()
    raw["checks"][3]["outputs"]["y"] = out_stats(bad=50)  # eager peer wrong
    raw["checks"][1]["mutated"] = ["x"]                   # baseline mutated an input
    assert reasons(raw)[0] == []


def test_warmup_and_timed_tamper_and_torch_kernels():
    raw = good_raw()
    raw["warmup_tampered"] = ["time.perf_counter"]
    raw["timed_tampered"] = ["torch.cuda.Event.record", "torch.cuda.Event.record"]
    raw["torch_kernels"] = ["void at::native::elementwise_kernel", "Memcpy DtoD", "cublasGemm", "x"]
    codes, details = reasons(raw)
    assert codes == [C.TAMPER, C.TORCH_KERNEL]
    assert any("while warmup" in d for d in details) and any("while timed" in d for d in details)
    assert any("at::native" in d and "Memcpy" in d for d in details)


def test_static_reasons_counted():
    codes, details = reasons(good_raw(), static=["a.py:1: imports 'gc'", "a.py:2: imports 'kda'"])
    assert codes == [C.STATIC] and "(+1 more)" in details[0] and "imports 'gc'" in details[0]


def test_crash_and_timeout_short_circuit():
    raw = {"id": "r", "crash": "Traceback (most recent call last):\n  ...\nValueError: bad shape\n"}
    codes, details = reasons(raw, static=["a.py:1: x"])
    assert codes == [C.STATIC, C.CRASH] and details[-1] == "CRASH: ValueError: bad shape"
    codes, details = reasons({"id": "r", "timeout": "row exceeded 300 s"})
    assert codes == [C.TIMEOUT] and "300 s" in details[0]


def test_no_candidate_check_is_a_crash():
    raw = good_raw()
    raw["checks"] = [c for c in raw["checks"] if c["arm"] != "candidate"]
    codes, details = reasons(raw)
    assert codes == [C.CRASH] and "no candidate check ran" in details[0]


def test_codes_are_deduplicated_and_details_capped():
    raw = good_raw(trials=10)
    for c in raw["checks"]:
        if c["arm"] == "candidate":
            c["outputs"]["y"] = out_stats(bad=1, max_norm_err=1.5)
    codes, details = reasons(raw)
    assert codes == [C.MISMATCH, C.PRECISION] and len(details) == 12


def test_whitespace_crash_text():
    assert reasons({"id": "r", "crash": "\n "})[0] == [C.CRASH]


# ---- arm_correct / row_statistics -------------------------------------------------------------------------

def test_arm_correct():
    raw = good_raw()
    assert arm_correct(raw, "eager") and arm_correct(raw, "candidate")
    raw["checks"][3]["outputs"]["y"] = out_stats(specials_mismatch=1)
    assert not arm_correct(raw, "eager")
    assert not arm_correct(raw, "nonexistent")


def samples(us, n=15, jitter=0.02):
    # deterministic per-trial drift shared by all arms, so paired ratios are exact
    drift = [1 + jitter * ((i * 7) % 5 - 2) for i in range(n)]
    return {"device_us": [us * d for d in drift], "wall_us": [us * 3 * d for d in drift],
            "graph_us": [us * 0.9 * d for d in drift], "graph_error": None}


def stats_for(arms, raw=None, bytes_moved=10**9, copy_tbps=3.0, datasheet=4.8):
    raw = raw or good_raw()
    raw["arms"] = arms
    return row_statistics(raw, bytes_moved, copy_tbps, datasheet, resamples=500, seed=0)


def test_speedups_from_paired_samples():
    out = stats_for({"baseline": samples(1000.0), "candidate": samples(500.0), "eager": samples(2000.0),
                     "compile": samples(800.0)})
    s = out["speedup"]["device_us"]
    assert s["vs_baseline"]["median"] == pytest.approx(2.0)
    assert s["vs_baseline"]["ci"] == pytest.approx([2.0, 2.0])
    assert s["vs_baseline"]["n"] == 15
    assert s["best_peer"] == "compile" and s["vs_best_peer"]["median"] == pytest.approx(1.6)
    assert out["speedup"]["wall_us"]["vs_baseline"]["median"] == pytest.approx(2.0)
    assert out["invalid"] == []


def test_best_peer_ignores_peer_whose_checks_failed():
    raw = good_raw()
    compile_rec = next(c for c in raw["checks"] if c["arm"] == "compile")
    compile_rec["outputs"]["y"] = out_stats(bad=4)
    out = stats_for({"baseline": samples(1000.0), "candidate": samples(500.0), "eager": samples(900.0),
                     "compile": samples(100.0)}, raw=raw)
    s = out["speedup"]["device_us"]
    assert s["best_peer"] == "eager" and s["vs_best_peer"]["median"] == pytest.approx(1.8)


def test_best_peer_ignores_peer_without_checks():
    raw = good_raw()
    raw["checks"] = [c for c in raw["checks"] if c["arm"] != "compile"]
    out = stats_for({"baseline": samples(1000.0), "candidate": samples(500.0), "compile": samples(100.0)}, raw=raw)
    assert out["speedup"]["device_us"]["best_peer"] == "baseline"


def test_roofline_columns_and_invalid_when_faster_than_datasheet():
    # 1e9 bytes in 100 us = 10 TB/s > 4.8 (device and graph, not wall)
    out = stats_for({"baseline": samples(1000.0), "candidate": samples(100.0)})
    c = out["arms"]["candidate"]["device_us"]
    assert c["tbps"] == pytest.approx(1e9 / c["median"] / 1e6)
    assert c["copy_frac"] == pytest.approx(c["tbps"] / 3.0)
    assert out["arms"]["baseline"]["device_us"]["tbps"] == pytest.approx(1.0, rel=0.05)
    inv = out["invalid"]
    assert any(i.startswith("candidate device_us") and "exceeds the datasheet 4.8" in i for i in inv)
    assert any(i.startswith("candidate graph_us") for i in inv)
    assert not any("wall_us" in i for i in inv) and not any(i.startswith("baseline") for i in inv)


def test_no_datasheet_no_invalid_and_no_copy_bandwidth():
    out = stats_for({"baseline": samples(1000.0), "candidate": samples(1.0)}, copy_tbps=None, datasheet=None)
    assert out["invalid"] == [] and out["arms"]["candidate"]["device_us"]["copy_frac"] is None


def test_missing_candidate_arm_and_graph_error():
    base = samples(1000.0)
    base["graph_us"] = [None] * 15
    base["graph_error"] = "not capturable"
    out = stats_for({"baseline": base})
    assert out["speedup"] == {} and out["arms"]["baseline"]["graph_error"] == "not capturable"
    assert out["arms"]["baseline"]["graph_us"]["median"] is None


def test_graph_speedup_none_when_baseline_graph_missing():
    base = samples(1000.0)
    base["graph_us"] = [None] * 15
    out = stats_for({"baseline": base, "candidate": samples(500.0)})
    g = out["speedup"]["graph_us"]
    assert g["vs_baseline"] is None and g["best_peer"] is None
    assert out["speedup"]["device_us"]["vs_baseline"]["median"] == pytest.approx(2.0)


def test_l2_resident_rows_are_not_invalid():
    from kda.harness.verdict import row_statistics
    raw = {"arms": {"baseline": {"device_us": [1.0] * 5, "wall_us": [5.0] * 5, "graph_us": [1.0] * 5},
                    "candidate": {"device_us": [1.0] * 5, "wall_us": [5.0] * 5, "graph_us": [1.0] * 5}},
           "checks": []}
    # 10 MB in 1 us is 10 TB/s: impossible from DRAM, normal from a hot L2
    assert row_statistics(raw, 10_000_000, 4.2, 4.8, 100, 0)["invalid"]
    assert row_statistics(raw, 10_000_000, 4.2, 4.8, 100, 0, l2_resident=True)["invalid"] == []


# ---- the baseline alone (issue 34, attack 3) --------------------------------------------------------------------

def test_clean_baseline_flags_a_baseline_slower_beside_the_candidate():
    from kda.harness.verdict import clean_baseline

    beside = {"device_us": [20.0, 21.0, 20.5], "graph_us": [19.0, 19.5, 19.2]}
    alone = {"device_us": [10.0, 10.2, 10.1], "graph_us": [18.9, 19.0, 19.4]}
    record, problem = clean_baseline(beside, alone, 1.6)
    assert record["device_us"]["ratio"] == pytest.approx(20.5 / 10.1)
    assert record["graph_us"]["ratio"] == pytest.approx(1.0, abs=0.02)
    assert problem is None  # the host path alone: two honest processes differ that much (verdict.py says where)
    alone["graph_us"] = [9.0, 9.2, 9.1]
    record, problem = clean_baseline(beside, alone, 1.6)
    assert problem.startswith("the baseline timed alone ran faster: device_us 20.50 us beside")
    assert "graph_us 19.20 us beside the candidate, 9.10 us alone" in problem


def test_clean_baseline_within_the_limit_or_without_samples_is_no_problem():
    from kda.harness.verdict import clean_baseline

    same = {"device_us": [10.0, 10.4], "graph_us": [9.0, None, 9.1]}
    record, problem = clean_baseline(same, {"device_us": [9.5, 9.8], "graph_us": [9.0, 9.2]}, 1.25)
    assert problem is None and set(record) == {"device_us", "graph_us"}
    assert clean_baseline(same, {"device_us": [], "graph_us": [None]}, 1.25) == ({}, None)


def test_baseline_slowed_and_upstream_tampered_are_reasons():
    raw = good_raw()
    raw["baseline_slowed"] = "the baseline timed alone ran faster: device_us 2x"
    raw["checks"][1]["upstream_tampered"] = ["sglang.m.kernel"]  # seen after the baseline's call: a thread did it
    raw["timed_upstream_tampered"] = ["sglang.m.kernel"]
    codes, details = reasons(raw)
    assert codes == [C.UPSTREAM_TAMPERED, C.BASELINE_SLOWED]
    assert any("at the baseline arm's trial 0 phase 0" in d for d in details)
    assert any(d.endswith("while timed") for d in details)



def test_todays_release_slowed_is_its_own_reason():
    raw = good_raw()
    raw["latest_slowed"] = "today's release (latest) timed alone ran faster: graph_us 2x"
    codes, details = reasons(raw)
    assert codes == [C.PEER_SLOWED] and any("today's release (latest)" in d for d in details)


def test_stale_repeat_is_the_poison_left_by_the_second_call_not_any_phase_4_error():
    raw = good_raw()
    raw["checks"].append(rec("candidate", 0, 4, outputs={"y": out_stats(bad=5, max_norm_err=3.0)}))
    assert reasons(raw)[0] == [C.MISMATCH]  # a precision cut fails phase 4 as it fails every phase
    raw["checks"][-1]["outputs"]["y"] = out_stats(unwritten=1)
    codes, details = reasons(raw)
    assert codes == [C.UNWRITTEN, C.STALE_REPEAT]
    assert "left 1 element(s) the harness had poisoned between the calls" in details[-1]


def test_a_bitexact_contract_fails_a_candidate_whose_bits_differ_from_the_eager_chain():
    """Issue 40: `check.contract = "bitexact"`: the candidate's first checked call equals SGLang's eager chain in
    every bit, or NOT_BITEXACT (a `close` candidate's row only records it)."""
    from kda.harness.verdict import bitexact_problem, bitexact_row

    exact, off, missing = {"y": 0}, {"y": 12}, "no eager chain for 'f' (kda.definition.eager_chains)"
    bitexact = {"check": {**CFG["check"], "contract": "bitexact"}}
    for bits, code in ((exact, None), (off, C.NOT_BITEXACT), (missing, C.NOT_BITEXACT), ({"y": None}, C.NOT_BITEXACT)):
        raw = good_raw()
        raw["checks"][0]["bits_differ"] = bits  # the candidate's trial 0, phase 0
        codes, details = candidate_reasons(raw, bitexact, [])
        assert codes == ([code] if code else []), (bits, details)
        assert reasons(raw) == ([], [])  # close (no contract key: the default): recorded, never a reason
    assert bitexact_problem(off) == "output 'y': 12 bytes differ from SGLang's eager chain"
    raw = good_raw()
    assert bitexact_row(raw) is None  # nothing compared
    raw["checks"][0]["bits_differ"] = missing
    assert bitexact_row(raw) is None  # no chain: says nothing either way
    raw["checks"][0]["bits_differ"] = off
    assert bitexact_row(raw) is False
    raw["checks"][0]["bits_differ"] = exact
    assert bitexact_row(raw) is True
