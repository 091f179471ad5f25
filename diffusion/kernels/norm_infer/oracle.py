"""norm_infer and the one-pass RMS norm written from the math, in fp32 (fp64 when x is fp64).

norm_infer, per row of x [M, N] (statistics over the N columns, population variance):
    LayerNorm: y = (x - mean(x)) / sqrt(mean((x - mean(x))^2) + eps) * weight + bias
    RMSNorm:   y = x / sqrt(mean(x^2) + eps) * weight + bias
    weight and bias are optional (None: 1 and 0).
triton_one_pass_rms_norm, over the last dim of x [..., D]:
    y = x / sqrt(mean(x^2) + eps) * w
The output has x's dtype and shape; the oracle returns it in fp32. NaN/Inf follow the math: a NaN or Inf in a
LayerNorm row makes its mean and variance non-finite, so the whole row is NaN; in an RMS row an Inf drives
1/sqrt(...) to 0, so finite entries become 0 (times w) and the Inf itself becomes NaN.
"""
import torch


def _wide(x):
    return torch.float64 if x.dtype == torch.float64 else torch.float32


def reference(row, inputs):
    x = inputs["x"]
    wide = _wide(x)
    xf = x.to(wide)
    eps = float(row.scalars["eps"])
    if row.function == "norm_infer":
        if bool(row.scalars["is_rms_norm"]):
            var = (xf * xf).mean(dim=-1, keepdim=True)
            y = xf * torch.rsqrt(var + eps)
        else:
            mean = xf.mean(dim=-1, keepdim=True)
            xc = xf - mean
            var = (xc * xc).mean(dim=-1, keepdim=True)
            y = xc * torch.rsqrt(var + eps)
        if inputs["weight"] is not None:
            y = y * inputs["weight"].to(wide)
        if inputs["bias"] is not None:
            y = y + inputs["bias"].to(wide)
        return {"y": y}
    if row.function == "triton_one_pass_rms_norm":
        var = (xf * xf).mean(dim=-1, keepdim=True)
        return {"y": xf * torch.rsqrt(var + eps) * inputs["w"].to(wide)}
    raise ValueError(f"unknown function {row.function!r}")
