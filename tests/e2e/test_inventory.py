"""kda/e2e/inventory.py: kernel families, the inventory from profiler events, the Amdahl prediction."""
import math

import pytest
import torch

from kda.e2e import inventory as inv


@pytest.mark.parametrize("name,fam", [
    ("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64", "gemm"),
    ("nvjet_hsh_128x256_64x4_2x1_v_bz_coopA_NNT", "gemm"),
    ("flash_fwd_kernel<Flash_fwd_kernel_traits<128, 64>>", "attention"),
    ("pytorch_flash::flash_fwd_kernel", "attention"),
    ("Memcpy DtoD (Device -> Device)", "copy"),
    ("void at::native::vectorized_elementwise_kernel<4, at::native::GeluCUDAKernelImpl>", "other"),
])
def test_family_by_name(name, fam):
    assert inv.family(name) == fam


def test_summarize_gives_site_kernels_to_their_task_and_the_rest_to_families():
    events = [
        {"name": "_fused_scale_shift_4d_kernel", "device_us": 10.0,
         "ranges": ["aten::empty", inv.site_range("img_mul_add", "fuse_scale_shift"), "forward"]},
        {"name": "some_norm_kernel", "device_us": 30.0, "ranges": [inv.site_range("img_norm1", "cutedsl_norm_scale_shift")]},
        {"name": "sm90_xmma_gemm_bf16", "device_us": 50.0, "ranges": ["aten::linear"]},
        {"name": "sm90_xmma_gemm_bf16", "device_us": 5.0, "ranges": []},
        {"name": "flash_fwd_kernel", "device_us": 5.0, "ranges": []},
    ]
    s = inv.summarize(events)
    assert s["total_us"] == 100.0
    assert s["tasks"] == {"fuse_scale_shift": 10.0, "cutedsl_norm_scale_shift": 30.0}
    assert s["families"] == {"gemm": 55.0, "attention": 5.0, "copy": 0.0, "other": 0.0}
    assert s["kernels"][0] == {"kernel": "sm90_xmma_gemm_bf16", "owner": "gemm", "us": 55.0}


def test_amdahl():
    # 40% of the block in one task made 2x faster: 1 / (0.6 + 0.2)
    assert inv.amdahl(100.0, {"t": 40.0}, {"t": 2.0}) == pytest.approx(1.25)
    assert inv.amdahl(100.0, {"t": 40.0, "u": 10.0}, {"t": 1.0, "u": 1.0}) == pytest.approx(1.0)
    assert inv.amdahl(100.0, {"t": 40.0}, {"t": None}) is None  # a task with time but no measurement: no guess
    assert inv.amdahl(0.0, {}, {}) is None


def test_task_speedups_from_the_rows_the_workload_was_read_from_else_the_task_geomean():
    rows = {"a": ("t", "r1"), "b": ("t", "r2"), "c": ("u", "r3")}
    measured = {("t", "r1"): 1.2, ("t", "r2"): 1.5}
    got = inv.task_speedups(rows, lambda t, r: measured.get((t, r)), lambda t: {"u": 1.1}.get(t))
    assert got["t"] == pytest.approx(math.sqrt(1.2 * 1.5)) and got["u"] == 1.1


def test_labelled_functions_run_unchanged_inside_a_named_range():
    from torch.profiler import ProfilerActivity, profile

    fns = inv.labelled({"s": lambda x: x + 1}, {"s": "task_a"})
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        assert int(fns["s"](torch.tensor(1))) == 2
    assert any(e.name == inv.site_range("s", "task_a") for e in prof.events())


def test_the_prediction_reads_the_task_results_rows_the_workload_came_from():
    """On the committed fuse_scale_shift H100 file: a workload read from one of its rows is predicted with that
    row's measured graph_us speedup; a task without a row there falls back to its file's geomean."""
    from kda.e2e import timing
    from kda.harness import results_file
    from kda.definition.task import Task

    records = results_file.read_records(results_file.find(Task.load("fuse_scale_shift").results_dir(), "h100"))
    row = next(r for r in records if r.get("type") == "row" and r["id"] == "qwen_image_s4096_c3072_bcast11")
    measured = row["speedup"]["graph_us"]["vs_baseline"]["median"]
    geo = records[-1]["metrics"]["graph_us"]["vs_baseline"]["geomean"]
    e2e_row = {"catalog_rows": {"img_tokens": {"task": "fuse_scale_shift", "id": row["id"], "file": "x.toml"}},
               "arms": {"upstream": {"inventory": {"total_us": 100.0, "tasks": {"fuse_scale_shift": 20.0}}}}}
    got = timing.predicted(e2e_row, "h100")
    assert got["task_speedups"] == {"fuse_scale_shift": pytest.approx(measured)}
    assert got["graph_us"] == pytest.approx(100.0 / (80.0 + 20.0 / measured))
    e2e_row["catalog_rows"] = {}
    assert timing.predicted(e2e_row, "h100")["task_speedups"] == {"fuse_scale_shift": pytest.approx(geo)}
    assert timing.predicted({"catalog_rows": {}, "arms": {}}, "h100") is None


def test_the_profiled_sites_synchronize_before_their_range_opens_and_before_it_closes(monkeypatch):
    """A sync inside the range leaves the window open while earlier work drains: the second GPU run (32a64c9)
    counted wan's attention kernel as a norm site's and predicted 1.35x for a block that measured 1.00x."""
    import contextlib

    import torch.profiler

    calls = []

    @contextlib.contextmanager
    def fake_range(label):
        calls.append(f"open {label}")
        yield
        calls.append("close")

    monkeypatch.setattr(torch.profiler, "record_function", fake_range)
    fns = inv.labelled({"s": lambda x: calls.append("site") or x + 1}, {"s": "task_a"},
                       sync=lambda: calls.append("sync"))
    assert fns["s"](1) == 2
    assert calls == ["sync", f"open {inv.site_range('s', 'task_a')}", "site", "sync", "close"]


def test_kernels_belong_to_the_site_whose_window_holds_them_linked_to_a_cpu_op_or_not():
    """The first GPU run lost every Triton kernel (no link to a launching CPU op): attribution is by time window
    now. A kernel inside a site's window is the site's task's, one outside every window is told apart by name, and
    a kernel straddling a window's edge by a microsecond goes where its midpoint is."""
    windows = [(100.0, 200.0, inv.site_range("norm1", "group_norm_silu")),
               (300.0, 400.0, inv.site_range("mod", "fuse_scale_shift"))]
    kernels = [{"name": "_group_norm_silu_fwd", "start_us": 120.0, "end_us": 180.0},  # a Triton kernel, unlinked
               {"name": "elementwise_kernel_copy", "start_us": 199.0, "end_us": 203.0},  # midpoint 201: outside
               {"name": "sm90_xmma_gemm", "start_us": 220.0, "end_us": 290.0},
               {"name": "fuse_scale_shift_kernel", "start_us": 299.5, "end_us": 330.5}]  # midpoint inside
    events = inv.attribute(kernels, windows)
    assert [e["ranges"] for e in events] == [[windows[0][2]], [], [], [windows[1][2]]]
    assert events[0]["device_us"] == 60.0
    got = inv.summarize(events)
    assert got["tasks"] == {"group_norm_silu": 60.0, "fuse_scale_shift": 31.0}
    assert got["families"]["gemm"] == 70.0 and got["families"]["copy"] == 4.0
    assert got["total_us"] == 165.0


def test_a_sites_range_is_not_a_kernel_of_its_task(monkeypatch):
    """The profile reports each record_function range a second time as a device-side annotation, over the same
    window. The third GPU run summed those as kernels of the site's task (its time twice, and a site named attn_...
    as attention by name): they are left out of a new profile, and out of an old file's inventory on reading."""
    from types import SimpleNamespace

    from torch.autograd import DeviceType

    label = inv.site_range("attn_norm2", "cutedsl_norm_tanh_mul_add")

    def ev(name, start, end, device, annotation=False):
        return SimpleNamespace(name=name, time_range=SimpleNamespace(start=start, end=end), device_type=device,
                               is_user_annotation=annotation)

    events = [ev(label, 100.0, 200.0, DeviceType.CPU), ev(label, 110.0, 150.0, DeviceType.CUDA, annotation=True),
              ev("_ntma_kernel", 110.0, 150.0, DeviceType.CUDA), ev("nvjet_sm90_gemm", 210.0, 300.0, DeviceType.CUDA)]

    class FakeProfile:
        def __init__(self, **_):
            pass

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

        def events(self):
            return events

    monkeypatch.setattr(torch.profiler, "profile", FakeProfile)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda: None)
    got = inv.summarize(inv.profile_events(lambda: None, cuda=True))
    assert got["tasks"] == {"cutedsl_norm_tanh_mul_add": 40.0} and got["total_us"] == 130.0
    assert got["families"]["attention"] == 0.0 and label not in {k["kernel"] for k in got["kernels"]}
    # a file of the third run: the range among the kernels, counted in its task's time and the total
    old = {"total_us": 170.0, "tasks": {"cutedsl_norm_tanh_mul_add": 80.0}, "kernels": [
        *got["kernels"], {"kernel": label, "owner": "cutedsl_norm_tanh_mul_add", "us": 40.0}]}
    assert inv.clean(old)["tasks"] == got["tasks"] and inv.clean(old)["total_us"] == 130.0
    assert inv.clean(got) == got  # the current method's inventory is its own clean form
    assert inv.prediction(old, {"cutedsl_norm_tanh_mul_add": 2.0}) == pytest.approx(130.0 / 110.0)
    assert inv.prediction(old, None) is None and inv.readable("site windows, opened after a synchronize")
    assert not inv.readable("site windows") and not inv.readable(None)
