"""Writes workloads.json for store_cache. Run: python bench/make_workloads.py [--check] (`kda shapes` runs it too).

One upstream entry point (sglang/jit_kernel/kvcache.py): `store_cache(k [B, R], v [B, R], k_cache [S, R],
v_cache [S, R], indices [B], *, row_bytes=0, num_split=0, size_limit=0)`, R = H_kv * D, writing the caches in place.
A row declares k and v `[T, H_kv, D]` and the caches `[S, H_kv, D]` as SGLang's MHATokenToKVPool holds them; the
adapter views them as `[-1, R]` as `_set_kv_buffer_impl` does (srt/mem_cache/memory_pool.py:146-155).

The step's out_cache_loc: a row declares `slots`, a permutation of the cache's S slot indices (dist `permutation`,
reshuffled per trial), and the step's indices are its first T entries (`slots[:T]`, a view the adapter takes): a
random subset of distinct slots, as the allocator hands out. Duplicate indices are left out: two tokens writing one
slot race in upstream's kernel (undefined which wins), and SGLang never passes them within a step.

Production rows come from the LLM shape catalog, llm/shapes/workloads.json (`kda shapes` generates it from
llm/shapes/*.toml, kda/shapes/llm.py). Selection rule (silu_and_mul's):
- op `store_cache` with `k` and `v` shapes (the MHA pool's write; `_set_kv_buffer_impl` calls store_cache where
  `can_use_store_cache(row_bytes)` and K and V share D, which every model below does);
- dense models Llama-3.1-8B, Qwen3-8B and Qwen3-32B at tp 1 and 8, and the MoE models whose attention writes the
  same MHA pool through the same entry point, Qwen3-30B-A3B and gpt-oss-120b (its sliding-window layers write a pool
  of the same class), at tp 1 and 8; each at decode batches 1, 8, 64, 256 and prefill chunks of 512, 2048, 8192;
- every model's KV cache is bf16, so every production row is bf16;
- rows of identical shape (k shape and dtype) are kept once, under the first workload's id; the others are named in
  its source.
Left out: DeepSeek-V3 (catalog entry `latent`): its MLA pool writes the latent cache by indexing
(`MLATokenToKVPool.set_kv_buffer`, memory_pool.py:2723-2750), not through this kernel.

The cache: 65536 slots (page_size 1: slot 0 is SGLang's padding slot, where padded tokens write, so it is a valid
index), about what an H200 holds per layer at these widths and small enough to keep the bytes reasonable (2 x 128 MiB
at 2 KiB rows).

Regression rows cover what upstream accepts that production does not exercise: any row width R * esize that is a
multiple of 4 (bf16, fp16, fp32), k and v with any token stride and unit stride along R (slices of a fused QKV
buffer, which `k.view(-1, R)` keeps), int32 or int64 indices. The caches must share one row stride (one matcher
verifies both), so no row gives them different strides.
"""
import sys
from pathlib import Path

from kda.definition.workloads import tensor_decl, write_or_check
from kda.shapes.llm import selected_workloads

OUT = Path(__file__).with_name("workloads.json")

MODELS = {"Llama-3.1-8B": (1, 8), "Qwen3-8B": (1, 8), "Qwen3-32B": (1, 8), "Qwen3-30B-A3B": (1, 8),
          "gpt-oss-120b": (1, 8)}
OP = "store_cache"
SLOTS = 65536
SEED0 = 36000


def kv_row(rid, model, source, T, H, D, seed, dtype="bfloat16", S=SLOTS, kv_stride=None, loc_dtype="int64",
           dist="normal", production=False, cpu=False):
    tensors = {
        "k": tensor_decl([T, H, D], dtype, kv_stride, 0, dist),
        "v": tensor_decl([T, H, D], dtype, kv_stride, 0, dist),
        "k_cache": tensor_decl([S, H, D], dtype),
        "v_cache": tensor_decl([S, H, D], dtype),
        "slots": tensor_decl([S], loc_dtype, None, 0, "permutation"),
    }
    return {"id": rid, "production": production, "model": model, "source": source, "function": "store_cache",
            "tensors": tensors, "scalars": {}, "seed": seed, "cpu": cpu}


def production_rows() -> list[dict]:
    out, seen = [], {}
    for w in selected_workloads(MODELS):
        shapes = w["ops"].get(OP)
        if shapes is None or "k" not in shapes:
            continue
        k, v = shapes["k"], shapes["v"]
        if k != v:
            raise SystemExit(f"{w['id']}: k {k} and v {v} differ; upstream's store_cache needs one row width")
        key = (tuple(k), w["dtype"])
        if key in seen:
            seen[key]["source"] += f"; also {w['id']}"
            continue
        T, H, D = k
        src = (f"derived: llm/shapes/workloads.json {w['id']} ops.{OP}.k/v {k} ({w['model']}, tp {w['tp']}, "
               f"{w['phase']} {T} tokens; per-rank KV heads {H}, head dim {D}; cache of {SLOTS} slots)")
        r = kv_row(w["id"], w["model"], src, T, H, D, SEED0 + len(out), w["dtype"], production=True)
        seen[key] = r
        out.append(r)
    return out


REG = "regression"


def reg(rid, source, T, H, D, seed, cpu=True, **kw):
    return kv_row(f"reg_{rid}", REG, f"regression: {source}", T, H, D, seed, cpu=cpu, **kw)


REGRESSION = [
    reg("bf16_t4_h2_d128_s64", "small bf16 row (512-byte rows: one warp, 16-byte vectors)", 4, 2, 128, 9001, S=64),
    reg("fp16_t5_h2_d128_s64", "fp16", 5, 2, 128, 9002, dtype="float16", S=64),
    reg("fp32_t3_h2_d32_s32", "fp32 (256-byte rows)", 3, 2, 32, 9003, dtype="float32", S=32),
    reg("bf16_t7_h2_d64_s64", "D = 64 (gpt-oss's head dim)", 7, 2, 64, 9004, S=64),
    reg("bf16_t4_h3_d40_s48", "D = 40, H = 3: 240-byte rows (4-byte vectors, a partial last vector per warp)", 4, 3,
        40, 9005, S=48),
    reg("bf16_t3_h1_d256_s32", "D = 256 (512-byte rows)", 3, 1, 256, 9006, S=32),
    reg("bf16_t1_h1_d128_s64", "a single token", 1, 1, 128, 9007, S=64),
    reg("bf16_t6_h4_d128_s32", "1 KiB rows (upstream splits each row over 2 warps)", 6, 4, 128, 9008, S=32),
    reg("bf16_t5_h8_d128_s32", "2 KiB rows (upstream splits each row over 4 warps)", 5, 8, 128, 9009, S=32),
    reg("bf16_t6_h2_d128_fused_qkv", "k and v as slices of a fused [T, Hq + 2 Hk, D] QKV buffer (Hq 8, Hk 2: token "
        "stride 12 * 128)", 6, 2, 128, 9010, S=64, kv_stride=[12 * 128, 128, 1]),
    reg("bf16_t5_h2_d128_int32", "int32 indices", 5, 2, 128, 9011, S=64, loc_dtype="int32"),
    reg("bf16_t16_h2_d64_all_slots", "every slot written (T = S = 16: slot 0, the padding slot, and the last one)",
        16, 2, 64, 9012, S=16),
    reg("bf16_t8_h2_d128_specials", "NaN and +-Inf in k and v: copied as they are", 8, 2, 128, 9013, S=32,
        dist="specials"),
    reg("fp16_t8_h2_d64_specials", "fp16 with NaN and +-Inf", 8, 2, 64, 9014, S=32, dtype="float16",
        dist="specials"),
    # GPU-sized regression rows (not for the interpreter).
    reg("fp16_t2048_h8_d128", "fp16 at Llama-3.1-8B tp 1's width, 2048 tokens", 2048, 8, 128, 9101, S=SLOTS,
        dtype="float16", cpu=False),
    reg("bf16_t256_h8_d128_fused_qkv", "fused-QKV slices (Hq 32, Hk 8: token stride 48 * 128), 256 tokens", 256, 8,
        128, 9102, S=SLOTS, kv_stride=[48 * 128, 128, 1], cpu=False),
    reg("bf16_t8192_h2_d128_int32", "int32 indices, 8192 tokens, 512-byte rows", 8192, 2, 128, 9103, S=SLOTS,
        loc_dtype="int32", cpu=False),
]


def rows() -> list[dict]:
    return production_rows() + REGRESSION


def sweep_row(p, seed):
    """A row of the generalisation sweep (kda/definition/sweep.py draws p from config.toml's [sweep] domain):
    k and v [tokens, kv_heads, head_dim] of `dtype` into caches of max(32, 2 * tokens) slots (65536 from 4096
    tokens on, the production cache; smaller caches keep the interpreter's rows small)."""
    T, H, D, dt = p["tokens"], p["kv_heads"], p["head_dim"], p["dtype"]
    S = SLOTS if T >= 4096 else max(32, 2 * T)
    return kv_row(f"t{T}_h{H}_d{D}_{dt}", "sweep", "sweep", T, H, D, seed, dt, S=S)


if __name__ == "__main__":  # `kda shapes` runs it as __main__; kda's sweep imports it for sweep_row
    write_or_check(OUT, rows(), sys.argv[1:])
