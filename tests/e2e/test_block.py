"""Block definitions: workloads from the shape catalog, a row the block cannot take named with file, block and row,
and the kernel set of every arm resolving every site."""
from __future__ import annotations

import shutil

import pytest

from kda.core.errors import KdaError
from kda.e2e.block import all_blocks, load_block
from kda.e2e.kernels import arms, kernel_set


def _copy(tmp_path, name="qwen_image"):
    dst = tmp_path / name
    shutil.copytree(load_block(name).path, dst, ignore=shutil.ignore_patterns("results", "__pycache__"))
    return dst


def _edit(path, old, new):
    text = (path / "block.toml").read_text()
    assert old in text
    (path / "block.toml").write_text(text.replace(old, new, 1))


def test_qwen_image_production_sizes_come_from_the_catalog():
    ws = {w.id: w for w in load_block("qwen_image").workloads()}
    w = ws["qwen_image_1024px_txt47"]
    assert (w.dims["hidden"], w.dims["heads"], w.dims["head_dim"]) == (3072, 24, 128)
    assert (w.dims["img_tokens"], w.dims["txt_tokens"]) == (4096, 47)
    assert ws["qwen_image_1024px_txt19"].dims["txt_tokens"] == 19
    assert w.rows["img_tokens"].file.endswith("qwen-image.toml")


def test_zimage_production_sizes_come_from_the_catalog():
    ws = {w.id: w for w in load_block("zimage").workloads()}
    w = ws["zimage_1024px_unified"]
    assert (w.dims["hidden"], w.dims["heads"], w.dims["head_dim"], w.dims["eps"]) == (3840, 30, 128, 1e-5)
    assert (w.dims["tokens"], w.dims["caption"]) == (4128, 32)
    assert ws["zimage_1024px_noise_refiner"].dims["tokens"] == 4096
    assert w.rows["tokens"].function == "fused_norm_tanh_mul_add_norm_scale"


def test_ltx2_production_sizes_come_from_the_catalog():
    ws = {w.id: w for w in load_block("ltx2").workloads()}
    w = ws["ltx2_v6144_a126_b2"]
    assert (w.dims["video_heads"], w.dims["video_head_dim"], w.dims["audio_heads"], w.dims["audio_head_dim"]) == \
        (32, 128, 32, 64)
    assert (w.dims["video_tokens"], w.dims["audio_tokens"], w.dims["batch"]) == (6144, 126, 2)
    assert ws["ltx2_v24576_a126_b1"].dims["video_tokens"] == 24576
    # the video grid the RoPE positions are laid out on: 121 frames at 768x512 -> 16 x 16 x 24 latent tokens
    assert load_block("ltx2").module.video_grid(6144) == (16, 16, 24)


def test_a_row_of_another_batch_is_named(tmp_path):
    d = _copy(tmp_path, "ltx2")
    _edit(d, 'video_tokens = "ltx2_video_b2_s6144_h32_d128"', 'video_tokens = "ltx2_video_b1_s6144_h32_d128"')
    with pytest.raises(KdaError, match=r"\(block 'ltx2'\) workload 'ltx2_v6144_a126_b2': catalog row "
                                       r"'ltx2_video_b1_s6144_h32_d128' \(.*ltx-2.toml\): the row's batch 1 is not "
                                       r"the workload's batch 2"):
        load_block(d).workloads()


def test_zimage_sizes_the_wheel_would_not_send_to_the_kernels_are_refused(tmp_path):
    d = _copy(tmp_path, "zimage")
    _edit(d, "head_dim = 128", "head_dim = 96")
    with pytest.raises(KdaError, match=r"\(block 'zimage'\) key 'cpu': the block cannot take these sizes: "
                                       r"head_dim 96: can_use_fused_inplace_qknorm_rope"):
        load_block(d).cpu_dims()


@pytest.mark.parametrize("name, wid, want", [
    ("wan", "wan_t2v_720p_81f", dict(hidden=5120, heads=40, ffn=13824, text_tokens=512, tokens=75600)),
    ("wan", "wan_ti2v_s18144", dict(hidden=3072, heads=24, ffn=14336, per_token_mod=1, tokens=18144)),
    ("hunyuanvideo_double", "hunyuanvideo_480p_65f", dict(hidden=3072, ffn=12288, img_tokens=27030, txt_tokens=55)),
    ("hunyuanvideo_single", "hunyuanvideo_480p_65f", dict(hidden=3072, ffn=12288, tokens=27085, text=55)),
])
def test_production_sizes_come_from_the_catalog_and_the_workload(name, wid, want):
    w = {w.id: w for w in load_block(name).workloads()}[wid]
    assert {k: w.dims[k] for k in want} == want


def test_a_workload_cannot_override_a_catalog_dimension(tmp_path):
    d = _copy(tmp_path, "wan")
    _edit(d, "dims = { ffn = 13824, text_tokens = 512, per_token_mod = 0 }",
          "dims = { ffn = 13824, text_tokens = 512, per_token_mod = 0, hidden = 4096 }")
    with pytest.raises(KdaError, match=r"\(block 'wan'\) workload 'wan_t2v_720p_81f': key 'dims': hidden come "
                                       r"from .*wan2.2-t2v-a14b.toml"):
        load_block(d).workloads()


def test_a_row_of_another_kernel_is_named(tmp_path):
    d = _copy(tmp_path)
    # a real catalog row, but of a kernel no site of this block calls (HunyuanVideo's QK RMSNorm)
    _edit(d, 'model = "qwen-image.toml"', 'model = "hunyuanvideo.toml"')
    _edit(d, 'img_tokens = "qwen_image_img_norm1_s4096_d3072"', 'img_tokens = "hunyuanvideo_qk_rms_s1320_d128_bf16"')
    with pytest.raises(KdaError, match=r"block\.toml \(block 'qwen_image'\) workload 'qwen_image_1024px_txt47': "
                                       r"catalog row 'hunyuanvideo_qk_rms_s1320_d128_bf16' \(.*hunyuanvideo.toml\): "
                                       r"norm_infer:triton_one_pass_rms_norm is no call site"):
        load_block(d).workloads()


def test_a_row_of_another_width_is_named(tmp_path):
    d = _copy(tmp_path)
    _edit(d, 'model = "qwen-image.toml"', 'model = "wan2.2-t2v-a14b.toml"')
    with pytest.raises(KdaError, match=r"workload 'qwen_image_1024px_txt47': key 'tokens.img_tokens': .*wan2.2-t2v-a14b"
                                       r".toml has no row 'qwen_image_img_norm1_s4096_d3072'"):
        load_block(d).workloads()


def test_sizes_the_wheel_would_not_send_to_the_kernels_are_refused(tmp_path):
    d = _copy(tmp_path)
    _edit(d, "hidden = 256", "hidden = 192")
    with pytest.raises(KdaError, match=r"\(block 'qwen_image'\) key 'cpu': the block cannot take these sizes: "
                                       r"hidden 192: .*D % 256"):
        load_block(d).cpu_dims()


def test_an_unknown_block_lists_the_known_ones():
    with pytest.raises(KdaError, match="known blocks: .*qwen_image"):
        load_block("no_such_block")


@pytest.mark.parametrize("name", all_blocks())
def test_every_arm_but_upstream_resolves_every_site_on_the_cpu(name):
    """Upstream and latest arms load CUDA and CuTe DSL baselines (GPU only); their names are checked by test_sites
    and, for latest, below on a block of Triton sites."""
    block = load_block(name)
    for arm in arms(block):
        if arm.startswith("only-") or arm in ("upstream", "latest"):
            continue
        ks = kernel_set(block, arm)
        assert set(ks.sources) == {s.name for s in block.sites}
    assert set(arms(block)) >= {"upstream", "candidate", "eager", "compile", "latest"} | \
        {f"only-{t}" for t in block.tasks}


def test_the_latest_arm_runs_each_sites_op_from_the_release_its_task_pins():
    """Issue 40, op by op: ltx2's rotary sites take SGLang 0.5.23's entry point (rotary_embedding pins it), loaded
    under the alias beside 0.5.15; a task that pins nothing is named with its baseline's release and its reason."""
    from kda.e2e.kernels import latest_sources

    block = load_block("ltx2")
    ks = kernel_set(block, "latest")
    assert ks.sources and all("sglang==0.5.23" in src for src in ks.sources.values()), ks.sources
    assert all(fn.__module__.startswith("sglang_0_5_23.") for fn in ks._fns.values())
    up = kernel_set(block, "upstream")
    assert all(not fn.__module__.startswith("sglang_0_5_23.") for fn in up._fns.values())
    assert latest_sources(block) == {"rotary_embedding": "sglang==0.5.23"}
    zimage = latest_sources(load_block("zimage"))
    assert zimage["qknorm_rope"].startswith("sglang==0.5.15 (") and "JIT" in zimage["qknorm_rope"]


def test_the_gpu_timing_module_imports_and_refuses_the_cpu():
    """Not run on a GPU yet (docs/e2e.md); on the CPU it must at least import and say where to go instead."""
    import torch

    from kda.e2e import timing

    if torch.cuda.is_available():
        pytest.skip("a GPU is present")
    with pytest.raises(KdaError, match="--cpu"):
        timing.bench(load_block("qwen_image"))


def test_vae_stage_shapes_and_layouts_come_from_the_catalog():
    """`shapes` reads a group_norm_silu row's C, T, H, W and layout; `dims` adds what no row carries."""
    ws = {w.id: w for w in load_block("hunyuanvae_up_block").workloads()}
    assert len(ws) == 8
    w = ws["hyvae_up2_t5_32x32_cl3d"]
    d = w.dims
    assert (d["x_C"], d["x_T"], d["x_H"], d["x_W"], d["x_cl3d"]) == (512, 9, 128, 128, 0)
    assert (d["out_C"], d["out_T"], d["out_H"], d["out_W"], d["out_cl3d"]) == (256, 9, 128, 128, 1)
    assert (d["up_block"], d["groups"], d["eps"]) == (2, 32, 1e-6)
    assert w.rows["out"].id == "hyvae_c256_t9_128x128_cl3d" and w.rows["x"].file.endswith("hunyuanvideo-vae.toml")
    assert ws["hyvae_up3_t5_32x32_contig"].dims["out_cl3d"] == 0


def test_ltx2_upsampler_latents_are_the_catalogs_stage1_video_token_counts():
    """The catalog has no group_norm_silu rows for LTX-2: each workload's latent (stage 1, half size) must multiply to
    a captured LTX-2 video token count and follow ltx-2.toml's `video` formula at its preset's size."""
    from kda.shapes.catalog import catalog_dir, load_model_file

    model = load_model_file(catalog_dir() / "ltx-2.toml")
    captured = {r.params["S"] for r in model.rows if r.id.startswith("ltx2_video_b1_")}
    ws = {w.id: w.dims for w in load_block("ltx2_latent_upsampler").workloads()}
    for wid, (width, height) in {"ltx2_two_stage_768x512_f121": (768, 512),
                                 "ltx23_two_stage_1536x1024_f121": (1536, 1024)}.items():
        d = ws[wid]
        tokens = d["latent_frames"] * d["latent_height"] * d["latent_width"]
        assert tokens in captured
        assert tokens == model.tokens_for(f"video(frames=121, H={height // 2}, W={width // 2})")
        assert (d["in_channels"], d["mid_channels"]) == (128, 512)


def test_a_shape_row_in_another_dtype_is_named(tmp_path):
    d = _copy(tmp_path, "hunyuanvae_up_block")
    _edit(d, 'dtype = "float16"', 'dtype = "bfloat16"')
    with pytest.raises(KdaError, match=r"\(block 'hunyuanvae_up_block'\) workload 'hyvae_up0_t5_32x32_contig': "
                                       r"catalog row 'hyvae_c512_t5_32x32_contig' \(.*\): dtype float16 is not the "
                                       r"block's bfloat16"):
        load_block(d).workloads()


def test_a_literal_dim_may_not_shadow_the_catalog(tmp_path):
    d = _copy(tmp_path, "hunyuanvae_up_block")
    _edit(d, "dims = { up_block = 0 }", "dims = { up_block = 0, groups = 16 }")
    with pytest.raises(KdaError, match=r"workload 'hyvae_up0_t5_32x32_contig': key 'dims': groups come from "
                                       r".*hunyuanvideo-vae.toml"):
        load_block(d).workloads()


def test_a_layout_the_wheel_never_passes_is_refused(tmp_path):
    """Resnet 0's norm1 gets hidden_states.contiguous(): a channels_last_3d row there is a wrong reading."""
    d = _copy(tmp_path, "hunyuanvae_up_block")
    _edit(d, 'x = "hyvae_c512_t5_32x32_contig"', 'x = "hyvae_c512_t5_32x32_cl3d"')
    with pytest.raises(KdaError, match=r"workload 'hyvae_up0_t5_32x32_contig': the block cannot take these sizes: "
                                       r"x is a channels_last_3d row.*hunyuanvae.py:342"):
        load_block(d).workloads()


def test_rows_of_different_sizes_in_one_up_block_are_refused(tmp_path):
    d = _copy(tmp_path, "hunyuanvae_up_block")
    _edit(d, 'out = "hyvae_c512_t5_32x32_contig"', 'out = "hyvae_c512_t5_64x64_contig"')
    with pytest.raises(KdaError, match=r"x is 5x32x32 but out is 5x64x64"):
        load_block(d).workloads()
