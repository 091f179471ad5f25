"""`kda new NAME --spec FILE` (or from flags): scaffold a task folder. The spec becomes the folder's task.toml; the
generated files are rendered from it (kda/definition/render.py); the hand-written parts get skeletons from templates/new/ that
raise NotImplementedError naming what to write, so an unfinished task fails loudly instead of passing vacuously."""
from __future__ import annotations

from pathlib import Path

from kda.definition import render
from kda.core.errors import KdaError

# Written once, never by `kda render`: output (relative to the task folder) -> template (relative to templates/).
SKELETONS = {
    "bench/adapter.py": "new/adapter.py.j2",
    "bench/make_workloads.py": "new/make_workloads.py.j2",
    "oracle.py": "new/oracle.py.j2",
    "solution/__init__.py": "new/solution_init.py.j2",
}


def _parse_file_flag(text: str) -> dict:
    path, sep, sha = text.rpartition("=")
    if not sep or not path:
        raise KdaError(f"--file {text!r}: expected PATH=SHA256 (a file of the upstream wheel and its sha256)")
    return {"path": path, "sha256": sha}


def spec_from_flags(root: Path, name: str, *, campaign: str, description: str | None, language: str,
                    candidate_language: str | None, entries: list[str], files: list[str], shims: list[str],
                    candidate_entry: str | None) -> str:
    """A first task.toml from flags; the prose blocks are TODO lines for a person to replace."""
    if not entries:
        raise KdaError("kda new without --spec needs at least one --entry MODULE:FUNCTION (the upstream entry points)")
    if not files:
        raise KdaError("kda new without --spec needs at least one --file PATH=SHA256 (the upstream files)")
    env = render.environment(root)
    return env.get_template("new/task.toml.j2").render(
        name=name, campaign=campaign, description=description or f"TODO: what {name} computes",
        language=language, candidate_language=candidate_language or language, entry_points=entries,
        candidate_entry=candidate_entry or entries[0].rpartition(":")[2],
        files=[_parse_file_flag(f) for f in files], shims=shims)


def new_task(root: Path, name: str, spec_text: str, spec_where: str) -> list[Path]:
    """Create <campaign>/kernels/<name>/ from a spec's text; returns the paths written."""
    root = Path(root)
    spec = render.parse_spec(spec_text, spec_where, root, expect_name=name)
    folder = root / spec.config["task"]["campaign"] / "kernels" / name
    if folder.exists() and any(folder.iterdir()):
        raise KdaError(f"{folder}: already exists and is not empty (kda new never overwrites a task)")
    written = []

    def write(rel: str, text: str):
        path = folder / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        written.append(path)

    write(render.SPEC_FILE, spec_text)
    env = render.environment(root)
    ctx = dict(name=name, candidate_entry=spec.config["task"]["candidate_entry"],
               entry_functions=[e.rpartition(":")[2] for e in spec.config["task"]["entry_points"]])
    for rel, template in SKELETONS.items():
        write(rel, env.get_template(template).render(ctx))
    write("docs/ledger.jsonl", "")  # the ledger starts empty; `kda ledger` appends
    out = render.render(root, [str(folder)], launchers_too=True)
    if out.problems:
        raise KdaError(f"{folder}: scaffolded, but rendering reported:\n  " + "\n  ".join(out.problems))
    return written + [p for p in out.written if p not in written]
