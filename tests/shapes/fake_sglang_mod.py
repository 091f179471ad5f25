"""Source of a fake SGLang entry point: the tests copy it to tmp_path under a unique module name."""
import torch

CALLS = []


def fuse_scale_shift_kernel(x: torch.Tensor, scale: torch.Tensor, shift: torch.Tensor, scale_constant: float = 1.0,
                            block_l: int = 128, bias: "torch.Tensor | None" = None, mode: str = "add", *, eps=1e-6):
    """Fake fused kernel: x * (scale_constant + scale) + shift."""
    CALLS.append(tuple(x.shape))
    return x * (scale_constant + scale) + shift
