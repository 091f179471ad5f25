"""kda/cli.py: the command line, end to end in a subprocess (no GPU needed)."""
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from kda import cli

ROOT = Path(__file__).resolve().parents[1]


def kda(*args, **env):
    e = {**os.environ, "COLUMNS": "250", "CUDA_VISIBLE_DEVICES": "", **env}
    return subprocess.run([sys.executable, "-m", "kda", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=120, env=e)


def test_tasks_lists_fuse_scale_shift():
    p = kda("tasks")
    assert p.returncode == 0, p.stderr
    assert "fuse_scale_shift" in p.stdout and "diffusion" in p.stdout
    assert "sglang.jit_kernel.diffusion.triton.scale_shift:fuse_scale_shift_kernel" in p.stdout


def test_check_unknown_task_exits_2_with_message():
    p = kda("check", "nonexistent_task", "--cpu")
    assert p.returncode == 2
    assert "kda: error: no task named 'nonexistent_task'" in p.stderr
    known = p.stderr.split("known tasks: ", 1)[1].strip().split(", ")
    assert known == sorted(known) and set(known) == {c.parent.name for c in ROOT.glob("*/kernels/*/config.toml")}
    assert "Traceback" not in p.stderr


def test_check_static_passes_the_solution_and_names_a_broken_rule(tmp_path):
    p = kda("check", "fuse_scale_shift", "--static")
    assert p.returncode == 0, p.stdout + p.stderr
    assert "keeps every static rule" in p.stdout
    p = kda("check", "fuse_scale_shift", "--static", "--candidate", str(ROOT / "tests/zoo/calls_oracle.py"))
    assert p.returncode == 1
    assert "fuse_scale_shift: calls_oracle.py:" in p.stdout and "'sys'" in p.stdout, p.stdout
    bad = tmp_path / "imports_ctypes.py"
    bad.write_text("import ctypes\n\n\ndef fuse_scale_shift_kernel(x, scale, shift, *a, out=None):\n    return out\n")
    p = kda("check", "fuse_scale_shift", "--static", "--candidate", str(bad))
    assert p.returncode == 1 and "imports_ctypes.py:1: imports 'ctypes'" in p.stdout, p.stdout


def test_check_static_reads_every_file_of_solution_whatever_the_candidate_names(tmp_path):
    root = tmp_path / "root"
    dst = root / "diffusion" / "kernels" / "fuse_scale_shift"
    shutil.copytree(ROOT / "diffusion" / "kernels" / "fuse_scale_shift", dst,
                    ignore=shutil.ignore_patterns("results", "docs", "__pycache__"))
    (root / "pyproject.toml").write_text("")
    (dst / "solution" / "unused.py").write_text("import torch\n\nt = torch\n")
    p = kda("check", "fuse_scale_shift", "--static", "--candidate", str(ROOT / "tests/zoo/static_logging_time.py"),
            KDA_ROOT=str(root))
    assert p.returncode == 1
    lines = p.stdout.splitlines()
    assert lines[0].startswith("fuse_scale_shift: static_logging_time.py:11: imports 'logging' (rule import: "), lines
    assert any(line.startswith("fuse_scale_shift: unused.py:3: uses torch (rule module-value: ") for line in lines)


def test_bench_without_gpu_exits_2():
    p = kda("bench", "fuse_scale_shift")
    assert p.returncode == 2
    assert "no CUDA GPU is visible" in p.stderr and "--cpu" in p.stderr
    assert "Traceback" not in p.stderr


def test_usage_errors(capsys):
    with pytest.raises(SystemExit) as e:
        cli.main([])
    assert e.value.code == 2
    with pytest.raises(SystemExit) as e:
        cli.main(["bench", "fuse_scale_shift", "--cpu"])  # --cpu belongs to check only
    assert e.value.code == 2
    assert "--cpu" in capsys.readouterr().err


def test_parser_options():
    a = cli.build_parser().parse_args(["check", "t", "--cpu", "--rows", "a,b", "--salt", "7"])
    assert a.fn is cli.cmd_check and a.cpu and a.rows == "a,b" and a.salt == 7
    a = cli.build_parser().parse_args(["bench", "t", "--aa", "--no-write"])
    assert a.fn is cli.cmd_bench and a.aa and a.no_write and a.salt is None
    a = cli.build_parser().parse_args(["run"])
    assert a.fn is cli.cmd_run and a.task is None


def test_kda_error_is_printed_without_traceback(capsys, monkeypatch):
    monkeypatch.setattr(cli, "_has_gpu", lambda: False)
    assert cli.main(["bench", "fuse_scale_shift"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("kda: error: no CUDA GPU is visible")


def test_archive_supersedes_a_committed_results_file_through_git(tmp_path):
    """`kda archive TASK FILE`: the file leaves the tree, the ledger entry citing it names the commit holding it
    (which `kda verify` then reads), nothing goes to a history folder; an uncommitted file is refused."""
    import json

    from kda.evidence import ledger
    from kda.harness import results_file

    repo = tmp_path / "repo"
    task = repo / "kernels" / "t"
    (task / "docs").mkdir(parents=True)
    (task / "config.toml").write_text("")
    res = results_file.write(task / "results" / "h100.jsonl.gz",
                             [{"type": "provenance", "commit": None, "gpu_slug": "h100"}, {"type": "summary"}])
    e = {"id": "L0001", "parent": None, "round": 0, "time_utc": "2026-11-25T00:00:00Z", "kind": "measurement",
         "hypothesis": "", "change": "bench", "source_hash": "a" * 64, "results_ref": ledger.results_ref(task, res),
         "metrics": {}, "decision": None, "reason": "r", "author": "t"}
    (task / "docs" / "ledger.jsonl").write_text(json.dumps(e) + "\n")
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], cwd=repo, check=True)
    subprocess.run([*git, "add", "kernels/t/config.toml"], cwd=repo, check=True)
    subprocess.run([*git, "commit", "-qm", "task"], cwd=repo, check=True)
    p = kda("archive", str(task), "results/h100.jsonl.gz")
    assert p.returncode == 2 and "not committed" in p.stderr and res.exists()
    subprocess.run([*git, "add", "-A"], cwd=repo, check=True)
    subprocess.run([*git, "commit", "-qm", "run"], cwd=repo, check=True)
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo, capture_output=True, text=True).stdout.strip()
    p = kda("archive", str(task), "results/h100.jsonl.gz")
    assert p.returncode == 0, p.stderr
    assert f"ledger L0001 now read it from git at {head[:12]}" in p.stdout
    assert not res.exists() and not (task / "results" / "history").exists()
    assert json.loads((task / "docs" / "ledger.jsonl").read_text())["results_ref"]["commit"] == head


def test_run_without_a_gpu_checks_the_covering_sample_and_says_how_to_check_all(monkeypatch, capsys):
    from kda.definition.sample import representative
    from kda.definition.task import Task

    seen = {}
    monkeypatch.setattr(cli, "_has_gpu", lambda: False)
    monkeypatch.setattr(cli, "_run", lambda args, mode: seen.update(mode=mode, rows=args.rows, salt=args.salt,
                                                                    cpu=args.cpu) or 0)
    assert cli.main(["run"]) == 0
    rows = Task.load(cli.DEFAULT_TASK).select(cpu_only=True)
    want = representative(rows, cli.CPU_SAMPLE_ROWS)
    assert seen == {"mode": "check", "rows": ",".join(r.id for r in want), "salt": cli.CPU_SALT, "cpu": True}
    assert 0 < len(want) < len(rows)
    err = capsys.readouterr().err
    assert f"{len(want)} of its {len(rows)} CPU rows" in err and "kda run --full" in err
    assert all(len(line) <= 80 for line in err.splitlines())
    seen.clear()
    assert cli.main(["run", "--full"]) == 0
    assert seen["rows"] is None and f"all {len(rows)} CPU rows" in capsys.readouterr().err


@pytest.mark.slow
def test_check_sweep_on_the_cpu_draws_rows_outside_workloads_json_and_checks_them(tmp_path):
    """End to end: `kda check TASK --cpu --sweep 2` draws from the domain's CPU end, hands the rows to the worker in a
    file of their own (--rows-file) and checks them; workloads.json is untouched and nothing is written."""
    workloads = ROOT / "diffusion" / "kernels" / "fuse_scale_shift" / "bench" / "workloads.json"
    before = workloads.read_bytes()
    out = tmp_path / "run.json"
    p = kda("check", "fuse_scale_shift", "--cpu", "--sweep", "2", "--sweep-seed", "3", "--salt", "7", "--json", str(out))
    assert p.returncode == 0, p.stdout + p.stderr
    run = __import__("json").loads(out.read_text())
    assert [r["id"].split("_")[:2] for r in run["rows"]] == [["sweep", "0"], ["sweep", "1"]]
    assert all(r["status"] == "PASS" and r["params"] for r in run["rows"])
    assert run["provenance"]["sweep"]["seed"] == 3 and run["provenance"]["sweep"]["cpu"]
    assert "sweep: 2 rows drawn with seed 3 from the CPU end of its domain" in p.stdout
    assert "path" not in run and workloads.read_bytes() == before


def test_sweep_usage_errors(capsys):
    assert cli.main(["check", "fuse_scale_shift", "--cpu", "--sweep", "2", "--rows", "x"]) == 2
    assert "--sweep draws its own rows" in capsys.readouterr().err
    assert cli.main(["check", "fuse_scale_shift", "--cpu", "--sweep-seed", "2"]) == 2
    assert "--sweep-seed needs --sweep N" in capsys.readouterr().err


def test_cold_usage_errors(capsys):
    assert cli.main(["bench", "fuse_scale_shift", "--cold", "--aa"]) == 2
    assert "--cold times the production rows" in capsys.readouterr().err
    assert cli.main(["bench", "fuse_scale_shift", "--cold", "--sweep", "4"]) == 2
