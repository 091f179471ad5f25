"""`kda launchers render [--check]`: one launcher per task, scripts/launch_kernels/kNN_<task>.sh, generated from
templates/launch_task.sh.j2. The numbers come from scripts/launch_kernels/index.toml, which only ever grows, so a
launcher's name never changes once given. The shared logic is the bash library scripts/launch_kernels/lib/launch.sh.
"""
from __future__ import annotations

import os
import re
import sys
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

from kda.core.errors import KdaError
from kda.core.schema import Field, ListOf, positive, validate

INDEX = Path("scripts/launch_kernels/index.toml")
TEMPLATE = Path("templates/launch_task.sh.j2")
LAUNCH_DIR = Path("scripts/launch_kernels")
INDEX_SPEC = {"launcher": Field(ListOf({"number": Field(int, check=positive), "task": Field(str)}),
                                doc="[[launcher]] tables: number (never reused) and task folder")}
GENERATED = re.compile(r"k\d{2,}_.+\.sh")
INDEX_HEADER = ("# Launcher numbers (kNN_<task>.sh). `kda launchers render` appends new tasks; a number is never reused "
                "or changed,\n# so a launcher's name stays valid in notes and shell history.\n")


def load_index(root: Path) -> list[dict]:
    path = root / INDEX
    if not path.is_file():
        return []
    try:
        data = validate(tomllib.loads(path.read_text()), INDEX_SPEC, str(path))
    except tomllib.TOMLDecodeError as e:
        raise KdaError(f"{path}: not valid TOML: {e}") from None
    entries = data["launcher"]
    for i, e in enumerate(entries):  # the later duplicate is the one named
        if e["number"] in [x["number"] for x in entries[:i]]:
            raise KdaError(f"{path}: key 'launcher[{i}].number': {e['number']} is used twice")
        if e["task"] in [x["task"] for x in entries[:i]]:
            raise KdaError(f"{path}: key 'launcher[{i}].task': {e['task']!r} is listed twice")
    return entries


def index_text(entries: list[dict]) -> str:
    out = [INDEX_HEADER]
    for e in sorted(entries, key=lambda x: x["number"]):
        out.append(f'[[launcher]]\nnumber = {e["number"]}\ntask = "{e["task"]}"\n')
    return "\n".join(out)


def label(entry: dict) -> str:
    return f"k{entry['number']:02d}_{Path(entry['task']).name}"


def render_one(root: Path, entry: dict) -> str:
    import jinja2

    path = root / TEMPLATE
    if not path.is_file():
        raise KdaError(f"{path}: no such file (the launcher template)")
    env = jinja2.Environment(undefined=jinja2.StrictUndefined, keep_trailing_newline=True)
    return env.from_string(path.read_text()).render(task_path=entry["task"], label=label(entry))


def _task_paths(root: Path) -> list[str]:
    from kda.core.paths import all_task_dirs

    return [p.resolve().relative_to(root.resolve()).as_posix() for p in all_task_dirs()]


def render(root: Path, check: bool = False) -> tuple[list[str], list[Path]]:
    """Returns (problems, written). With check, writes nothing and lists every drift; otherwise fixes what it can
    (new tasks get the next number; launchers are rewritten and made executable) and lists what needs a person."""
    root = Path(root)
    entries = load_index(root)
    problems: list[str] = []
    written: list[Path] = []
    known = {e["task"] for e in entries}
    new = [t for t in _task_paths(root) if t not in known]
    if new:
        if check:
            problems += [f"{root / INDEX}: task {t} has no launcher number (run `kda launchers render`)" for t in new]
        else:
            nxt = max((e["number"] for e in entries), default=0)
            entries += [{"number": nxt + i + 1, "task": t} for i, t in enumerate(new)]
            (root / INDEX).parent.mkdir(parents=True, exist_ok=True)
            (root / INDEX).write_text(index_text(entries))
            written.append(root / INDEX)
    expected = {}
    for e in entries:
        if not (root / e["task"] / "config.toml").is_file():
            problems.append(f"{root / INDEX}: task {e['task']} (k{e['number']:02d}) has no config.toml: remove the "
                            f"entry by hand if the task is gone (its number stays retired)")
            continue
        expected[root / LAUNCH_DIR / f"{label(e)}.sh"] = render_one(root, e)
    for path, text in expected.items():
        current = path.read_text() if path.is_file() else None
        executable = path.is_file() and os.access(path, os.X_OK)
        if current == text and executable:
            continue
        if check:
            why = "missing" if current is None else ("differs from the template" if current != text else "not executable")
            problems.append(f"{path}: {why} (run `kda launchers render`)")
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
            path.chmod(0o755)
            written.append(path)
    launch_dir = root / LAUNCH_DIR
    if launch_dir.is_dir():
        for p in sorted(launch_dir.iterdir()):
            if GENERATED.fullmatch(p.name) and p not in expected:
                problems.append(f"{p}: a launcher no index entry generates (rename or delete it)")
    return problems, written
