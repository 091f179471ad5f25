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


def _candidate(task: Task, override: Path | None = None) -> dict[str, Callable]:
    """The task's candidate functions, once its files keep the static rules: a block runs every arm in one process,
    so a candidate could reach upstream's modules and slow the arms it is compared with (tests/zoo/slows_baseline.py
    does, in a task's bench); the task bench's runtime watch of upstream does not run here, the static rules do."""
    from kda.harness.guards import static_violations

    problems = static_violations(task.static_files(override))
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
