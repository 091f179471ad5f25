"""scripts/l2_aftermath.py and scripts/arm_placement.py on a CPU: the follower kernel really re-reads its buffer
(every block summed as the plan says, under Triton's interpreter), and the moved inputs are copies at new addresses
with the same values."""
import os
import subprocess
import sys

import torch

from kda.core.paths import repo_root
from script_support import load_script

_REREAD = """
import sys, torch
sys.path.insert(0, "scripts")
import l2_aftermath as m
nblocks, block = 5, 64
src = torch.randn(nblocks * block, dtype=torch.bfloat16)
dst = torch.empty(nblocks)
m._reread[(nblocks,)](src, dst, nblocks, REPS=8, BLOCK=block)
blocks = src.view(nblocks, block).float()
want = torch.stack([sum(blocks[(p + r * 997) % nblocks] for r in range(8)).sum() for p in range(nblocks)])
assert torch.allclose(dst, want, atol=1e-3), (dst, want)
# a program reads blocks other than its own: the L2, not its L1, serves the passes after the first
assert len({(0 + r * 997) % nblocks for r in range(8)}) > 1
print("ok")
"""


def test_follower_sums_the_blocks_it_is_planned_to_read():
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    proc = subprocess.run([sys.executable, "-c", _REREAD], capture_output=True, text=True, timeout=300, env=env,
                          cwd=repo_root())
    assert proc.returncode == 0 and proc.stdout.strip().endswith("ok"), proc.stdout + proc.stderr


def test_moved_inputs_are_equal_copies_at_new_addresses(monkeypatch):
    placement = load_script("arm_placement")
    real_empty = torch.empty
    # the spacer is allocated on "cuda"; on a CPU the same call on the CPU
    monkeypatch.setattr(placement.torch, "empty", lambda *a, **k: real_empty(*a, **{**k, "device": "cpu"}))
    inp = {"x": torch.randn(3, 4), "gate": None, "eps": 1e-6}
    moved = placement._moved(inp)
    assert set(moved) == set(inp)
    assert moved["gate"] is None and moved["eps"] == 1e-6
    assert torch.equal(moved["x"], inp["x"]) and moved["x"].data_ptr() != inp["x"].data_ptr()
    assert placement._SPACERS, "the spacer must stay alive for the run"
