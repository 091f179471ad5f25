"""kda/loop/campaign_run.py: `kda campaign run` drives one agent per task through the launchers, each on a GPU it
holds alone, a queue when tasks outnumber GPUs; here three tasks on two fake GPUs with a scripted agent and a
stand-in gate (KDA_GATE_CMD): one run passes, one fails every round until its budget, one agent is broken."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

from agentrun_support import ROOT, clean_env, git, kda_wrapper, make_clone
from kda.core.errors import KdaError
from kda.loop import agentrun, campaign_run

TASKS = ("fuse_scale_shift", "norm_infer", "rotary_embedding")
# The scripted agent: logs its GPU and the time it held it, then acts by task. fuse_scale_shift makes a change the
# gate passes; norm_infer one the gate fails every round; rotary_embedding's agent is broken (exits 1, no change).
AGENT = r"""
log="$KDA_CAMPAIGN_TEST_LOG"
echo "start $KDA_TASK $CUDA_VISIBLE_DEVICES $(date +%s.%N)" >> "$log"
sleep 1
case "$KDA_TASK" in
  *rotary_embedding) echo "end $KDA_TASK $CUDA_VISIBLE_DEVICES $(date +%s.%N)" >> "$log"; exit 1 ;;
esac
echo "# round ${KDA_ROUND:-1}" >> "$KDA_TASK/solution/__init__.py"
echo "Hypothesis: a comment (predicted effect: none)"
echo "Change: solution/__init__.py"
echo "end $KDA_TASK $CUDA_VISIBLE_DEVICES $(date +%s.%N)" >> "$log"
"""
GATE = 'case "$KDA_TASK" in *norm_infer) echo "min_geomean: 0.9x"; exit 1 ;; *) echo ok; exit 0 ;; esac'


def assert_each_gpu_held_alone(log: Path) -> None:
    """The agents' start/end lines: on each GPU the spans they held never overlap."""
    spans: dict[str, list[tuple[float, float]]] = {}
    opened = {}
    for kind, task, gpu, t in (line.split() for line in log.read_text().splitlines()):
        if kind == "start":
            opened[(task, gpu)] = float(t)
        else:
            spans.setdefault(gpu, []).append((opened.pop((task, gpu)), float(t)))
    assert spans and not opened
    for held in spans.values():
        held.sort()
        assert all(a[1] <= b[0] for a, b in zip(held, held[1:])), spans


def test_a_plan_names_what_is_wrong_with_its_input(tmp_path, monkeypatch):
    monkeypatch.chdir(ROOT)
    with pytest.raises(KdaError, match="no GPU listed by nvidia-smi; pass --gpus"):
        campaign_run.plan(ROOT, ["norm_infer"], [], "claude", None)
    with pytest.raises(KdaError, match="a GPU is listed twice"):
        campaign_run.plan(ROOT, ["norm_infer"], ["0", "0"], "claude", None)
    with pytest.raises(KdaError, match="norm_infer: named twice"):
        campaign_run.plan(ROOT, ["norm_infer", "diffusion/kernels/norm_infer"], ["0"], "claude", None)
    with pytest.raises(KdaError, match="no task named 'nope'"):
        campaign_run.plan(ROOT, ["nope"], ["0"], "claude", None)
    with pytest.raises(KdaError, match="--rounds 0: expected at least 1"):
        campaign_run.plan(ROOT, ["norm_infer"], ["0"], "claude", 0)
    c = campaign_run.plan(ROOT, list(TASKS), ["0", "1"], "codex", 2)
    assert [s.launcher for s in c.slots] == ["scripts/launch_kernels/k01_fuse_scale_shift.sh",
                                             "scripts/launch_kernels/k03_norm_infer.sh",
                                             "scripts/launch_kernels/k04_rotary_embedding.sh"]
    assert all(s.state == "queued" for s in c.slots)


def test_three_tasks_on_two_gpus_never_share_a_gpu_and_each_run_ends_as_its_gate_says(tmp_path):
    repo = make_clone(tmp_path)
    log = tmp_path / "agent.log"
    env = clean_env(KDA_BIN=str(kda_wrapper(tmp_path)), KDA_SKIP_VENDOR="1",
                    KDA_WORKTREE_ROOT=str(tmp_path / "worktrees"), KDA_CACHE=str(tmp_path / "cache"),
                    KDA_GATE_CMD=GATE, KDA_CAMPAIGN_TEST_LOG=str(log), PYTHONPATH=str(ROOT))
    p = subprocess.run([sys.executable, "-c", "import sys; sys.path.pop(0); from kda.cli import main; "
                        "sys.exit(main())", "campaign", "run", *TASKS, "--gpus", "g0,g1", "--rounds", "2",
                        "--agent", AGENT], cwd=repo, env=env, capture_output=True, text=True, timeout=600)
    assert p.returncode == 1, p.stdout + p.stderr  # the broken agent's launcher exits non-zero
    cid = next(d.name for d in (repo / ".kda-campaign").iterdir())
    c = campaign_run.Campaign.load(repo, cid)
    assert [s.state for s in c.slots] == ["ended"] * 3 and {s.gpu for s in c.slots} == {"g0", "g1"}
    assert git(repo, "status", "--porcelain") == ""  # the campaign's files are ignored
    assert_each_gpu_held_alone(log)  # the third task waited for a GPU to come free
    by_task = {Path(s.task).name: s for s in c.slots}
    for name, s in by_task.items():
        wt = Path(s.worktree)
        m = agentrun.load_manifest(wt)
        assert (m["run_id"], m["gpu"], m["max_rounds"]) == (s.run_id, s.gpu, 2), m
        assert f"{name}: ended on GPU {s.gpu}, run {s.run_id}, rc {s.rc}" in p.stdout, p.stdout  # the log lines
    rounds = {n: agentrun.load_rounds(Path(s.worktree)) for n, s in by_task.items()}
    assert [h["status"] for h in rounds["fuse_scale_shift"]["history"]] == ["PASS"]
    assert [h["status"] for h in rounds["norm_infer"]["history"]] == ["FAIL", "FAIL"]  # the --rounds budget
    assert rounds["rotary_embedding"]["history"] == [] and by_task["rotary_embedding"].rc != 0
    ended = {n: agentrun.load_manifest(Path(s.worktree))["ended"]["why"] for n, s in by_task.items()}
    assert ended["fuse_scale_shift"] == "passed" and "round" in ended["norm_infer"], ended
    ledger = Path(by_task["norm_infer"].worktree) / "diffusion/kernels/norm_infer/docs/ledger.jsonl"
    entries = [json.loads(line) for line in ledger.read_text().splitlines()]
    assert [e["decision"] for e in entries[-2:]] == ["NO-GO", "NO-GO"]


def test_resume_queues_what_never_started_and_leaves_interrupted_runs(tmp_path):
    c = campaign_run.Campaign(id="20261128T000000Z-abcd", gpus=["0"], agent="claude", rounds=None, slots=[
        campaign_run.Slot(task="a", launcher="x", state="ended", rc=0),
        campaign_run.Slot(task="b", launcher="x", state="running"),
        campaign_run.Slot(task="c", launcher="x", state="not started")])
    c.save(tmp_path)
    back = campaign_run.resume(tmp_path, c.id)
    assert [s.state for s in back.slots] == ["ended", "interrupted", "queued"]
    c.slots[2].state = "ended"
    c.save(tmp_path)
    with pytest.raises(KdaError, match="every task has started; nothing to resume"):
        campaign_run.resume(tmp_path, c.id)
    with pytest.raises(KdaError, match="no such campaign"):
        campaign_run.resume(tmp_path, "nope")


def test_ctrl_c_stops_the_running_agents_records_their_end_and_leaves_the_queue_unstarted(tmp_path):
    repo = make_clone(tmp_path)
    log = tmp_path / "agent.log"
    env = clean_env(KDA_BIN=str(kda_wrapper(tmp_path)), KDA_SKIP_VENDOR="1",
                    KDA_WORKTREE_ROOT=str(tmp_path / "worktrees"), KDA_CACHE=str(tmp_path / "cache"),
                    KDA_GATE_CMD="exit 0", PYTHONPATH=str(ROOT))
    sleeper = f'echo started >> {log}; sleep 120'
    c = campaign_run.Campaign(id="20261128T000000Z-0001", gpus=["g0"], agent=sleeper, rounds=None, slots=[
        campaign_run.Slot(task="diffusion/kernels/fuse_scale_shift",
                          launcher="scripts/launch_kernels/k01_fuse_scale_shift.sh"),
        campaign_run.Slot(task="diffusion/kernels/norm_infer", launcher="scripts/launch_kernels/k03_norm_infer.sh")])
    from io import StringIO

    from rich.console import Console

    screen = StringIO()  # a terminal: the live table
    c = campaign_run.run(repo, c, env=env, poll_s=0.2, grace_s=20, console=Console(file=screen, force_terminal=True,
                                                                                   width=160),
                         stop=lambda: log.is_file() and "started" in log.read_text())
    assert f"kda campaign {c.id}" in screen.getvalue() and "not started" in screen.getvalue()
    first, second = c.slots
    assert (first.state, second.state) == ("ended", "not started") and second.run_id is None
    m = agentrun.load_manifest(Path(first.worktree))
    assert m["ended"]["why"].startswith("interrupted (Ctrl-C)"), m["ended"]
    assert campaign_run.Campaign.load(repo, c.id).slots[1].state == "not started"


def test_on_a_local_ray_cluster_each_run_gets_a_gpu_of_its_own_and_its_branches_come_back(tmp_path, monkeypatch):
    """--ray: three runs on a local Ray instance with two fake GPUs, launched in another checkout (a node's);
    every run's branches, its committed ledger included, are fetched into this one."""
    ray = pytest.importorskip("ray")
    from kda.loop import campaign_ray

    repo = make_clone(tmp_path)
    node = tmp_path / "node"
    subprocess.run(["git", "clone", "-q", str(repo), str(node)], check=True)
    log = tmp_path / "agent.log"
    env = clean_env(KDA_BIN=str(kda_wrapper(tmp_path)), KDA_SKIP_VENDOR="1",
                    KDA_WORKTREE_ROOT=str(tmp_path / "worktrees"), KDA_CACHE=str(tmp_path / "cache"),
                    KDA_GATE_CMD=GATE, KDA_CAMPAIGN_TEST_LOG=str(log), PYTHONPATH=str(ROOT))
    monkeypatch.setenv("KDA_ROOT", str(repo))  # not chdir: Ray's workers put the driver's cwd on sys.path, and the
    c = campaign_run.plan(repo, list(TASKS), ["ray"], AGENT, 2)  # clone's own `kda` would shadow this checkout's
    try:
        c = campaign_ray.run(repo, c, node_repo=str(node), env=env, init_kwargs={
            "num_cpus": 4, "num_gpus": 2, "runtime_env": {"env_vars": {"PYTHONPATH": str(ROOT)}}})
    finally:
        ray.shutdown()
    assert [s.state for s in c.slots] == ["ended"] * 3, [(s.state, s.log) for s in c.slots]
    assert {s.gpu.rsplit(":", 1)[1] for s in c.slots} <= {"0", "1"}
    assert_each_gpu_held_alone(log)
    by_task = {Path(s.task).name: s for s in c.slots}
    run = by_task["norm_infer"].run_id
    ledger = git(repo, "show", f"kda/norm_infer/{run}:diffusion/kernels/norm_infer/docs/ledger.jsonl")
    assert [json.loads(line)["decision"] for line in ledger.splitlines()][-2:] == ["NO-GO", "NO-GO"]
    assert git(repo, "rev-parse", f"kda-base/fuse_scale_shift/{by_task['fuse_scale_shift'].run_id}")
    assert by_task["rotary_embedding"].rc != 0 and by_task["fuse_scale_shift"].rc == 0
