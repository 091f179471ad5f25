"""kda/definition/render.py: every task with a spec renders exactly to its committed files; every task folder has a spec; drift
is named with a diff and fixed by a render; a bad spec names the file and the key; hand-written files are never
touched."""
import re
import shutil
import sys
from pathlib import Path

import pytest

from kda import cli

from kda.definition import render
from kda.definition.config import load_config
from kda.core.errors import KdaError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[2]
FOLDERS = render.task_folders(ROOT)
SPECCED = [p.name for p in FOLDERS if (p / render.SPEC_FILE).is_file()]
PILOT = "norm_infer"  # any converted task works for the tmp-root tests; this one has comments, notes and two files


@pytest.mark.parametrize("name", SPECCED)
def test_committed_files_match_their_spec(name):
    out = render.render(ROOT, [name], check=True)
    assert out.problems == [], "\n".join(out.problems)


@pytest.mark.parametrize("name", [p.name for p in FOLDERS])
def test_every_task_folder_has_a_spec(name):
    folder = next(p for p in FOLDERS if p.name == name)
    assert (folder / render.SPEC_FILE).is_file(), f"{folder} has no {render.SPEC_FILE}: write one and run `kda render`"


@pytest.mark.parametrize("name", SPECCED)
def test_generated_files_say_so_and_config_loads(name):
    folder = next(p for p in FOLDERS if p.name == name)
    spec = render.load_spec(folder / render.SPEC_FILE, ROOT)
    for rel, template in render.GENERATED.items():
        first = (folder / rel).read_text().splitlines()[0]
        assert render.generated_line(template) in first and first.startswith(("# ", "<!-- ")), rel
    assert load_config(folder / "config.toml").data == spec.config


def test_render_check_command_passes_on_the_repository(monkeypatch, capsys):
    monkeypatch.setenv("KDA_ROOT", str(ROOT))
    assert cli.main(["render", "--check", *SPECCED]) == 0, capsys.readouterr().err


@pytest.fixture
def mini_root(tmp_path, monkeypatch):
    """A throwaway repository with the templates and one converted task (spec, generated and hand-written files)."""
    root = tmp_path / "root"
    shutil.copytree(ROOT / "templates", root / "templates")
    src = ROOT / "diffusion" / "kernels" / PILOT
    dst = root / "diffusion" / "kernels" / PILOT
    for rel in [render.SPEC_FILE, *render.GENERATED, "oracle.py"]:
        (dst / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src / rel, dst / rel)
    shutil.copytree(ROOT / "external" / PILOT, root / "external" / PILOT)  # the card points at these notes
    (root / "scripts" / "launch_kernels").mkdir(parents=True)
    (root / "scripts" / "launch_kernels" / "index.toml").write_text(
        f'[[launcher]]\nnumber = 3\ntask = "diffusion/kernels/{PILOT}"\n')
    (root / "pyproject.toml").write_text("")
    monkeypatch.setenv("KDA_ROOT", str(root))
    return root


def test_drift_is_named_with_a_diff_and_render_fixes_it(mini_root, capsys):
    assert render.render(mini_root, [PILOT], check=True).problems == []
    prompt = mini_root / "diffusion" / "kernels" / PILOT / "prompt.md"
    prompt.write_text(prompt.read_text().replace("# Task card: norm_infer", "# Task card: norm"))
    assert cli.main(["render", "--check", PILOT]) == 1
    err = capsys.readouterr().err
    assert f"{prompt}: differs from its template and task.toml" in err
    assert "-# Task card: norm\n" in err and "+# Task card: norm_infer" in err  # both sides of the diff
    assert "# Task card: norm\n" in prompt.read_text()  # --check writes nothing
    assert cli.main(["render", PILOT]) == 0
    assert "# Task card: norm_infer\n" in prompt.read_text() and render.render(mini_root, [PILOT], check=True).problems == []


def test_the_card_points_at_the_tasks_external_notes_only_where_they_exist(mini_root):
    prompt = mini_root / "diffusion" / "kernels" / PILOT / "prompt.md"
    assert f"notes written for this task in `external/{PILOT}/`" in prompt.read_text()
    assert "`kda profile norm_infer --row ROW --compare`" in prompt.read_text()
    shutil.rmtree(mini_root / "external" / PILOT)
    assert render.render(mini_root, [PILOT], check=True).problems  # the pointer would now be wrong: drift
    render.render(mini_root, [PILOT])
    assert "external/" not in prompt.read_text() and "`kda profile norm_infer" in prompt.read_text()


def test_spec_change_reaches_config_and_missing_files_are_reported(mini_root):
    folder = mini_root / "diffusion" / "kernels" / PILOT
    spec = folder / render.SPEC_FILE
    spec.write_text(spec.read_text().replace("[comments]", "[gates]\nmax_rounds = 3\n\n[comments]"))
    (folder / "README.md").unlink()
    problems = render.render(mini_root, [PILOT], check=True).problems
    assert any(p.startswith(f"{folder / 'config.toml'}: differs") and "+max_rounds = 3" in p for p in problems)
    assert any(p.startswith(f"{folder / 'README.md'}: missing") for p in problems)
    render.render(mini_root, [PILOT])
    assert load_config(folder / "config.toml")["gates"]["max_rounds"] == 3


def test_template_change_is_drift(mini_root):
    tpl = mini_root / "templates" / "task" / "prompt.md.j2"
    tpl.write_text(tpl.read_text().replace("Task card:", "Task:"))
    problems = render.render(mini_root, [PILOT], check=True).problems
    assert len(problems) == 1 and "prompt.md: differs" in problems[0]


def test_inplace_task_says_what_it_writes_instead_of_out(mini_root):
    """An in-place op has no out= buffer: the card and README must not ask for one (qknorm_rope is such a task)."""
    folder = mini_root / "diffusion" / "kernels" / PILOT
    render.render(mini_root, [PILOT])
    assert "plus `out=`" in (folder / "prompt.md").read_text()
    spec = folder / render.SPEC_FILE
    spec.write_text(spec.read_text().replace("[comments]", '[check]\ninplace = ["x"]\n\n[comments]'))
    render.render(mini_root, [PILOT])
    card = " ".join((folder / "prompt.md").read_text().split())
    readme = " ".join((folder / "README.md").read_text().split())
    assert "plus `out=`" not in card and "poisoned" not in card and "plus `out=`" not in readme
    assert "They write `x` in place, as upstream does" in card and 'docs/harness.md, "In-place ops"' in card
    assert "writing `x` in place" in readme
    assert load_config(folder / "config.toml")["check"]["inplace"] == ["x"]


def test_hand_written_files_are_never_touched(mini_root):
    folder = mini_root / "diffusion" / "kernels" / PILOT
    for rel in ("prompt.md", "config.toml"):
        (folder / rel).write_text("stale\n")
    before = (folder / "oracle.py").read_text()
    written = render.render(mini_root, [PILOT]).written
    assert {p.relative_to(folder).as_posix() for p in written} <= set(render.GENERATED)
    assert folder / "prompt.md" in written and (folder / "oracle.py").read_text() == before


def test_folder_without_spec_is_listed_not_rendered(mini_root):
    other = mini_root / "diffusion" / "kernels" / "zzz_unconverted"
    other.mkdir()
    (other / "config.toml").write_text("hand-written\n")
    out = render.render(mini_root, check=True, launchers_too=False)
    assert out.unconverted == [other] and out.problems == []
    render.render(mini_root, launchers_too=False)
    assert (other / "config.toml").read_text() == "hand-written\n"


@pytest.mark.parametrize("edit, key", [
    (lambda t: t.replace("[prompt]\n", "[prompt]\nintroo = 'x'\n"), "unknown key 'prompt.introo'"),
    (lambda t: t + "\n[bench]\nsed = 1\n", "unknown key 'bench.sed'"),
    (lambda t: re.sub(r'^rows = """.*?"""\n', "", t, flags=re.S | re.M), "missing key 'prompt.rows'"),
    (lambda t: t.replace('candidate_entry = "norm_infer"', 'candidate_entry = "nope"'), "'prompt.exports'"),
    (lambda t: t.replace("[comments]\n", '[comments]\n"bench.sedd" = "x"\n'), "'comments.bench.sedd'"),
    (lambda t: t.replace('name = "norm_infer"', 'name = "other"'), "'task.name' is 'other'"),
    (lambda t: t + "\n[[[broken\n", "not valid TOML"),
    (lambda t: t + '\n[gates]\nmin_row = "high"\n', "gates.min_row must be a number"),
])
def test_bad_spec_names_file_and_key(mini_root, edit, key):
    spec = mini_root / "diffusion" / "kernels" / PILOT / render.SPEC_FILE
    text = spec.read_text()
    assert edit(text) != text
    spec.write_text(edit(text))
    with pytest.raises(KdaError) as e:
        render.render(mini_root, [PILOT], check=True)
    assert str(spec) in str(e.value) and key in str(e.value), str(e.value)


def test_toml_values_read_back():
    value = {"s": 'quote " and \\ and é', "f": [0.02, 1e-05, 4000.0, 1e20], "i": -3, "b": False,
             "t": {"bfloat16": {"atol": 0.02}, "a key": 1}, "l": [{"path": "p", "sha256": "x"}], "e": []}
    text = "\n".join(render.toml_assign(k, v) for k, v in value.items()) + "\n"
    assert tomllib.loads(text) == value
    assert render.toml_value(1e-05) == "1e-5" and "\n" in render.toml_assign("l", value["l"])
    long = ["x" * 60, "y" * 60]
    assert render.toml_assign("k", long).startswith("k = [\n  ") and render.toml_assign("k", ["a"]) == 'k = ["a"]'


def test_wrap_md_keeps_markers_off_line_starts_and_nests():
    words = " ".join(["word"] * 20)
    text = f"- top {words} a + b c - d 1. e # f > g\n  - nested {words} {words}\n  continued\n\n# Heading stays\n"
    out = render.wrap_md(text, width=40)
    lines = out.split("\n")
    assert all(len(l) <= 40 for l in lines if " " in l.strip())
    for l in lines[1:]:
        body = l.lstrip()
        if l.startswith("    ") or (l.startswith("  ") and not body.startswith("- nested")):
            assert not (body[:2] in ("+ ", "- ", "* ") or body[:1] in "#>" or body.split(" ")[0].rstrip(".").isdigit())
    assert any(l.startswith("  - nested") for l in lines) and "# Heading stays" in lines
    assert "continued" in out and out.endswith("\n")
