"""In-place ops (config `check.inplace`): the outputs are the declared inputs after the call.

Unit tests of the storage helpers; the worker's RowRunner driven in this process with torch-written arms (checked
call, restore between arms, the post-timing replay); and the real harness (run_task, CPU, Triton interpreter) on the
qknorm_rope task with in-place fakes from tests/zoo/inplace/, which must be rejected.
"""
from __future__ import annotations

import types
from pathlib import Path

import pytest
import torch

from kda.harness import checks as C
from kda.harness.guards import TamperWatch
from kda.harness.runner import RunOptions, run_task
from kda.harness.worker import RowRunner, Tripwire
from kda.definition.task import Task
from kda.definition.workloads import build_inputs, refill_inputs

REPO = Path(__file__).resolve().parents[2]
FAKES = REPO / "tests" / "zoo" / "inplace"
TASK = "qknorm_rope"
OFFSET_ROW = "reg_storage_offsets_n6_h2"
NEOX_ROW = "reg_d128_neox_n7_h3"


# ---- storage helpers --------------------------------------------------------------------------------------------

def test_written_outside_views_sees_gaps_but_not_the_view():
    base = torch.arange(10, dtype=torch.float32)
    view = base.as_strided((2, 2), (4, 1), 1)  # elements 1, 2, 5, 6
    inputs = {"x": view, "w": torch.ones(3)}
    snaps = C.snapshot_inputs(inputs)
    view.mul_(3)  # in place, inside the view: allowed
    assert C.written_outside_views(inputs, snaps, ["x"]) == []
    base[3] = -1  # the gap between the rows
    assert C.written_outside_views(inputs, snaps, ["x"]) == ["x (outside its view)"]
    C.restore_inputs_(inputs, snaps)
    assert torch.equal(base, torch.arange(10, dtype=torch.float32))


# ---- RowRunner in this process, arms written with torch -----------------------------------------------------------

def _oracle_arm(reference, skip_k=False):
    """An in-place 'candidate' computing the oracle's values and storing them into q (and k unless skip_k)."""
    def fused_inplace_qknorm_rope(q, k, q_weight, k_weight, cos_sin_cache, positions, *, is_neox, eps, head_dim,
                                  rope_dim):
        row = types.SimpleNamespace(scalars={"is_neox": is_neox, "eps": eps, "rope_dim": rope_dim})
        ref = reference(row, {"q": q, "k": k, "q_weight": q_weight, "k_weight": k_weight,
                              "cos_sin_cache": cos_sin_cache, "positions": positions})
        q.copy_(ref["q"])
        if not skip_k:
            k.copy_(ref["k"])
    return types.SimpleNamespace(fused_inplace_qknorm_rope=fused_inplace_qknorm_rope)


def _runner(solution, row_id=OFFSET_ROW):
    task = Task.load(TASK)
    args = types.SimpleNamespace(salt=3, aa=False, device="cpu")
    reference = task.oracle.reference
    r = RowRunner(task, args, {}, solution, TamperWatch(), (set(), ()), Tripwire(), reference)
    r.baseline_skipped = "no baseline in this test"
    row = next(x for x in task.rows if x.id == row_id)
    r.build(row)
    r.refill(0, 0)
    r.make_arms([])
    return r


def _bad(rec):
    return {k: C.check_reasons(s) for k, s in rec["outputs"].items() if C.check_reasons(s)}


def test_inplace_outputs_are_the_inputs_and_are_restored_after_each_check():
    task = Task.load(TASK)
    r = _runner(_oracle_arm(task.oracle.reference))
    assert set(r.out) == {"q", "k"} and r.out["q"] is r.inputs["q"]  # no buffers of its own
    before = {k: v.clone() for k, v in r.inputs.items()}
    rec = r.check("candidate", 0, 0)
    assert _bad(rec) == {} and rec["mutated"] == [] and rec["return_problem"] is None
    assert all(torch.equal(before[k], r.inputs[k]) for k in before)  # the next arm starts from the same values


def test_inplace_candidate_that_skips_k_is_a_mismatch_on_k_in_checks_and_in_the_timed_replay():
    task = Task.load(TASK)
    r = _runner(_oracle_arm(task.oracle.reference, skip_k=True))
    assert _bad(r.check("candidate", 0, 1)) == {"k": [C.MISMATCH]}
    # Post-timing: replay_one stands for the graph replay the bench loop sets up; the inputs it runs on are fresh.
    r.inputs["q"].fill_(0)
    r.replay_one = r.arms["candidate"]
    rec = r.check_timed_output(0)
    assert rec["phase"] == 2 and _bad(rec) == {"k": [C.MISMATCH]}


def test_inplace_timed_replay_of_a_correct_candidate_passes():
    task = Task.load(TASK)
    r = _runner(_oracle_arm(task.oracle.reference), NEOX_ROW)
    r.replay_one = r.arms["candidate"]
    rec = r.check_timed_output(1)
    assert _bad(rec) == {} and rec["mutated"] == [] and rec["tampered"] == []


def test_inplace_output_specs_must_name_exactly_the_inplace_inputs(monkeypatch):
    task = Task.load(TASK)
    r = _runner(_oracle_arm(task.oracle.reference))
    monkeypatch.setattr(r.task.adapter, "output_specs", lambda row, inputs: {"q": (tuple(inputs["q"].shape), inputs["q"].dtype)})
    with pytest.raises(ValueError, match="in-place inputs"):
        r.make_arms([])


# ---- the real harness on the CPU ---------------------------------------------------------------------------------

def _run(candidate, rows):
    return run_task(Task.load(TASK), RunOptions(mode="check", device="cpu", candidate=candidate, rows=rows,
                                                write=False, quiet=True, salt=11))


def _runtime_reasons(row):
    return [c for c in row["reasons"] if c != C.STATIC]


def test_fake_that_skips_k_is_rejected_by_the_harness():
    out = _run(FAKES / "skips_k.py", [NEOX_ROW])
    (row,) = out["rows"]
    assert row["status"] == "FAIL" and C.MISMATCH in _runtime_reasons(row), row["details"]
    assert any("output 'k'" in d for d in row["details"]) and not any("output 'q'" in d for d in row["details"])


def test_fake_that_writes_outside_q_and_k_is_rejected_by_the_harness():
    out = _run(FAKES / "writes_outside.py", [OFFSET_ROW])
    (row,) = out["rows"]
    assert _runtime_reasons(row) == [C.INPUT_MUTATED], row["details"]
    detail = next(d for d in row["details"] if d.startswith(C.INPUT_MUTATED))
    assert "q (outside its view)" in detail and "k_weight" in detail


def test_rotated_arms_call_each_input_set_with_its_own_outputs():
    """bench.rotate's arms (issue 34, attack 2), on the CPU: one call per rotated set, each writing that set's own
    in-place outputs from that set's own values."""
    task = Task.load(TASK)
    r = _runner(_oracle_arm(task.oracle.reference))
    arms = r.rotated_arms(3)
    assert set(arms) == {"candidate"} and len(arms["candidate"]) == r.rot.count == 4  # inner + 1; no baseline here
    before = [{k: (None if v is None else v.clone()) for k, v in one.items()} for one in r.rot.sets]
    assert not torch.equal(before[0]["q"], before[1]["q"])
    for call in arms["candidate"]:
        call()
    for one, old, out in zip(r.rot.sets, before, r.rot_outs):
        assert out["q"] is one["q"] and out["k"] is one["k"]
        ref = task.oracle.reference(r.row, old)
        assert torch.equal(one["q"], ref["q"].to(one["q"].dtype)) and torch.equal(one["k"], ref["k"].to(one["k"].dtype))
