"""group_norm_silu task folder: the 48 derived HunyuanVideo-VAE shapes in both layouts, and the oracle against
PyTorch's own GroupNorm + SiLU. Checks every task shares: tests/test_task_folders.py; the CPU gate:
tests/test_cpu_gate.py."""
import math

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
