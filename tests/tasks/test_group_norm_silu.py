"""group_norm_silu task folder: the 48 derived HunyuanVideo-VAE shapes in both layouts, the oracle against
PyTorch's own GroupNorm + SiLU, and the candidate's streaming path forced on small inputs. Checks every task
shares: tests/test_task_folders.py; the CPU gate: tests/test_cpu_gate.py."""
import math
import os
import subprocess
import sys
import textwrap

import torch
import torch.nn.functional as F

from kda.task import Task
from kda.workloads import build_inputs, refill_inputs

TASK = Task.load("group_norm_silu")



def test_production_rows_are_the_48_vae_shapes_in_both_layouts():
    prod = [r for r in TASK.rows if r.production]
    assert all(r.source.startswith("derived:") and not r.cpu for r in prod)
    assert all(r.source.startswith("regression:") for r in TASK.rows if not r.production)
    shapes = {r.tensors["x"].shape for r in prod}
    assert len(prod) == 96 and len(shapes) == 48
    assert {s[1] for s in shapes} == {128, 256, 512} and {s[2] for s in shapes} == {2, 3, 5, 9, 17}
    assert max(shapes, key=math.prod) == (1, 256, 17, 256, 256)
    assert all(r.scalars == {"num_groups": 32, "eps": 1e-6} and r.tensors["x"].dtype == "float16" for r in prod)
    for shape in shapes:
        layouts = {r.tensors["x"].stride for r in prod if r.tensors["x"].shape == shape}
        b, c, t, h, w = shape
        assert layouts == {(c * t * h * w, t * h * w, h * w, w, 1), (c * t * h * w, 1, h * w * c, w * c, c)}


def test_oracle_matches_torch_group_norm_silu():
    for rid in ("reg_fp32_4d_b2_c64_g32_s9x7", "reg_fp16_cl3d_b2_c96_g32", "reg_fp16_permuted_thw"):
        row = next(r for r in TASK.rows if r.id == rid)
        inputs = build_inputs(row, "cpu")
        refill_inputs(row, inputs, 3)
        x, w, b = (inputs[k].double() for k in ("x", "weight", "bias"))
        want = F.silu(F.group_norm(x, row.scalars["num_groups"], w, b, row.scalars["eps"]))
        got = TASK.oracle.reference(row, inputs)["y"]
        assert got.dtype == (torch.float32) and got.is_contiguous()
        torch.testing.assert_close(got.double(), want, atol=2e-5, rtol=2e-5)


# The streaming path (v3) runs only on rows larger than twice the L2 on a GPU and on the one CPU row with a group of
# 2^18 elements; this probe forces it on small inputs (tiny tiles, so groups span several tiles and apply tiles
# interleave with the next group's statistics tiles) and compares with PyTorch in float64.
_STREAM_PROBE = textwrap.dedent("""
    import torch, torch.nn.functional as F
    from kda.task import Task
    import importlib.util, sys
    task = Task.load("group_norm_silu")
    spec = importlib.util.spec_from_file_location("gn_sol", task.path / "solution" / "group_norm_silu.py")
    m = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(m)
    m._FUSED_MAX_GROUP = 0
    m._STREAM_BLOCK, m._STREAM_ITERS = 64, 2
    m._INTERPRETER_DEVICE = (1, 1 << 20, 0.0)
    g = torch.Generator().manual_seed(0)
    cases = [((2, 8, 3, 8, 16), 4, torch.float16, None, True),       # 6 tiles per group, last one full
             ((1, 12, 5, 7, 9), 3, torch.float32, None, False),      # ragged last tile, no affine
             ((2, 8, 3, 6, 10), 4, torch.bfloat16, (0, 1, 3, 2, 4), True)]   # spatial dims that do not merge
    for shape, G, dtype, perm, affine in cases:
        x = (torch.randn(shape, generator=g) * 3 + 1).to(dtype)
        if perm:
            x = x.permute(*perm).contiguous().permute(*[perm.index(i) for i in range(len(perm))])
        C = shape[1]
        w = torch.randn(C, generator=g).to(dtype) if affine else None
        b = torch.randn(C, generator=g).to(dtype) if affine else None
        plan = m._plan(x, w, b, G)
        assert plan[0] == "stream", plan[0]
        n_part, tiles, lag = plan[2].ints[11], plan[2].ints[13], plan[2].ints[14]
        assert n_part > 1 and n_part <= lag < tiles, (n_part, lag, tiles)
        ref = F.silu(F.group_norm(x.double(), G, None if w is None else w.double(),
                                  None if b is None else b.double(), 1e-6))
        for _ in range(2):   # the second call reuses the plan: its counters must start from zero again
            out = torch.full(shape, float("nan"), dtype=dtype)
            assert m.triton_group_norm_silu(x, w, b, G, 1e-6, out=out) is out
            err = (out.double() - ref).abs()
            assert bool((err <= 2e-2 + 1e-2 * ref.abs()).all()), (shape, dtype, float(err.max()))
    cl = torch.randn(1, 8, 2, 4, 4, generator=g).half().to(memory_format=torch.channels_last_3d)
    assert m._plan(cl, None, None, 2)[0] == "split"   # every spatial row holds every group: no streaming
    print("ok")
""")


def test_candidate_streaming_path_matches_torch():
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    proc = subprocess.run([sys.executable, "-c", _STREAM_PROBE], capture_output=True, text=True, timeout=600,
                          env=env, cwd=TASK.path.parents[2])
    assert proc.returncode == 0 and proc.stdout.strip().endswith("ok"), proc.stdout + proc.stderr
