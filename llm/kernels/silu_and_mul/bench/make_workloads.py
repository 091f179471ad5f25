"""Writes workloads.json for silu_and_mul. Run: python bench/make_workloads.py [--check] (`kda shapes` runs it too).

Three upstream entry points share the task (sglang/jit_kernel/activation.py): `silu_and_mul`, `gelu_and_mul` and
`gelu_tanh_and_mul`, each `(input [..., 2I], out=None, expert_ids=None, expert_step=1)`; `row.function` picks one.

Production rows come from the LLM shape catalog, llm/shapes/workloads.json (`kda shapes` generates it from
llm/shapes/*.toml, kda/shapes/llm.py). Selection rule:
- ops `act_and_mul` (the dense MLP's gated activation: `SiluAndMul.forward_cuda`, srt/layers/activation.py:102-107
  in 0.5.15, which calls `silu_and_mul(x, out)` on a fresh `out`) and `shared_act_and_mul` (DeepSeek-V3's shared
  expert, a dense MLP too: DeepseekV2MLP's `act_fn = SiluAndMul()`, srt/models/deepseek_v2.py:282);
- models Llama-3.1-8B, Qwen3-8B and Qwen3-32B at tp 1 and 8, DeepSeek-V3 at tp 8 (its only degree), each at decode
  batches 1, 8, 64, 256 and prefill chunks of 512, 2048 and 8192 tokens;
- every model's hidden_act is silu and its dtype bf16, so every production row is `silu_and_mul` on bf16 x [T, 2I];
- rows of identical shape (same function, x shape and dtype) are kept once, under the first workload's id; the
  others are named in its source.
Left out: `moe_act_and_mul` (the routed experts). The fused MoE runner imports the same jit kernel
(srt/layers/moe/moe_runner/triton_utils/fused_moe.py:58) but may pass `expert_ids` or take other kernels
(DeepGEMM's masked/post-quant ones, moe_runner/deep_gemm.py); it is not a dense MLP and is not covered here. No
dense call passes `expert_ids`, so no row does.

Regression rows cover what upstream accepts that production does not exercise. Upstream's kernel
(csrc/elementwise/activation.cuh) verifies x [N, 2I] and out [N, I] CONTIGUOUS (TensorMatcher without strides) and of
one dtype (bf16, fp16 or fp32), and requires I to be a multiple of the vector width: 16 bytes / element size on
sm_90 (8 for 16-bit, 4 for fp32), 32 bytes on sm_100+. So there is no strided or transposed row (upstream refuses
them), no I that is not a multiple of 8 (4 for fp32) (refused on sm_90), and storage offsets are multiples of 16
elements (upstream loads whole 16/32-byte vectors and does not check alignment). The rows with I = 8 * odd (not a
multiple of 16) are refused by upstream on sm_100+.
"""
import sys
from pathlib import Path

from kda.definition.workloads import tensor_decl, write_or_check
from kda.shapes.llm import selected_workloads

OUT = Path(__file__).with_name("workloads.json")

MODELS = {"Llama-3.1-8B": (1, 8), "Qwen3-8B": (1, 8), "Qwen3-32B": (1, 8), "DeepSeek-V3": (8,)}
OPS = ("act_and_mul", "shared_act_and_mul")
SEED0 = 35000


def t(shape, dtype="bfloat16", stride=None, offset=0, dist="normal"):
    return tensor_decl(shape, dtype, stride, offset, dist)


def row(rid, model, source, function, x, seed, production=True, cpu=False):
    return {"id": rid, "production": production, "model": model, "source": source, "function": function,
            "tensors": {"x": x}, "scalars": {}, "seed": seed, "cpu": cpu}


def production_rows() -> list[dict]:
    out, seen = [], {}
    for w in selected_workloads(MODELS):
        for op in OPS:
            shapes = w["ops"].get(op)
            if shapes is None:
                continue
            x = shapes["x"]
            key = ("silu_and_mul", tuple(x), w["dtype"])
            suffix = "" if op == "act_and_mul" else "_shared"
            rid = f"{w['id']}{suffix}"
            if key in seen:
                seen[key]["source"] += f"; also {rid}"
                continue
            src = (f"derived: llm/shapes/workloads.json {w['id']} ops.{op}.x {x} ({w['model']}, tp {w['tp']}, "
                   f"{w['phase']} {w['tokens']} tokens; per-rank I = {x[1] // 2})")
            r = row(rid, w["model"], src, "silu_and_mul", t(x, w["dtype"]), SEED0 + len(out))
            seen[key] = r
            out.append(r)
    return out


REG = "regression"


def reg(rid, source, function, x, seed, cpu=True):
    return row(f"reg_{rid}", REG, f"regression: {source}", function, x, seed, production=False, cpu=cpu)


REGRESSION = [
    reg("silu_bf16_t4_i64", "small silu row, bf16", "silu_and_mul", t([4, 128]), 9001),
    reg("silu_bf16_t1_i1792", "a single token at Llama-3.1-8B tp 8's width", "silu_and_mul", t([1, 3584]), 9002),
    reg("silu_bf16_t3_i200", "I = 200 = 8 * 25: not a multiple of 16 (sm_90's vector is 8 bf16; sm_100+ refuses)",
        "silu_and_mul", t([3, 400]), 9003),
    reg("silu_bf16_t5_i8", "I = 8: one vector per half", "silu_and_mul", t([5, 16]), 9004),
    reg("silu_bf16_t17_i1000", "I = 1000 (not a power of two), 17 tokens", "silu_and_mul", t([17, 2000]), 9005),
    reg("silu_fp16_t9_i320", "fp16", "silu_and_mul", t([9, 640], "float16"), 9006),
    reg("silu_fp32_t6_i100", "fp32 (upstream takes fp32_t; I = 100: a multiple of 4, fp32's vector on sm_90)",
        "silu_and_mul", t([6, 200], "float32"), 9007),
    reg("silu_bf16_3d_b2_s5_i96", "3-D x [B, S, 2I] (upstream views it as [B*S, 2I]; out [B, S, I])",
        "silu_and_mul", t([2, 5, 192]), 9008),
    reg("silu_bf16_t3_i128_offset16", "contiguous x at a storage offset of 16 elements (32 bytes)",
        "silu_and_mul", t([3, 256], offset=16), 9009),
    reg("silu_bf16_t8_i256_large", "values near 1e4 (silu saturates: exp(-x) overflows for x < -88)",
        "silu_and_mul", t([8, 512], dist="large"), 9010),
    reg("silu_bf16_t16_i128_specials", "NaN and +-Inf in x (silu(-inf) = -inf / inf = NaN, as the math puts it)",
        "silu_and_mul", t([16, 256], dist="specials"), 9011),
    reg("silu_fp16_t8_i96_specials", "fp16 with NaN and +-Inf", "silu_and_mul", t([8, 192], "float16",
                                                                                 dist="specials"), 9012),
    reg("gelu_bf16_t7_i256", "erf gelu, bf16", "gelu_and_mul", t([7, 512]), 9101),
    reg("gelu_fp16_t5_i200", "erf gelu, fp16, I = 8 * 25", "gelu_and_mul", t([5, 400], "float16"), 9102),
    reg("gelu_fp32_t4_i36", "erf gelu, fp32", "gelu_and_mul", t([4, 72], "float32"), 9103),
    reg("gelu_bf16_t8_i128_large", "erf gelu at values near 1e4", "gelu_and_mul", t([8, 256], dist="large"), 9104),
    reg("gelu_bf16_t16_i128_specials", "erf gelu with NaN and +-Inf", "gelu_and_mul", t([16, 256], dist="specials"),
        9105),
    reg("gelu_tanh_bf16_t5_i128", "tanh gelu, bf16", "gelu_tanh_and_mul", t([5, 256]), 9201),
    reg("gelu_tanh_fp16_t3_i520", "tanh gelu, fp16, I = 8 * 65", "gelu_tanh_and_mul", t([3, 1040], "float16"), 9202),
    reg("gelu_tanh_bf16_3d_b3_s2_i64", "tanh gelu, 3-D x", "gelu_tanh_and_mul", t([3, 2, 128]), 9203),
    reg("gelu_tanh_bf16_t8_i128_large", "tanh gelu at values near 1e4 (x^3 near 1e12 in fp32)", "gelu_tanh_and_mul",
        t([8, 256], dist="large"), 9204),
    reg("gelu_tanh_bf16_t16_i128_specials", "tanh gelu with NaN and +-Inf", "gelu_tanh_and_mul",
        t([16, 256], dist="specials"), 9205),
    # GPU-sized regression rows (not for the interpreter): the other entry points at a production width.
    reg("gelu_bf16_t2048_i3200", "erf gelu at Qwen3-32B tp 8's width, 2048 tokens", "gelu_and_mul",
        t([2048, 6400]), 9301, cpu=False),
    reg("gelu_tanh_bf16_t2048_i3200", "tanh gelu at Qwen3-32B tp 8's width, 2048 tokens", "gelu_tanh_and_mul",
        t([2048, 6400]), 9302, cpu=False),
    reg("silu_fp16_t8192_i1536", "fp16 at Qwen3-8B tp 8's width, 8192 tokens", "silu_and_mul",
        t([8192, 3072], "float16"), 9303, cpu=False),
]


def rows() -> list[dict]:
    return production_rows() + REGRESSION


def sweep_row(p, seed):
    """A row of the generalisation sweep (kda/definition/sweep.py draws p from config.toml's [sweep] domain):
    `function` on x [tokens, 2 * I] of `dtype`, I = 8 * i8 (upstream's vector width on sm_90)."""
    T, I, dt, fn = p["tokens"], 8 * p["i8"], p["dtype"], p["function"]
    return row(f"{fn}_t{T}_i{I}_{dt}", "sweep", "sweep", fn, t([T, 2 * I], dt), seed, production=False)


if __name__ == "__main__":  # `kda shapes` runs it as __main__; kda's sweep imports it for sweep_row
    write_or_check(OUT, rows(), sys.argv[1:])
