"""kda/definition/scaffold.py (`kda new`): a task scaffolded from a spec or from flags renders in sync, its hand-written parts
are skeletons that fail loudly, and a bad spec names the file and the key."""
import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from kda import cli

from kda.definition import launchers, render
from kda.definition.config import load_config

ROOT = Path(__file__).resolve().parents[2]
SHA = "0" * 64


@pytest.fixture
def root(tmp_path, monkeypatch):
    root = tmp_path / "root"
    shutil.copytree(ROOT / "templates", root / "templates")
    (root / "diffusion" / "kernels").mkdir(parents=True)
    (root / "pyproject.toml").write_text("")
    monkeypatch.setenv("KDA_ROOT", str(root))
    monkeypatch.chdir(root)
    return root


def _spec(name="toy_op"):
    return f'''[task]
name = "{name}"
campaign = "diffusion"
description = "y = 2 * x"
language = "triton"
candidate_language = "triton"
entry_points = ["sglang.toy.ops:double"]
candidate_entry = "double"

[upstream]
files = [{{ path = "sglang/toy/ops.py", sha256 = "{SHA}" }}]

[bench]
seed = 7

[readme]
production = "ToyModel"

[prompt]
intro = "Make the toy doubling faster than the pinned upstream kernel on the rows real models run"
ops = "- **Op**: `y = 2 * x`."
exports = ["`double(x, *, out=None)`"]
rows = "production rows from ToyModel"
time = "every row streams."
'''


def _load(path: Path):
    spec = importlib.util.spec_from_file_location(f"scaffolded_{path.stem}", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_new_from_spec_renders_in_sync_with_failing_skeletons(root, tmp_path, capsys):
    spec_file = tmp_path / "toy.toml"
    spec_file.write_text(_spec())
    assert cli.main(["new", "toy_op", "--spec", str(spec_file)]) == 0, capsys.readouterr().err
    folder = root / "diffusion" / "kernels" / "toy_op"
    assert (folder / "task.toml").read_text() == spec_file.read_text()
    for rel in [*render.GENERATED, *(r for r in ("bench/adapter.py", "bench/make_workloads.py", "oracle.py",
                                                  "solution/__init__.py"))]:
        assert (folder / rel).is_file(), rel
    assert (folder / "docs" / "ledger.jsonl").read_text() == ""
    cfg = load_config(folder / "config.toml")
    assert cfg["bench"]["seed"] == 7 and cfg["gates"]["max_rounds"] == 8  # the spec's value, then the defaults
    assert [e["task"] for e in launchers.load_index(root)] == ["diffusion/kernels/toy_op"]
    assert "scripts/launch_kernels/k01_toy_op.sh" in (folder / "README.md").read_text()
    assert cli.main(["render", "--check"]) == 0, capsys.readouterr().err

    adapter = _load(folder / "bench" / "adapter.py")
    with pytest.raises(NotImplementedError, match=r"TODO\(toy_op\).*output_specs"):
        adapter.output_specs(None, {})
    with pytest.raises(NotImplementedError, match=r"TODO\(toy_op\)"):
        _load(folder / "oracle.py").reference(None, {})
    with pytest.raises(NotImplementedError, match=r"TODO\(toy_op\).*double"):
        _load(folder / "solution" / "__init__.py").double(1, out=None)
    proc = subprocess.run([sys.executable, str(folder / "bench" / "make_workloads.py")], capture_output=True,
                          text=True, timeout=120, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.returncode != 0 and "NotImplementedError: TODO(toy_op)" in proc.stderr
    assert not (folder / "bench" / "workloads.json").exists()


def test_new_from_flags(root, capsys):
    assert cli.main(["new", "flag_op", "--entry", "sglang.a.b:fn", "--file", f"sglang/a/b.py={SHA}",
                     "--language", "cutedsl", "--candidate-language", "triton"]) == 0, capsys.readouterr().err
    folder = root / "diffusion" / "kernels" / "flag_op"
    cfg = load_config(folder / "config.toml")
    assert cfg["task"]["candidate_entry"] == "fn" and cfg["task"]["language"] == "cutedsl"
    prompt = " ".join((folder / "prompt.md").read_text().split())  # wrapping may split the phrase
    assert "TODO" in prompt and "the oracle alone, as the CuTe DSL baseline cannot run there" in prompt
    assert render.render(root, check=True).problems == []


def test_bad_spec_names_file_and_key_and_writes_nothing(root, tmp_path, capsys):
    spec_file = tmp_path / "bad.toml"
    spec_file.write_text(_spec().replace('[bench]\n', '[bench]\nwarmupp = 2\n'))
    assert cli.main(["new", "toy_op", "--spec", str(spec_file)]) == 2
    err = capsys.readouterr().err
    assert str(spec_file) in err and "unknown key 'bench.warmupp'" in err
    assert not (root / "diffusion" / "kernels" / "toy_op").exists()


def test_name_must_match_and_existing_task_is_refused(root, tmp_path, capsys):
    spec_file = tmp_path / "toy.toml"
    spec_file.write_text(_spec())
    assert cli.main(["new", "other_op", "--spec", str(spec_file)]) == 2
    assert "'task.name' is 'toy_op'" in capsys.readouterr().err
    assert cli.main(["new", "toy_op", "--spec", str(spec_file)]) == 0
    (root / "diffusion" / "kernels" / "toy_op" / "oracle.py").write_text("# mine\n")
    assert cli.main(["new", "toy_op", "--spec", str(spec_file)]) == 2
    assert "already exists" in capsys.readouterr().err
    assert (root / "diffusion" / "kernels" / "toy_op" / "oracle.py").read_text() == "# mine\n"


def test_flags_without_entry_point_are_refused(root, capsys):
    assert cli.main(["new", "x_op", "--file", f"a.py={SHA}"]) == 2
    assert "--entry" in capsys.readouterr().err
