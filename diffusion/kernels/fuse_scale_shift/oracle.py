"""fuse_scale_shift written from the math, in fp32 (fp64 when the inputs are fp64): y = x * (scale_constant + scale) + shift.

Broadcast forms accepted upstream: scalar (0-d or one element), [B, C], [B|1, L|1, C], and per-frame [B, F, 1, C]
(frame f covers tokens f*L/F .. (f+1)*L/F - 1). The output has x's dtype; the oracle returns it in fp32.
"""
import torch


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


def reference(row, inputs):
    x, scale, shift = inputs["x"], inputs["scale"], inputs["shift"]
    wide = torch.float64 if x.dtype == torch.float64 else torch.float32
    B, L, C = x.shape
    c = float(row.scalars["scale_constant"])
    y = x.to(wide) * (c + as_blc(scale, B, L, C).to(wide)) + as_blc(shift, B, L, C).to(wide)
    return {"y": y}
