"""Shim for `sglang.kernels.jit.utils` as SGLang 0.5.23's `kda_kernels/norm_scale_shift_jit.py` imports it.

That module's native CUDA path runs only on Blackwell or newer: on the H100 and H200 its `try_*` entries return None
before anything is built, and the facade's CuTe DSL kernel runs (cutedsl_norm_scale_shift's `[upstream_latest]`).
The real JIT infrastructure imports half of SGLang's runtime (`sglang.srt`, distributed communicators), so it is
not vendored; `cache_once` is what the module decorates with, and `load_jit` fails loudly, naming why, should a
newer GPU ever reach it: the arm then fails its row instead of timing a kernel the facade would not pick."""
from __future__ import annotations

import functools


def cache_once(fn):
    """One result per argument tuple, as upstream's (a dict, not functools.lru_cache, for torch.compile)."""
    results = {}

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        key = (args, tuple(sorted(kwargs.items())))
        if key not in results:
            results[key] = fn(*args, **kwargs)
        return results[key]

    return wrapper


def load_jit(name: str, *args, **kwargs):
    raise RuntimeError(f"SGLang 0.5.23's JIT module {name!r} is its Blackwell-only native path, whose JIT "
                       "infrastructure kda does not vendor (kda/vendor/shims/sglang_kernels_jit_utils.py): this "
                       "GPU would take it, so the peer `latest` cannot run here as 0.5.23 would")
