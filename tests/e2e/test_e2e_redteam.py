"""Red team of the end-to-end tier's defences against a candidate that shares the process with the arms it is timed
against (docs/e2e.md, "What a candidate could do here..."): the static rules on the candidate's files
(kda/harness/static_rules.py) and the runtime UpstreamWatch over upstream's and 0.5.23's modules
(kda.harness.guards.UpstreamWatch, kda/e2e/kernels.py).

Each fake in tests/zoo/e2e_*.py keeps the static rules and changes nothing the watch compares, yet changes what a
peer arm does or what the candidate arm is timed doing. Each test runs kda.e2e.timing.bench on block wan at its CPU
sizes with the CPU stand-ins of tests/e2e/test_e2e_timing.py: the fake loaded through kernel_set in
fuse_scale_shift's place (its one-task arm, the PyTorch path at the other task's sites), upstream's and latest's
sites on the PyTorch path (the vendored kernels do not run on a CPU), and the watch over the module those stand-in
sites run (kda.definition.eager_chains), as it is over the vendored modules on a GPU.

The tests assert that the defences stop the fake. While the hole is open each raises HoleOpen after showing the
fake's effect, which is the failure its strict xfail expects; any other failure (the demonstration itself broken)
fails the test. Once a defence stops the fake, the test passes and strict xfail flags it, so the marker goes.
"""
from __future__ import annotations

import gc
import shutil
from collections import Counter
from pathlib import Path

import pytest
import torch

from kda.core.errors import KdaError
from kda.definition import eager_chains
from kda.e2e import alone, check, kernels, timing
from kda.e2e.block import Workload, load_block
from kda.e2e.kernels import KernelSet
from kda.harness import results_file
from e2e_cpu_support import CpuStandIn
import e2e_alone_standin

ZOO = Path(__file__).resolve().parents[1] / "zoo"
TASK, SITE = "fuse_scale_shift", "mlp_residual"  # wan's last site: MulAdd, ff * (0 + c_gate) + hidden_states
TRIALS = 2

HONEST = '''"""An honest stand-in candidate (the control): y = x * (scale_constant + scale) + shift, by operators."""
import torch


def fuse_scale_shift_kernel(x, scale, shift, scale_constant=1.0, block_l=128, block_c=128, *, out=None):
    y = torch.empty_like(x) if out is None else out
    y[...] = x * (scale_constant + scale) + shift
    return y
'''


class HoleOpen(Exception):
    """The fake got past both defences and had its effect (what each test's strict xfail expects)."""




class Run:
    """What one bench of the stand-in block did: its row (None where the run was refused), the refusal, site calls
    per (arm, site), block calls per arm, and the candidate site's outputs judged against the PyTorch path."""

    def __init__(self):
        self.row, self.refused = None, None
        self.sites, self.blocks = Counter(), Counter()
        self.moded = Counter()  # (arm, site) -> calls made while a torch-function mode was pushed
        self.calls: list[tuple] = []  # the candidate site's (args, kwargs, output) per call, judged afterwards

    @property
    def wrong(self) -> list[bool]:
        """Per call of the candidate's site: its output off the PyTorch path's on the same inputs (judged after the
        run, so the judging costs the timed calls nothing)."""
        want = eager_chains.PATHS["fuse_scale_shift_kernel"]
        out = []
        with torch.no_grad():
            for args, kwargs, got in self.calls:
                ref = want(*args, **kwargs).detach().float()
                out.append(float((got.detach().float() - ref).norm() / ref.norm()) > 0.02)
        return out

    def arm(self, arm: str) -> dict:
        return (self.row or {}).get("arms", {}).get(arm, {})

    def timed(self, arm: str) -> bool:
        rec = self.arm(arm)
        return bool(rec.get("passed")) and not rec.get("error") and len(rec.get("eager_us", [])) == TRIALS


@pytest.fixture
def wan(monkeypatch):
    monkeypatch.setattr(timing, "DEV", CpuStandIn(ops_as_kernels=True))  # a site's launches counted, as on a GPU
    # The peers alone (kda.e2e.alone) run in a child under the same stand-ins. Two processes' CPU timings differ by
    # more than any bound worth having, so only the exact comparison (launches per site) judges here.
    monkeypatch.setattr(alone, "MAX_RATIO", {"graph_us": 1e6, "eager_us": 1e6})
    monkeypatch.setattr(timing, "TARGET_SAMPLE_US", 1.0)  # one block call per sample
    block = load_block("wan")
    dims, w = block.cpu_dims(), block.workloads()[0]
    monkeypatch.setattr(block, "workloads", lambda: [Workload(w.id, dims, w.rows)])
    # the one-task arm's other sites and the upstream-side arms: the PyTorch path (the vendored kernels need a GPU);
    # the watch over the module those sites run, as it is over the vendored modules on a GPU
    monkeypatch.setattr(kernels, "_upstream", lambda task: dict(eager_chains.PATHS))
    monkeypatch.setattr(kernels, "upstream_modules", lambda b: {"kda.definition.eager_chains": eager_chains})
    grad = torch.is_grad_enabled()
    yield block
    # a fake's leftovers (a suspended generator holding a grad mode or a pushed mode) go now, not in a later test
    gc.collect()
    torch.set_grad_enabled(grad)
    while torch._C._len_torch_function_stack():
        torch._C._pop_torch_function_stack()


def _bench(block, monkeypatch, tmp_path, candidate: Path, arms: list[str], on_load=None) -> Run:
    """timing.bench on `arms`: `candidate` in fuse_scale_shift's place in the candidate arm, every other site and
    arm on the PyTorch path; each site function counted, the candidate's site outputs kept to be judged.
    `on_load`: called after each load of the candidate arm (the control's stand-in for a tamper)."""
    run = Run()
    real = kernels.kernel_set

    def counted(arm, site, fn):
        def call(*args, **kwargs):
            run.sites[arm, site] += 1
            run.moded[arm, site] += torch._C._len_torch_function_stack() > 0
            out = fn(*args, **kwargs)
            if arm == "candidate" and site == SITE:
                run.calls.append((args, kwargs, out))
            return out
        return call

    def kernel_set(b, arm):
        got = real(b, f"only-{TASK}", {TASK: candidate}) if arm == "candidate" else real(b, "eager")
        if arm == "candidate" and on_load is not None:
            on_load()
        return KernelSet(arm, {s: counted(arm, s, f) for s, f in got._fns.items()}, got.sources)

    real_build = timing.build

    def build(b, dims, device):
        model, ref_model, inputs = real_build(b, dims, device)
        model.register_forward_pre_hook(lambda mod, args: run.blocks.update([args[0].arm]))
        return model, ref_model, inputs

    monkeypatch.setattr(timing, "kernel_set", kernel_set)
    monkeypatch.setattr(check, "kernel_set", kernel_set)
    monkeypatch.setattr(timing, "build", build)
    try:
        path = timing.bench(block, arms, trials=TRIALS, out=tmp_path, log=lambda m: None, predict=False,
                            alone_cmd=e2e_alone_standin.command)
    except KdaError as e:  # stopped (UpstreamTampered); a candidate the static rules refuse is its row's error
        run.refused = e
        return run
    prov, run.row = results_file.read_records(path)[:2]
    assert prov["upstream_watch"] == 1  # the watch was on, over the stand-in upstream module
    return run


def _honest(tmp_path) -> Path:
    path = tmp_path / "honest_candidate.py"
    path.write_text(HONEST)
    return path


def test_the_stand_in_block_times_an_honest_candidate_beside_its_peers(wan, monkeypatch, tmp_path):
    """The control of the demonstrations below: with an honest candidate every arm passes and is timed, each
    upstream site runs once per block call, no site runs under a torch-function mode and every candidate call's
    output is right. Both defences are live on this path: a zoo fake that breaks the static rules is refused, and a
    rebound global of the watched module stops the run (and is put back)."""
    refused = _bench(wan, monkeypatch, tmp_path / "a", ZOO / "slows_baseline.py", ["upstream", "candidate"])
    assert refused.refused is None and not refused.calls  # the run goes on, the candidate never ran: its row says why
    assert "fuse_scale_shift: its candidate breaks the static rules" in refused.arm("candidate")["error"]
    assert refused.timed("upstream") and not refused.timed("candidate")
    original = eager_chains.fuse_scale_shift_kernel

    def tamper():
        eager_chains.fuse_scale_shift_kernel = lambda *a, **k: original(*a, **k)

    stopped = _bench(wan, monkeypatch, tmp_path / "b", _honest(tmp_path), ["upstream", "candidate"], tamper).refused
    assert isinstance(stopped, kernels.UpstreamTampered) and "eager_chains.fuse_scale_shift_kernel" in str(stopped)
    assert eager_chains.fuse_scale_shift_kernel is original
    run = _bench(wan, monkeypatch, tmp_path / "c", _honest(tmp_path), ["upstream", "candidate", "latest"])
    assert run.refused is None
    assert all(run.timed(a) for a in ("upstream", "candidate", "latest")), run.row["arms"]
    assert {"candidate/upstream", "candidate/latest"} <= set(run.row["speedup"])
    # the peers alone, in a child that never imported the candidate, launched the same work at every site
    assert "speedup_withheld" not in run.row and set(run.row["alone"]) == {"upstream", "latest"}
    calls = run.row["alone"]["upstream"]["site_calls"]
    assert calls["beside"] == calls["alone"] and sum(calls["alone"].values()) > 0
    assert run.blocks["upstream"] > TRIALS and all(run.sites["upstream", s.name] == run.blocks["upstream"]
                                                    for s in wan.sites)
    assert run.wrong and not any(run.wrong)
    assert not any(run.moded.values())


def test_a_candidate_honest_only_on_its_checked_call_is_stopped(wan, monkeypatch, tmp_path):
    """Closed (twentieth session): the check runs on the kernel set then timed, and every timed arm's output is
    judged once more after the trials, from the timed arguments: the fake's arm fails there, its samples dropped."""
    run = _bench(wan, monkeypatch, tmp_path, ZOO / "e2e_honest_only_when_checked.py", ["upstream", "candidate"])
    if run.refused is None:
        cand = run.arm("candidate")
        assert cand.get("stage") == "post-check" and "after timing" in cand["error"], cand
        assert not run.timed("candidate") and "candidate/upstream" not in run.row["speedup"]
    if run.refused is not None or not run.timed("candidate") or "candidate/upstream" not in run.row["speedup"]:
        return  # refused, or its arm failed: stopped
    # the hole: checked on one call and passed, then timed on calls that did no work and returned wrong outputs
    assert run.arm("candidate")["errors"][0] < 0.02
    assert run.wrong[0] is False and sum(run.wrong) >= 2 * TRIALS, run.wrong
    raise HoleOpen(f"candidate arm passed its check and was timed; {sum(run.wrong)} of its {len(run.wrong)} site "
                   f"calls returned the residual alone; speedup {run.row['speedup']['candidate/upstream']}")


@pytest.mark.filterwarnings("ignore:Converting a tensor with requires_grad")  # the checks after it run with grad on
def test_a_candidate_that_rewrites_the_shared_weights_is_stopped(wan, monkeypatch, tmp_path):
    """Closed (twentieth session): grad mode switched on inside the runner's no_grad stops the run at the
    candidate's load (kda.e2e.kernels.process_state), before it can reach the weights; a rewrite of the weights or
    inputs themselves would be seen by their prints (WeightPrint)."""
    fake = ZOO / "e2e_rewrites_shared_weights.py"
    run = _bench(wan, monkeypatch, tmp_path, fake, ["upstream", "candidate", "latest"])
    assert isinstance(run.refused, kernels.UpstreamTampered) and "grad mode on" in str(run.refused), run.refused
    if run.refused is not None or not run.timed("candidate"):
        return  # refused, or its own arm failed: stopped
    if run.timed("latest") and "candidate/latest" in run.row["speedup"]:
        return  # the arm after it passed and was compared: the weights were not the candidate's to change
    # the hole: the candidate passed and was timed against upstream; latest, checked after it, missed the fp32 path
    assert "candidate/upstream" in run.row["speedup"]
    latest = run.arm("latest")
    assert latest["passed"] is False and any("relative error" in p for p in latest["problems"]), latest
    assert "eager_us" not in latest and "candidate/latest" not in run.row["speedup"]
    raise HoleOpen(f"latest failed its check after the candidate ran ({latest['problems'][0]}); the row compares the "
                   f"candidate with {sorted(run.row['speedup'])} only")


def test_a_candidate_that_leaves_a_torch_function_mode_pushed_is_stopped(wan, monkeypatch, tmp_path):
    """Closed (twentieth session): a mode left pushed after the candidate's load stops the run (process_state pops
    it and names it)."""
    run = _bench(wan, monkeypatch, tmp_path, ZOO / "e2e_leaves_a_mode.py", ["upstream", "candidate"])
    assert isinstance(run.refused, kernels.UpstreamTampered) and "TorchFunctionMode" in str(run.refused), run.refused
    assert torch._C._len_torch_function_stack() == 0
    if run.refused is not None or not run.timed("candidate"):
        return  # refused, or its arm failed: stopped
    under = {s.name: run.moded["upstream", s.name] for s in wan.sites}
    if not any(under.values()):
        return  # upstream's sites never ran under a mode the candidate left
    # the hole: both arms passed and were timed; upstream's later block calls ran under the candidate's mode
    assert run.timed("upstream") and "candidate/upstream" in run.row["speedup"] and not any(run.wrong)
    assert run.moded["upstream", "norm1"] >= 2, under  # a whole sample's block call at least, its first site on
    assert run.moded["candidate", "norm1"] >= 1  # its own arm's block calls too, up to its site: a small advantage
    raise HoleOpen(f"upstream's site calls made under the candidate's torch-function mode: {under} of "
                   f"{run.blocks['upstream']} block calls")


def _compiler() -> bool:
    return bool(shutil.which("ninja") and (shutil.which("c++") or shutil.which("g++")))


@pytest.mark.skipif(not _compiler(), reason="needs a C++ compiler and ninja (torch's extension loader)")
def test_a_native_candidate_that_doubles_the_peers_sites_is_stopped(wan, monkeypatch, tmp_path):
    """Native code is outside the static rules and the watch sees only upstream's modules: the C++ extension wraps
    the peers' site functions in place. The peers timed alone, in a child that never imported it, launch half the
    work at their sites: the workload's speedups are withheld, and the error says why."""
    run = _bench(wan, monkeypatch, tmp_path, ZOO / "e2e_native_doubles_peers.py", ["upstream", "candidate"])
    if run.refused is not None or not run.timed("candidate"):
        return  # refused, or its arm failed: stopped
    if "speedup_withheld" in run.row:
        assert run.row["speedup"] == {} and "candidate/upstream" in run.row["speedup_withheld"]
        calls = run.row["alone"]["upstream"]["site_calls"]
        assert all(calls["beside"][t] == 2 * calls["alone"][t] for t in calls["alone"]), calls
        assert "upstream: its sites launched other work beside the candidate" in run.row["error"]
        return
    up = {s.name: run.sites["upstream", s.name] for s in wan.sites}
    if all(n == run.blocks["upstream"] for n in up.values()):
        return  # upstream's sites ran once per block call: untouched
    # the hole: upstream passed and was timed with every site running twice in each block call after the candidate
    # loaded (its check, which ran before, once)
    assert run.timed("upstream") and "candidate/upstream" in run.row["speedup"]
    assert all(n == 2 * run.blocks["upstream"] - 1 for n in up.values()), (up, run.blocks)
    raise HoleOpen(f"upstream's sites ran {up} times in {run.blocks['upstream']} block calls, its samples timed so; "
                   "the watch saw nothing")
