"""The CUDA kernel of qknorm_rope v2 (csrc/), built and loaded through kda.runtime.cuda_ext (torch's extension loader; the
build is named after the sources, so an edited kernel is never served from a stale build)."""
from kda.runtime.cuda_ext import CudaExtension

EXT = CudaExtension("kda_qknorm_rope", __file__, "csrc", ("binding.cpp", "qknorm_rope.cu"), ("qknorm_rope.h",))


def load():
    """The compiled extension (built on first use in this build directory)."""
    return EXT.load()
