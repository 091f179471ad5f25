"""norm_infer and the one-pass RMS norm written from the math, in fp32 or fp64 (see below).

norm_infer, per row of x [M, N] (statistics over the N columns, population variance):
    LayerNorm: y = (x - mean(x)) / sqrt(mean((x - mean(x))^2) + eps) * weight + bias
    RMSNorm:   y = x / sqrt(mean(x^2) + eps) * weight + bias
    weight and bias are optional (None: 1 and 0).
triton_one_pass_rms_norm, over the last dim of x [..., D]:
    y = x / sqrt(mean(x^2) + eps) * w
The oracle computes in fp32 for 16-bit x and in fp64 for fp32 and fp64 x, and returns its outputs in that precision.
An fp32 truth for fp32 rows carries rounding of its own (0.03-0.11 of the fp32 tolerance against fp64 on
reg_ln_fp32_m16_n5120_large's distributions, CPU), so the 2x-baseline rule ranked arms by how closely they repeat
that rounding: an fp32 formula like upstream's scores 0, and the candidate, whose statistics are summed in fp64,
failed the row on an H200 (0.293 against 0.0537, run of a050fae). `peer_reference` is the same math in fp32 for
fp32 x: what a PyTorch user would run, and what the eager and torch.compile peers time.
NaN/Inf follow the math: a NaN or Inf in a LayerNorm row makes its mean and variance non-finite, so the whole row is
NaN; in an RMS row an Inf drives 1/sqrt(...) to 0, so finite entries become 0 (times w) and the Inf itself becomes
NaN.
"""
import torch


def _wide(x):
    return torch.float32 if x.dtype in (torch.float16, torch.bfloat16) else torch.float64


def _working(x):
    return torch.float64 if x.dtype == torch.float64 else torch.float32


def reference(row, inputs):
    return _math(row, inputs, _wide(inputs["x"]))


def peer_reference(row, inputs):
    return _math(row, inputs, _working(inputs["x"]))


def _math(row, inputs, wide):
    x = inputs["x"]
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
