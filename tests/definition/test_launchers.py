"""Launchers: `kda launchers render [--check]` against the template, and a dry run of the generated launcher in a
throwaway clone (branches, worktree, manifest, brief, settings, the refusals, the agent command)."""
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from agentrun_support import LAUNCHER, ROOT, TASK_PATH, clean_env, git, launch, make_clone, worktree_of
from kda.loop import agentrun
from kda import cli
from kda.definition import launchers

RUN = "20260101T000000Z-abcd"


# ---- render --------------------------------------------------------------------------------------------------

def test_committed_launchers_match_the_template(capsys, monkeypatch):
    monkeypatch.setenv("KDA_ROOT", str(ROOT))
    assert cli.main(["launchers", "render", "--check"]) == 0, capsys.readouterr().err
    text = (ROOT / LAUNCHER).read_text()
    assert f'KDA_TASK_PATH="{TASK_PATH}"' in text and "lib/launch.sh" in text
    assert os.access(ROOT / LAUNCHER, os.X_OK)


@pytest.fixture
def mini_root(tmp_path, monkeypatch):
    root = tmp_path / "root"
    for rel in ("scripts/launch_kernels", "templates/launch_task.sh.j2", f"{TASK_PATH}/config.toml"):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (shutil.copytree if (ROOT / rel).is_dir() else shutil.copy2)(ROOT / rel, root / rel)
    (root / "pyproject.toml").write_text("")
    # Only the pilot lives in this mini repository: keep its launcher and index entry, drop the other tasks'.
    launch_dir = root / "scripts" / "launch_kernels"
    for f in launch_dir.glob("k*_*.sh"):
        if f.name != LAUNCHER.split("/")[-1]:
            f.unlink()
    (launch_dir / "index.toml").write_text(f'[[launcher]]\nnumber = 1\ntask = "{TASK_PATH}"\n')
    monkeypatch.setenv("KDA_ROOT", str(root))
    return root


def test_check_finds_drift_and_render_fixes_it(mini_root):
    assert launchers.render(mini_root, check=True) == ([], [])
    k01 = mini_root / LAUNCHER
    k01.write_text(k01.read_text() + "echo extra\n")
    problems, _ = launchers.render(mini_root, check=True)
    assert problems == [f"{k01}: differs from the template (run `kda launchers render`)"]
    k01.chmod(0o644)
    _, written = launchers.render(mini_root)
    assert written == [k01] and os.access(k01, os.X_OK) and launchers.render(mini_root, check=True) == ([], [])
    k01.unlink()
    assert "missing" in launchers.render(mini_root, check=True)[0][0]
    launchers.render(mini_root)
    (mini_root / "templates" / "launch_task.sh.j2").write_text("# new template {{ label }}\n")
    assert "differs from the template" in launchers.render(mini_root, check=True)[0][0]


def test_new_task_gets_the_next_number_and_stale_files_are_reported(mini_root):
    new = mini_root / "diffusion" / "kernels" / "aaa_new"
    new.mkdir()
    shutil.copy2(mini_root / TASK_PATH / "config.toml", new / "config.toml")
    problems, _ = launchers.render(mini_root, check=True)
    assert any("diffusion/kernels/aaa_new has no launcher number" in p for p in problems)
    problems, written = launchers.render(mini_root)
    assert problems == []
    assert mini_root / "scripts/launch_kernels/k02_aaa_new.sh" in written  # appended, k01 keeps its number
    idx = launchers.load_index(mini_root)
    assert [(e["number"], e["task"]) for e in idx] == [(1, TASK_PATH), (2, "diffusion/kernels/aaa_new")]
    (mini_root / "scripts/launch_kernels/k09_gone.sh").write_text("#!/bin/sh\n")
    assert any("k09_gone.sh: a launcher no index entry generates" in p for p in launchers.render(mini_root, check=True)[0])


def test_index_errors_name_the_key(mini_root):
    (mini_root / launchers.INDEX).write_text('[[launcher]]\nnumber = 1\ntask = "a"\n[[launcher]]\nnumber = 1\ntask = "b"\n')
    with pytest.raises(Exception, match=r"index.toml: key 'launcher\[1\].number': 1 is used twice"):
        launchers.load_index(mini_root)


# ---- the launcher in a clone ---------------------------------------------------------------------------------

@pytest.fixture
def clone(tmp_path):
    return make_clone(tmp_path)


def branches(repo: Path) -> set[str]:
    return set(git(repo, "for-each-ref", "--format=%(refname:short)", "refs/heads").splitlines())


def test_dry_run_creates_branches_worktree_and_run_files(clone, tmp_path):
    base = git(clone, "rev-parse", "HEAD")
    p = launch(clone, tmp_path, KDA_NO_CLAUDE="1", KDA_RUN_ID=RUN, KDA_GPU="3", KDA_EFFORT="high")
    assert p.returncode == 0, p.stderr
    wt = worktree_of(tmp_path, RUN)
    branch, review = f"kda/fuse_scale_shift/{RUN}", f"kda-base/fuse_scale_shift/{RUN}"
    assert {branch, review} <= branches(clone)
    assert git(clone, "rev-parse", branch) == git(clone, "rev-parse", review) == base
    assert f"worktree {wt}" in git(clone, "worktree", "list", "--porcelain")
    assert git(wt, "rev-parse", "--abbrev-ref", "HEAD") == branch
    for text in (str(wt), branch, review, "claude --model opus --permission-mode bypassPermissions --effort high",
                 "KDA_NO_CLAUDE=1: not starting the agent"):
        assert text in p.stdout, (text, p.stdout)
    m = agentrun.load_manifest(wt)  # schema-checked
    assert (m["task"], m["task_path"], m["run_id"], m["base_commit"], m["base_ref"]) == \
        ("fuse_scale_shift", TASK_PATH, RUN, base, "main")
    assert (m["branch"], m["review_base"], m["worktree"], m["gpu"], m["max_rounds"]) == (branch, review, str(wt), "3", 8)
    assert m["agent"]["kind"] == "claude" and m["agent"]["model"] == "opus" and m["agent"]["effort"] == "high"
    assert m["agent"]["command"] in p.stdout and m["ended"] is None and m["time_utc"].endswith("Z")
    brief = (wt / ".kda" / "BRIEF.md").read_text()
    assert (clone / TASK_PATH / "prompt.md").read_text().strip()[:200] in brief
    assert "| `min_geomean` | 1.0 |" in brief and "| `max_rounds` | 8 |" in brief and "kda gate" in brief
    assert "| `min_graph_peer_row_ci` | 1.0 | no production row whose 95% interval of graph_us" in brief
    assert "CUDA_VISIBLE_DEVICES" in brief
    # the evidence the task folder holds, counted when the run starts (kda.loop.evidence); the clone's ledger is
    # blank, so no NO-GO line
    assert "## Evidence already here" in brief and f"`kda profile {TASK_PATH} --row ROW --compare` (GPU)" in brief
    assert "NO-GO entries in" not in brief
    hooks = json.loads((wt / ".claude" / "settings.json").read_text())["hooks"]["Stop"][0]["hooks"]
    assert hooks[0]["type"] == "command" and hooks[0]["command"].endswith("kda hook stop") and hooks[0]["timeout"] == 7200
    # the run files cannot be committed by accident
    assert git(wt, "status", "--porcelain") == ""
    git(wt, "add", "-A")
    assert git(wt, "diff", "--cached", "--name-only") == ""


def test_refuses_a_dirty_tree_unless_allowed(clone, tmp_path):
    (clone / "scratch.txt").write_text("wip\n")
    before = branches(clone)
    p = launch(clone, tmp_path, KDA_NO_CLAUDE="1", KDA_RUN_ID=RUN)
    assert p.returncode == 1 and "uncommitted changes" in p.stderr and "scratch.txt" in p.stderr
    assert "KDA_ALLOW_DIRTY=1" in p.stderr
    assert branches(clone) == before and not worktree_of(tmp_path, RUN).exists()
    p = launch(clone, tmp_path, KDA_NO_CLAUDE="1", KDA_RUN_ID=RUN, KDA_ALLOW_DIRTY="1")
    assert p.returncode == 0, p.stderr
    assert not (worktree_of(tmp_path, RUN) / "scratch.txt").exists()  # uncommitted work is not in the worktree


def test_refuses_an_existing_branch_or_worktree_path(clone, tmp_path):
    git(clone, "branch", f"kda/fuse_scale_shift/{RUN}")
    p = launch(clone, tmp_path, KDA_NO_CLAUDE="1", KDA_RUN_ID=RUN)
    assert p.returncode == 1 and f"the branch kda/fuse_scale_shift/{RUN} already exists" in p.stderr
    git(clone, "branch", "-D", f"kda/fuse_scale_shift/{RUN}")
    worktree_of(tmp_path, RUN).mkdir(parents=True)
    p = launch(clone, tmp_path, KDA_NO_CLAUDE="1", KDA_RUN_ID=RUN)
    assert p.returncode == 1 and "already exists" in p.stderr and "worktree path" in p.stderr
    assert f"kda-base/fuse_scale_shift/{RUN}" not in branches(clone)


def test_refuses_a_base_without_the_task(clone, tmp_path):
    empty = git(clone, "commit-tree", "4b825dc642cb6eb9a060e54bf8d69288fbee4904", "-m", "empty")
    git(clone, "branch", "no-task", empty)
    p = launch(clone, tmp_path, KDA_NO_CLAUDE="1", KDA_BASE_BRANCH="no-task")
    assert p.returncode == 1 and f"has no task folder {TASK_PATH}" in p.stderr and "KDA_BASE_BRANCH" in p.stderr
    p = launch(clone, tmp_path, KDA_NO_CLAUDE="1", KDA_BASE_BRANCH="no-such-branch")
    assert p.returncode == 1 and "does not name a commit" in p.stderr
    assert not any(b.startswith("kda") for b in branches(clone))


def test_run_id_format_and_bad_override(clone, tmp_path):
    p = launch(clone, tmp_path, KDA_NO_CLAUDE="1")
    assert p.returncode == 0, p.stderr
    (wt,) = list((tmp_path / "worktrees").iterdir())
    run_id = wt.name.removeprefix("fuse_scale_shift-")
    assert agentrun._run_id(run_id) is None  # YYYYmmddTHHMMSSZ-xxxx
    p = launch(clone, tmp_path, KDA_NO_CLAUDE="1", KDA_RUN_ID="tomorrow")
    assert p.returncode == 1 and "is not YYYYmmddTHHMMSSZ-xxxx" in p.stderr


def test_needs_bash_4(clone):
    p = subprocess.run(["sh", str(clone / "scripts/launch_kernels/lib/launch.sh"), TASK_PATH, "x"],
                       capture_output=True, text=True, env=clean_env())
    assert p.returncode == 1 and "bash >= 4 is required" in p.stderr


@pytest.mark.skipif(os.getuid() != 0, reason="the root rule only applies to root")
def test_root_without_is_sandbox_refuses_bypass_before_creating_anything(clone, tmp_path):
    p = launch(clone, tmp_path, KDA_RUN_ID=RUN, KDA_CLAUDE_BIN="true")
    assert p.returncode == 1 and "IS_SANDBOX=1" in p.stderr and "refuses" in p.stderr
    assert not any(b.startswith("kda") for b in branches(clone))
    p = launch(clone, tmp_path, KDA_RUN_ID=RUN, KDA_NO_CLAUDE="1")  # a dry run only warns
    assert p.returncode == 0 and "IS_SANDBOX=1" in p.stderr


def test_execs_claude_with_model_effort_permission_flags(clone, tmp_path):
    fake = tmp_path / "bin" / "fake-claude"
    fake.parent.mkdir(parents=True, exist_ok=True)
    fake.write_text('#!/bin/sh\nprintf "%s\\n" "$PWD" "$KDA_BRIEF" "$CUDA_VISIBLE_DEVICES" "$@" > "$FAKE_OUT"\n')
    fake.chmod(0o755)
    out = tmp_path / "claude-args.txt"
    p = launch(clone, tmp_path, KDA_RUN_ID=RUN, KDA_CLAUDE_BIN=str(fake), FAKE_OUT=str(out), IS_SANDBOX="1",
               KDA_MODEL="sonnet", KDA_PERMISSION_MODE="acceptEdits", KDA_GPU="1")
    assert p.returncode == 0, p.stderr
    wt = worktree_of(tmp_path, RUN)
    lines = out.read_text().splitlines()
    assert lines[:3] == [str(wt), str(wt / ".kda" / "BRIEF.md"), "1"]
    assert lines[3:7] == ["--model", "sonnet", "--permission-mode", "acceptEdits"]
    assert "BRIEF.md" in lines[-1]


def test_agent_cmd_gets_the_brief(clone, tmp_path):
    out = tmp_path / "agent.txt"
    # the agent exits without a Stop hook, so the driver gates it on exit (kda/loop/drive.py): a stand-in gate
    # that passes, as the CPU gate itself takes minutes and this test is about the brief
    p = launch(clone, tmp_path, KDA_RUN_ID=RUN, KDA_AGENT_CMD=f'echo "$1|$KDA_BRIEF|$PWD" > {out}',
               KDA_GATE_CMD="true")
    assert p.returncode == 0, p.stderr
    wt = worktree_of(tmp_path, RUN)
    brief = wt / ".kda" / "BRIEF.md"
    assert out.read_text().strip() == f"{brief}|{brief}|{wt}"
    m = agentrun.load_manifest(wt)
    assert m["agent"]["kind"] == "custom" and m["agent"]["model"] is None and "echo" in m["agent"]["command"]
    assert m["ended"]["why"] == "passed" and agentrun.load_rounds(wt)["rounds"] == 1  # one gate round, on exit
