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
