"""fuse_scale_shift written from the math, in fp32 for 16-bit x and fp64 for fp32/fp64 x:
y = x * (scale_constant + scale) + shift.

Broadcast forms accepted upstream: scalar (0-d or one element), [B, C], [B|1, L|1, C], and per-frame [B, F, 1, C]
(frame f covers tokens f*L/F .. (f+1)*L/F - 1). The output has x's dtype; the oracle returns it in its working
precision.

The select01 gate variants (row.function names them), over x [B, L, C] with per-token set t = (index[b, l] != 0):
    plain:    n = LayerNorm(x)                       -> y, gate
    residual: r = residual + residual_gate * x; n = LayerNorm(r)   -> y, residual_out = r, gate
    y = n * (1 + scale_t[b]) + shift_t[b];  gate = gate_t[b] broadcast over the token
LayerNorm over C with population variance, eps inside the root, optional weight/bias [C]; the residual form
normalises r before any rounding. Every output has x's dtype.

fp32 rows are computed in fp64: an fp32 oracle rounds r = residual + gate * x twice (a product, then a sum) where
upstream and the candidate form one fma, and under cancellation its own error was outside the fp32 tolerance
(reg_sel_res_fp32_large, H200 ca2f94a: both arms at 1.18 of tolerance, the same fma). The truth must be closer to
the exact value than the kernels it judges.
"""
import torch


def _wide(x: torch.Tensor) -> torch.dtype:
    return torch.float32 if x.dtype in (torch.float16, torch.bfloat16) else torch.float64


def as_blc(t: torch.Tensor, B: int, L: int, C: int) -> torch.Tensor:
    if t.dim() == 0 or (t.dim() == 1 and t.numel() == 1):
        return t.reshape(1, 1, 1)
    if t.dim() == 2:
        return t[:, None, :]
    if t.dim() == 3:
        return t
    if t.dim() == 4:
        frames = t.shape[1]
        return t.expand(t.shape[0], frames, L // frames, C).reshape(t.shape[0], L, C)
    raise ValueError(f"unsupported modulation rank {t.dim()}")


def _layernorm(v, weight, bias, eps, wide):
    mean = v.mean(dim=-1, keepdim=True)
    vc = v - mean
    var = (vc * vc).mean(dim=-1, keepdim=True)
    n = vc / torch.sqrt(var + eps)
    if weight is not None:
        n = n * weight.to(wide)
    if bias is not None:
        n = n + bias.to(wide)
    return n


def select01(row, inputs):
    x = inputs["x"]
    wide = _wide(x)
    v = x.to(wide)
    out = {}
    if row.function == "fuse_residual_layernorm_scale_shift_gate_select01_kernel":
        v = inputs["residual"].to(wide) + inputs["residual_gate"].to(wide) * v
        out["residual_out"] = v
    pick = (inputs["index"] != 0)[:, :, None]

    def chosen(name):
        return torch.where(pick, inputs[name + "1"].to(wide)[:, None, :], inputs[name + "0"].to(wide)[:, None, :])

    n = _layernorm(v, inputs["weight"], inputs["bias"], float(row.scalars["eps"]), wide)
    out["y"] = n * (1 + chosen("scale")) + chosen("shift")
    out["gate"] = chosen("gate").expand(v.shape)
    return out


def reference(row, inputs):
    if row.function != "fuse_scale_shift_kernel":
        return select01(row, inputs)
    x, scale, shift = inputs["x"], inputs["scale"], inputs["shift"]
    wide = _wide(x)
    B, L, C = x.shape
    c = float(row.scalars["scale_constant"])
    y = x.to(wide) * (c + as_blc(scale, B, L, C).to(wide)) + as_blc(shift, B, L, C).to(wide)
    return {"y": y}
