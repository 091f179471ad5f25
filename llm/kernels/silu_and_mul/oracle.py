"""The gated activations written from the math: out = act(g) * u with g = x[..., :I], u = x[..., I:], I = x.shape[-1] / 2.

    silu_and_mul       act(g) = g * sigmoid(g)
    gelu_and_mul       act(g) = g * 0.5 * (1 + erf(g / sqrt(2)))
    gelu_tanh_and_mul  act(g) = g * 0.5 * (1 + tanh(sqrt(2 / pi) * (g + 0.044715 * g^3)))

The oracle computes in fp32 for 16-bit x and in fp64 for fp32 x (as norm_infer's does), and returns out in that
precision. `peer_reference` is the same math in fp32 for fp32 x: what a PyTorch user would run, and what the eager
and torch.compile peers time. NaN/Inf follow the math: act(+inf) = +inf, act(-inf) = -inf * 0 = NaN, and a NaN in
either half makes its output NaN.
"""
import math

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
    x = inputs["x"].to(wide)
    d = x.shape[-1] // 2
    g, u = x[..., :d], x[..., d:]
    if row.function == "silu_and_mul":
        a = g * torch.sigmoid(g)
    elif row.function == "gelu_and_mul":
        a = g * 0.5 * (1.0 + torch.erf(g * (1.0 / math.sqrt(2.0))))
    elif row.function == "gelu_tanh_and_mul":
        a = g * 0.5 * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (g + 0.044715 * g * g * g)))
    else:
        raise ValueError(f"unknown function {row.function!r}")
    return {"out": a * u}
