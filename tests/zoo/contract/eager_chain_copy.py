"""A candidate for the numerical contract's tests (issue 40): fuse_scale_shift_kernel computed by exactly the torch ops
of SGLang's eager chain (MulAdd.forward_native: x * (scale_constant + scale) + shift, in x's dtype, as
kda.definition.eager_chains writes it), copied into out. Not a cheat: it is what `bitexact` asks for, the bits of
the chain SGLang replaces, and the harness must say so (`bitexact` true on every row it runs), where the real
candidate, which computes in fp32 and rounds once, differs on 16-bit rows."""
import torch


def fuse_scale_shift_kernel(x, scale, shift, scale_constant=1.0, block_l=128, block_c=128, *, out=None):
    if x.dim() == 3:
        scale = scale.unsqueeze(1) if scale.dim() == 2 else scale
        shift = shift.unsqueeze(1) if shift.dim() == 2 else shift
    if scale.dim() == 4:
        frames = scale.shape[1]
        y = x.unflatten(1, (frames, x.shape[1] // frames)) * (scale_constant + scale)
        y = (y + shift).flatten(1, 2) if shift.dim() == 4 else y.flatten(1, 2) + shift
    else:
        y = x * (scale_constant + scale) + shift
    if out is None:
        return y
    out.copy_(y)
    return out
