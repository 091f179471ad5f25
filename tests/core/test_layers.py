"""The package's layers: every import in kda/ points down (or within its own subpackage), and no two modules import
each other, directly or through others. Function-level imports count too: a lazy import is still a dependency.

Layers, lowest first (docs/architecture.md draws them):
  core, runtime -> definition, vendor, shapes -> harness, e2e -> evidence -> loop -> cli
"""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parents[2] / "kda"
LAYER = {"core": 0, "runtime": 0, "definition": 1, "vendor": 1, "shapes": 1, "harness": 2, "e2e": 2, "evidence": 3,
         "loop": 4, "cli": 5, "__main__": 5, "__init__": 0}
# Within one layer, the imports allowed between subpackages (importer, imported): vendor and shapes read task
# definitions, never the other way; e2e writes results through the harness's encoding; `python -m kda` is the CLI.
WITHIN = {("vendor", "definition"), ("shapes", "definition"), ("e2e", "harness"), ("__main__", "cli")}


def modules() -> dict[str, Path]:
    out = {}
    for p in PKG.rglob("*.py"):
        rel = p.relative_to(PKG.parent).with_suffix("")
        if "shims" in rel.parts or "sitecustomize" in rel.parts:
            continue  # loaded into upstream code or a foreign interpreter, never imported by kda
        name = ".".join(rel.parts[:-1] if rel.name == "__init__" else rel.parts)
        out[name] = p
    return out


def imports(path: Path, name: str, known: set[str]) -> set[str]:
    """Every kda module `path` imports, at any depth of the file (resolved to the longest known module name)."""
    found = set()
    pkg = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text())):
        targets = []
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(pkg.split(".")[: len(pkg.split(".")) - node.level + 1] + ([base] if base else []))
            targets = [f"{base}.{a.name}" for a in node.names] + [base]
        for t in targets:
            while t and t not in known:
                t = t.rpartition(".")[0]
            if t.startswith("kda") and t != name:
                found.add(t)
    return found


def role(mod: str) -> str:
    parts = mod.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


MODS = modules()
GRAPH = {m: imports(p, m, set(MODS)) for m, p in MODS.items()}


def test_every_module_has_a_layer():
    assert {role(m) for m in MODS} <= set(LAYER), sorted({role(m) for m in MODS} - set(LAYER))


@pytest.mark.parametrize("mod", sorted(MODS))
def test_imports_point_down(mod):
    bad = []
    for dep in GRAPH[mod]:
        a, b = role(mod), role(dep)
        if dep == "kda" or a == b:
            continue
        if LAYER[b] > LAYER[a] or (LAYER[b] == LAYER[a] and (a, b) not in WITHIN):
            bad.append(f"{mod} ({a}) imports {dep} ({b})")
    assert not bad, "\n".join(bad)


def test_no_import_cycles():
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(m):
        state[m] = 1
        stack.append(m)
        for d in sorted(GRAPH.get(m, ())):
            if d == "kda" or d.endswith(".__init__"):
                continue
            if state.get(d) == 1:
                raise AssertionError("import cycle: " + " -> ".join(stack[stack.index(d):] + [d]))
            if d not in state:
                visit(d)
        stack.pop()
        state[m] = 2

    for m in sorted(GRAPH):
        if m not in state:
            visit(m)


def test_the_check_sees_a_cycle_and_an_upward_import(tmp_path):
    """The walker finds lazy and relative imports; otherwise the two tests above could not fail."""
    src = tmp_path / "m.py"
    src.write_text("def f():\n    from kda.loop import gate\n    from ..evidence.ledger import read\n")
    found = imports(src, "kda.harness.m", set(MODS))
    assert {"kda.loop.gate", "kda.evidence.ledger"} <= found
