"""scripts/gpu_tasks.sh on a CPU: which kda steps each mode runs, in which order, with python3 replaced by a stub
that records its arguments (the real steps need a GPU). A wrong branch here costs a GPU call's minutes there."""
import os
import subprocess
import textwrap

import pytest

from kda.core.paths import repo_root

STUB = textwrap.dedent("""\
    #!/usr/bin/env bash
    echo "$*" >> "$STUB_LOG"
    case "$*" in
      *gpu_slug*) echo h100 ;;
      *resolve_task*) echo "diffusion/kernels/${@: -1}" ;;
      *unprofiled_large_rows*) echo "row_a,row_b" ;;
      *warm_baseline.py*) echo "  2/2 built in 1 s" ;;
      "-m kda check"*--static*) exit "${STATIC_RC:-0}" ;;
      "-m kda bench"*) echo "rows passed: 2/2" ;;
      "-m kda profile"*) echo "profiled" ;;
    esac
    """)


def _run(tmp_path, args, **env):
    stub_dir = tmp_path / "bin"
    stub_dir.mkdir(exist_ok=True)
    stub = stub_dir / "python3"
    stub.write_text(STUB)
    stub.chmod(0o755)
    log = tmp_path / "calls.log"
    log.write_text("")
    full = {**os.environ, "PATH": f"{stub_dir}:{os.environ['PATH']}", "STUB_LOG": str(log),
            "OUT": str(tmp_path / "out"), **env}
    full.pop("KDA_WARM_JOBS", None)
    full.update(env)
    proc = subprocess.run(["bash", str(repo_root() / "scripts" / "gpu_tasks.sh"), *args], cwd=repo_root(), env=full,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    steps = [line for line in log.read_text().splitlines() if line.startswith(("-m kda", "scripts/"))]
    return steps, proc.stdout, tmp_path / "out"


def test_default_mode_runs_aa_static_rules_bench_then_the_named_profiles(tmp_path):
    steps, _, out = _run(tmp_path, ["fuse_scale_shift=r1,r2"], KDA_WARM_JOBS="4")
    assert steps[0].startswith("scripts/warm_baseline.py fuse_scale_shift --peer --jobs 4")
    assert [s.split(" --save-csv")[0] for s in steps[1:]] == [
        "-m kda bench fuse_scale_shift --aa", "-m kda check fuse_scale_shift --static", "-m kda bench fuse_scale_shift",
        "-m kda profile fuse_scale_shift --row r1 --compare", "-m kda profile fuse_scale_shift --row r2 --compare"]
    assert sorted(p.name for p in out.iterdir()) == ["logs.tar", "results.tar"]


def test_profile_only_runs_no_bench_no_warm_up_and_reads_large_rows_from_the_kept_file(tmp_path):
    steps, stdout, _ = _run(tmp_path, ["--profile-only", "group_norm_silu=@large"], KDA_WARM_JOBS="8")
    assert [s.split(" --save-csv")[0] for s in steps] == [
        "-m kda profile group_norm_silu --row row_a --compare", "-m kda profile group_norm_silu --row row_b --compare"]
    assert "large rows to profile: row_a,row_b" in stdout


def test_a_broken_static_rule_stops_the_bench_and_its_profiles(tmp_path):
    steps, stdout, _ = _run(tmp_path, ["--bench-only", "norm_infer=r1"], STATIC_RC="1")
    assert steps == ["-m kda check norm_infer --static"]
    assert "static rules broken, no bench" in stdout


@pytest.mark.parametrize("mode,expected", [("--aa-only", ["-m kda bench rotary_embedding --aa"]),
                                           ("--bench-only", ["-m kda check rotary_embedding --static",
                                                             "-m kda bench rotary_embedding"]),
                                           ("--cold-only", ["-m kda check rotary_embedding --static",
                                                            "-m kda bench rotary_embedding --cold"]),
                                           ("--sweep-only", ["-m kda check rotary_embedding --static",
                                                             "-m kda bench rotary_embedding --sweep 64"])])
def test_single_step_modes(tmp_path, mode, expected):
    steps, _, _ = _run(tmp_path, [mode, "rotary_embedding"])
    assert steps == expected


def test_results_tar_holds_each_kept_path_once(tmp_path):
    """docs/profile is kept once per profiled row; named twice, tar would store the second copy as hard links, which
    kda intake then had to refuse (2026-11-26)."""
    import tarfile

    _, _, out = _run(tmp_path, ["--profile-only", "group_norm_silu=@large"])
    with tarfile.open(out / "results.tar") as tar:
        members = tar.getmembers()
    names = [m.name for m in members]
    assert any("/docs/profile/" in n for n in names)
    assert not [m.name for m in members if m.islnk()] and len(names) == len(set(names))


def test_the_sweep_size_comes_from_kda_sweep_n(tmp_path):
    steps, _, _ = _run(tmp_path, ["--sweep-only", "norm_infer"], KDA_SWEEP_N="8")
    assert steps == ["-m kda check norm_infer --static", "-m kda bench norm_infer --sweep 8"]


def test_a_sweep_warms_its_own_rows_peer_and_baseline_before_the_bench(tmp_path):
    steps, stdout, _ = _run(tmp_path, ["--sweep-only", "qknorm_rope"], KDA_SWEEP_N="16", KDA_WARM_JOBS="6")
    assert steps == ["scripts/warm_baseline.py qknorm_rope --peer --sweep 16 --jobs 6",
                     "scripts/warm_baseline.py qknorm_rope --sweep 16 --jobs 6",
                     "-m kda check qknorm_rope --static", "-m kda bench qknorm_rope --sweep 16"]
    assert "sweep --peer warm-up: rc=0" in stdout and "sweep baseline warm-up: rc=0" in stdout
