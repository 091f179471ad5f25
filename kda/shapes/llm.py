"""The LLM campaign's shape catalog (issue 35): one TOML file per model under llm/shapes/, the serving grid in
llm/shapes/grid.toml, and the per-rank tensor shapes of every kernel family a decoder layer runs, for each model,
tensor-parallel degree, phase and token count, generated into llm/shapes/workloads.json (`kda shapes` writes it,
`kda shapes --check` compares, as for the diffusion tasks' workloads).

What a workload is: one forward step of one decoder layer on one tensor-parallel rank. Decode steps run `batch`
requests of one token each; prefill steps run a chunk of `tokens` tokens. Under tensor parallelism (SGLang's default
for these models: no expert parallelism, no data-parallel attention) each rank holds heads/tp query heads, its share
of the KV heads (a KV head is replicated when tp exceeds their count), intermediate/tp of every MLP and of every
expert's MLP. The hidden size is whole on every rank (the norms and the residual run on all of it).

Families (the keys of a workload's `ops`), each with its tensors' shapes:
  rmsnorm            x, residual [T, hidden]: input and post-attention norms with the residual add (fused_add_rmsnorm)
  qk_norm            q [T, Hq, D], k [T, Hk, D]: per-head RMSNorm of q and k (Qwen3)
  rope               q [T, Hq, R], k [T, Hk, R]: rotary embedding on R = rope_dim columns (MLA: the decoupled heads)
  act_and_mul        x [T, 2I] -> out [T, I]: the gated activation of the dense MLP (and of shared experts)
  moe_act_and_mul    x [T*k, 2Ie] -> out [T*k, Ie]: the experts' gated activation over routed token copies
  moe_routing        logits [T, E] -> top-k: the router's selection
  store_cache        k [T, Hk, D], v [T, Hk, Dv]: writing the step's keys and values into the KV cache
                     (MLA: one latent [T, 1, kv_lora_rank + rope_dim], no v)
  latent_norm        q_a [T, q_lora_rank], kv_a [T, kv_lora_rank]: MLA's two low-rank norms
  quant_fp8_group    each block-fp8 GEMM's activation (hidden [T, hidden], o_proj [T, Hq*Dv], MLA's q_b_proj
                     [T, q_lora_rank], down [T, I], moe_down [T*k, Ie], shared_down), quantised per token group (128)
Attention and GEMMs are not kernel families of this campaign (their libraries own them); they are left out.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

import tomli

from kda.core.errors import KdaError
from kda.core.paths import repo_root

SHAPES_DIR = Path("llm") / "shapes"
GRID_FILE, WORKLOADS_FILE = "grid.toml", "workloads.json"
DTYPES = ("bfloat16", "float16")
QUANTS = ("none", "fp8-block128", "mxfp4-experts")
ROPE_STYLES = ("neox", "interleaved")
ATTENTION = ("gqa", "mla")
# [dims] every model declares, and those its attention kind or its experts add (0 where a model has none)
COMMON = ("hidden", "layers", "heads", "head_dim", "rope_dim", "intermediate", "vocab")
GQA = ("kv_heads",)
MLA = ("q_lora_rank", "kv_lora_rank", "v_head_dim")
MOE = ("experts", "experts_per_token", "moe_intermediate", "shared_experts", "dense_layers")
QUANT_GROUP = 128  # per-token-group fp8: DeepSeek-V3's weight_block_size [128, 128] sets the activation groups


@dataclass(frozen=True)
class LlmModel:
    slug: str  # the file name without .toml: workload ids start with it
    name: str
    source: str
    dtype: str
    quantization: str
    attention: str
    rope_style: str
    qk_norm: bool
    dims: dict
    tp: tuple[int, ...]
    tp_why: str
    path: Path

    @property
    def moe(self) -> bool:
        return self.dims.get("experts", 0) > 0


def _err(path: Path, key: str, what: str) -> KdaError:
    return KdaError(f"{path}: key {key!r}: {what}")


def _choice(path: Path, table: dict, key: str, allowed: tuple[str, ...], where: str) -> str:
    v = table.get(key)
    if v not in allowed:
        raise _err(path, f"{where}.{key}", f"expected one of {', '.join(allowed)}, got {v!r}")
    return v


def _ints(path: Path, values, key: str) -> tuple[int, ...]:
    if not isinstance(values, list) or not values or not all(isinstance(v, int) and v > 0 for v in values):
        raise _err(path, key, f"expected a non-empty list of positive integers, got {values!r}")
    if sorted(set(values)) != values:
        raise _err(path, key, f"expected increasing values without repeats, got {values}")
    return tuple(values)


def load_grid(directory: Path | None = None) -> dict:
    """llm/shapes/grid.toml: the serving grid every model is generated over (a model may narrow its tp)."""
    path = (directory or repo_root() / SHAPES_DIR) / GRID_FILE
    if not path.is_file():
        raise KdaError(f"{path}: missing (the LLM serving grid: [grid] tp, decode_batch, prefill_tokens)")
    grid = tomli.loads(path.read_text()).get("grid")
    if not isinstance(grid, dict):
        raise _err(path, "grid", "expected a [grid] table")
    return {k: _ints(path, grid.get(k), f"grid.{k}") for k in ("tp", "decode_batch", "prefill_tokens")}


def load_model(path: Path, grid: dict) -> LlmModel:
    """One model file, every key checked: an error names the file and the key, and what was expected."""
    try:
        data = tomli.loads(path.read_text())
    except tomli.TOMLDecodeError as e:
        raise KdaError(f"{path}: not valid TOML: {e}") from e
    m, dims = data.get("model"), data.get("dims")
    if not isinstance(m, dict) or not isinstance(dims, dict):
        raise _err(path, "model" if not isinstance(m, dict) else "dims", "expected a table")
    for key in ("name", "source"):
        if not isinstance(m.get(key), str) or not m[key].strip():
            raise _err(path, f"model.{key}", "expected a non-empty string")
    if "llm/shapes/SOURCES.md#" not in m["source"]:
        raise _err(path, "model.source", "expected a citation of llm/shapes/SOURCES.md#<section>")
    attention = _choice(path, m, "attention", ATTENTION, "model")
    need = COMMON + (GQA if attention == "gqa" else MLA) + MOE
    for key in need:
        v = dims.get(key)
        if not isinstance(v, int) or isinstance(v, bool) or v < 0 or (v == 0 and key in COMMON + GQA + MLA):
            raise _err(path, f"dims.{key}", f"expected a {'non-negative' if key in MOE else 'positive'} integer, "
                                            f"got {v!r}")
    extra = sorted(set(dims) - set(need))
    if extra:
        raise _err(path, f"dims.{extra[0]}", f"not a dimension of a {attention} model ({', '.join(need)})")
    if dims["experts"] and not (0 < dims["experts_per_token"] <= dims["experts"] and dims["moe_intermediate"]):
        raise _err(path, "dims.experts_per_token", "a model with experts needs 0 < experts_per_token <= experts "
                                                   "and a moe_intermediate")
    if not dims["experts"] and any(dims[k] for k in MOE):
        raise _err(path, "dims.experts", "0, yet other expert dimensions are set")
    if not isinstance(m.get("qk_norm"), bool):
        raise _err(path, "model.qk_norm", f"expected true or false, got {m.get('qk_norm')!r}")
    serving = data.get("serving") or {}
    tp = _ints(path, serving["tp"], "serving.tp") if "tp" in serving else grid["tp"]
    if "tp" in serving and not isinstance(serving.get("why"), str):
        raise _err(path, "serving.why", "a model that narrows the grid's tp says why")
    if not set(tp) <= set(grid["tp"]):
        raise _err(path, "serving.tp", f"{list(tp)} leaves the grid's tp {list(grid['tp'])}")
    model = LlmModel(path.stem, m["name"], m["source"], _choice(path, m, "dtype", DTYPES, "model"),
                     _choice(path, m, "quantization", QUANTS, "model"), attention,
                     _choice(path, m, "rope_style", ROPE_STYLES, "model"), m["qk_norm"], dict(dims), tp,
                     serving.get("why", ""), path)
    for t in tp:
        per_rank(model, t)  # a degree that does not divide the model fails on load
    return model


def load_models(directory: Path | None = None) -> list[LlmModel]:
    d = directory or repo_root() / SHAPES_DIR
    grid = load_grid(d)
    models = [load_model(p, grid) for p in sorted(d.glob("*.toml")) if p.name != GRID_FILE]
    if not models:
        raise KdaError(f"{d}: no model file (*.toml besides {GRID_FILE})")
    return models


def _split(model: LlmModel, key: str, tp: int) -> int:
    v = model.dims[key]
    if v % tp:
        raise _err(model.path, f"dims.{key}", f"{v} does not split over tp={tp} ranks")
    return v // tp


def per_rank(model: LlmModel, tp: int) -> dict:
    """The dimensions one tensor-parallel rank holds."""
    d = model.dims
    out = {"hidden": d["hidden"], "heads": _split(model, "heads", tp), "head_dim": d["head_dim"],
           "rope_dim": d["rope_dim"], "intermediate": _split(model, "intermediate", tp)}
    if model.attention == "gqa":
        kv = d["kv_heads"]
        if kv >= tp:
            out["kv_heads"] = _split(model, "kv_heads", tp)
        elif tp % kv:
            raise _err(model.path, "dims.kv_heads", f"{kv} KV heads can be neither split nor replicated evenly "
                                                    f"over tp={tp} ranks")
        else:
            out["kv_heads"] = 1  # each rank keeps one KV head, replicated tp / kv_heads times
    if model.moe:
        out["moe_intermediate"] = _split(model, "moe_intermediate", tp)
    return out


def _ops(model: LlmModel, r: dict, T: int) -> dict:
    d, ops = model.dims, {}
    ops["rmsnorm"] = {"x": [T, r["hidden"]], "residual": [T, r["hidden"]]}
    if model.attention == "gqa":
        hk, dv, cache = r["kv_heads"], d["head_dim"], None
    else:
        hk, dv, cache = 1, d["v_head_dim"], [T, 1, d["kv_lora_rank"] + d["rope_dim"]]
        ops["latent_norm"] = {"q_a": [T, d["q_lora_rank"]], "kv_a": [T, d["kv_lora_rank"]]}
    if model.qk_norm:
        ops["qk_norm"] = {"q": [T, r["heads"], r["head_dim"]], "k": [T, hk, r["head_dim"]]}
    ops["rope"] = {"q": [T, r["heads"], r["rope_dim"]], "k": [T, hk, r["rope_dim"]]}
    ops["store_cache"] = {"latent": cache} if cache else {"k": [T, hk, r["head_dim"]], "v": [T, hk, dv]}
    dense = not model.moe or d["dense_layers"] > 0
    if dense:
        ops["act_and_mul"] = {"x": [T, 2 * r["intermediate"]], "out": [T, r["intermediate"]]}
    if model.moe:
        k, ie = d["experts_per_token"], r["moe_intermediate"]
        ops["moe_routing"] = {"logits": [T, d["experts"]], "topk": [T, k]}
        ops["moe_act_and_mul"] = {"x": [T * k, 2 * ie], "out": [T * k, ie]}
        if d["shared_experts"]:
            ops["shared_act_and_mul"] = {"x": [T, 2 * d["shared_experts"] * ie], "out": [T, d["shared_experts"] * ie]}
    if model.quantization == "fp8-block128":  # the activation of every block-fp8 GEMM, quantised per token group
        q = {"hidden": [T, r["hidden"]], "o_proj": [T, r["heads"] * dv]}
        if model.attention == "mla":
            q["q_b_proj"] = [T, d["q_lora_rank"]]
        if dense:
            q["down"] = [T, r["intermediate"]]
        if model.moe:
            q["moe_down"] = [T * d["experts_per_token"], r["moe_intermediate"]]
            if d["shared_experts"]:
                q["shared_down"] = [T, d["shared_experts"] * r["moe_intermediate"]]
        ops["quant_fp8_group"] = {**q, "group": [QUANT_GROUP]}
    return ops


def workloads(models: list[LlmModel], grid: dict) -> list[dict]:
    """Every (model, tp, phase, tokens) of the grid, in file, tp, phase and token order."""
    out = []
    for m in models:
        for tp in m.tp:
            r = per_rank(m, tp)
            steps = [("decode", "b", b) for b in grid["decode_batch"]] + \
                [("prefill", "t", t) for t in grid["prefill_tokens"]]
            for phase, tag, T in steps:
                out.append({"id": f"{m.slug}_tp{tp}_{phase}_{tag}{T}", "model": m.name, "tp": tp, "phase": phase,
                            "tokens": T, "dtype": m.dtype, "quantization": m.quantization, "per_rank": r,
                            "ops": _ops(m, r, T)})
    ids = [w["id"] for w in out]
    if len(set(ids)) != len(ids):
        dup = next(i for i in ids if ids.count(i) > 1)
        raise KdaError(f"llm/shapes: workload id {dup!r} generated twice (two model files with one slug?)")
    return out


def render(directory: Path | None = None) -> str:
    """workloads.json's text: provenance per model, then the workloads (one line each, so a diff reads by row)."""
    d = directory or repo_root() / SHAPES_DIR
    grid = load_grid(d)
    models = load_models(d)
    head = {"generated_by": "kda shapes (kda/shapes/llm.py) from llm/shapes/*.toml; do not edit",
            "grid": {k: list(v) for k, v in grid.items()},
            "models": [{"slug": m.slug, "name": m.name, "source": m.source, "tp": list(m.tp),
                        **({"tp_why": m.tp_why} if m.tp_why else {})} for m in models]}
    rows = workloads(models, grid)
    lines = ["{", f'"head": {json.dumps(head, sort_keys=True)},', '"workloads": [']
    lines += [json.dumps(w, sort_keys=True) + ("," if i < len(rows) - 1 else "") for i, w in enumerate(rows)]
    return "\n".join(lines + ["]", "}"]) + "\n"


def sync(check: bool, directory: Path | None = None) -> tuple[list[str], list[str]]:
    """(messages, problems): write llm/shapes/workloads.json, or with `check` compare it with what the model files
    generate, naming the first workload that differs."""
    d = directory or repo_root() / SHAPES_DIR
    text = render(d)
    path = d / WORKLOADS_FILE
    n = text.count('"id": ')
    shown = path.relative_to(repo_root()) if path.is_relative_to(repo_root()) else path
    if not check:
        if not path.is_file() or path.read_text() != text:
            path.write_text(text)
            return [f"llm: wrote {shown} ({n} workloads)"], []
        return [f"llm: {shown} up to date ({n} workloads)"], []
    if not path.is_file():
        return [], [f"llm: {shown} missing; run `kda shapes`"]
    if path.read_text() == text:
        return [f"llm: {shown} matches its model files ({n} workloads)"], []
    old = {w["id"]: w for w in json.loads(path.read_text()).get("workloads", [])}
    new = {w["id"]: w for w in json.loads(text)["workloads"]}
    changed = [i for i in new if old.get(i) != new[i]] + [i for i in old if i not in new]
    first = changed[0] if changed else "the head (grid or models)"
    return [], [f"llm: {shown} out of date: {len(changed)} workload(s) differ, first {first}"]



# The token counts an LLM task's production rows sample from the grid: small, middle and full decode batches, and
# short, middle and long prefill chunks (a bench of every grid point would take hours for little more evidence).
ROW_TOKENS = {"decode": (1, 8, 64, 256), "prefill": (512, 2048, 8192)}


def selected_workloads(models: dict[str, tuple[int, ...]], tokens: dict[str, tuple[int, ...]] = ROW_TOKENS,
                       directory: Path | None = None) -> list[dict]:
    """The committed workloads (llm/shapes/workloads.json) of `models` (name -> the tp degrees wanted) at `tokens`
    (phase -> token counts), in file order: what an LLM task's bench/make_workloads.py turns into production rows."""
    path = (directory or repo_root() / SHAPES_DIR) / WORKLOADS_FILE
    if not path.is_file():
        raise KdaError(f"{path}: missing; run `kda shapes`")
    return [w for w in json.loads(path.read_text())["workloads"]
            if w["tp"] in models.get(w["model"], ()) and w["tokens"] in tokens.get(w["phase"], ())]
