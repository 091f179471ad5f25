"""Writes workloads.json for rope. Run: python bench/make_workloads.py [--check] (`kda shapes` runs it too).

One upstream entry point, sglang/jit_kernel/rope.py's apply_rope_with_cos_sin_cache_inplace(q, k, cos_sin_cache,
positions, *, is_neox, rope_dim=0, fused_args=None), called as SGLang 0.5.15's RotaryEmbedding.forward_cuda calls it
(srt/layers/rotary_embedding/base.py:41-42 imports it on CUDA, :370-384 calls it): q and k viewed [T, H, head_dim]
and, with partial rotary, sliced to their first rotary_dim columns; the cache the module built (fp32 on CUDA,
[max_pos, rotary_dim], cos half then sin half); no rope_dim (the cache's width); no fused_args (no model below passes
one). Head sizes other than 64/128/256/512 take another kernel (`rotary_embedding`, pos_enc.cuh, base.py:100-121);
none of the models below has one.

Production rows come from the LLM shape catalog, llm/shapes/workloads.json (op `rope`: q [T, Hq, R], k [T, Hk, R]
per rank; R = rope_dim), with each model's rope style from llm/shapes/<model>.toml. Selection rule (silu_and_mul's):
- models Llama-3.1-8B, Qwen3-8B and Qwen3-32B at tp 1 and 8, DeepSeek-V3 at tp 8, each at decode batches 1, 8, 64,
  256 and prefill chunks of 512, 2048 and 8192 tokens; bf16 everywhere;
- layout as the model passes it. Dense models (llama.py:208-209, qwen3.py:175-184): q and k are column slices of the
  fused qkv_proj output [T, (Hq + 2 Hk) D] (Qwen3's q/k norm runs in place, so the slices stay), so both have token
  stride (Hq + 2 Hk) D and head stride D, k at storage offset Hq D. DeepSeek-V3 (MLA, interleaved: rope_interleave
  defaults true): forward_mla.py:232-233 and :560 pass q_pe = q[..., 128:] of q [T, 16, 192] (head stride 192,
  offset 128) and k_pe = latent_cache[..., 512:].unsqueeze(1) of latent_cache [T, 576] (token stride 576, offset
  512) through DeepseekScalingRotaryEmbedding, which inherits forward_cuda, so the same entry point serves it on
  H200 (head size 64; the trtllm-MLA fused-rope path is sm_100 only). Upstream's TensorMatcher wants one head stride
  for q and k but skips the check on a size-1 dim, so k_pe's single head passes;
- cache rows: what the model's rotary module allocates (max_position_embeddings; DeepSeek-V3's YaRN module
  original_max_position_embeddings 4096 x factor 40); values uniform in [-1, 1) (the harness has no cos/sin
  distribution; the kernel reads the values and does not depend on them being cos/sin);
- positions int64, an arange over the tokens;
- rows of identical shape and layout (same q/k shapes and strides, style) are kept once, under the first workload's
  id (Qwen3-8B's attention is Llama-3.1-8B's: 32/8 heads of 128); the others are named in its source.

Regression rows (most small enough for the CPU gate): interleaved vs NeoX at R 64/128/256, partial rotary (R < head
size: the [T, H, R] view of wider heads, as forward_cuda slices it), fp16, GQA and one k head, one token and odd
counts, int32 and permuted positions, large positions (an arange at a storage offset into a long cache), contiguous
q/k, explicit rope_dim, storage offsets (16-byte multiples: upstream loads whole vectors), NaN/Inf.
"""
import sys
import tomllib
from pathlib import Path

from kda.core.paths import repo_root
from kda.definition.workloads import tensor_decl, write_or_check
from kda.shapes.llm import selected_workloads

OUT = Path(__file__).with_name("workloads.json")
SHAPES = repo_root() / "llm" / "shapes"
FN = "apply_rope_with_cos_sin_cache_inplace"

MODELS = {"Llama-3.1-8B": (1, 8), "Qwen3-8B": (1, 8), "Qwen3-32B": (1, 8), "DeepSeek-V3": (8,)}
# Rows of the cos_sin_cache each model's rotary module builds (config.json, llm/shapes/SOURCES.md).
MAX_POS = {"Llama-3.1-8B": 131072, "Qwen3-8B": 40960, "Qwen3-32B": 40960, "DeepSeek-V3": 163840}
SEED0 = 36000


def rope_style(model: str) -> str:
    for p in sorted(SHAPES.glob("*.toml")):
        m = tomllib.loads(p.read_text()).get("model", {})
        if m.get("name") == model:
            return m["rope_style"]
    raise KeyError(model)


def qk_row(rid, model, source, n, hq, r, seed, *, hk=None, neox=True, dtype="bfloat16", q_stride=None, k_stride=None,
           q_offset=0, k_offset=0, cache_rows=None, pos_dtype="int64", pos_dist="arange", pos_offset=0,
           qk_dist="normal", rope_dim=0, production=False, cpu=True):
    hk = hk or hq
    tensors = {
        "q": tensor_decl([n, hq, r], dtype, q_stride, q_offset, qk_dist),
        "k": tensor_decl([n, hk, r], dtype, k_stride, k_offset, qk_dist),
        "cos_sin_cache": tensor_decl([cache_rows or (n + pos_offset), r], "float32", None, 0, "uniform"),
        "positions": tensor_decl([n], pos_dtype, None, pos_offset, pos_dist),
    }
    return {"id": rid, "production": production, "model": model, "source": source, "function": FN,
            "tensors": tensors, "scalars": {"is_neox": neox, "rope_dim": rope_dim}, "seed": seed, "cpu": cpu}


def production_rows() -> list[dict]:
    out, seen = [], {}
    for w in selected_workloads(MODELS):
        shapes = w["ops"].get("rope")
        if shapes is None:
            continue
        q, k = shapes["q"], shapes["k"]
        T, hq, r = q
        hk = k[1]
        pr = w["per_rank"]
        style = rope_style(w["model"])
        if w["model"] == "DeepSeek-V3":
            d, lat = pr["head_dim"], 576  # q [T, Hq, 192]; latent_cache [T, kv_lora_rank 512 + rope 64]
            qs, ks, qo, ko = [hq * d, d, 1], [lat, r, 1], d - r, lat - r
            layout = f"q_pe = q[..., {d - r}:] of q [T, {hq}, {d}], k_pe = latent_cache[..., {lat - r}:] of [T, {lat}]"
        else:
            d = pr["head_dim"]
            width = (hq + 2 * hk) * d
            qs, ks, qo, ko = [width, d, 1], [width, d, 1], 0, hq * d
            layout = f"q and k slices of qkv [T, {width}] (head_dim {d})"
        key = (tuple(q), tuple(k), tuple(qs), tuple(ks), qo, ko, style, w["dtype"])
        if key in seen:
            seen[key]["source"] += f"; also {w['id']}"
            continue
        src = (f"derived: llm/shapes/workloads.json {w['id']} ops.rope q {q} k {k} ({w['model']}, tp {w['tp']}, "
               f"{w['phase']} {T} tokens; {style}; {layout}; cache [{MAX_POS[w['model']]}, {r}])")
        rr = qk_row(w["id"], w["model"], src, T, hq, r, SEED0 + len(out), hk=hk, neox=style == "neox",
                    dtype=w["dtype"], q_stride=qs, k_stride=ks, q_offset=qo, k_offset=ko,
                    cache_rows=MAX_POS[w["model"]], production=True, cpu=False)
        seen[key] = rr
        out.append(rr)
    return out


def reg(rid, why, *a, **kw):
    return qk_row(f"reg_{rid}", "regression", f"regression: {why}", *a, **kw)


def qkv(hq, hk, d):
    w = (hq + 2 * hk) * d
    return {"q_stride": [w, d, 1], "k_stride": [w, d, 1], "k_offset": hq * d}


REGRESSION = []
for r in (64, 128, 256):
    for neox in (True, False):
        style = "neox" if neox else "interleaved"
        REGRESSION.append(reg(f"r{r}_{style}_n7_h3", f"rope_dim {r}, {style}, contiguous q and k", 7, 3, r,
                              9000 + r + neox, hk=2, neox=neox))
for d, r, neox in ((128, 64, True), (128, 32, False), (256, 128, True), (64, 32, True)):
    style = "neox" if neox else "interleaved"
    REGRESSION.append(reg(f"partial_d{d}_r{r}_{style}_n9",
                          f"partial rotary: the [T, H, {r}] view of heads of {d} (forward_cuda's q[..., :rotary_dim])",
                          9, 4, r, 9100 + d + r + neox, hk=2, neox=neox, q_stride=[4 * d, d, 1],
                          k_stride=[2 * d, d, 1]))
REGRESSION += [
    reg("fused_qkv_llama_tp8_n5", "Llama-3.1-8B tp 8's layout (4 q heads, one k head in a qkv slice), 5 tokens", 5, 4,
        128, 9201, hk=1, **qkv(4, 1, 128)),
    reg("mla_interleaved_n6", "DeepSeek-V3's layout: q_pe at offset 128 of [T, 4, 192], k_pe a slice of [T, 576]",
        6, 4, 64, 9202, hk=1, neox=False, q_stride=[4 * 192, 192, 1], q_offset=128, k_stride=[576, 64, 1],
        k_offset=512),
    reg("fp16_neox_n11", "fp16, NeoX", 11, 4, 128, 9203, hk=2, dtype="float16", **qkv(4, 2, 128)),
    reg("fp16_interleaved_n11", "fp16, interleaved", 11, 4, 64, 9204, hk=2, neox=False, dtype="float16"),
    reg("n1_h32", "one token, 32 q heads and 8 k heads", 1, 32, 128, 9205, hk=8, **qkv(32, 8, 128)),
    reg("odd_n131_h3", "odd token and head counts (131 tokens, 3 q heads, 1 k head)", 131, 3, 128, 9206, hk=1,
        **qkv(3, 1, 128)),
    reg("positions_int32_perm_n33", "int32 positions, a permutation, a cache longer than T", 33, 2, 128, 9207,
        pos_dtype="int32", pos_dist="permutation", cache_rows=50),
    reg("large_positions_n8", "positions 131064..131071: the end of Llama-3.1-8B's 131072-row cache (int64 offsets)",
        8, 4, 128, 9208, hk=1, pos_offset=131064, cache_rows=131072, **qkv(4, 1, 128)),
    reg("large_positions_interleaved_n5", "positions near the end of DeepSeek-V3's 163840-row cache, interleaved",
        5, 2, 64, 9209, hk=1, neox=False, pos_offset=163835, cache_rows=163840),
    reg("rope_dim_explicit_n4", "rope_dim passed explicitly (equal to the cache width)", 4, 2, 128, 9210,
        rope_dim=128),
    reg("storage_offsets_n6", "q and k at storage offsets (16-byte multiples), positions at an offset", 6, 2, 128,
        9211, q_offset=64, k_offset=128, pos_offset=3, cache_rows=12),
    reg("large_values_n8", "large magnitudes (x 1e4 in bf16)", 8, 4, 128, 9212, qk_dist="large"),
    reg("specials_n16", "NaN and +-Inf in q and k (NeoX)", 16, 4, 128, 9213, qk_dist="specials"),
    reg("specials_interleaved_fp16_n16", "NaN and +-Inf in fp16 q and k, interleaved", 16, 4, 64, 9214, neox=False,
        dtype="float16", qk_dist="specials"),
    # GPU-sized regression rows (not for the interpreter).
    reg("neox_fp16_n8192_h32", "fp16 at Llama-3.1-8B tp 1's layout, 8192 tokens", 8192, 32, 128, 9301, hk=8,
        dtype="float16", cache_rows=131072, cpu=False, **qkv(32, 8, 128)),
    reg("interleaved_n8192_h32", "interleaved (GPT-J) at a dense layout, 8192 tokens", 8192, 32, 128, 9302, hk=8,
        neox=False, cache_rows=131072, cpu=False, **qkv(32, 8, 128)),
    reg("partial_d128_r64_n2048_h32", "partial rotary R 64 of 128 at 2048 tokens", 2048, 32, 64, 9303, hk=8,
        q_stride=[48 * 128, 128, 1], k_stride=[48 * 128, 128, 1], k_offset=32 * 128, cpu=False),
]


def rows() -> list[dict]:
    return production_rows() + REGRESSION


def sweep_row(p, seed):
    """A row of the generalisation sweep (kda/definition/sweep.py draws p from config.toml's [sweep] domain): the
    dense production layout (q and k slices of a fused qkv buffer) at `tokens`, `heads` q heads and `heads / group`
    k heads of 128, NeoX or interleaved, in `dtype`."""
    T, hq = p["tokens"], p["heads"]
    hk = max(1, hq // p["group"])
    style = "neox" if p["neox"] else "interleaved"
    return qk_row(f"t{T}_hq{hq}_hk{hk}_{style}_{p['dtype']}", "sweep", "sweep", T, hq, 128, seed, hk=hk,
                  neox=p["neox"], dtype=p["dtype"], cpu=False, **qkv(hq, hk, 128))


if __name__ == "__main__":  # `kda shapes` runs it as __main__; kda's sweep imports it for sweep_row
    write_or_check(OUT, rows(), sys.argv[1:])
