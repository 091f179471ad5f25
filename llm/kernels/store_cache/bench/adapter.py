"""How the harness calls each arm of store_cache with the inputs a row declares.

The op works in place on k_cache and v_cache and returns None (config `check.inplace = ["k_cache", "v_cache"]`):
the outputs ARE the caches, so `output_specs` names exactly those two (their own shapes and dtypes) and the `out`
dict the harness passes holds the input tensors themselves. The whole caches are compared: slots the step does not
address must keep their values.

Both arms are called as SGLang 0.5.15 calls the baseline: `_set_kv_buffer_impl` (srt/mem_cache/memory_pool.py:
146-155) passes `k.view(-1, R)`, `v.view(-1, R)`, `k_cache.view(-1, R)`, `v_cache.view(-1, R)` (R = H_kv * D),
`out_cache_loc`, `row_bytes=R * esize` and `size_limit` (the pool's row count: size + page_size). The step's
out_cache_loc is `slots[:T]`, the first T entries of the row's slot permutation (bench/make_workloads.py).
"""
import torch

FN = "store_cache"


def build_key(row):
    """The template signature upstream JIT-builds a module for: the row's bytes (PDL follows the GPU)."""
    k = row.tensors["k"]
    return (k.shape[1] * k.shape[2] * torch.empty((), dtype=k.torch_dtype).element_size(),)


def output_specs(row, inputs):
    return {n: (tuple(inputs[n].shape), inputs[n].dtype) for n in ("k_cache", "v_cache")}


def _args(inputs):
    k, v, kc, vc = inputs["k"], inputs["v"], inputs["k_cache"], inputs["v_cache"]
    R = k.shape[1] * k.shape[2]
    args = (k.view(-1, R), v.view(-1, R), kc.view(-1, R), vc.view(-1, R), inputs["slots"][: k.shape[0]])
    return args, {"row_bytes": R * k.element_size(), "size_limit": kc.shape[0]}


def call_baseline(upstream, row, inputs, out):
    args, kwargs = _args(inputs)
    upstream[FN](*args, **kwargs)


def call_candidate(solution, row, inputs, out):
    args, kwargs = _args(inputs)
    return solution.store_cache(*args, **kwargs)


def bytes_moved(row):
    """k and v read once, each row written once into the caches; T indices read."""
    t = row.tensors
    k = t["k"]
    esize = torch.empty((), dtype=k.torch_dtype).element_size()
    isize = torch.empty((), dtype=t["slots"].torch_dtype).element_size()
    T = k.shape[0]
    return 4 * k.numel * esize + T * isize
