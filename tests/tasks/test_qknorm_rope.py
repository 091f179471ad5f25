"""qknorm_rope task folder: the v2 candidate's CUDA sources and its dispatch. The Triton general path is checked
against the oracle by the CPU gate (tests/test_cpu_gate.py); the CUDA kernel runs only on a GPU, so here it is
compiled for Hopper when nvcc is present (no spills, no stack frame), its sources are checked to be hashed as solution
code, and its launch to wait for its predecessor (PDL) before touching memory."""
import re
import sys

import torch

from kda.definition.task import Task

TASK = Task.load("qknorm_rope")
SOLUTION = TASK.load_solution()
CUDA_EXT = sys.modules[SOLUTION.__name__ + ".cuda_ext"]


def test_every_source_of_the_extension_is_hashed_and_counted_as_solution_code():
    names = {p.name for p in TASK.solution_files()}
    assert set(CUDA_EXT.EXT.sources) <= names  # provenance hashes every file the build reads
    assert all((CUDA_EXT.EXT.csrc / s).is_file() for s in CUDA_EXT.EXT.sources)
    assert {"binding.cpp", "qknorm_rope.cu", "qknorm_rope.h"} <= set(CUDA_EXT.EXT.sources)
    assert re.fullmatch(r"kda_qknorm_rope_[0-9a-f]{12}", CUDA_EXT.EXT.module_name())


def test_cuda_kernel_waits_for_its_predecessor_before_touching_memory():
    """The kernel is launched with programmatic dependent launch (PDL), so it may start while the previous kernel
    still runs: its wait must come before the first global access, and every launch must carry the attribute."""
    src = (CUDA_EXT.EXT.csrc / "qknorm_rope.cu").read_text()
    body = src[src.index("__global__ void"):src.index("cudaError_t launch_pdl")]
    wait = body.index("grid_dependency_wait();")
    first_access = min(body.index(s) for s in ("raw[u] =", "__ldg(", "head_ptr<T>("))
    assert wait < first_access
    assert "griddepcontrol.wait" in src and "cudaLaunchAttributeProgrammaticStreamSerialization" in src
    assert "<<<" not in src  # no launch bypasses launch_pdl
    assert body.count("launch_dependents();") == 2  # on the early exit and after the last store


def _refuse():
    raise AssertionError("the CUDA extension was asked for")


def test_cpu_tensors_take_the_triton_path_and_never_build_the_extension(monkeypatch):
    seen = []
    impl = sys.modules[SOLUTION.__name__ + ".qknorm_rope"]
    monkeypatch.setattr(CUDA_EXT, "load", _refuse)
    monkeypatch.setattr(impl, "_triton_qknorm_rope", lambda *a, **kw: seen.append((a, kw)))
    q, k = torch.zeros(5, 8, 128, dtype=torch.bfloat16), torch.zeros(5, 2, 128, dtype=torch.bfloat16)
    w, cache, pos = torch.ones(128, dtype=torch.bfloat16), torch.zeros(5, 64), torch.arange(5)
    assert SOLUTION.fused_inplace_qknorm_rope(q, k, w, w, cache, pos, is_neox=True, eps=1e-5, rope_dim=64) is None
    (args, kw), = seen
    assert args[0] is q and args[1] is k and args[4] is cache
    assert kw == {"is_neox": True, "eps": 1e-5, "head_dim": 0, "rope_dim": 64}


def test_cuda_kernel_compiles_for_hopper_without_spills(hopper_build):
    # 3 head sizes x 2 rotary styles x 2 dtypes x (1, 2, 4 or 8 heads per lane group)
    assert hopper_build(CUDA_EXT.EXT.csrc / "qknorm_rope.cu") == 48


def test_large_cuda_calls_take_the_triton_kernel(monkeypatch):
    """Past TRITON_MIN_ELEMENTS the GPU time hides Triton's host path and its kernel streams faster: dispatch there."""
    impl = sys.modules[SOLUTION.__name__ + ".qknorm_rope"]
    seen = []

    class FakeCuda:  # stands for a CUDA tensor: the dispatch reads only is_cuda and numel()
        is_cuda = True

        def __init__(self, n):
            self.n = n

        def numel(self):
            return self.n

    monkeypatch.setattr(CUDA_EXT, "load", _refuse)
    monkeypatch.setattr(impl, "_triton_qknorm_rope", lambda *a, **kw: seen.append(a[0]))
    half = impl.TRITON_MIN_ELEMENTS // 2
    q, k = FakeCuda(half), FakeCuda(impl.TRITON_MIN_ELEMENTS - half)
    SOLUTION.fused_inplace_qknorm_rope(q, k, None, None, None, None, is_neox=False)
    assert seen == [q]
