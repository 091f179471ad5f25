"""rotary_embedding written from the math, in fp32. Outputs are returned in fp32; the kernels store x's dtype.

apply_rotary_embedding (GPT-J / interleaved pairs): x [B, T, H, D] or [T, H, D], cos/sin [T, D/2] indexed by token
(the same for every batch entry and head). For each pair (x[2i], x[2i+1]):
    out[2i]   = x[2i] * cos[i] - x[2i+1] * sin[i]
    out[2i+1] = x[2i+1] * cos[i] + x[2i] * sin[i]
With interleaved=True and full-width cos/sin [T, D] (each frequency repeated twice), column 2i holds frequency i.

apply_ltx2_split_rotary_emb (split halves): x [B, S, H*D], cos/sin [B, H, S, D/2]; per head, with x1 = x[:D/2] and
x2 = x[D/2:]:
    out[:D/2] = bf16(x1 * cos) - x2 * sin
    out[D/2:] = bf16(x2 * cos) + x1 * sin
The bf16(...) rounding of the cosine product is part of LTX-2's definition, not an artefact: SGLang's PyTorch
reference (ltx_2.py apply_split_rotary_emb) computes `out = x * cos` in bf16 and then `addcmul_` adds the sine
product in fp32 arithmetic before the bf16 store, and the upstream kernel reproduces that order on purpose ("Match
the original PyTorch order"). Without it the reference would differ from the model's numerics by up to half a bf16
ulp of |x * cos| wherever the two products cancel. (SGLang routes only bf16 x/cos/sin to this kernel.)
"""
import torch


def _rotary(row, x, cos, sin):
    D = x.shape[-1]
    if bool(row.scalars.get("interleaved", False)) and cos.shape[-1] == D:
        cos, sin = cos[..., ::2], sin[..., ::2]
    T = x.shape[-3]
    c = cos[:T].float()[:, None, :]  # [T, 1, D/2]: broadcast over heads (and batch)
    s = sin[:T].float()[:, None, :]
    x1 = x[..., 0::2].float()
    x2 = x[..., 1::2].float()
    o1 = x1 * c - x2 * s
    o2 = x2 * c + x1 * s
    return torch.stack((o1, o2), dim=-1).flatten(-2)


def _ltx2_split(x, cos, sin):
    B, S, HD = x.shape
    H, half = cos.shape[1], cos.shape[3]
    xv = x.float().reshape(B, S, H, 2, half)
    x1, x2 = xv[..., 0, :], xv[..., 1, :]
    c = cos.float().permute(0, 2, 1, 3)  # [B, S, H, D/2]
    s = sin.float().permute(0, 2, 1, 3)
    o1 = (x1 * c).to(torch.bfloat16).float() - x2 * s
    o2 = (x2 * c).to(torch.bfloat16).float() + x1 * s
    return torch.stack((o1, o2), dim=-2).reshape(B, S, HD)


def reference(row, inputs):
    x, cos, sin = inputs["x"], inputs["cos"], inputs["sin"]
    if row.function == "apply_rotary_embedding":
        return {"out": _rotary(row, x, cos, sin)}
    if row.function == "apply_ltx2_split_rotary_emb":
        return {"out": _ltx2_split(x, cos, sin)}
    raise ValueError(f"row {row.id}: unknown function {row.function!r}")
