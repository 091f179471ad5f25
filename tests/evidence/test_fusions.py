"""kda/evidence/fusions.py: what torch.compile fuses that the candidates lack, from a block's results file."""
from kda.e2e.inventory import INVENTORY_METHOD
from kda.evidence import fusions
from kda.harness import results_file


def test_inductor_names_give_the_kind_and_the_computing_ops_other_kernels_none():
    assert fusions.fused_ops("triton_red_fused__to_copy_add_mean_mul_pow_rsqrt_split_tanh_unsqueeze_6") == \
        ("reduction", ["add", "mul", "mean", "pow", "rsqrt", "tanh"])
    assert fusions.fused_ops("triton_poi_fused__unsafe_view_clone_view_1") == ("pointwise", [])
    assert fusions.fused_ops("triton_per_fused_native_layer_norm_0") == ("persistent reduction", ["native_layer_norm"])
    assert fusions.fused_ops("_qknorm_rope_kernel") is None and fusions.fused_ops("nvjet_sm90_tst") is None


def _file(path, ratio, arms=("upstream", "candidate", "compile")):
    k = lambda name, owner, us: {"kernel": name, "owner": owner, "us": us}  # noqa: E731
    cand = {"kernels": [k("nvjet_sm90_gemm", "gemm", 500.0), k("flash_fwd", "attention", 200.0),
                        k("_norm_kernel", "norm_infer", 40.0), k("kda.site:n:norm_infer", "norm_infer", 40.0),
                        k("elementwise_kernel<silu>", "other", 60.0)]}
    comp = {"kernels": [k("nvjet_sm90_gemm", "gemm", 500.0), k("flash_fwd", "attention", 200.0),
                        # named for the attention op it feeds, but a copy Inductor wrote: counted outside
                        k("triton_poi_fused__scaled_dot_product_cudnn_attention_clone_3", "attention", 5.0),
                        k("triton_red_fused_add_mean_mul_pow_rsqrt_0", "other", 30.0),
                        k("triton_poi_fused_mul_silu_1", "other", 20.0)]}
    sp = {"median": ratio, "ci": [ratio - 0.02, ratio + 0.02], "n": 5}
    row = {"type": "row", "id": "w1", "speedup": {"candidate/compile": {"graph_us": sp}},
           "arms": {"candidate": {"inventory": cand}, "compile": {"inventory": comp}}}
    prov = {"type": "provenance", "block": "zimage", "gpu_slug": "h200", "arms": list(arms),
            "inventory": INVENTORY_METHOD}
    return results_file.write(path, [prov, row, {"type": "summary"}])


def test_a_workload_where_compile_wins_lists_its_fusions_and_both_arms_time_outside_gemm_and_attention(tmp_path):
    text = fusions.fusion_section([_file(tmp_path / "h200.jsonl.gz", 0.88)])
    # the candidate: its site kernel once (the range entry left out) and the unfused silu; compile: its three
    assert "| zimage | H200 | w1 | 0.880 [0.860, 0.900] | 100 | 55 |" in text
    assert "  - 30 us, reduction: add mul mean pow rsqrt" in text and "  - 20 us, pointwise: mul silu" in text
    assert text.index("30 us") < text.index("20 us") < text.index("5 us, pointwise: copies only")
    assert all(len(line) <= 120 for line in text.splitlines() if line.startswith("  -"))


def test_no_row_where_compile_does_not_win_and_the_section_says_which_blocks_ran_it(tmp_path):
    text = fusions.fusion_section([_file(tmp_path / "h200.jsonl.gz", 1.02)])
    assert "No workload where compile beats the candidate: the blocks run with it (zimage)." in text
    none = fusions.fusion_section([_file(tmp_path / "h100.jsonl.gz", 0.8, arms=("upstream", "candidate"))])
    assert "no block has run the compile arm yet" in none and "| zimage |" not in none
