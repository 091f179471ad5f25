"""`kda campaign run ... --ray [ADDRESS]` (issue 38): the same campaign beyond one host, scheduled by Ray, an optional
dependency (`pip install ray`), not by our own code.

Each run is a Ray task that asks for one GPU (`num_gpus=1`): Ray places it on a node with a free GPU, sets
CUDA_VISIBLE_DEVICES, and starts the next queued run only when a GPU frees, on any node. The task runs the task's
launcher in a checkout of this repository on that node (`--ray-repo`, default this checkout's path: a shared file
system or the same path deployed on every node) and, when the run ends, returns a git bundle of its two branches
(`kda/<task>/<run-id>` and its review base). The driver fetches the bundle into this checkout, so every run's
committed ledger, results files and solution come back as a branch here, as a run on this host leaves them:
`kda campaign status` and `clean`, promotion and review read them the same way.

On one node the launches take a lock on the node's checkout until each run's manifest exists (git locks its refs
and worktree list; kda.loop.campaign_run staggers its launches for the same reason). Ctrl-C cancels the Ray tasks;
each passes SIGINT to its launcher, whose driver records the run's end, then SIGTERM after a grace period.
"""
from __future__ import annotations

import fcntl
import os
import signal
import socket
import subprocess
import tempfile
from pathlib import Path

from kda.core.errors import KdaError
from kda.loop.campaign_run import (GRACE_S, PREPARE_TIMEOUT_S, Campaign, _utc, _worktree_root, launch_env, new_run_id,
                                   wait_prepared)

LOCK = "kda-campaign-launch.lock"  # in the node checkout's git dir


def _ray():
    try:
        import ray
    except ImportError:
        raise KdaError("kda campaign run --ray needs Ray: pip install ray (an optional dependency)") from None
    return ray


def launch_and_bundle(repo: str, launcher: str, task: str, run_id: str, env: dict, grace_s: float = GRACE_S,
                      prepare_timeout_s: float = PREPARE_TIMEOUT_S) -> dict:
    """Body of the Ray task (plain, so a test can call it): run one launcher on the GPU Ray gave this task, then
    bundle the run's branches. Returns {rc, gpu, host, bundle (bytes or None), log (its last lines)}."""
    import ray

    gpu = ",".join(str(int(g)) for g in ray.get_gpu_ids()) or "any"
    name = Path(task).name
    run_env = dict(env, KDA_RUN_ID=run_id, KDA_GPU=gpu)
    git_dir = subprocess.run(["git", "-C", repo, "rev-parse", "--git-common-dir"], capture_output=True, text=True,
                             check=True).stdout.strip()
    lock_path = Path(repo, git_dir) if not Path(git_dir).is_absolute() else Path(git_dir)
    worktree = _worktree_root(Path(repo), env) / f"{name}-{run_id}"
    log = tempfile.NamedTemporaryFile("w+", suffix=f"-{name}.log", delete=False)
    with open(lock_path / LOCK, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one launch at a time prepares on this node
        proc = subprocess.Popen(["bash", str(Path(repo) / launcher)], cwd=repo, env=run_env, stdout=log,
                                stderr=subprocess.STDOUT, start_new_session=True)
        wait_prepared(proc, worktree, prepare_timeout_s, 0.2)
    try:
        rc = proc.wait()
    except KeyboardInterrupt:  # ray.cancel: the run records its end, as on Ctrl-C at a terminal
        os.killpg(proc.pid, signal.SIGINT)
        try:
            rc = proc.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGTERM)
            rc = proc.wait()
    branches = [f"kda/{name}/{run_id}", f"kda-base/{name}/{run_id}"]
    have = [b for b in branches if subprocess.run(["git", "-C", repo, "rev-parse", "--verify", "-q", b],
                                                  capture_output=True).returncode == 0]
    bundle = None
    if have:
        with tempfile.TemporaryDirectory() as d:
            path = Path(d) / "run.bundle"
            subprocess.run(["git", "-C", repo, "bundle", "create", str(path), *have], check=True,
                           capture_output=True)
            bundle = path.read_bytes()
    log.seek(0)
    tail = log.read()[-4000:]
    log.close()
    os.unlink(log.name)
    return {"rc": rc, "gpu": gpu, "host": socket.gethostname(), "bundle": bundle, "log": tail}


def fetch_bundle(repo: Path, bundle: bytes, task: str, run_id: str) -> list[str]:
    """The run's branches from its bundle into this checkout (a no-op where the node's checkout is this one)."""
    name = Path(task).name
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "run.bundle"
        path.write_bytes(bundle)
        heads = subprocess.run(["git", "-C", str(repo), "bundle", "list-heads", str(path)], capture_output=True,
                               text=True, check=True).stdout.split()
        refs = [r.removeprefix("refs/heads/") for r in heads[1::2]]
        wanted = [r for r in refs if r in (f"kda/{name}/{run_id}", f"kda-base/{name}/{run_id}")]
        checked_out = {line.split(" ", 1)[1].removeprefix("refs/heads/") for line in subprocess.run(
            ["git", "-C", str(repo), "worktree", "list", "--porcelain"], capture_output=True, text=True,
            check=True).stdout.splitlines() if line.startswith("branch ")}
        specs = [f"refs/heads/{r}:refs/heads/{r}" for r in wanted if r not in checked_out]
        if specs:
            subprocess.run(["git", "-C", str(repo), "fetch", "-q", str(path), *specs], check=True,
                           capture_output=True)
    return wanted


def run(repo: Path, c: Campaign, *, address: str | None = None, node_repo: str | None = None,
        env: dict | None = None, console=None, init_kwargs: dict | None = None) -> Campaign:
    """Every queued slot of `c` as a Ray task of one GPU; returns when all ended (Ctrl-C cancels them).
    `init_kwargs` (tests): what ray.init gets instead of `address` (a local cluster with fake GPUs)."""
    ray = _ray()
    repo = Path(repo)
    env = dict(os.environ if env is None else env)
    node_repo = node_repo or str(repo)
    if not ray.is_initialized():
        ray.init(**(init_kwargs if init_kwargs is not None else {"address": address}), include_dashboard=False,
                 log_to_driver=False)
    task_fn = ray.remote(num_gpus=1)(launch_and_bundle)
    base_env = launch_env(c, env)
    refs = {}
    for i, s in enumerate(c.slots):
        if s.state != "queued":
            continue
        s.run_id, s.state, s.started_utc = new_run_id(), "submitted", _utc()
        refs[task_fn.remote(node_repo, s.launcher, s.task, s.run_id, base_env)] = i
    c.save(repo)
    try:
        while refs:
            done, _ = ray.wait(list(refs), num_returns=1)
            for ref in done:
                s = c.slots[refs.pop(ref)]
                try:
                    out = ray.get(ref)
                except Exception as e:  # noqa: BLE001  (a task that died is recorded, the campaign goes on)
                    s.state, s.rc, s.ended_utc = "failed", None, _utc()
                    s.log = f"ray: {type(e).__name__}: {str(e)[:300]}"
                else:
                    s.state, s.rc, s.gpu, s.ended_utc = "ended", out["rc"], f"{out['host']}:{out['gpu']}", _utc()
                    s.log = out["log"][-1000:]
                    if out["bundle"]:
                        fetch_bundle(repo, out["bundle"], s.task, s.run_id)
                c.save(repo)
                if console is not None:
                    console.print(f"{Path(s.task).name}: {s.state} on {s.gpu}, run {s.run_id}, rc {s.rc}")
    except KeyboardInterrupt:
        for ref in refs:
            ray.cancel(ref)
        for ref, i in refs.items():
            try:
                out = ray.get(ref)
                c.slots[i].rc = out["rc"]
            except Exception:  # noqa: BLE001  (cancelled before it started, or stopped)
                pass
            c.slots[i].state = "interrupted"
        c.save(repo)
    return c
