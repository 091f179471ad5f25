"""kda/evidence/e2e_targets.py: issue 33's targets judged from the blocks' results files."""
from kda.e2e.inventory import INVENTORY_METHOD
from kda.evidence import e2e_targets
from kda.harness import results_file


def _sp(median, lo, hi):
    return {"median": median, "ci": [lo, hi], "n": 5}


def _row(rid, eager, graph, tasks_us, total=1000.0, speedups=None, errors=(0.001, 0.001), passed=True, **extra):
    """A workload: candidate over upstream by both metrics, the upstream arm's inventory (task -> us of `total`),
    the task speedups the run recorded, and each arm's largest error (upstream, candidate)."""
    kernels = [{"kernel": f"_{t}_kernel", "owner": t, "us": us} for t, us in tasks_us.items()]
    kernels.append({"kernel": "nvjet_sm90_gemm", "owner": "gemm", "us": total - sum(tasks_us.values())})
    inv = {"total_us": total, "tasks": dict(tasks_us), "families": {}, "kernels": kernels}
    return {"type": "row", "id": rid,
            "speedup": {"candidate/upstream": {"eager_us": _sp(*eager), "graph_us": _sp(*graph)}},
            "arms": {"upstream": {"passed": True, "errors": [errors[0]], "inventory": inv},
                     "candidate": {"passed": passed, "errors": [errors[1]]}},
            "predicted": {"task_speedups": speedups or {t: 2.0 for t in tasks_us}}, **extra}


def _file(path, block, rows, alone="done"):
    prov = {"type": "provenance", "block": block, "gpu_slug": "h200", "inventory": INVENTORY_METHOD,
            "alone": {"state": alone}}
    return results_file.write(path, [prov, *rows, {"type": "summary"}])


def _judge(paths):
    rs = e2e_targets.rows(paths)
    return {label: judge(rs) for label, judge in e2e_targets.TARGETS}


def test_a_stage_below_a_third_is_not_reached_and_the_dit_geomean_and_predictions_are_judged(tmp_path):
    dit = _file(tmp_path / "wan.jsonl.gz", "wan", [
        _row("w1", (1.02, 1.00, 1.04), (1.01, 0.99, 1.03), {"norm_infer": 40.0}),
        _row("w2", (1.00, 0.98, 1.02), (1.00, 0.98, 1.02), {"norm_infer": 20.0, "fuse_scale_shift": 10.0})])
    vae = _file(tmp_path / "vae.jsonl.gz", "hunyuanvae_up_block", [
        _row("v1", (1.25, 1.24, 1.26), (1.25, 1.24, 1.26), {"group_norm_silu": 220.0}, speedups={
            "group_norm_silu": 4.8})])
    v = _judge([dit, vae])
    assert v["correct vs fp32, error <= 2x upstream"] == (
        "met", "3 workloads, every arm within tolerance; candidate's error at most 1.00x upstream's")
    assert v["no workload wholly below 1"][0] == "met"
    verdict, why = v["DiT eager_us geomean >= 1.05"]
    assert verdict == "missed" and why.startswith("geomean 1.010 over 2 workloads of 1 blocks")  # the VAE is no DiT
    verdict, why = v["stages >= 1.30 where gns >= 1/3"]
    assert verdict == "not reached" and "largest share 22% (hunyuanvae_up_block v1, graph_us 1.250" in why
    verdict, why = v["measured within 25% of predicted"]
    assert verdict == "met" and "on 3 workloads" in why


def test_a_stage_at_a_third_must_gain_1_30_and_a_slow_or_wrong_workload_is_named(tmp_path):
    vae = _file(tmp_path / "vae.jsonl.gz", "ltx2_latent_upsampler", [
        _row("v1", (1.2, 1.1, 1.3), (1.20, 1.18, 1.22), {"group_norm_silu": 400.0}),
        _row("v2", (0.97, 0.95, 0.99), (1.0, 0.98, 1.02), {"group_norm_silu": 10.0}, errors=(0.001, 0.003)),
        _row("v3", (1.0, 0.9, 1.1), (1.0, 0.9, 1.1), {"group_norm_silu": 10.0}, passed=False)])
    v = _judge([vae])
    assert v["stages >= 1.30 where gns >= 1/3"] == (
        "missed", "ltx2_latent_upsampler v1: 40% of the time, graph_us 1.200 [1.180, 1.220]")
    verdict, why = v["no workload wholly below 1"]
    assert verdict == "missed" and why == ("1 of 3 workloads wholly below 1: ltx2_latent_upsampler v2 eager_us "
                                           "0.970 [0.950, 0.990]")
    verdict, why = v["correct vs fp32, error <= 2x upstream"]
    assert verdict == "missed" and "failed: ltx2_latent_upsampler v3 (candidate)" in why \
        and "ltx2_latent_upsampler v2 (3.00x upstream's error)" in why
    assert v["DiT eager_us geomean >= 1.05"] == ("no data", "no DiT block timed")


def test_a_gain_far_from_its_prediction_misses_and_withheld_or_pending_rows_are_not_judged(tmp_path):
    # share 0.1 at a 2x task speedup predicts 1/(0.9 + 0.05) = 1.053; measured 1.5 is 42% above it
    far = _file(tmp_path / "far.jsonl.gz", "zimage", [
        _row("z1", (1.5, 1.4, 1.6), (1.5, 1.4, 1.6), {"qknorm_rope": 100.0}),
        _row("z2", (0.5, 0.4, 0.6), (0.5, 0.4, 0.6), {"qknorm_rope": 100.0}, speedup_withheld={})])
    verdict, why = _judge([far])["measured within 25% of predicted"]
    assert verdict == "missed" and "outside 25%: zimage z1 1.425" in why
    assert _judge([far])["no workload wholly below 1"][0] == "met"  # z2's speedups were withheld
    pending = _file(tmp_path / "pending.jsonl.gz", "wan", [_row("w", (0.5, 0.4, 0.6), (0.5, 0.4, 0.6), {})],
                    alone="pending")
    assert e2e_targets.rows([pending]) == [] and e2e_targets.table([pending]) == ""


def test_the_table_has_a_row_per_target_and_gpu(tmp_path):
    f = _file(tmp_path / "wan.jsonl.gz", "wan", [_row("w1", (1.0, 0.99, 1.01), (1.0, 0.99, 1.01), {"norm_infer": 5.0})])
    text = e2e_targets.table([f])
    assert text.count("| H200 |") == len(e2e_targets.TARGETS)
    assert "| DiT eager_us geomean >= 1.05 | H200 | missed | geomean 1.000 over 1 workloads of 1 blocks" in text
