"""Fixtures shared by the task tests."""
import os
import subprocess
import sys

import pytest

from kda.paths import repo_root


@pytest.fixture
def interpreted():
    """Run a snippet under Triton's interpreter in a fresh process (the interpreter is chosen when kernels are
    defined) from the repository root; the snippet prints "ok" last when every assertion held."""
    def run(code: str) -> None:
        env = {**os.environ, "TRITON_INTERPRET": "1"}
        proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env=env,
                              cwd=repo_root())
        assert proc.returncode == 0 and proc.stdout.strip().endswith("ok"), proc.stdout + proc.stderr
    return run
