"""Random weights at the scale of trained ones, shared by the blocks (no checkpoint is ever downloaded)."""
from __future__ import annotations

import math

import torch
import torch.nn as nn


def linear(n_in: int, n_out: int, bias: bool = True) -> nn.Linear:
    """Unit-variance outputs from unit-variance inputs, as a trained layer keeps its activations; a small bias."""
    lin = nn.Linear(n_in, n_out, bias=bias)
    nn.init.normal_(lin.weight, std=1.0 / math.sqrt(n_in))
    if bias:
        nn.init.normal_(lin.bias, std=0.02)
    return lin


def near_one(n: int) -> torch.Tensor:
    """A trained norm weight sits near 1."""
    return 1.0 + 0.1 * torch.randn(n)
