"""group_norm_silu written from the math, in fp32 (fp64 when x is fp64): y = silu(GroupNorm(x; G, weight, bias, eps)).

x is [B, C, *spatial] in any layout; group g of batch b holds channels g*C/G .. (g+1)*C/G - 1 over every spatial
position. mean and the biased variance (divide by the group size) of each group, z = (x - mean) / sqrt(var + eps)
* weight[c] + bias[c], y = z * sigmoid(z). Statistics come from torch.var_mean in fp32 (a stable reduction, not
E[x^2] - mean^2). The oracle returns y in fp32, shaped like x (contiguous: upstream's output is contiguous whatever
x's layout); the harness rounds nothing, it compares the candidate's x-dtype output against this.
"""
import torch


def reference(row, inputs):
    x, weight, bias = inputs["x"], inputs["weight"], inputs["bias"]
    groups = int(row.scalars["num_groups"])
    eps = float(row.scalars["eps"])
    wide = torch.float64 if x.dtype == torch.float64 else torch.float32
    B, C = x.shape[0], x.shape[1]
    xg = x.to(wide).reshape(B, groups, -1)  # logical order: a non-contiguous x is gathered here
    var, mean = torch.var_mean(xg, dim=-1, correction=0, keepdim=True)
    xn = ((xg - mean) * torch.rsqrt(var + eps)).reshape(B, C, -1)
    z = xn * weight.to(wide)[None, :, None] + bias.to(wide)[None, :, None]
    y = z * torch.sigmoid(z)
    return {"y": y.reshape(x.shape)}
