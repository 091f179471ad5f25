"""kda/shapes/llm.py: the LLM campaign's model files, serving grid and generated workloads (issue 35)."""
import json
import re
import shutil

import pytest

from kda.core.errors import KdaError
from kda.core.paths import repo_root
from kda.shapes import llm

SHAPES = repo_root() / "llm" / "shapes"
MODELS = ("llama-3.1-8b", "qwen3-8b", "qwen3-32b", "qwen3-30b-a3b", "deepseek-v3", "gpt-oss-120b")


def _by_id():
    return {w["id"]: w for w in llm.workloads(llm.load_models(), llm.load_grid())}


def test_the_six_models_of_the_issue_load_over_the_whole_grid_or_a_narrower_tp_they_explain():
    models = {m.slug: m for m in llm.load_models()}
    assert set(models) == set(MODELS)
    grid = llm.load_grid()
    steps = len(grid["decode_batch"]) + len(grid["prefill_tokens"])
    assert len(_by_id()) == sum(len(m.tp) * steps for m in models.values())
    assert models["deepseek-v3"].tp == (8,) and "H200" in models["deepseek-v3"].tp_why
    assert all(m.tp == grid["tp"] for s, m in models.items() if s != "deepseek-v3")


def test_each_rank_holds_its_share_of_heads_and_mlp_and_a_replicated_kv_head_beyond_their_count():
    w = _by_id()
    llama = w["llama-3.1-8b_tp8_decode_b1"]["per_rank"]
    assert (llama["heads"], llama["kv_heads"], llama["intermediate"]) == (4, 1, 1792)
    qwen_moe = w["qwen3-30b-a3b_tp8_prefill_t512"]  # 4 KV heads over 8 ranks: one each, replicated
    assert qwen_moe["per_rank"]["kv_heads"] == 1 and qwen_moe["ops"]["store_cache"]["k"] == [512, 1, 128]
    assert qwen_moe["ops"]["moe_act_and_mul"] == {"x": [4096, 192], "out": [4096, 96]}  # 512 tokens x 8 experts
    assert "act_and_mul" not in qwen_moe["ops"]  # no dense layer
    assert w["qwen3-8b_tp1_decode_b256"]["ops"]["qk_norm"] == {"q": [256, 32, 128], "k": [256, 8, 128]}
    assert "qk_norm" not in w["llama-3.1-8b_tp1_decode_b256"]["ops"]


def test_mla_writes_one_latent_and_ropes_the_decoupled_heads_and_fp8_quantises_each_gemm_input():
    ops = _by_id()["deepseek-v3_tp8_decode_b32"]["ops"]
    assert ops["store_cache"] == {"latent": [32, 1, 576]}  # kv_lora_rank 512 + rope 64
    assert ops["rope"] == {"q": [32, 16, 64], "k": [32, 1, 64]}
    assert ops["latent_norm"] == {"q_a": [32, 1536], "kv_a": [32, 512]}
    assert ops["act_and_mul"]["out"] == [32, 2304] and ops["shared_act_and_mul"]["out"] == [32, 256]
    q = ops["quant_fp8_group"]
    assert q["hidden"] == [32, 7168] and q["moe_down"] == [256, 256] and q["group"] == [128]
    assert q["o_proj"] == [32, 16 * 128]


def _copy(tmp_path):
    d = tmp_path / "shapes"
    shutil.copytree(SHAPES, d)
    return d


def _edit(path, old, new):
    text = path.read_text()
    assert old in text, old
    path.write_text(text.replace(old, new, 1))


@pytest.mark.parametrize("old, new, message", [
    ("heads = 32\n", "heads = 12\n", r"llama-3\.1-8b\.toml: key 'dims\.heads': 12 does not split over tp=8"),
    ("kv_heads = 8\n", "", r"key 'dims\.kv_heads': expected a positive integer, got None"),
    ('attention = "gqa"', 'attention = "mqa"', r"key 'model\.attention': expected one of gqa, mla, got 'mqa'"),
    ("(llm/shapes/SOURCES.md#llama-3.1-8b)", "(somewhere)", r"key 'model\.source': expected a citation"),
    ("dense_layers = 0\n", "dense_layers = 0\nlayers_per_stage = 4\n", r"key 'dims\.layers_per_stage': not a dim"),
    ("experts = 0\n", "experts = 4\n", r"key 'dims\.experts_per_token': a model with experts needs"),
    ('quantization = "none"', "quantization = true", r"key 'model\.quantization': expected one of none"),
])
def test_a_broken_model_file_names_the_file_the_key_and_what_was_expected(tmp_path, old, new, message):
    d = _copy(tmp_path)
    _edit(d / "llama-3.1-8b.toml", old, new)
    with pytest.raises(KdaError, match=message):
        llm.load_models(d)


def test_a_narrower_tp_must_say_why_and_stay_inside_the_grid(tmp_path):
    d = _copy(tmp_path)
    _edit(d / "deepseek-v3.toml", "why = ", "reason = ")
    with pytest.raises(KdaError, match=r"deepseek-v3\.toml: key 'serving\.why'"):
        llm.load_models(d)
    d = _copy(tmp_path / "b")
    _edit(d / "deepseek-v3.toml", "tp = [8]", "tp = [16]")
    with pytest.raises(KdaError, match=r"key 'serving\.tp': \[16\] leaves the grid's tp"):
        llm.load_models(d)
    _edit(d / "grid.toml", "tp = [1, 2, 4, 8]", "tp = [4, 2]")
    with pytest.raises(KdaError, match=r"grid\.toml: key 'grid\.tp': expected increasing values"):
        llm.load_grid(d)


def test_check_passes_on_the_committed_file_and_names_the_first_workload_that_drifted(tmp_path):
    messages, problems = llm.sync(check=True)
    assert not problems and "matches its model files" in messages[0]
    d = _copy(tmp_path)
    _edit(d / "qwen3-8b.toml", "intermediate = 12288", "intermediate = 12800")
    _, problems = llm.sync(check=True, directory=d)
    assert len(problems) == 1 and "first qwen3-8b_tp1_decode_b1" in problems[0]
    (d / "workloads.json").unlink()
    assert "missing; run `kda shapes`" in llm.sync(check=True, directory=d)[1][0]
    messages, _ = llm.sync(check=False, directory=d)
    assert "wrote" in messages[0] and json.loads((d / "workloads.json").read_text())["workloads"]
    assert llm.sync(check=True, directory=d)[1] == []


def test_every_model_cites_a_section_sources_md_has():
    sources = (SHAPES / "SOURCES.md").read_text()
    sections = {re.sub(r"[^a-z0-9 .-]", "", h.lower()).replace(" ", "-")
                for h in re.findall(r"^## (.+)$", sources, re.M)}
    for m in llm.load_models():
        anchor = re.search(r"llm/shapes/SOURCES\.md#([\w.-]+)", m.source).group(1)
        assert anchor in sections, (m.slug, anchor, sorted(sections))


def test_selected_workloads_are_the_committed_ones_of_the_named_models_tp_and_token_counts():
    from kda.shapes.llm import ROW_TOKENS, selected_workloads

    got = selected_workloads({"Llama-3.1-8B": (1, 8), "DeepSeek-V3": (8,)})
    assert {(w["model"], w["tp"]) for w in got} == {("Llama-3.1-8B", 1), ("Llama-3.1-8B", 8), ("DeepSeek-V3", 8)}
    assert {(w["phase"], w["tokens"]) for w in got} == {(p, t) for p, ts in ROW_TOKENS.items() for t in ts}
    assert len(got) == 3 * sum(len(ts) for ts in ROW_TOKENS.values())
    assert selected_workloads({"Llama-3.1-8B": (3,)}) == [] and selected_workloads({}) == []
