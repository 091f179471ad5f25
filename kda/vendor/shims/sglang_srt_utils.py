"""Shim for `sglang.srt.utils` as SGLang 0.5.23's diffusion kernels import it: they ask only whether the GPU is an
AMD gfx1250, to route one bf16 case to torch. The harness runs on NVIDIA GPUs (and on a CPU through Triton's
interpreter, where upstream must take its CUDA path), so the answer is always no."""


def is_gfx1250_supported() -> bool:
    return False
