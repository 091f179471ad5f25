"""The worker's result channel and the parent's own check of the outputs: a verdict nothing in the candidate's process
can write.

Unit tests of the authenticated lines (kda/harness/channel.py) and of the parent's reading of them (runner.Worker.
receive) fed forged, replayed and torn lines; a real worker's command line, environment and stdin, which must name
neither its result pipe nor the run's key; the parent's own check (kda/harness/recheck.py) on hand-overs built here;
and the real harness (run_task, CPU, Triton interpreter) on two forgers with the static rules switched off, so the
runtime defences stand alone: tests/zoo/forges_results.py (writes PASS lines into every pipe it finds) and
tests/zoo/channel/steals_key.py (finds the key in the worker's memory and answers the row itself).
"""
from __future__ import annotations

import hashlib
import io
import json
import os
from pathlib import Path

import pytest
import torch

from kda.core.errors import KdaError
from kda.definition.task import Task
from kda.definition.workloads import build_inputs, refill_inputs, trial_seed
from kda.harness import channel, recheck, runner
from kda.harness import checks as C
from kda.harness.runner import RunOptions, Worker, run_task
from kda.harness.static_rules import static_violations

REPO = Path(__file__).resolve().parents[2]
ZOO = REPO / "tests" / "zoo"
TASK = "fuse_scale_shift"
ROWS = ("reg_specials_s64_c512_fp32", "reg_tiny_b1_s1_c1")
SALT = 20261122


# ---- the lines -----------------------------------------------------------------------------------------------------

def _line(seal, msg: dict) -> bytes:
    return seal(msg).encode()


def test_a_sealed_line_opens_and_every_forgery_is_refused():
    key = channel.new_key()
    seal, open_line = channel.sealer(key), channel.opener(key)
    expect = {"seq": 3, "nonce": "ab" * 16, "type": "row", "id": "r1"}
    good = {"type": "row", "id": "r1", "seq": 3, "nonce": "ab" * 16, "checks": []}
    msg, why = open_line(_line(seal, good), expect)
    assert why is None and msg == good

    body = json.dumps(good)
    refused = {
        "no tag": body.encode(),
        "another key": _line(channel.sealer(channel.new_key()), good),
        "no key": _line(channel.sealer(b""), good),
        "body changed after tagging": _line(seal, good).replace(b'"checks": []', b'"checks": [{}]'),
        "replayed (another request's nonce)": _line(seal, {**good, "nonce": "cd" * 16}),
        "another sequence number": _line(seal, {**good, "seq": 2}),
        "another row": _line(seal, {**good, "id": "r2"}),
        "another type": _line(seal, {**good, "type": "hello"}),
        "not an object": _line(seal, [1, 2]),
    }
    for what, line in refused.items():
        msg, why = open_line(line, expect)
        assert msg is None and why, what


def test_the_sealer_keeps_no_key_bytes_where_a_candidate_would_look():
    """The key lives in the HMAC object of the closure: not a module global, not among the closure's cells as bytes."""
    key = channel.new_key()
    seal = channel.sealer(key)
    cells = [c.cell_contents for c in seal.__closure__]
    assert not any(isinstance(v, (bytes, str)) and (key in v if isinstance(v, bytes) else key.hex() in v) for v in cells)
    assert not any(isinstance(v, bytes) and key in v for v in vars(channel).values())


# ---- the parent's reading ------------------------------------------------------------------------------------------

def _reader(expect: dict):
    """A Worker's reading half over a pipe this test writes into, as a candidate would."""
    key = channel.new_key()
    r, w = os.pipe()
    wk = object.__new__(Worker)
    wk.res, wk.buf, wk.expect, wk.open_line = r, b"", expect, channel.opener(key)
    return wk, w, channel.sealer(key)


def test_receive_takes_the_authentic_answer_and_refuses_a_forged_line_ahead_of_it():
    expect = {"seq": 1, "nonce": "00" * 16, "type": "row", "id": "r1"}
    answer = {"type": "row", "id": "r1", "seq": 1, "nonce": "00" * 16, "checks": []}
    wk, w, seal = _reader(expect)
    os.write(w, seal(answer).encode())
    assert wk.receive(5) == answer

    wk, w, seal = _reader(expect)
    forged = json.dumps({**answer, "checks": [{"arm": "candidate"}]})
    os.write(w, (forged + "\n").encode() + seal(answer).encode())  # the candidate's line comes first
    got = wk.receive(5)
    assert got["type"] == "forged" and "without an authentication tag" in got["why"]


def test_receive_neither_hangs_on_a_torn_line_nor_takes_it():
    wk, w, _ = _reader({"seq": 1, "nonce": "00" * 16})
    os.write(w, b'{"type": "row", "id": "r1"')  # no newline: a plain readline would block for ever
    assert wk.receive(0.3) is None  # the row's timeout still applies
    os.close(w)
    assert wk.receive(1)["type"] == "forged"


def test_a_workers_command_line_environment_and_stdin_name_neither_its_result_pipe_nor_the_key(monkeypatch):
    task = Task.load(TASK)
    _vendored(task)
    key = channel.new_key()
    monkeypatch.setattr(channel, "new_key", lambda: key)
    wk = Worker(task, RunOptions(mode="check", device="cpu", quiet=True, write=False), SALT, False)
    try:
        hello = wk.receive(300)
        assert hello and hello["type"] == "hello", hello or wk.log_tail()
        pid = wk.proc.pid
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        environ = Path(f"/proc/{pid}/environ").read_bytes()
        assert not any(a.startswith(b"--fd") for a in cmdline), cmdline
        for secret in (key.hex().encode(), key):
            assert secret not in b"\0".join(cmdline) and secret not in environ
        assert os.readlink(f"/proc/{pid}/fd/0") == "/dev/null"  # the command pipe left fd 0 before any task code
        fds = {int(n): os.readlink(f"/proc/{pid}/fd/{n}") for n in os.listdir(f"/proc/{pid}/fd")}
        assert all(str(n) not in [a.decode() for a in cmdline] for n, t in fds.items() if t.startswith("pipe:"))
    finally:
        wk.close()


# ---- the parent's own check ---------------------------------------------------------------------------------------

def _hand_over(tmp_path: Path, calls: list[dict]) -> tuple[Path, str]:
    buf = io.BytesIO()
    torch.save(calls, buf)
    path = tmp_path / "outputs.pt"
    path.write_bytes(buf.getvalue())
    return path, hashlib.sha256(buf.getvalue()).hexdigest()


def _calls(task, row, outputs_of) -> list[dict]:
    """The calls a check row makes (candidate, phases 0 and 1 of each trial, and the repeat check: trial 0, phase 4),
    each with outputs_of(inputs)."""
    calls = []
    for t, p in [(t, p) for t in range(task.cfg["check"]["trials"]) for p in (0, 1)] + [(0, 4)]:
        inputs = build_inputs(row, "cpu")
        refill_inputs(row, inputs, trial_seed(row.seed, SALT, t, p))
        calls.append({"arm": "candidate", "trial": t, "phase": p, "outputs": outputs_of(inputs),
                      "inputs": C.snapshot_inputs(inputs)})
    return calls


CLEAN = {"layout_ok": True, "unwritten": 0, "specials_mismatch": 0, "bad": 0, "max_norm_err": 0.0,
         "mean_abs_err": 0.0, "max_abs_err": 0.0, "numel": 1, "atol": 1e-5, "rtol": 1e-5}


def _claim(calls: list[dict]) -> dict:
    return {"type": "row", "id": "r", "arms": {}, "notes": [],
            "checks": [{"arm": c["arm"], "trial": c["trial"], "phase": c["phase"], "mutated": [],
                        "outputs": {"y": dict(CLEAN)}} for c in calls]}


def test_the_parent_agrees_with_an_honest_report_and_contradicts_a_false_one(tmp_path):
    task = Task.load(TASK)
    row = next(r for r in task.rows if r.id == ROWS[1])

    def right(inputs):
        return {"y": task.oracle.reference(row, inputs)["y"].to(inputs["x"].dtype)}

    def poisoned(inputs):
        y = torch.empty_like(inputs["x"])
        C.poison_(y)
        return {"y": y}

    calls = _calls(task, row, right)
    path, sha = _hand_over(tmp_path, calls)
    out = recheck.recheck_row(task, row, {**_claim(calls), "outputs_sha256": sha}, path, SALT, "check")
    assert out["contradicted"] == [] and not out.get("forged")
    assert all(not C.check_reasons(s) for c in out["checks"] for s in c["outputs"].values())

    calls = _calls(task, row, poisoned)
    path, sha = _hand_over(tmp_path, calls)
    out = recheck.recheck_row(task, row, {**_claim(calls), "outputs_sha256": sha}, path, SALT, "check")
    assert len(out["contradicted"]) == len(calls)  # every call reported clean, none is
    assert all(C.UNWRITTEN in C.check_reasons(c["outputs"]["y"]) for c in out["checks"])  # the parent's statistics
    reasons, _ = runner.candidate_reasons(out, task.cfg, [])
    assert C.FORGED in reasons and C.UNWRITTEN in reasons


def test_a_hand_over_that_is_altered_missing_or_short_of_a_call_is_forged(tmp_path):
    task = Task.load(TASK)
    row = next(r for r in task.rows if r.id == ROWS[1])
    calls = _calls(task, row, lambda inputs: {"y": task.oracle.reference(row, inputs)["y"].to(inputs["x"].dtype)})
    path, sha = _hand_over(tmp_path, calls)
    claim = _claim(calls)
    assert "no hand-over" in recheck.recheck_row(task, row, claim, path, SALT, "check")["forged"]
    path.write_bytes(path.read_bytes() + b"\0")
    assert "vouches" in recheck.recheck_row(task, row, {**claim, "outputs_sha256": sha}, path, SALT, "check")["forged"]

    # The inputs handed over are not the ones the row's seed gives: the parent says they changed.
    changed = [dict(c, inputs={k: v + 1 for k, v in c["inputs"].items()}) for c in calls]
    path, sha = _hand_over(tmp_path, changed)
    out = recheck.recheck_row(task, row, {**claim, "outputs_sha256": sha}, path, SALT, "check")
    assert all(c["mutated"] for c in out["checks"]) and out["contradicted"]

    # A report (and hand-over) that leaves out a call the row must make.
    path, sha = _hand_over(tmp_path, calls[1:])
    out = recheck.recheck_row(task, row, {**_claim(calls[1:]), "outputs_sha256": sha}, path, SALT, "check")
    assert any("not checked" in c for c in out["contradicted"])


# ---- the real harness, static rules off ---------------------------------------------------------------------------

def _vendored(task: Task) -> None:
    from kda.vendor.fetch import vendor_task
    try:
        vendor_task(task.cfg)
    except KdaError as e:
        pytest.skip(f"the upstream baseline is not vendored here: {e}")


def _run_without_static_rules(monkeypatch, candidate: Path) -> dict:
    task = Task.load(TASK)
    _vendored(task)
    assert static_violations([candidate]), "the static rules should refuse this fake (switched off below)"
    monkeypatch.setattr(runner, "static_violations", lambda files: [])
    out = run_task(task, RunOptions(mode="check", device="cpu", candidate=candidate, rows=list(ROWS), write=False,
                                    quiet=True, salt=SALT))
    return {r["id"]: r for r in out["rows"]}


def test_forged_lines_in_the_result_pipe_are_refused_without_the_static_rules(monkeypatch):
    rows = _run_without_static_rules(monkeypatch, ZOO / "forges_results.py")
    assert set(rows) == set(ROWS)
    for r in rows.values():
        assert r["status"] == "FAIL" and r["reasons"] == [C.FORGED], r
        assert "tag" in r["details"][0], r["details"]


def test_a_thief_of_the_key_is_caught_by_the_parents_own_check(monkeypatch):
    """The thief's answer carries a good tag and the right nonce, so the channel takes it; the parent's own check
    of the outputs it handed over finds them wrong and the report contradicted."""
    rows = _run_without_static_rules(monkeypatch, ZOO / "channel" / "steals_key.py")
    for r in rows.values():
        assert r["status"] == "FAIL" and C.FORGED in r["reasons"], r
        assert set(r["reasons"]) & {C.MISMATCH, C.UNWRITTEN, C.SPECIALS}, r
        forged = [d for d in r["details"] if d.startswith(C.FORGED)]
        assert forged and all("contradicted" in d for d in forged), forged  # the tag verified: recheck caught it
