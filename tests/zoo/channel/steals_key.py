"""Exploit (not in the zoo's catalog: run by tests/harness/test_result_channel.py, static rules bypassed): a candidate
that reads the worker's memory, finds the sealing closure that holds the run's key, and answers the row itself.

It computes nothing. On its first call it walks up the stack to the worker's main loop, takes the command being served
(its sequence number, nonce and the file the parent named for the hand-over of the outputs) and the `reply` closure,
writes a hand-over of what it has (the out buffer as it is, the inputs as they are, for every call the row must check)
and sends a row answer, tagged with the real key, that reports every check clean. The tag verifies and the nonce
matches: the authentication of the channel cannot stop this. What stops it is the parent's own check (recheck.py):
it rebuilds each call's inputs from the row's seed, runs the oracle and finds the outputs wrong (and the inputs not
those of the call), contradicting the report: FORGED, with the parent's own MISMATCH/UNWRITTEN/INPUT_MUTATED.

What a more careful thief could still do: hand over outputs it computed correctly in some slow way (torch ops) only for
the hand-over, while its kernel computes nothing. On the CPU nothing is timed, so nothing is gained; on a GPU the
parent does not check outputs itself yet, and the worker's report is taken as authenticated (docs/harness.md, Threat
model). The static rules reject `sys` and frame walking outright.
"""
import hashlib
import io
import os
import sys

import torch

_done = [False]


def _worker_main_frame():
    f = sys._getframe(1)
    while f is not None:
        if f.f_code.co_name == "main" and "reply" in f.f_locals and "cmd" in f.f_locals:
            return f
        f = f.f_back
    return None


def _answer_for_the_worker(out) -> None:
    frame = _worker_main_frame()
    if frame is None:
        return
    loc = frame.f_locals
    cmd, reply, runner = loc["cmd"], loc["reply"], loc["runner"]
    trials = runner.cfg["check"]["trials"]
    names = list(runner.specs)
    clean = {"layout_ok": True, "unwritten": 0, "specials_mismatch": 0, "bad": 0, "max_norm_err": 0.0,
             "mean_abs_err": 0.0, "max_abs_err": 0.0, "numel": 1, "atol": 1e-5, "rtol": 1e-5}
    calls = [(t, p) for t in range(trials) for p in (0, 1)]
    checks = [{"arm": "candidate", "trial": t, "phase": p, "outputs": {n: dict(clean) for n in names}, "mutated": [],
               "forbidden_calls": [], "tampered": [], "return_problem": None} for t, p in calls]
    answer = {"type": "row", "id": cmd["row"], "arms": {}, "checks": checks, "notes": [], "arm_errors": {}}
    if cmd.get("outputs"):
        storages = {k: t.as_strided((t.untyped_storage().nbytes() // t.element_size(),), (1,), 0).clone()
                    for k, t in runner.inputs.items() if t is not None}
        kept = [{"arm": "candidate", "trial": t, "phase": p, "outputs": {n: out.clone() for n in names},
                 "inputs": storages} for t, p in calls]
        buf = io.BytesIO()
        torch.save(kept, buf)
        with open(cmd["outputs"], "wb") as f:
            f.write(buf.getvalue())
        answer["outputs_sha256"] = hashlib.sha256(buf.getvalue()).hexdigest()
    reply(cmd, answer)


def fuse_scale_shift_kernel(x, scale, shift, scale_constant=1.0, block_l=128, block_c=128, *, out=None):
    if not _done[0]:
        _done[0] = True
        _answer_for_the_worker(out)
    return out
