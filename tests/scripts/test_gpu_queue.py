"""scripts/gpu_queue.py on a CPU: the scheduler with each job's command replaced by a short shell step that writes
what the real job would (the real ones need GPUs). A wrong schedule costs a multi-GPU call's minutes there."""
import json
import tarfile

import pytest

from script_support import load_script

Q = load_script("gpu_queue")


def _fake_command(job):
    where = f"diffusion/e2e/{job.name}" if job.mode == "e2e" else f"diffusion/kernels/{job.name}"
    return ["bash", "-c", f"mkdir -p {where}/results && echo \"$CUDA_VISIBLE_DEVICES\" > {where}/results/{job.mode}.txt"
            f" && sleep 0.3 && echo '{job.name} {job.mode}: rc=0 rows passed: 3/3'" + ("; exit 3" if job.mode == "aa" else "")]


@pytest.fixture
def queue(tmp_path, monkeypatch):
    monkeypatch.setattr(Q, "command", _fake_command)
    monkeypatch.setattr(Q, "POLL_S", 0.05)
    (tmp_path / "repo").mkdir()
    labels = ["bench:norm_infer", "aa:norm_infer", "bench:rotary_embedding", "sweep:rotary_embedding", "e2e:wan",
              "aa:fuse_scale_shift"]
    (tmp_path / "jobs.json").write_text(json.dumps({"jobs": labels, "gpus": 3}))
    Q.Queue(tmp_path, Q.parse_jobs(labels), gpus=3).run()
    return tmp_path, labels


def test_every_job_runs_once_on_some_gpu_and_two_jobs_of_one_task_never_overlap(queue):
    work, labels = queue
    events = Q.read_state(work)
    started = {e["job"]: e for e in events if e.get("state") == "started"}
    done = {e["job"]: e for e in events if e.get("state") == "done"}
    assert set(started) == set(done) == set(labels)
    assert {e["gpu"] for e in started.values()} == {0, 1, 2}
    a, b = "bench:norm_infer", "aa:norm_infer"
    assert started[b]["t"] >= done[a]["t"]  # both append to the task's ledger: the A/A run waits for the bench
    # a sweep writes no ledger line: it ran beside its task's bench
    s, d = started["sweep:rotary_embedding"], done["bench:rotary_embedding"]
    assert s["t"] < d["t"] and s["gpu"] != started["bench:rotary_embedding"]["gpu"]
    assert done["aa:fuse_scale_shift"]["rc"] == 3 and all(done[j]["rc"] == 0 for j in labels if j.startswith("b"))
    assert events[-1]["state"] == "queue done"
    # each job saw exactly the GPU the scheduler recorded for it
    seen = (work / "repo/diffusion/kernels/rotary_embedding/results/bench.txt").read_text().strip()
    assert seen == str(started["bench:rotary_embedding"]["gpu"])


def test_results_tar_holds_the_task_folders_and_e2e_tar_the_blocks(queue):
    work, _ = queue
    with tarfile.open(work / "results.tar") as tar:
        names = set(tar.getnames())
    assert "diffusion/kernels/norm_infer/results/aa.txt" in names
    assert "diffusion/kernels/rotary_embedding/results/bench.txt" in names
    assert not any(n.startswith("diffusion/e2e") for n in names)
    with tarfile.open(work / "e2e.tar") as tar:
        assert "diffusion/e2e/wan/results/e2e.txt" in tar.getnames()


def test_wait_packs_into_out_and_summarises_each_job_within_80_columns(queue, tmp_path, capsys):
    work, labels = queue
    out = tmp_path / "out"
    assert Q.main(["wait", str(work), "--for", "5", "--out", str(out)]) == 0
    assert [p.name for p in out.iterdir()] == ["queue"]  # a folder of its own: gpu_tasks.sh writes OUT/results.tar
    out = out / "queue"
    assert sorted(p.name for p in out.iterdir()) == ["e2e.tar", "logs.tar", "queue.txt", "results.tar"]
    text = (out / "queue.txt").read_text()
    assert all(len(line) <= 80 for line in text.splitlines())
    for label in labels:
        assert label in text
    assert "rc=3" in text and "rotary_embedding bench: rc=0 rows passed: 3/3" in text


@pytest.mark.parametrize("spec,why", [("bench", "expected MODE:NAME"), ("time:norm_infer", "expected MODE:NAME"),
                                      ("bench:", "expected MODE:NAME")])
def test_a_malformed_job_is_refused_with_what_was_expected(spec, why):
    with pytest.raises(SystemExit, match=why):
        Q.parse_jobs([spec])


def test_a_job_named_twice_or_an_unknown_task_or_block_is_refused_before_anything_is_copied(tmp_path):
    with pytest.raises(SystemExit, match="named twice"):
        Q.parse_jobs(["bench:norm_infer", "bench:norm_infer"])
    with pytest.raises(SystemExit, match="no block"):
        Q.main(["start", str(tmp_path / "w"), "e2e:no_such_block", "--gpus", "1"])
    with pytest.raises(Exception, match="no_such_task"):
        Q.main(["start", str(tmp_path / "w"), "bench:no_such_task", "--gpus", "1"])
    assert not (tmp_path / "w").exists()


def test_a_gated_job_waits_for_its_file_and_the_others_do_not_wait_for_it(tmp_path, monkeypatch):
    monkeypatch.setattr(Q, "command", _fake_command)
    monkeypatch.setattr(Q, "POLL_S", 0.05)
    (tmp_path / "repo").mkdir()
    gate = tmp_path / "bundle.ok"
    jobs = Q.parse_jobs([f"sweep:cutedsl_norm_scale_shift@{gate}", "sweep:norm_infer", "cold:norm_infer"])
    assert jobs[0].label == "sweep:cutedsl_norm_scale_shift" and jobs[0].gate == str(gate)
    import threading
    opened = threading.Timer(0.8, gate.touch)
    opened.start()
    Q.Queue(tmp_path, jobs, gpus=2).run()
    started = {e["job"]: e["t"] for e in Q.read_state(tmp_path) if e.get("state") == "started"}
    done = {e["job"]: e["t"] for e in Q.read_state(tmp_path) if e.get("state") == "done"}
    assert started["sweep:norm_infer"] < started["sweep:cutedsl_norm_scale_shift"]
    # sweep and cold runs of one task write different files and no ledger: they ran side by side
    assert started["cold:norm_infer"] < done["sweep:norm_infer"]
    # the state's times are rounded to 0.1 s (Queue._event): a start just after the gate may read up to 0.05 s early
    assert started["sweep:cutedsl_norm_scale_shift"] >= gate.stat().st_mtime - 0.06


def test_a_job_gated_on_another_jobs_done_marker_starts_after_it_finishes(tmp_path, monkeypatch):
    monkeypatch.setattr(Q, "command", _fake_command)
    monkeypatch.setattr(Q, "POLL_S", 0.05)
    (tmp_path / "repo").mkdir()
    jobs = Q.parse_jobs([f"e2e:wan@{tmp_path}/done/bench-cutedsl_norm_scale_shift", "bench:cutedsl_norm_scale_shift",
                         "aa:norm_infer"])
    Q.Queue(tmp_path, jobs, gpus=2).run()
    events = Q.read_state(tmp_path)
    started = {e["job"]: e["t"] for e in events if e.get("state") == "started"}
    done = {e["job"]: e for e in events if e.get("state") == "done"}
    assert started["e2e:wan"] >= done["bench:cutedsl_norm_scale_shift"]["t"]
    # a failed job leaves its marker too (with its exit status), so nothing waits forever behind it
    assert (tmp_path / "done" / "aa-norm_infer").read_text() == "3\n" and done["aa:norm_infer"]["rc"] == 3
    assert (tmp_path / "done" / "e2e-wan").read_text() == "0\n"


def test_commands_per_mode_and_the_e2e_arguments_from_the_environment(monkeypatch):
    monkeypatch.delenv("KDA_E2E_ARGS", raising=False)
    assert Q.command(Q.Job("sweep", "norm_infer")) == ["bash", "scripts/gpu_tasks.sh", "--sweep-only", "norm_infer"]
    assert Q.command(Q.Job("e2e", "wan"))[-3:] == ["kda", "e2e", "wan"]
    monkeypatch.setenv("KDA_E2E_ARGS", "--skip-arm compile --trials 5")
    assert Q.command(Q.Job("e2e", "wan"))[-5:] == ["wan", "--skip-arm", "compile", "--trials", "5"]
    monkeypatch.setenv("KDA_E2E_ARGS_qwen_image", "--trials 3")  # one block's own arguments, the others unchanged
    assert Q.command(Q.Job("e2e", "qwen_image"))[-3:] == ["qwen_image", "--trials", "3"]
    assert Q.command(Q.Job("e2e", "wan"))[-3:] == ["compile", "--trials", "5"]


def test_a_trajectory_job_runs_the_sampled_stack_and_packs_with_the_blocks(monkeypatch):
    monkeypatch.setenv("KDA_E2E_ARGS", "--skip-arm compile")  # the timing run's, not the trajectory's
    monkeypatch.setenv("KDA_TRAJ_ARGS", "--steps 10")
    assert Q.command(Q.Job("traj", "wan"))[-5:] == ["e2e", "wan", "--trajectory", "--steps", "10"]
    assert Q.kept_paths(Q.Job("traj", "wan")) == ["diffusion/e2e/wan/results"]
    with pytest.raises(SystemExit, match="no block"):
        Q.kept_paths(Q.Job("traj", "no_such_block"))
    assert [j.label for j in Q.parse_jobs(["e2e:wan", "traj:wan"])] == ["e2e:wan", "traj:wan"]


def test_the_zoo_job_writes_its_page_into_its_own_folder_and_only_for_the_zoo_task(tmp_path):
    cmd = Q.command(Q.Job("zoo", "fuse_scale_shift"))
    assert cmd[:2] == ["bash", "-c"] and "scripts/gpu_exploit_zoo.py" in cmd[2] and "--bench-probe" in cmd[2]
    assert '"$OUT/exploit-zoo.md"' in cmd[2]  # the job's $OUT, expanded when it runs, not the caller's
    assert Q.kept_paths(Q.Job("zoo", "fuse_scale_shift")) == []  # nothing for kda intake: it comes in logs.tar
    with pytest.raises(SystemExit, match="zoo:fuse_scale_shift"):
        Q.kept_paths(Q.Job("zoo", "norm_infer"))
    assert Q.Job("zoo", "fuse_scale_shift").writes != Q.Job("bench", "fuse_scale_shift").writes  # no ledger line
