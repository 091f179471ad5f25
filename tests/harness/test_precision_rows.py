"""Issue 34, attack 4: a precision cut that only rows with a large mean expose, judged against the oracle alone.

The fake (tests/zoo/norms/naive_variance.py) takes a LayerNorm's variance as E[x^2] - mean^2 in one pass. It goes
through the real harness (run_task, CPU, Triton interpreter) on norm_infer's fp32 offset row, where the pinned
upstream kernel itself sits close to the tolerance: the fake must fail there with MISMATCH, the tolerance against the
oracle, which no state of the baseline excuses (the error-ratio rule is the only one the baseline's own error
switches off: tests/harness/test_verdict.py).
"""
from __future__ import annotations

from pathlib import Path

import pytest

from kda.core.errors import KdaError
from kda.definition.task import Task
from kda.harness.runner import RunOptions, run_task

REPO = Path(__file__).resolve().parents[2]
FAKE = REPO / "tests" / "zoo" / "norms" / "naive_variance.py"
ROW = "reg_ln_fp32_m16_n3072_offset"


def test_one_pass_variance_fails_the_offset_row_with_mismatch():
    task = Task.load("norm_infer")
    from kda.vendor.fetch import vendor_task
    try:
        vendor_task(task.cfg)
    except KdaError as e:
        pytest.skip(f"the upstream baseline is not vendored here: {e}")
    out = run_task(task, RunOptions(mode="check", device="cpu", candidate=FAKE, rows=[ROW], write=False, quiet=True,
                                    salt=20261128))
    (row,) = out["rows"]
    assert row["status"] != "PASS", row
    assert "MISMATCH" in row["reasons"], row["details"]
    assert "CRASH" not in row["reasons"], row["details"]
    # far over, not at the edge: 6-13x on the CPU when the rows were made
    worst = max(float(d.rsplit("worst normalised error ", 1)[1]) for d in row["details"] if d.startswith("MISMATCH"))
    assert worst > 3, row["details"]


def test_each_row_records_whether_the_candidate_equals_sglangs_eager_chain_bit_for_bit():
    """Issue 40's contract, measured on every out-of-place row: a candidate written as the eager chain's own torch ops
    is bit-exact on a bf16 and an fp16 row, the real one (fp32 math, one rounding) is not; the summary counts them."""
    task = Task.load("fuse_scale_shift")
    rows = ["reg_offset_padded_s61_c256", "reg_fp16_b2_s33_c512_bcast2d"]  # small: the interpreter runs the real one
    chain = REPO / "tests" / "zoo" / "contract" / "eager_chain_copy.py"
    got = {}
    for name, candidate in (("chain", chain), ("real", None)):
        out = run_task(task, RunOptions(mode="check", device="cpu", candidate=candidate, rows=rows, write=False,
                                        quiet=True, salt=20261128))
        got[name] = ({r["id"]: r["bitexact"] for r in out["rows"]}, out["summary"]["bitexact"])
    assert got["chain"] == ({r: True for r in rows}, {"rows": 2, "exact": 2}), got
    assert got["real"][0] == {r: False for r in rows} and got["real"][1] == {"rows": 2, "exact": 0}, got
