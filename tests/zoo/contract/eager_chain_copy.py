"""A candidate for the numerical contract's tests (issue 40): fuse_scale_shift_kernel computed by SGLang's eager chain
itself (kda.definition.eager_chains: MulAdd.forward_native, x * (scale_constant + scale) + shift in x's dtype),
copied into out. Not a cheat: it is what `bitexact` asks for, the bits of the chain SGLang replaces, and the harness
must say so (`bitexact` true on every row it runs), where the real candidate, which computes in fp32 and rounds
once, differs on 16-bit rows."""
from kda.definition.eager_chains import fuse_scale_shift_kernel as _chain


def fuse_scale_shift_kernel(x, scale, shift, scale_constant=1.0, block_l=128, block_c=128, *, out=None):
    y = _chain(x, scale, shift, scale_constant)
    if out is None:
        return y
    out.copy_(y)
    return out
