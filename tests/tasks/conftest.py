"""Fixtures shared by the task tests."""
import os
import re
import shutil
import subprocess
import sys

import pytest

from kda.core.paths import repo_root


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


@pytest.fixture
def hopper_build(tmp_path):
    """Compile a candidate's .cu for sm_90 with ptxas statistics (skipped where nvcc is not installed); asserts the
    build succeeds without spills or a stack frame and returns how many entry functions ptxas compiled."""
    if shutil.which("nvcc") is None:
        pytest.skip("nvcc is not installed on this machine")

    def build(source) -> int:
        res = subprocess.run(["nvcc", "-std=c++17", "-O3", "-gencode=arch=compute_90,code=sm_90", "-Xptxas", "-v",
                              "-c", str(source), "-o", str(tmp_path / "k.o")], capture_output=True, text=True,
                             timeout=600)
        assert res.returncode == 0, res.stderr[-4000:]
        assert not re.search(r"[1-9]\d* bytes (spill|stack)", res.stderr), res.stderr
        return len(re.findall(r"Compiling entry function", res.stderr))
    return build
