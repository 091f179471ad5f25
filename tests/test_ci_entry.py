"""`.ci/run` runs exactly the test command README.md gives, so what CI checks and what a person is told to run
cannot drift apart."""
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def readme_test_command() -> str:
    text = (ROOT / "README.md").read_text()
    m = re.search(r"The test suite[^\n]*\n+```bash\n(.*?)\n```", text, re.S)
    assert m, "README.md has no bash block after 'The test suite'"
    return m.group(1).strip()


def test_ci_runs_the_readme_test_command():
    command = readme_test_command()
    assert "pytest" in command
    lines = [l.strip() for l in (ROOT / ".ci" / "run").read_text().splitlines()]
    commands = [l for l in lines if l and not l.startswith("#") and not l.startswith(("set ", "cd "))]
    assert commands == [command], f".ci/run runs {commands}, README.md says {command!r}"


def test_no_two_test_files_share_a_basename():
    """pytest imports test files by basename (no __init__.py in tests/): two of one name stop the whole run at
    collection, as tests/e2e/test_timing.py beside tests/harness/test_timing.py did in a clean clone."""
    from collections import Counter
    from pathlib import Path

    names = Counter(p.name for p in (Path(__file__).parent).rglob("test_*.py"))
    assert [n for n, c in names.items() if c > 1] == []
