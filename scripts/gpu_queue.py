"""Run GPU jobs on every GPU of one machine, one job per GPU at a time, across the calls of a device session.

A device call lasts at most 10 minutes, and a machine of four GPUs costs device time per second held however many
of its GPUs work. This keeps every GPU busy and outlives the call:

- `start` copies the repository to WORK/repo (the next call re-sends the working tree, which would overwrite results
  files written in place) and starts the scheduler in a new process session, which a call's end does not kill;
- `wait` returns when the queue is done or its time is up, packing what finished into OUT/queue/ (results.tar for
  `kda intake`, e2e.tar with the end-to-end blocks' results, logs.tar, queue.txt); the scheduler runs on between
  calls, so the next call's `wait` picks up where this one stopped.

Jobs are MODE:NAME:
  bench:TASK  scripts/gpu_tasks.sh --bench-only TASK (rotated input sets and the baseline timed alone: the defaults)
  sweep:TASK  --sweep-only (KDA_SWEEP_N rows)     cold:TASK  --cold-only     aa:TASK  --aa-only
  e2e:BLOCK   python3 -m kda e2e BLOCK (diffusion/e2e/BLOCK), with KDA_E2E_ARGS appended (`--skip-arm compile`),
              or KDA_E2E_ARGS_BLOCK where set (one block with the compile arm, the others without)
  traj:BLOCK  python3 -m kda e2e BLOCK --trajectory (the sampled stack's PSNR against fp32), KDA_TRAJ_ARGS appended
  zoo:TASK    scripts/gpu_exploit_zoo.py --bench-probe on the zoo's task (fuse_scale_shift); nothing is ledgered,
              its page and JSON come back in logs.tar (jobs/zoo-TASK/) for docs/evidence/
A job may end in @PATH: it starts only once PATH exists (a package a later call brings, such as the CuTe DSL
bundle's last part: the jobs that need nothing wait for nothing). Every finished job leaves WORK/done/MODE-NAME
(whatever its exit status), so a job can wait for another: an e2e block whose predictions read a task's results
file waits for that task's bench (`e2e:wan@WORK/done/bench-cutedsl_norm_scale_shift`); it fails by itself,
naming the stale file, if the bench did not write one.
They start in the order given, each on the first free GPU. Two jobs of one task run at once only where they write
different files: a sweep and a cold run write results/sweep/ and results/cold/ and no ledger line, a bench and an
A/A run both append to the ledger (and an e2e block's results are its own). Each job sees one GPU (CUDA_VISIBLE_DEVICES), so every timing it makes is a ratio within one
run on one GPU, as on a machine of one; the GPUs share the host's CPUs, which the host-path metric (device_us) feels:
say so beside any figure taken this way.

Usage (GPU machine, repository root; KDA_COMMIT and the rest of gpu_tasks.sh's environment set):
  python3 scripts/gpu_queue.py start WORK JOB... [--gpus N]
  python3 scripts/gpu_queue.py wait WORK --for SECONDS [--out DIR]
"""
from __future__ import annotations

import argparse
import io
import json
import os
import shlex
import shutil
import subprocess
import sys
import tarfile
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
MODES = {"bench": "--bench-only", "sweep": "--sweep-only", "cold": "--cold-only", "aa": "--aa-only", "e2e": None,
         "traj": None, "zoo": None}
ZOO_TASK = "fuse_scale_shift"  # the task tests/zoo/'s fakes are written for
POLL_S = 2.0
# What the copy leaves behind: git history (the copy has KDA_COMMIT instead) and outputs of earlier runs.
COPY_IGNORE = shutil.ignore_patterns(".git", ".venv", ".kda-device", "__pycache__", ".pytest_cache")


@dataclass(frozen=True)
class Job:
    mode: str
    name: str
    gate: str = ""  # a path that must exist before the job starts ("": none)

    @property
    def label(self) -> str:
        return f"{self.mode}:{self.name}"

    @property
    def spec(self) -> str:
        return self.label + (f"@{self.gate}" if self.gate else "")

    def ready(self) -> bool:
        return not self.gate or Path(self.gate).exists()

    @property
    def slug(self) -> str:
        return f"{self.mode}-{self.name}"

    @property
    def writes(self) -> tuple[str, str]:
        """What no other running job may write at the same time."""
        return (self.name, "ledger") if self.mode in ("bench", "aa") else (self.name, self.mode)


def parse_jobs(specs: list[str]) -> list[Job]:
    jobs = []
    for spec in specs:
        what, _, gate = spec.partition("@")
        mode, sep, name = what.partition(":")
        if not sep or mode not in MODES or not name or (spec.count("@") and not gate):
            raise SystemExit(f"job {spec!r}: expected MODE:NAME[@PATH] with MODE one of {', '.join(MODES)} "
                             "(bench:norm_infer, e2e:wan, sweep:cutedsl_norm_scale_shift@/tmp/kda-site/.ok)")
        if any((j.mode, j.name) == (mode, name) for j in jobs):
            raise SystemExit(f"job {spec!r} named twice")
        jobs.append(Job(mode, name, gate))
    return jobs


def command(job: Job) -> list[str]:
    if job.mode == "e2e":
        args = os.environ.get(f"KDA_E2E_ARGS_{job.name}", os.environ.get("KDA_E2E_ARGS", ""))
        return [sys.executable, "-m", "kda", "e2e", job.name, *shlex.split(args)]
    if job.mode == "traj":
        return [sys.executable, "-m", "kda", "e2e", job.name, "--trajectory",
                *shlex.split(os.environ.get("KDA_TRAJ_ARGS", ""))]
    if job.mode == "zoo":  # the job's $OUT (its own folder, Queue._start; packed into logs.tar), read when it runs
        return ["bash", "-c", f"{shlex.quote(sys.executable)} scripts/gpu_exploit_zoo.py --jobs 4 --bench-probe"
                ' --out "$OUT/exploit-zoo.md" --json "$OUT/exploit-zoo.json"']
    return ["bash", "scripts/gpu_tasks.sh", MODES[job.mode], job.name]


def kept_paths(job: Job) -> list[str]:
    """What a finished job leaves that the project keeps, relative to the repository root (the same in its copy)."""
    if job.mode in ("e2e", "traj"):  # a trajectory writes results/trajectory/ beside the timing file
        if not (REPO / "diffusion" / "e2e" / job.name / "block.toml").is_file():
            raise SystemExit(f"job {job.label}: no block diffusion/e2e/{job.name}/block.toml")
        return [f"diffusion/e2e/{job.name}/results"]
    if job.mode == "zoo":
        if job.name != ZOO_TASK:
            raise SystemExit(f"job {job.label}: the exploit zoo is written for {ZOO_TASK} (zoo:{ZOO_TASK})")
        return []
    if str(REPO) not in sys.path:
        sys.path.insert(0, str(REPO))
    from kda.core.paths import repo_root, resolve_task

    task_dir = resolve_task(job.name).relative_to(repo_root())
    return [f"{task_dir}/results", f"{task_dir}/docs/ledger.jsonl"]


def _tar(path: Path, root: Path, members: list[str]) -> None:
    """Written aside and renamed, so a `wait` packing at the same moment never reads half a tar."""
    tmp = path.with_suffix(".tmp")
    with tarfile.open(tmp, "w") as tar:
        for m in dict.fromkeys(members):
            if (root / m).exists():
                tar.add(root / m, arcname=m)
    tmp.replace(path)


class Queue:
    """The scheduler, run detached in WORK/repo; its state is WORK/state.jsonl, one line per event."""

    def __init__(self, work: Path, jobs: list[Job], gpus: int):
        self.work, self.jobs, self.gpus = work, jobs, gpus
        self.repo = work / "repo"
        self.kept: list[str] = []
        self.e2e_kept: list[str] = []

    def _event(self, **e) -> None:
        with open(self.work / "state.jsonl", "a") as f:
            f.write(json.dumps({"t": round(time.time(), 1), **e}) + "\n")

    def _start(self, job: Job, gpu: int) -> subprocess.Popen:
        out = self.work / "jobs" / job.slug
        out.mkdir(parents=True, exist_ok=True)
        env = {**os.environ, "CUDA_VISIBLE_DEVICES": str(gpu), "OUT": str(out), "PYTHONUNBUFFERED": "1",
               "PYTHONPATH": str(self.repo) + (f":{os.environ['PYTHONPATH']}" if os.environ.get("PYTHONPATH") else "")}
        self._event(job=job.label, gpu=gpu, state="started")
        log = open(out / "stdout.log", "w")
        return subprocess.Popen(command(job), cwd=self.repo, env=env, stdout=log, stderr=subprocess.STDOUT)

    def _finished(self, job: Job, gpu: int, rc: int) -> None:
        paths = kept_paths(job)
        (self.e2e_kept if job.mode in ("e2e", "traj") else self.kept).extend(paths)
        self._event(job=job.label, gpu=gpu, state="done", rc=rc)
        # after the event: a job gated on this marker starts only once the state says this one is done
        (self.work / "done").mkdir(exist_ok=True)
        (self.work / "done" / job.slug).write_text(f"{rc}\n")
        self.pack()

    def pack(self) -> None:
        _tar(self.work / "results.tar", self.repo, self.kept)
        _tar(self.work / "e2e.tar", self.repo, self.e2e_kept)
        _tar(self.work / "logs.tar", self.work, ["jobs", "scheduler.log"])

    def run(self) -> None:
        pending = list(self.jobs)
        running: dict[int, tuple[Job, subprocess.Popen]] = {}
        while pending or running:
            for gpu, (job, proc) in list(running.items()):
                if proc.poll() is not None:
                    del running[gpu]
                    self._finished(job, gpu, proc.returncode)
            busy = {job.writes for job, _ in running.values()}
            for gpu in range(self.gpus):
                if gpu in running:
                    continue
                job = next((j for j in pending if j.writes not in busy and j.ready()), None)
                if job is None:
                    break
                pending.remove(job)
                busy.add(job.writes)
                try:
                    running[gpu] = (job, self._start(job, gpu))
                except OSError as e:  # one job that cannot start must not stop the others
                    self._event(job=job.label, gpu=gpu, state="done", rc=-1, error=str(e))
            time.sleep(POLL_S)
        self.pack()
        self._event(state="queue done")


def read_state(work: Path) -> list[dict]:
    path = work / "state.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def summary(work: Path, jobs: list[str], now: float) -> str:
    """One line per job (state, GPU, seconds, rc, the job's own summary lines), readable at 80 columns."""
    events = read_state(work)
    started = {e["job"]: e for e in events if e.get("state") == "started"}
    done = {e["job"]: e for e in events if e.get("state") == "done"}
    lines = []
    for label in (spec.partition("@")[0] for spec in jobs):
        if label in done:
            e = done[label]
            s = started.get(label, e)  # a job that could not start has no start
            head = f"{label:<34} gpu {e['gpu']}  done {e['t'] - s['t']:5.0f} s  rc={e['rc']}"
        elif label in started:
            s = started[label]
            head = f"{label:<34} gpu {s['gpu']}  running {now - s['t']:5.0f} s"
        else:
            head = f"{label:<34} waiting"
        lines.append(head)
        log = work / "jobs" / label.replace(":", "-", 1) / "stdout.log"
        if label in done and log.exists():
            tail = [ln for ln in log.read_text(errors="replace").splitlines() if ln.strip()][-3:]
            lines += [f"    {ln[:76]}" for ln in tail]
    return "\n".join(lines)


def cmd_start(args) -> int:
    work = Path(args.work)
    if (work / "state.jsonl").exists() and not any(e.get("state") == "queue done" for e in read_state(work)):
        raise SystemExit(f"{work}: a queue is already running there (state.jsonl has no 'queue done')")
    jobs = parse_jobs(args.jobs)
    for job in jobs:  # a task or block that does not resolve fails now, not minutes into the queue
        kept_paths(job)
    if work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True)
    shutil.copytree(REPO, work / "repo", symlinks=True, ignore=COPY_IGNORE)
    gpus = args.gpus or _gpu_count()
    (work / "jobs.json").write_text(json.dumps({"jobs": [j.spec for j in jobs], "gpus": gpus}))
    with open(work / "scheduler.log", "w") as log:
        subprocess.Popen([sys.executable, str(work / "repo" / "scripts" / "gpu_queue.py"), "_run", str(work)],
                         cwd=work / "repo", stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    print(f"queue of {len(jobs)} jobs on {gpus} GPUs started in {work}")
    return 0


def _gpu_count() -> int:
    proc = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True)
    n = sum(1 for line in proc.stdout.splitlines() if line.startswith("GPU "))
    if n == 0:
        raise SystemExit("nvidia-smi lists no GPU: pass --gpus N")
    return n


def cmd_run(args) -> int:
    work = Path(args.work)
    spec = json.loads((work / "jobs.json").read_text())
    Queue(work, parse_jobs(spec["jobs"]), spec["gpus"]).run()
    return 0


def cmd_wait(args) -> int:
    work = Path(args.work)
    jobs = json.loads((work / "jobs.json").read_text())["jobs"]
    t0 = time.time()
    last = t0
    while time.time() - t0 < args.seconds:
        if any(e.get("state") == "queue done" for e in read_state(work)):
            break
        time.sleep(POLL_S)
        if time.time() - last >= args.every:
            last = time.time()
            n_done = sum(1 for e in read_state(work) if e.get("state") == "done")
            print(f"[{time.time() - t0:4.0f} s] {n_done}/{len(jobs)} jobs done", flush=True)
    text = summary(work, jobs, time.time())
    print(text)
    if args.out:
        # A folder of its own under OUT: on 2026-11-28 a gpu_tasks.sh run beside the queue in one call wrote its own
        # OUT/results.tar over the queue's, and a finished bench was lost with it.
        out = Path(args.out) / "queue"
        out.mkdir(parents=True, exist_ok=True)
        for name in ("results.tar", "e2e.tar", "logs.tar"):
            if (work / name).exists():
                shutil.copy(work / name, out / name)
        (out / "queue.txt").write_text(text + "\n")
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("start", help="copy the repository to WORK/repo and start the queue detached")
    p.add_argument("work")
    p.add_argument("jobs", nargs="+", metavar="JOB")
    p.add_argument("--gpus", type=int, help="GPUs to use (default: all that nvidia-smi lists)")
    p.set_defaults(fn=cmd_start)
    p = sub.add_parser("wait", help="wait for the queue, then pack what finished into --out")
    p.add_argument("work")
    p.add_argument("--for", dest="seconds", type=float, required=True, help="at most this long")
    p.add_argument("--every", type=float, default=60.0, help="a progress line this often (seconds)")
    p.add_argument("--out", help="where results.tar, e2e.tar, logs.tar and queue.txt go")
    p.set_defaults(fn=cmd_wait)
    p = sub.add_parser("_run", help=argparse.SUPPRESS)
    p.add_argument("work")
    p.set_defaults(fn=cmd_run)
    args = ap.parse_args(argv)
    return args.fn(args)


if __name__ == "__main__":
    sys.exit(main())
