"""Shim for `sglang.multimodal_gen.runtime.platforms`: the vendored kernels only ask which platform they run on.

The harness always runs the CUDA code path of the upstream file: on a GPU for real, and on a CPU through Triton's
interpreter. Answering "cpu" there would make upstream swap in its PyTorch fallback and test the wrong code.
"""


class _CudaPlatform:
    device_name = "cuda"
    device_type = "cuda"

    def is_cuda(self) -> bool:
        return True

    def is_cuda_alike(self) -> bool:
        return True

    def is_hip(self) -> bool:
        return False

    def is_rocm(self) -> bool:
        return False

    def is_npu(self) -> bool:
        return False

    def is_mps(self) -> bool:
        return False

    def is_musa(self) -> bool:
        return False

    def is_xpu(self) -> bool:
        return False

    def is_cpu(self) -> bool:
        return False


current_platform = _CudaPlatform()
