"""Candidate v2 for qknorm_rope: a CUDA kernel behind a C++ host path, with the v1 Triton kernel as general path.

Why CUDA here: v1 (qknorm_rope_triton.py) already beat upstream's kernel 1.24-1.43x by graph_us on every row of 4K
tokens and more, but lost 2x by device_us on the six short production rows (19-512 tokens), where a call is all host
path: ~17.6 us through Python and Triton's launcher against ~8.7 us for upstream's tvm-ffi binding (H200, ledger
L0004). v2 moves the argument checks and the launch into C++ (csrc/binding.cpp, pybind11) and the kernel into CUDA
(csrc/qknorm_rope.cu: a group of D/8 lanes per head, 16-byte accesses, one shuffle reduction per head). v2f launches
it with programmatic dependent launch, as upstream launches its own kernel: on the few-token rows (2-5 us) upstream's
kernel started before its predecessor ended and ours did not (graph_us 0.78-0.94 of upstream, ledger L0010).

Dispatch, by what each path does best (H200, results of 7b77c7f against d12926e):
- calls moving at least TRITON_MIN_ELEMENTS values of q and k take the Triton kernel: there the GPU time (36-63 us)
  hides Triton's host path, and the Triton kernel streams faster (28.5 us on qwen_image_n4096_h24 by graph_us, against
  33.9 us for the CUDA kernel);
- smaller CUDA calls in the vector layout (16-byte aligned heads, contiguous last dimension) take the CUDA kernel,
  whose C++ host path is what those host-bound rows need;
- everything else (misaligned views; CPU tensors under Triton's interpreter, which is how CI checks the algorithm)
  takes the Triton kernel. The binding validates every call as upstream does, so both paths reject the same inputs.
"""
from . import cuda_ext
from .qknorm_rope_triton import fused_inplace_qknorm_rope as _triton_qknorm_rope

# 7 x 2^22 (29.4M) values of q and k: about 36 us of GPU time for the Triton kernel. Below it Triton's host path can
# set the time: at 2^24 the 25M-value rows (qwen_image / flux1_image n4096 h24, 30 us of GPU time) took 39-42 us per
# back-to-back call on the H200 host of edd0822, 0.94-1.01 of upstream by device_us, where the C++ path costs ~8 us.
TRITON_MIN_ELEMENTS = 7 << 22


def fused_inplace_qknorm_rope(q, k, q_weight, k_weight, cos_sin_cache, positions, *, is_neox, eps=1e-6,
                              head_dim=0, rope_dim=0):
    """Drop-in for sglang's fused_inplace_qknorm_rope: per-head RMSNorm of q [N, Hq, D] and k [N, Hk, D] with
    q_weight / k_weight [D], then RoPE of the first rope_dim dims from cos_sin_cache [max_pos, rope_dim] (cos half,
    then sin half) at positions [N]; in place, returns None."""
    if q.is_cuda and q.numel() + k.numel() < TRITON_MIN_ELEMENTS and \
            cuda_ext.load().qknorm_rope(q, k, q_weight, k_weight, cos_sin_cache, positions, is_neox, eps, head_dim,
                                        rope_dim):
        return None
    _triton_qknorm_rope(q, k, q_weight, k_weight, cos_sin_cache, positions, is_neox=is_neox, eps=eps,
                        head_dim=head_dim, rope_dim=rope_dim)
    return None
