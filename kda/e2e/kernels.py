"""Which function runs at each call site of a block, per arm.

Arms:
    upstream       SGLang's kernel at every site: the task's vendored entry point (loaded as the worker loads baselines)
    candidate      every task's current solution at its sites (loaded as Task.load_solution does)
    only-<task>    that task's candidate at its sites, upstream everywhere else: what one task alone buys
    eager          the PyTorch path at every site (kda.definition.eager_chains)
    compile        the eager arm, with the whole block under torch.compile (the runner compiles; the sites are eager's)
    latest         today's SGLang per op (issue 40): at each site, the entry point of the release the site's task pins
                   in [upstream_latest] (0.5.23), loaded as the worker loads the peer `latest`; a task that pins none
                   runs its 0.5.15 baseline there and `latest_sources` says why. The fused sites 0.5.23 mounts in
                   some models (one kernel for a chain of our sites) are not modeled: this is 0.5.23 op by op.
"""
from __future__ import annotations

from pathlib import Path
from typing import Callable

from kda.core.errors import KdaError
from kda.definition.task import Task
from kda.definition import eager_chains
from kda.e2e.block import BlockDef

FIXED_ARMS = ("upstream", "candidate", "eager", "compile", "latest")
ONLY = "only-"


class KernelSet:
    """The resolved function of every site: `k.<site>(...)` calls it. Attribute access keeps the block's code as
    the wheel's reads (one call per site) and lets torch.compile see plain Python functions."""

    def __init__(self, arm: str, fns: dict[str, Callable], sources: dict[str, str]):
        self.arm = arm
        self._fns = fns
        self.sources = sources  # site -> where its function came from, for the report

    def __getattr__(self, name: str) -> Callable:
        fns = self.__dict__.get("_fns", {})
        if name not in fns:
            raise AttributeError(f"no call site {name!r} in this block (sites: {', '.join(fns)})")
        return fns[name]


def arms(block: BlockDef) -> list[str]:
    return [*FIXED_ARMS, *(ONLY + t for t in block.tasks)]


def _check_arm(block: BlockDef, arm: str) -> None:
    if arm not in arms(block):
        raise KdaError(f"{block.label}: no arm {arm!r} (arms: {', '.join(arms(block))})")


def _upstream(task: Task) -> dict[str, Callable]:
    from kda.vendor import load_entry_points, vendor_task

    return load_entry_points(task.cfg, vendor_task(task.cfg))


def _latest(task: Task) -> dict[str, Callable]:
    if not task.cfg["upstream_latest"]["version"]:
        return _upstream(task)
    from kda.vendor import vendor_task
    from kda.vendor.importer import load_latest_entry_points

    return load_latest_entry_points(task.cfg, vendor_task(task.cfg, section="upstream_latest"))


def latest_sources(block: BlockDef) -> dict[str, str]:
    """What the `latest` arm runs for each of the block's tasks, without loading anything: `sglang==0.5.23` where the
    task pins a later release, else its baseline's release and the task's reason (`[upstream_latest] note`)."""
    return {name: latest_sources_of(name) for name in block.tasks}


_STATIC: dict[tuple[str, str], list[str]] = {}  # bounded: one entry per task and candidate file of a block run


def _static_problems(task: Task, override: Path | None) -> list[str]:
    """The static rules on the task's candidate files, once per process. Under Triton's interpreter (`kda e2e
    --cpu` sets TRITON_INTERPRET before Triton loads) triton.language's functions are interpreter objects, which the
    rules would take for reaches outside triton.language: the check then runs in a child process without it, as a
    task's bench runs it in the parent of its interpreted worker."""
    import json
    import os
    import subprocess
    import sys

    key = (task.name, str(override or ""))
    if key in _STATIC:
        return _STATIC[key]
    if os.environ.get("TRITON_INTERPRET") != "1":
        from kda.harness.guards import static_violations

        problems = static_violations(task.static_files(override))
    else:
        code = ("import json, sys; from pathlib import Path; from kda.definition.task import Task; "
                "from kda.harness.guards import static_violations; t = Task.load(sys.argv[1]); "
                "print(json.dumps(static_violations(t.static_files(Path(sys.argv[2]) if sys.argv[2] else None))))")
        env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
        done = subprocess.run([sys.executable, "-c", code, task.name, key[1]], capture_output=True, text=True,
                              env=env, timeout=300)
        if done.returncode != 0:
            raise KdaError(f"{task.name}: the static rules could not be checked: {done.stderr.strip()[-800:]}")
        problems = json.loads(done.stdout.strip().splitlines()[-1])
    _STATIC[key] = problems
    return problems


def _candidate(task: Task, override: Path | None = None) -> dict[str, Callable]:
    """The task's candidate functions, once its files keep the static rules: a block runs every arm in one process,
    so a candidate could reach upstream's modules and slow the arms it is compared with (tests/zoo/slows_baseline.py
    does, in a task's bench). At run time watch_upstream and process_state check what the static rules cannot."""
    problems = _static_problems(task, override)
    if problems:
        raise KdaError(f"{task.name}: its candidate breaks the static rules, so no block runs it (it would share the "
                       f"process with the kernels it is timed against; `kda check {task.name} --static` lists "
                       "them):\n  " + "\n  ".join(problems[:5]))
    mod = task.load_solution(override)
    return {e.split(":")[1]: getattr(mod, e.split(":")[1], None) for e in task.cfg["task"]["entry_points"]}


def kernel_set(block: BlockDef, arm: str, candidates: dict[str, Path] | None = None) -> KernelSet:
    """Resolve every site for `arm`; a site whose function is missing is an error naming the block and the site.
    `candidates`: task -> a candidate file to load instead of its solution/ (as `kda check --candidate`)."""
    _check_arm(block, arm)
    candidates = candidates or {}
    loaded: dict[tuple[str, str], dict[str, Callable]] = {}
    fns, sources = {}, {}
    for site in block.sites:
        kind = _kind(arm, site.task)
        if kind == "eager":
            fn = eager_chains.PATHS.get(site.entry)
            where = f"kda/definition/eager_chains.py:{site.entry}"
        else:
            if (kind, site.task) not in loaded:
                task = Task.load(site.task)
                if kind == "candidate":
                    loaded[kind, site.task] = _candidate(task, candidates.get(site.task))
                else:
                    loaded[kind, site.task] = {"upstream": _upstream, "latest": _latest}[kind](task)
            fn = loaded[kind, site.task].get(site.entry)
            origin = {"upstream": "vendored", "candidate": "solution"}.get(kind) or \
                f"vendored {latest_sources_of(site.task)}"
            where = f"{site.task} {origin}:{site.entry}"
        if not callable(fn):
            raise KdaError(f"{block.label} site {site.name!r}: the {kind} arm has no function {site.entry!r} "
                           f"({where})")
        fns[site.name], sources[site.name] = fn, where
    return KernelSet(arm, fns, sources)


def latest_sources_of(task: str) -> str:
    cfg = Task.load(task).cfg
    latest = cfg["upstream_latest"]
    return f"{latest['package']}=={latest['version']}" if latest["version"] else \
        f"{cfg['upstream']['package']}=={cfg['upstream']['version']} ({latest['note'] or 'not pinned'})"


def _kind(arm: str, task: str) -> str:
    if arm in ("eager", "compile"):
        return "eager"
    if arm in ("upstream", "candidate", "latest"):
        return arm
    return "candidate" if arm == ONLY + task else "upstream"


class UpstreamTampered(KdaError):
    """A block run saw upstream's or 0.5.23's modules change after a candidate was loaded: its timings could be of
    slowed peers, so none is kept."""


def upstream_modules(block: BlockDef) -> dict[str, object]:
    """Every loaded module of the vendored releases the block's tasks pin (0.5.15 and, where pinned, 0.5.23 under
    its alias) and of kda's shims for them: what the upstream and latest arms run."""
    import sys

    from kda.vendor import vendor_task
    from kda.vendor.importer import SHIM_DIR

    roots = {str(SHIM_DIR)}
    for name in block.tasks:
        cfg = Task.load(name).cfg
        roots.add(str(vendor_task(cfg).root))
        if cfg["upstream_latest"]["version"]:
            roots.add(str(vendor_task(cfg, section="upstream_latest").root))
    roots = tuple(sorted(roots))
    return {name: mod for name, mod in list(sys.modules.items())
            if mod is not None and str(getattr(mod, "__file__", "") or "").startswith(roots)}


def watch_upstream(block: BlockDef, arms: list[str], load: Callable = kernel_set):
    """Load the upstream and latest arms' kernels (through `load`, kernel_set by default) before any candidate,
    then snapshot their modules' state (kda.harness.guards.UpstreamWatch, as a task's worker does); None where no
    candidate shares the run with them."""
    from kda.harness.guards import UpstreamWatch

    peers = [a for a in ("upstream", "latest") if a in arms]
    if not peers or not any(a == "candidate" or a.startswith(ONLY) for a in arms):
        return None
    for arm in peers:
        load(block, arm)
    return UpstreamWatch(upstream_modules(block))


def after_arm(watch, block: BlockDef, arm: str, when: str, weights=()) -> None:
    """After an arm ran: upstream's and 0.5.23's own first runs may set globals of their own (a lazily built table),
    so after theirs the state is taken as the reference, as a task's worker does after a baseline call; after any
    other arm it is checked. Checks before each arm (after its load) keep the reference honest: nothing a candidate
    changed can be accepted, since every candidate arm is checked right after it ran."""
    if watch is not None and arm in ("upstream", "latest"):
        watch.accept()
    else:
        check_upstream(watch, block, when)
    process_state(block, when, weights)


def process_state(block: BlockDef, when: str, weights=()) -> None:
    """What a candidate could leave in the process to change the arms timed after it, beyond upstream's modules
    (the red team's fakes, tests/zoo/e2e_*.py): a torch function or dispatch mode left pushed, grad mode or a default
    device switched on inside the runner's no_grad, the block's shared weights or inputs rewritten. Raises
    UpstreamTampered (after popping the modes); `weights`: (WeightPrint, ...) to compare."""
    import torch

    from kda.harness.guards import pop_torch_modes

    problems = pop_torch_modes()
    if torch.is_grad_enabled():
        problems.append("grad mode on inside the runner's no_grad")
    if torch.get_default_device() != torch.device("cpu"):
        problems.append(f"the default device set to {torch.get_default_device()}")
    for w in weights:
        problems += w.changed()
    if problems:
        raise UpstreamTampered(f"{block.label}: the process's state changed {when}: {'; '.join(problems)}; a "
                               "candidate changed what the other arms run, so no timing of this run is kept")


class WeightPrint:
    """The block's shared tensors (parameters, buffers, inputs) as they were: each one's storage, version counter
    and an exact sum of its bytes, compared after every arm that ran a candidate. An in-place rewrite bumps the
    version counter; the sum catches a write that went around it."""

    def __init__(self, label: str, tensors: dict):
        self.label = label
        self.tensors = {k: t for k, t in tensors.items() if t is not None}
        self.prints = {k: self._print(t) for k, t in self.tensors.items()}

    @staticmethod
    def _print(t):
        import torch

        if not t.numel():
            return t.data_ptr(), t._version, 0
        # flat first: a byte view keeps the shape, so a conv weight whose last dim is 3 in bf16 (6 bytes) has no
        # int32 view however many bytes it holds (the H200 run of 2026-11-28 failed both VAE blocks on it)
        raw = t.detach().contiguous().reshape(-1).view(torch.uint8)
        # an exact sum of the words (int32 where the bytes allow: 4x fewer elements), accumulated in int64
        words = raw.view(torch.int32) if raw.numel() % 4 == 0 else raw
        return t.data_ptr(), t._version, int(words.sum(dtype=torch.int64))

    def changed(self) -> list[str]:
        bad = [k for k, t in self.tensors.items() if self._print(t) != self.prints[k]]
        return [f"{self.label} rewritten: {', '.join(bad[:5])}" + (f" and {len(bad) - 5} more" if len(bad) > 5
                                                                    else "")] if bad else []


def check_upstream(watch, block: BlockDef, when: str) -> None:
    """Raise UpstreamTampered naming what changed since the snapshot (and put it back); nothing without a watch."""
    if watch is None:
        return
    changed = watch.changed()
    if changed:
        watch.restore()
        raise UpstreamTampered(f"{block.label}: upstream's state changed {when}: {', '.join(changed[:8])}"
                               + (f" and {len(changed) - 8} more" if len(changed) > 8 else "")
                               + "; a candidate reached the kernels it is timed against, so no timing of this run "
                               "is kept")
