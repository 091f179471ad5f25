"""Provenance a reader can follow: the shape catalog, every task's workloads, generator, task definition and the
templates cite nothing outside the repository, and every `SOURCES.md#section` they cite is a heading of
diffusion/shapes/SOURCES.md (which names the public sources: the KDA-Pilot capture, SGLang 0.5.15, model configs)."""
import json
import re
import unicodedata
from pathlib import Path

import pytest

from kda.core.paths import all_task_dirs, repo_root

ROOT = repo_root()
SOURCES = ROOT / "diffusion" / "shapes" / "SOURCES.md"

# Citations of material that lives outside this repository (the project's shared notes, research notes).
OUTSIDE = [
    (re.compile(r"\.\./shared\b"), "a path outside the repository (../shared)"),
    (re.compile(r"(?<![\w./-])shared/"), "a path outside the repository (shared/)"),
    (re.compile(r"(?<![\w.])/(?:[\w.-]+/)+shared\b"), "an absolute path to a folder outside the repository"),
    (re.compile(r"\banchors\b", re.IGNORECASE), "the out-of-repo anchors notes"),
    (re.compile(r"\bkda-pilot\.md\b", re.IGNORECASE), "the out-of-repo KDA-Pilot research note"),
    (re.compile(r"\bresearch notes?\b", re.IGNORECASE), "out-of-repo research notes"),
]
CITE = re.compile(r"(?:diffusion/shapes/)?SOURCES\.md#([A-Za-z0-9_-]+)")
LOCAL_LINK = re.compile(r"\]\(#([A-Za-z0-9_-]+)\)")


def github_slug(heading: str) -> str:
    """The anchor GitHub gives a Markdown heading: lower case, punctuation dropped, spaces to hyphens."""
    text = unicodedata.normalize("NFKC", heading.strip()).lower()
    text = "".join(c for c in text if c.isalnum() or c in " -_")
    return text.replace(" ", "-")


def heading_anchors(markdown: str) -> set[str]:
    anchors, seen, fenced = set(), {}, False
    for line in markdown.splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
        m = None if fenced else re.match(r"#{1,6}\s+(.*?)\s*#*\s*$", line)
        if m:
            slug = github_slug(m.group(1))
            n = seen.get(slug, 0)
            seen[slug] = n + 1
            anchors.add(slug if n == 0 else f"{slug}-{n}")
    return anchors


def cited_files() -> list[Path]:
    files = sorted((ROOT / "diffusion" / "shapes").glob("*.toml")) + sorted((ROOT / "diffusion" / "shapes").glob("*.md"))
    for task in all_task_dirs():
        for rel in ("bench/workloads.json", "bench/make_workloads.py", "task.toml", "config.toml", "prompt.md",
                    "README.md", "baseline/README.md"):
            if (task / rel).is_file():
                files.append(task / rel)
    files += sorted(p for p in (ROOT / "templates").rglob("*") if p.is_file())
    return files


def problems_in(text: str, anchors: set[str]) -> list[str]:
    """Every outside citation and every SOURCES.md#section that is not a heading, one line each."""
    found = []
    for lineno, line in enumerate(text.splitlines(), 1):
        for pattern, what in OUTSIDE:
            for m in pattern.finditer(line):
                found.append(f"line {lineno}: {m.group(0)!r} cites {what}")
        for m in CITE.finditer(line):
            if m.group(1) not in anchors:
                found.append(f"line {lineno}: {m.group(0)!r}: SOURCES.md has no such section")
    return found


@pytest.fixture(scope="module")
def anchors():
    return heading_anchors(SOURCES.read_text())


def test_sources_has_the_sections_rows_cite(anchors):
    for section in ("sources", "kda-pilot-capture", "token-counts", "wan22-a14b", "hunyuanvideo-vae", "ltx-2"):
        assert section in anchors, (section, sorted(anchors))


def test_sources_links_its_own_sections(anchors):
    text = SOURCES.read_text()
    missing = [m.group(1) for m in LOCAL_LINK.finditer(text) if m.group(1) not in anchors]
    assert not missing, f"{SOURCES.relative_to(ROOT)}: links to missing sections {missing}"


@pytest.mark.parametrize("path", cited_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_citations_stay_in_the_repository(path, anchors):
    found = problems_in(path.read_text(), anchors)
    assert not found, f"{path.relative_to(ROOT)}:\n  " + "\n  ".join(found)


def test_rows_citing_kda_pilot_name_a_section(anchors):
    """A production row from the KDA-Pilot capture must say where in SOURCES.md that capture is quoted."""
    bad = []
    for task in all_task_dirs():
        wl = task / "bench" / "workloads.json"
        if not wl.is_file():
            continue
        for row in json.loads(wl.read_text()):
            src = row.get("source", "")
            if row.get("production") and "KDA-Pilot" in src and not CITE.search(src):
                bad.append(f"{task.name}/{row['id']}")
    assert not bad, f"rows citing KDA-Pilot without a SOURCES.md section: {bad}"


def test_the_check_catches_outside_paths_and_missing_sections(anchors):
    text = ('source = "captured: KDA-Pilot (token counts in ../shared anchors section 3)"\n'
            "see shared/research/kda-pilot.md\n"
            'source = "derived: diffusion/shapes/SOURCES.md#no-such-model"\n'
            'source = "captured: diffusion/shapes/SOURCES.md#wan22-a14b"\n'
            "kda/shared/x.py and dist-shared/ are not outside citations\n")
    found = problems_in(text, anchors)
    assert any("line 1" in f and "../shared" in f for f in found)
    assert any("line 1" in f and "anchors" in f for f in found)
    assert any("line 2" in f and "'shared/'" in f for f in found)
    assert any("line 2" in f and "kda-pilot.md" in f for f in found)
    assert any("line 3" in f and "no such section" in f for f in found)
    assert not any(f.startswith(("line 4", "line 5")) for f in found), found
    assert github_slug("Wan2.2 A14B") == "wan22-a14b" and github_slug("Differences from the public captures") \
        == "differences-from-the-public-captures"
