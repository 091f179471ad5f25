"""The worker process: builds each row's inputs, runs every arm, measures; it decides nothing.

Started once per task run by the parent (kda/harness/runner.py) and restarted after a crash or timeout. It reads
one JSON command per line on a private pipe and answers one JSON line per row: raw timing samples of every arm
and raw error statistics of every check. Pass/fail, statistics and the results file belong to the parent.
"""
from __future__ import annotations

import argparse
import hashlib
import io
import json
import math
import os
import random
import sys
import traceback

from kda.harness import channel as _channel  # bound before any task code: the result channel's sealer

# Captured before any task code is imported: the harness keeps the originals even if a candidate patches them.
from kda.harness import timing  # noqa: E402  (import order is the point)
from kda.harness.guards import (CallTracer, TamperWatch, UpstreamWatch, candidate_threads, pop_torch_modes,  # noqa: E402
                                 torch_kernels)

import torch  # noqa: E402

from kda.harness import checks  # noqa: E402
from kda.harness.checks import bits_differ as _bits_differ  # noqa: E402
from kda.harness.checks import compare as _compare  # noqa: E402  (bound now: a candidate can't swap them later)
from kda.harness.checks import mutated_inputs as _mutated_inputs  # noqa: E402
from kda.harness.checks import poison_ as _poison  # noqa: E402
from kda.harness.checks import restore_inputs_ as _restore_inputs  # noqa: E402
from kda.harness.checks import restore_views as _restore_views  # noqa: E402
from kda.harness.checks import shift_floats_ as _shift_floats  # noqa: E402
from kda.harness.checks import snapshot_inputs as _snapshot_inputs  # noqa: E402
from kda.harness.checks import written_outside_views as _written_outside  # noqa: E402
_save = torch.save  # noqa: E402  (the checked outputs handed to the parent: bound before the candidate loads)
_sha256 = hashlib.sha256  # noqa: E402
from kda.definition.task import Task  # noqa: E402
from kda.definition.eager_chains import PATHS as _CHAINS  # noqa: E402  (SGLang's eager chains, bound before any candidate)
from kda.vendor import load_entry_points, vendor_task  # noqa: E402
from kda.harness.peers import peer_call, peer_calls, peer_math  # noqa: E402
from kda.definition.workloads import (  # noqa: E402
    build_input_sets, build_inputs, make_generator, refill_inputs, set_bytes, trial_seed,
)

ARM_ORDER = ("baseline", "candidate", "compile", "eager", "latest")
# Memory the rotated input sets of one row may take (inputs and the candidate's outputs): enough for a sample's calls
# each on its own set on every production row with room to spare on an 80 GB card; a larger row gets two sets.
ROTATION_BUDGET_BYTES = 8 << 30


class Tripwire:
    """Wraps the oracle and every vendored upstream function: a call while a checked candidate call is in flight,
    from any thread, is recorded. (sys.setprofile sees one thread only and can be unhooked; this cannot.)"""

    def __init__(self):
        self.active = False
        self.hits: list[str] = []

    def wrap(self, fn, label: str):
        wire = self

        def tripwire(*args, **kwargs):
            if wire.active and len(wire.hits) < 10:
                wire.hits.append(label)
            return fn(*args, **kwargs)

        tripwire.__wrapped__ = fn
        return tripwire

    def arm_module(self, mod, root: str, label: str) -> None:
        for name, value in list(vars(mod).items()):
            code = getattr(value, "__code__", None)
            if code is not None and code.co_filename.startswith(root):
                setattr(mod, name, self.wrap(value, f"{label}.{name}"))


def _interpreter_autotune() -> None:
    """Under TRITON_INTERPRET there is nothing to time: autotuning runs each config once and keeps the first.

    Every config computes the same function, so correctness is unaffected; upstream source is untouched.
    """
    import triton.testing

    def run_once(fn, *args, **kwargs):
        fn()
        quantiles = kwargs.get("quantiles")
        return [1.0] * len(quantiles) if quantiles else 1.0

    triton.testing.do_bench = run_once
    # Autotuners that time through driver.active.get_benchmarker() (no driver under the interpreter) as well.
    from triton.runtime.autotuner import Autotuner

    Autotuner.do_bench = property(lambda self: run_once)


def _interpreter_device_module() -> None:
    """Under TRITON_INTERPRET the tensors live on the CPU, so `torch.get_device_module()` must be torch.cpu, which lacks
    the CUDA-only calls some upstream files make: norm.py sizes its autotune configs from
    `get_device_properties(current_device()).warp_size` at import time, and the one-pass RMS wrapper (and norm.py's
    training path) enter `torch.get_device_module().device(x.device)`. Give torch.cpu inert stand-ins (warp size 32,
    a null context); upstream source is untouched. Must run before the upstream files are imported.
    torch 2.13 answers torch.cpu where no CUDA device is present; torch 2.14 answers torch.cuda for a CUDA build even
    without a driver, whose current_device() then fails: without a CUDA device, the call with no device answers
    torch.cpu.
    """
    import contextlib
    import types

    cpu = torch.cpu
    if not hasattr(cpu, "get_device_properties"):
        cpu.get_device_properties = lambda device=None: types.SimpleNamespace(name="Triton interpreter", warp_size=32)
    if not hasattr(cpu, "device"):
        cpu.device = lambda device=None: contextlib.nullcontext()
    if not torch.cuda.is_available() and not getattr(torch.get_device_module, "_kda_cpu", False):
        original = torch.get_device_module

        def get_device_module(device=None):
            return cpu if device is None else original(device)

        get_device_module._kda_cpu = True
        torch.get_device_module = get_device_module


def baseline_skip_reason(cfg, device: str) -> str | None:
    """Why the baseline arm cannot run here, or None. On a CPU only Triton runs (through its interpreter): a CUDA or
    CuTe DSL baseline is not even imported there (its modules import cutlass, cuda.bindings or tvm_ffi), and the
    candidate is held to the oracle alone (no error-ratio rule). On a GPU a baseline that fails to load is an error."""
    lang = cfg["task"]["language"]
    if device == "cpu" and lang != "triton":
        return (f"the {lang} baseline runs only on a GPU; on the CPU the candidate is checked against the oracle "
                f"alone (no error-ratio rule)")
    return None


def _dtype_name(dt: torch.dtype) -> str:
    return str(dt).replace("torch.", "")


class RowRunner:
    def __init__(self, task: Task, args, upstream, solution, tamper: TamperWatch, forbidden: tuple[set, tuple],
                 tripwire: Tripwire, reference, peer_reference=None):
        self.task, self.args, self.upstream, self.solution = task, args, upstream, solution
        self.tamper, self.forbidden, self.tripwire = tamper, forbidden, tripwire
        self.reference = reference  # the oracle's own function, bound before the candidate was imported
        # what the peers run (peers.peer_math), bound at the same time; the oracle's reference when it has no other
        self.peer_reference = peer_reference or reference
        self.cfg = task.cfg
        self.device = torch.device(args.device)
        self.gpu = self.device.type == "cuda"
        self.baseline_skipped: str | None = None  # why the baseline arm does not run on this device, if it does not
        self.latest: dict | None = None  # [upstream_latest]'s entry points by the baseline's names, where pinned
        # Where the parent asked for them: every checked call's outputs and the inputs' storages right after it, handed
        # over at the end of the row for the parent's own check (kda/harness/recheck.py); None: not asked.
        self.kept: list[dict] | None = None
        # Upstream's state before the candidate was imported (guards.UpstreamWatch) and the candidate's own files (a
        # thread whose code lives there is the candidate's); set by main() once the candidate is loaded.
        self.upstream_watch: UpstreamWatch | None = None
        self.rot = self.rot_outs = None  # the rotated input sets and the candidate's outputs for them (bench, GPU)
        self.candidate_roots: tuple[str, ...] = ()

    # -- inputs -------------------------------------------------------------------------------------------
    def build(self, row):
        self.inputs = build_inputs(row, self.device)
        self.row = row

    def refill(self, trial: int, phase: int) -> None:
        refill_inputs(self.row, self.inputs, trial_seed(self.row.seed, self.args.salt, trial, phase))

    # -- arms ---------------------------------------------------------------------------------------------
    def make_arms(self, comparators: list[str]):
        ad, row, inputs = self.task.adapter, self.row, self.inputs
        specs = ad.output_specs(row, inputs)
        self.specs = {k: (tuple(shape), dt) for k, (shape, dt) in specs.items()}
        inplace = self.cfg["check"]["inplace"]
        self.inplace = bool(inplace)
        if self.inplace:
            # An in-place op's outputs ARE its declared in-place inputs: every arm writes them, nothing is
            # preallocated, and the "out" dict an adapter receives is those input tensors themselves.
            if set(self.specs) != set(inplace):
                raise ValueError(f"adapter.output_specs names {sorted(self.specs)} but check.inplace declares "
                                 f"{sorted(inplace)}: an in-place task's outputs are its in-place inputs")
            for k in inplace:
                if self.specs[k] != (tuple(inputs[k].shape), inputs[k].dtype):
                    raise ValueError(f"adapter.output_specs gives {k} as {self.specs[k]}, but the input is "
                                     f"{tuple(inputs[k].shape)}:{inputs[k].dtype}")
            self.out = {k: inputs[k] for k in inplace}
            out_b = self.out
        else:
            self.out, out_b = self._empty_outs(), self._empty_outs()
        # an A/A run's second baseline writes outputs of its own (in place: the same inputs)
        out_c = self._empty_outs() if not self.judged and not self.inplace else self.out
        arms = self._calls(inputs, out_b, out_c)
        if self.baseline_skipped:
            del arms["baseline"]
        if "latest" in arms and "latest" not in comparators:
            del arms["latest"]
        out_dtypes = {k: dt for k, (_, dt) in self.specs.items()}
        for kind in ("eager", "compile"):
            if kind in comparators:
                arms[kind] = peer_call(self.peer_reference, row, inputs, out_dtypes, kind)
        self.arms = arms

    def _empty_outs(self) -> dict:
        return {k: torch.empty(shape, dtype=dt, device=self.device) for k, (shape, dt) in self.specs.items()}

    def _calls(self, inputs: dict, out_b: dict, out_c: dict) -> dict:
        """The baseline's and the candidate's call on one set of inputs (in an A/A run the candidate arm is the
        baseline again), writing out_b and out_c."""
        ad, row = self.task.adapter, self.row
        calls = {"baseline": lambda: ad.call_baseline(self.upstream, row, inputs, out_b)}
        if self.latest:  # today's release as a peer (issue 40): called as the baseline is, into the same outputs
            calls["latest"] = lambda: ad.call_baseline(self.latest, row, inputs, out_b)
        if not self.judged:
            calls["candidate"] = lambda: ad.call_baseline(self.upstream, row, inputs, out_c)
        else:
            calls["candidate"] = lambda: ad.call_candidate(self.solution, row, inputs, out_c)
        return calls

    def rotated_arms(self, inner: int) -> dict:
        """Every timed arm as a list of calls, one per rotated input set (issue 34, attack 2): as many sets as a sample
        has calls plus its lead call, within ROTATION_BUDGET_BYTES (at least two). The candidate writes each set's
        own outputs; the peers share one compiled function; the baseline allocates its outputs as upstream does."""
        row = self.row
        out_bytes = 0 if self.inplace else sum(math.prod(shape) * torch.empty((), dtype=dt).element_size()
                                               for shape, dt in self.specs.values())
        per_set = max(1, set_bytes(row) + out_bytes)
        count = max(2, min(inner + 1, ROTATION_BUDGET_BYTES // per_set))
        self.rot = build_input_sets(row, self.device, count, trial_seed(row.seed, self.args.salt, 0, 90))
        sets = self.rot.sets
        if self.inplace:
            outs = [{k: one[k] for k in self.cfg["check"]["inplace"]} for one in sets]
        else:
            outs = [self._empty_outs() for _ in sets]
        out_b = None if self.inplace else self._empty_outs()  # one for every set: upstream's own outputs
        self.rot_outs = outs
        calls = [self._calls(one, o if self.inplace else out_b, o) for one, o in zip(sets, outs)]
        arms = {n: [c[n] for c in calls] for n in ("baseline", "candidate", "latest") if n == "candidate" or n in self.arms}
        out_dtypes = {k: dt for k, (_, dt) in self.specs.items()}
        for kind in ("eager", "compile"):
            if kind in self.arms:
                arms[kind] = peer_calls(self.peer_reference, row, sets, out_dtypes, kind)
        return arms

    def check_rotated_output(self, trial: int, last: int, rng: random.Random) -> dict:
        """Phase 2 where the timed calls rotate: one set the candidate's last sample wrote (1..last), drawn at random,
        its outputs against the oracle on that set's inputs, before the next refill changes them."""
        j = rng.randint(1, max(1, min(last, self.rot.count - 1)))
        with torch._C.DisableTorchFunction():
            copies = {k: torch.Tensor.clone(v) for k, v in self.rot_outs[j].items()}
        ref = self.reference(self.row, self.rot.sets[j])
        return {"arm": "candidate", "trial": trial, "phase": 2, "set": j, "outputs": self._compare_all(copies, ref)}

    @property
    def judged(self) -> bool:
        """Whether the candidate arm runs a candidate: in an A/A run and in the clean worker it is the baseline
        again (the clean worker imports no candidate at all)."""
        return not (self.args.aa or getattr(self.args, "clean", False))

    def destination_arm(self, name: str) -> bool:
        return name == "candidate" and self.judged

    # -- checks -------------------------------------------------------------------------------------------
    def check(self, name: str, trial: int, phase: int, poison: bool = True) -> dict:
        """One checked call. Phase 0: NaN-poisoned output, traced. Phase 1: finite random 'stale' output and no
        profile hook, so a candidate can tell neither that it is checked nor that it is watched.

        In place: the arm's outputs are the declared in-place inputs after the call (nothing to poison: they hold
        this trial's fresh inputs), compared with the oracle on the snapshot taken before it; then every input is
        put back from the snapshot, so the next arm starts from the same values."""
        record = {"arm": name, "trial": trial, "phase": phase}
        inplace = self.cfg["check"]["inplace"]
        snaps = _snapshot_inputs(self.inputs)
        dest = self.destination_arm(name)
        cand = name == "candidate" and self.judged
        writes_inputs = self.inplace and name in ("baseline", "candidate", "latest")  # peers return their outputs
        if dest and not self.inplace and poison:
            finite = make_generator(self.device, trial_seed(self.row.seed, self.args.salt, trial, 50 + phase)) if phase else None
            for t in self.out.values():
                _poison(t, finite)
        tracer = CallTracer(*self.forbidden) if cand and phase == 0 else None
        self.tripwire.hits.clear()
        self.tripwire.active = cand
        try:
            if tracer:
                with tracer:
                    ret = self.arms[name]()
                record["forbidden_calls"] = list(tracer.hits)
            else:
                ret = self.arms[name]()
        finally:
            self.tripwire.active = False
        if cand:
            record["forbidden_calls"] = record.get("forbidden_calls", []) + [f"{h} (tripwire)" for h in self.tripwire.hits]
        tampered = self._reset_torch_state()
        # Stream-ordered copies taken right after the call: work the call left on another stream is not waited for.
        if dest:
            outs = self.out
            record["return_problem"] = self._return_problem(ret)
        else:
            outs = self.out if writes_inputs else ret
        with torch._C.DisableTorchFunction():
            copies = {k: (torch.Tensor.clone(v) if isinstance(v, torch.Tensor) else v) for k, v in outs.items()}
        self._keep(record, copies)
        changed, upstream = self.harness_changes()
        record["tampered"], record["upstream_tampered"] = tampered + changed, upstream
        if self.gpu:
            torch.cuda.synchronize()
        record["mutated"] = _mutated_inputs(self.inputs, snaps, inplace) + _written_outside(self.inputs, snaps, inplace)
        ref = self.reference(self.row, _restore_views(self.inputs, snaps))
        record["outputs"] = self._compare_all(copies, ref)
        if cand and phase == 0 and trial == 0 and not self.inplace:
            record["bits_differ"] = self._bits_against_chain(copies)
        if self.inplace:
            _restore_inputs(self.inputs, snaps)
        return record

    def _bits_against_chain(self, copies: dict) -> dict | str:
        """The candidate's first checked outputs against SGLang's eager chain on the same inputs (issue 40's contract:
        a `bitexact` candidate must match it in every bit; for a `close` one the row records whether it does). Per
        output the bytes that differ, or why the chain could not run. Out-of-place tasks only: an in-place op's inputs
        are its outputs, and the chain would write them."""
        try:
            with torch.no_grad():
                chain = self.task.adapter.call_baseline(_CHAINS, self.row, self.inputs, {})
        except KeyError as e:
            return f"no eager chain for {e} (kda.definition.eager_chains)"
        except Exception as e:  # noqa: BLE001 - the chain's failure is the comparison's, never the candidate's crash
            return f"the eager chain failed: {type(e).__name__}: {str(e)[:200]}"
        return {k: _bits_differ(copies.get(k), (chain or {}).get(k)) for k in self.specs}

    def check_repeat(self, trial: int) -> dict:
        """Phase 4: the candidate called twice on the same inputs, as every timed call after the first is; between the
        calls one element of each output, at a random position, is set to the poison (the rest keeps the first call's
        correct result). A kernel that skips its work when it sees nothing changed since its last write (a fingerprint
        of a few sampled input and output elements, issue 34 attack 2) leaves that element behind unless its
        fingerprint happens to cover it: STALE_REPEAT. In-place ops are not repeated: their second call has other
        inputs by construction (the first call's results)."""
        self.refill(trial, 4)
        self.arms["candidate"]()
        if self.gpu:
            torch.cuda.synchronize()
        gen = make_generator("cpu", trial_seed(self.row.seed, self.args.salt, trial, 60))
        for t in self.out.values():
            if t.numel():
                i = int(torch.randint(0, t.numel(), (1,), generator=gen))
                with torch._C.DisableTorchFunction():
                    _poison(t.view(-1)[i:i + 1])
        return self.check("candidate", trial, 4, poison=False)

    def check_timed_output(self, trial: int) -> dict:
        """After the timed calls: the candidate's out buffer holds its last timed (graph or eager) result on this
        trial's inputs, which nothing has changed since. A candidate that cuts work when unobserved fails here.

        In place, the timed calls re-applied the op to their own results, which no oracle follows; so the inputs are
        refilled with fresh values and the candidate runs once more the way the timed loop ran it: a replay of a
        one-call CUDA graph captured with the timed graphs (an eager call where the row was not capturable), with
        neither the call tracer nor the tripwires active."""
        if self.inplace:
            return self._check_inplace_replay(trial)
        with torch._C.DisableTorchFunction():
            copies = {k: torch.Tensor.clone(v) for k, v in self.out.items()}
        self._keep({"arm": "candidate", "trial": trial, "phase": 2}, copies)
        ref = self.reference(self.row, self.inputs)
        return {"arm": "candidate", "trial": trial, "phase": 2, "outputs": self._compare_all(copies, ref)}

    def _check_inplace_replay(self, trial: int) -> dict:
        self.refill(trial, 2)
        return self._checked_replay(self.replay_one, trial, 2)

    def check_replay_shifted(self, replay, trial: int) -> dict:
        """Phase 3: one candidate call captured alone in a CUDA graph, replayed on fresh inputs scaled and shifted
        (checks.shift_floats_: other statistics in the same buffers). A graph freezes every host-side value a launch
        takes, so a candidate that keeps state between calls in device memory (counters, tags, caches) can find its
        last replay's state there and use it; the timed graphs hold many calls on inputs of one distribution, which
        hides that (group_norm_silu's ledger L0072). The graph runs twice: state a run leaves is only there for the
        next (a graph's first replay finds none). Tolerance only: the baseline does not run on these inputs."""
        self.refill(trial, 3)
        replay()
        _shift_floats(self.inputs)
        return self._checked_replay(replay, trial, 3)

    def _checked_replay(self, replay, trial: int, phase: int) -> dict:
        """One replay checked as a call is: inputs snapshot first, outputs copied at once, inputs compared bitwise
        (in place: but for the declared ones), the oracle run on the snapshot, the inputs restored."""
        snaps = _snapshot_inputs(self.inputs)
        replay()
        tampered = self._reset_torch_state()
        with torch._C.DisableTorchFunction():
            copies = {k: torch.Tensor.clone(v) for k, v in self.out.items()}
        self._keep({"arm": "candidate", "trial": trial, "phase": phase}, copies)
        changed, upstream = self.harness_changes()
        tampered += changed
        if self.gpu:
            torch.cuda.synchronize()
        inplace = self.cfg["check"]["inplace"]
        record = {"arm": "candidate", "trial": trial, "phase": phase, "tampered": tampered, "upstream_tampered": upstream,
                  "mutated": _mutated_inputs(self.inputs, snaps, inplace) + _written_outside(self.inputs, snaps, inplace)}
        record["outputs"] = self._compare_all(copies, self.reference(self.row, _restore_views(self.inputs, snaps)))
        _restore_inputs(self.inputs, snaps)
        return record

    def _keep(self, record: dict, copies: dict) -> None:
        """For the parent's own check: this call's output copies and every input's whole storage as it is now."""
        if self.kept is None:
            return
        self.kept.append({"arm": record["arm"], "trial": record["trial"], "phase": record["phase"],
                          "outputs": {k: (v if isinstance(v, torch.Tensor) else None) for k, v in copies.items()},
                          "inputs": _snapshot_inputs(self.inputs)})

    def hand_over(self, path: str) -> str:
        """Write the kept calls to `path` (a new file the parent named; refused if anything is already there) and
        return the sha256 of its bytes, which goes into the authenticated row answer."""
        buf = io.BytesIO()
        _save(self.kept, buf)
        data = buf.getvalue()
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        self.kept = None
        return _sha256(data).hexdigest()

    def _compare_all(self, copies: dict, ref: dict) -> dict:
        stats = {}
        for k, (shape, dt) in self.specs.items():
            atol, rtol = self.cfg.tolerance(_dtype_name(dt))
            stats[k] = _compare(copies.get(k), ref[k], shape, dt, atol, rtol)
            stats[k]["atol"], stats[k]["rtol"] = atol, rtol
        return stats

    def _reset_torch_state(self) -> list[str]:
        """Undo what a call could leave behind to intercept the harness's own tensor ops."""
        problems = pop_torch_modes()
        for group in (self.out, self.inputs):
            for k, t in group.items():
                if t is not None and type(t) is not torch.Tensor:
                    problems.append(f"{k}.__class__ swapped to {type(t).__name__}")
                    t.__class__ = torch.Tensor
        return problems

    def harness_changes(self) -> tuple[list[str], list[str]]:
        """(harness state replaced or a thread of the candidate's running, upstream state changed) since the watches
        were set; whatever was replaced is put back, so the rest of the run measures and checks the originals."""
        replaced = self.tamper.changed()
        if replaced:
            self.tamper.restore()
        tampered = replaced + candidate_threads(self.candidate_roots)
        upstream = self.upstream_watch.changed() if self.upstream_watch is not None else []
        if upstream:
            self.upstream_watch.restore()
        return tampered, upstream

    def _return_problem(self, ret) -> str | None:
        outs = list(self.out.values())
        if ret is None:
            return None
        if isinstance(ret, torch.Tensor) and len(outs) == 1 and ret is outs[0]:
            return None
        if isinstance(ret, (tuple, list)) and len(ret) == len(outs) and all(a is b for a, b in zip(ret, outs)):
            return None
        if isinstance(ret, dict) and all(ret.get(k) is v for k, v in self.out.items()):
            return None
        return f"returned {type(ret).__name__} instead of the out buffers it was given"

    def candidate_kernels(self) -> list[str]:
        from torch.profiler import ProfilerActivity, profile

        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            self.arms["candidate"]()
            torch.cuda.synchronize()
        return sorted({e.name for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA})

    def kernel_origin(self, result: dict) -> None:
        """Names the GPU kernels of one candidate call and flags those of PyTorch (memsets and copies included).
        `kda check` runs it as `kda bench` does, so a path the gate passes is one the benchmark accepts."""
        try:
            result["kernels"] = self.candidate_kernels()
            result["torch_kernels"] = torch_kernels(result["kernels"]) if self.judged else []
        except Exception as e:  # noqa: BLE001
            result["notes"].append(f"profiler unavailable, kernel-origin check skipped: {e}")

    # -- the baseline alone, in a process that never imported the candidate --------------------------------
    def run_clean(self, row, inner: int, samples: int) -> dict:
        """The baseline arm timed by a worker started with --clean, which never imports a candidate: the parent
        compares these with the baseline's samples beside the candidate (issue 34, attack 3: a candidate that slows
        the baseline).

        The samples come from run() itself, `samples` trials at the candidate worker's inner count, with the candidate
        arm played by the baseline again (as in an A/A run) and the same peers: the same checks, state watches,
        profiler pass and arms between two baseline samples as beside the candidate, so only the candidate's absence
        differs. A tight loop of the baseline alone (until 2026-11-28) kept the host path hot: on four H200s, small
        host-bound rows of honest candidates failed BASELINE_SLOWED by up to 3.9x in device_us, and over 1.6x in
        graph_us too (docs/gpu-sessions.md, eighteenth session)."""
        result = self.run(row, "bench", trials=samples, inner=inner)
        base = result["arms"].get("baseline")
        if base is None:
            raise RuntimeError(f"the baseline did not run alone: {result.get('arm_errors') or result.get('notes')}")
        reply = {"type": "clean", "id": row.id, "inner": result.get("inner"), "device_us": base["device_us"],
                 "graph_us": base["graph_us"], "graph_error": base.get("graph_error")}
        latest = result["arms"].get("latest")  # today's release, a peer the candidate could slow as well
        if latest is not None:
            reply["latest"] = {"device_us": latest["device_us"], "graph_us": latest["graph_us"]}
        return reply

    # -- one row ------------------------------------------------------------------------------------------
    def run(self, row, mode: str, hand_over: str | None = None, trials: int | None = None,
            inner: int | None = None) -> dict:
        """One row. `hand_over`: a path the parent chose, where the row's checked outputs go for its own check;
        `trials` and `inner`: the clean worker's (run_clean), instead of the config's and the measured count."""
        bench = mode == "bench"
        self.kept = [] if hand_over else None
        b = self.cfg["bench"]
        result = {"type": "row", "id": row.id, "arms": {}, "checks": [], "notes": [], "arm_errors": {}}
        if self.baseline_skipped:
            result["notes"].append(f"baseline not run: {self.baseline_skipped}")
        self.build(row)
        self.refill(0, 0)
        comparators = b["comparators"] if (bench and not self.args.aa and self.gpu) else []
        self.make_arms(comparators)
        trials = trials or (b["trials"] if bench else self.cfg["check"]["trials"])

        # Warm-up (compiles, autotunes); an arm other than the candidate that fails is dropped with a note.
        warmup_upstream: list[str] = []
        for name in list(self.arms):
            try:
                if name in ("baseline", "latest") and self.upstream_watch is not None:
                    # The baseline's first calls may set globals of upstream's own; nothing else runs meanwhile, so
                    # what its warm-up changes becomes the reference (anything changed before it is the candidate's).
                    # So may today's release (`latest`, warmed up right after the baseline, before the candidate).
                    warmup_upstream += self.upstream_watch.changed()
                    self.upstream_watch.restore()
                for _ in range(b["warmup"] if bench else 1):
                    self.arms[name]()
                if self.gpu:
                    torch.cuda.synchronize()
                if name in ("baseline", "latest") and self.upstream_watch is not None:
                    self.upstream_watch.accept()
            except Exception as e:  # noqa: BLE001
                if name == "candidate":
                    raise
                result["arm_errors"][name] = f"{type(e).__name__}: {str(e).splitlines()[0][:300] if str(e) else ''}"
                del self.arms[name]
        changed, upstream = self.harness_changes()
        if changed:
            result["notes"].append("harness functions were replaced during warm-up: " + ", ".join(changed))
            result["warmup_tampered"] = changed
        if warmup_upstream + upstream:
            result["warmup_upstream_tampered"] = sorted(set(warmup_upstream + upstream))

        names = [n for n in ARM_ORDER if n in self.arms]
        if bench:
            flush = timing.Flusher(b["l2"] == "cold", torch.cuda.get_device_properties(0).L2_cache_size)
            base_one = sorted(timing.device_us(self.arms["baseline"] if "baseline" in self.arms else self.arms["candidate"], 1, flush)
                              for _ in range(3))[1]
            inner = inner or timing.inner_count(base_one, b)
            result["inner"] = inner
            rotate = b["rotate"]
            timed = self.rotated_arms(inner) if rotate else dict(self.arms)
            if rotate:
                result["input_sets"] = self.rot.count
            graphs = {n: timing.GraphArm(timed[n], inner) for n in names}
            if self.inplace and self.judged:
                # One call captured like the timed ones, replayed by the post-timing check (check_timed_output).
                one = timing.GraphArm(self.arms["candidate"], 1) if graphs["candidate"].graph is not None else None
                self.replay_one = (lambda: one.sample_us(flush)) if one is not None and one.graph is not None \
                    else self.arms["candidate"]
            for n, g in graphs.items():
                if g.error:
                    result["notes"].append(f"{n}: not capturable in a CUDA graph: {g.error}")
            samples = {n: {"device_us": [], "wall_us": [], "graph_us": []} for n in names}
        # One candidate call captured alone, replayed after the trials on inputs with other statistics (phase 3),
        # on a GPU in check and bench runs alike; A/A runs judge no candidate.
        replay_shifted = None
        if self.gpu and self.judged:
            alone = timing.GraphArm(self.arms["candidate"], 1)
            if alone.graph is not None:
                no_flush = timing.Flusher(False, 0)
                replay_shifted = lambda: alone.sample_us(no_flush)  # noqa: E731
            else:
                result["notes"].append(f"candidate: not capturable in a CUDA graph, no replay check: {alone.error}")
        if self.gpu:
            self.kernel_origin(result)
        order_rng = random.Random(trial_seed(row.seed, self.args.salt, 0, 7))

        for trial in range(trials):
            self.refill(trial, 0)
            result["checks"].append(self.check("candidate", trial, 0))
            self.refill(trial, 0)  # the same values again: the baseline must not see what the candidate did to them
            if "baseline" in self.arms:
                try:
                    result["checks"].append(self.check("baseline", trial, 0))
                except Exception as e:  # noqa: BLE001
                    result["arm_errors"]["baseline"] = f"{type(e).__name__}: {e}"
                    del self.arms["baseline"]
            if trial == 0:
                for n in ("compile", "eager", "latest"):
                    if n in self.arms:
                        result["checks"].append(self.check(n, trial, 0))
            if bench:
                order = [n for n in names if n in self.arms]
                order_rng.shuffle(order)
                for n in order:
                    s = samples[n]
                    for k, m in enumerate(("device_us", "wall_us", "graph_us")):
                        if rotate:  # fresh values in every set before each sample: no call finds what one left
                            self.rot.refill(trial_seed(row.seed, self.args.salt, trial, 100 + 3 * order.index(n) + k))
                        if m == "device_us":
                            s[m].append(timing.device_us(timed[n], inner, flush))
                        elif m == "wall_us":
                            s[m].append(timing.wall_us(timed[n], b["wall_repeats"], flush))
                        else:
                            s[m].append(graphs[n].sample_us(flush))
                    if rotate and n == "candidate" and self.judged and not self.inplace:
                        last = inner if graphs[n].graph is not None else b["wall_repeats"]
                        result["checks"].append(self.check_rotated_output(trial, last, order_rng))
                changed, upstream = self.harness_changes()
                changed = self._reset_torch_state() + changed
                if changed:
                    result.setdefault("timed_tampered", []).extend(changed)
                if upstream:
                    result.setdefault("timed_upstream_tampered", []).extend(upstream)
                if self.judged and not (rotate and not self.inplace):
                    result["checks"].append(self.check_timed_output(trial))
            self.refill(trial, 1)
            result["checks"].append(self.check("candidate", trial, 1))
        if not self.inplace and self.judged:
            result["checks"].append(self.check_repeat(0))
        if replay_shifted is not None:
            result["checks"].append(self.check_replay_shifted(replay_shifted, trials))
        if bench:
            for n in names:
                result["arms"][n] = samples[n]
                result["arms"][n]["graph_error"] = graphs[n].error
        del self.arms
        self.rot = self.rot_outs = None
        if hand_over:
            result["outputs_sha256"] = self.hand_over(hand_over)
        return result


LATEST_STATUS: dict = {}  # what _load_latest found, for the hello message (the results file's provenance)


def _load_latest(task, args, skipped: str | None) -> tuple[dict | None, str | None]:
    """[upstream_latest]'s entry points and their import alias, where the task pins a later release and a bench
    compares with it (`bench.comparators` names "latest"); where the baseline cannot run here, neither does it. A
    release that does not load is recorded, not fatal: the bench goes on without the peer, and says why."""
    latest = task.cfg["upstream_latest"]
    if not latest["version"] or skipped or "latest" not in task.cfg["bench"]["comparators"] or args.aa \
            or args.mode != "bench" or args.device != "cuda":
        return None, None
    from kda.vendor.importer import alias_name, load_latest_entry_points

    LATEST_STATUS["version"] = latest["version"]
    try:
        info = vendor_task(task.cfg, allow_download=False, section="upstream_latest")
        entries = load_latest_entry_points(task.cfg, info)
    except Exception as e:  # noqa: BLE001 - a peer that cannot load is a note, never the candidate's failure
        LATEST_STATUS["error"] = f"{type(e).__name__}: {str(e)[:300]}"
        return None, None
    return entries, alias_name(latest["package"], latest["version"])


def _latest_roots(task) -> tuple[str, ...]:
    """Where [upstream_latest]'s vendored files live, whether or not this run loads them (nothing of the candidate's
    may run from there either way)."""
    latest = task.cfg["upstream_latest"]
    if not latest["version"]:
        return ()
    from kda.vendor.fetch import vendor_root

    return (str(vendor_root(latest["package"], latest["version"])),)


def _gpu_info() -> dict:
    p = torch.cuda.get_device_properties(0)
    return {"name": p.name, "uuid": str(getattr(p, "uuid", "")), "sms": p.multi_processor_count,
            "l2_bytes": p.L2_cache_size, "memory_bytes": p.total_memory, "capability": f"{p.major}.{p.minor}"}


def _open_channel():
    """The worker's two pipes and the run's key, taken before any task or candidate code is imported.

    The parent writes commands to this process's stdin and reads results from a pipe whose fd number comes, with the
    run's HMAC key, in the first command (kda.harness.channel). The command pipe is moved off fd 0 (stdin reads
    /dev/null from here on) and both pipes to fresh fds that child processes do not inherit. Returns the command
    lines and reply(request, msg), which stamps msg with the request's sequence number and nonce and writes it tagged;
    the key is kept only inside the sealing closure (no module global, no attribute), the first command returned as
    `start` without it."""
    cmd_fd = os.dup(0)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    cmd_in = os.fdopen(cmd_fd, "r")
    start = json.loads(cmd_in.readline())
    seal = _channel.sealer(bytes.fromhex(start.pop("key")))
    inherited = start.pop("result_fd")
    out_fd = os.dup(inherited)  # os.dup: not inheritable
    os.close(inherited)
    out = os.fdopen(out_fd, "w")

    def reply(request: dict, msg: dict) -> None:
        out.write(seal({**msg, "seq": request.get("seq"), "nonce": request.get("nonce")}))
        out.flush()

    return cmd_in, reply, start


def main(argv=None) -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--task", required=True)
    ap.add_argument("--mode", choices=("bench", "check"), required=True)
    ap.add_argument("--device", choices=("cuda", "cpu"), required=True)
    ap.add_argument("--salt", type=int, required=True)
    ap.add_argument("--aa", action="store_true")
    ap.add_argument("--clean", action="store_true", help="time the baseline alone; never import a candidate")
    ap.add_argument("--l2", choices=("hot", "cold"), default=None, help="override bench.l2 for this run")
    ap.add_argument("--candidate", default=None)
    ap.add_argument("--copy-bandwidth", action="store_true")
    ap.add_argument("--rows-file", default=None, help="rows to serve instead of workloads.json (a sweep's draws)")
    args = ap.parse_args(argv)
    # Before any task or candidate code: the pipes and the run's key (nothing on the command line names them).
    cmd_in, reply, start = _open_channel()

    # Inference kernels run without autograd in production; some upstream wrappers fall back to PyTorch when grad is on.
    torch.set_grad_enabled(False)
    tamper = TamperWatch()
    try:
        task = Task.load(args.task)
        if args.l2:
            task.cfg["bench"]["l2"] = args.l2  # kda bench --cold: the same rows with the L2 flushed before each sample
        if args.rows_file:  # a sweep's drawn rows instead of workloads.json, read before any candidate code runs
            from pathlib import Path

            from kda.definition.workloads import load_rows

            task.rows = load_rows(Path(args.rows_file))
        info = vendor_task(task.cfg, allow_download=False)
        if args.device == "cpu":
            _interpreter_device_module()
        skipped = baseline_skip_reason(task.cfg, args.device)
        upstream = {} if skipped else load_entry_points(task.cfg, info)
        if args.device == "cpu":
            _interpreter_autotune()
        from pathlib import Path

        tripwire = Tripwire()
        reference, peer_reference = task.oracle.reference, peer_math(task.oracle)
        task.oracle.reference = tripwire.wrap(reference, "oracle.reference")
        if hasattr(task.oracle, "peer_reference"):
            task.oracle.peer_reference = tripwire.wrap(peer_reference, "oracle.peer_reference")
        for name, mod in list(sys.modules.items()):
            if name.startswith(task.cfg["upstream"]["package"] + ".") and str(getattr(mod, "__file__", "")).startswith(str(info.root)):
                tripwire.arm_module(mod, str(info.root), name)
        upstream = {k: getattr(sys.modules[e.split(":")[0]], k) for k, e in
                    zip(upstream, task.cfg["task"]["entry_points"])}
        latest, latest_alias = _load_latest(task, args, skipped)
        if latest_alias:
            for name, mod in list(sys.modules.items()):
                if name.startswith(latest_alias + "."):
                    tripwire.arm_module(mod, str(getattr(mod, "__file__", "") or ""), name)
        # Watch the harness's own modules and classes, the oracle and the adapter from here on.
        for name in ("kda.harness.checks", "kda.harness.guards", "kda.harness.timing", "kda.definition.workloads", "__main__"):
            if name in sys.modules:
                tamper.watch(name, sys.modules[name])
        for label, obj in (("RowRunner", RowRunner), ("Tripwire", Tripwire), ("CallTracer", CallTracer),
                           ("TamperWatch", TamperWatch), ("oracle", task.oracle), ("adapter", task.adapter)):
            tamper.watch(label, obj)
        # Upstream's state as the baseline runs it, before any candidate code: checked after every call and sample.
        upstream_watch = UpstreamWatch({name: mod for name, mod in sys.modules.items()
                                        if (name.startswith(task.cfg["upstream"]["package"] + ".")
                                            and str(getattr(mod, "__file__", "")).startswith(str(info.root)))
                                        or (latest_alias and name.startswith(latest_alias + "."))})
        solution = None if args.aa or args.clean else task.load_solution(Path(args.candidate) if args.candidate else None)
        candidate_roots = (str(task.path / "solution"),) + ((str(Path(args.candidate).resolve()),) if args.candidate else ())
        # Any code of the vendored baseline (Python or Triton) and the oracle is off limits to the candidate; so is
        # today's release, a peer: a candidate launching its kernels would be as fast as it by construction.
        forbidden = ({str(task.path / "oracle.py")}, (str(info.root),) + _latest_roots(task))
        hello = {"type": "hello", "device": args.device, "vendored": info.as_dict(), "baseline_skipped": skipped,
                 "upstream_latest": LATEST_STATUS or None}
        if args.device == "cuda":
            hello["gpu"] = _gpu_info()
            if args.copy_bandwidth:
                hello["copy_tbps"] = timing.copy_bandwidth_tbps()
        reply(start, hello)
    except Exception:  # noqa: BLE001
        reply(start, {"type": "fatal", "error": traceback.format_exc()[-4000:]})
        return

    runner = RowRunner(task, args, upstream, solution, tamper, forbidden, tripwire, reference,
                       peer_reference)
    runner.baseline_skipped = skipped
    runner.latest = latest
    runner.upstream_watch, runner.candidate_roots = upstream_watch, candidate_roots
    rows = {r.id: r for r in task.rows}
    for line in cmd_in:
        cmd = json.loads(line)
        if cmd.get("cmd") == "quit":
            break
        try:
            if cmd.get("cmd") == "clean":
                reply(cmd, runner.run_clean(rows[cmd["row"]], int(cmd["inner"]), int(cmd["samples"])))
                continue
            reply(cmd, runner.run(rows[cmd["row"]], args.mode, cmd.get("outputs")))
        except Exception:  # noqa: BLE001
            reply(cmd, {"type": "row", "id": cmd.get("row"), "crash": traceback.format_exc()[-4000:]})
        finally:
            if args.device == "cuda":
                torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
