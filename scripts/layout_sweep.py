"""Time launch-layout variants of a candidate on a GPU, to choose its heuristics by measurement.

A variant replaces one of the candidate's layout functions (module attribute) for the whole run; each row is checked
against the oracle and timed by CUDA-graph replay (the graph_us method of the harness, without its interleaving and
statistics), and by back-to-back calls between two events (device_us's method; printed as graph/stream us); with
`--rounds N`, N times each, the variants interleaved, medians reported with the graph times' range. Only for picking
defaults: the numbers a campaign reports come from `kda bench`.

    python3 scripts/layout_sweep.py cutedsl_norm_scale_shift --rows a,b --out sweep.json

Variants are named in VARIANTS below, per task, or in the task's own tools/variants.py: {name: {attribute:
replacement}}, where an attribute is a name in the task's main module or a (module, name) pair. `--compile` also
times the torch.compile peer the harness runs; with TORCHINDUCTOR_CACHE_DIR set, Inductor leaves the Triton source
it generated there.
"""
import argparse
import contextlib
import importlib
import importlib.util
import json
import statistics
import sys

import torch

from kda.core.paths import all_task_dirs
from kda.definition.task import Task
from kda.definition.workloads import build_inputs, refill_inputs


def _solution_module(task: str, name: str):
    """The candidate's module `name` of `task`, as the adapter sees it (the solution package's submodule)."""
    return importlib.import_module(Task.load(task).load_solution().__name__ + "." + name)


def _nss_layouts():
    """Every (chunked | padded) x (warps) x (8 rows | 1 row per program) x (PREFETCH) layout around the default,
    each also with x and residual loaded through L1 (_nocg: no .cg modifier)."""
    m = _solution_module("cutedsl_norm_scale_shift", "norm_scale_shift")

    def layout(padded, wide, rows1, pf):
        def f(D, M, has_res, g_kind, sc_kind, sh_kind):
            if padded:  # one masked power-of-two block: 32 values per thread (wide: 16)
                C, K = 1 << (D - 1).bit_length(), 1
                warps = max(1, C // (512 if wide else 1024))
            else:  # unpadded chunks, the default warps (wide: twice as many)
                C, K = m._chunks(D)
                warps = min(16, m._warps(C, K) * (2 if wide else 1))
            return C, K, 1 if rows1 else m._rows_per_program(M), warps, pf
        return f

    out = {}
    for padded in (False, True):
        for wide in (False, True):
            for rows1 in (False, True):
                for pf in (False, True):
                    shape = ("pad" if padded else "chunk") + ("_wide" if wide else "_std")
                    name = f"{shape}_r{1 if rows1 else 8}_pf{int(pf)}"
                    out[name] = {"_layout": layout(padded, wide, rows1, pf)}
                    out[name + "_nocg"] = {"_layout": layout(padded, wide, rows1, pf), "_STREAM_CG": False}
    out["no_cg"] = {"_STREAM_CG": False}
    # v6 stores the chunked residual form's residual_out after the statistics (69ef63b-res-stores.json, which also
    # timed evict-first stores: within 0.6%, knob removed); the early store of v5, with and without .cg loads
    out["res_early"] = {"_RES_OUT_LATE": False}
    out["res_early_cg"] = {"_RES_OUT_LATE": False, "_STREAM_CG": True}
    # the residual form without a gate (cross-attention rows) as v6 ran it, one padded block with the early store,
    # and as v7 ran it, unpadded chunks with the late store (v7b: chunks only where the block pads D by more than a
    # third; 3bc0389-res.json timed v7's as nogate_chunk_late); the padded block at other warps, or two rows a program
    out["nogate_padded"] = {"_padded_res": lambda M, g_kind, D: g_kind == m._NONE or M <= m._PADDED_RES_MAX_ROWS}
    out["nogate_chunked"] = {"_padded_res": lambda M, g_kind, D: M <= m._PADDED_RES_MAX_ROWS}

    def padded(warps, rows):
        return lambda D, M, has_res, g_kind, sc_kind, sh_kind: (
            1 << (D - 1).bit_length(), 1, rows, warps, m._PER_ROW in (sc_kind, sh_kind))
    out.update({f"pad_w{w}": {"_layout": padded(w, 1)} for w in (4, 16, 32)})
    out["pad_w8_r2"] = {"_layout": padded(8, 2)}
    # the gated chunks at other warps than _warps picks
    out.update({f"chunk_w{w}": {"_layout": (lambda w=w: lambda D, M, has_res, g_kind, sc_kind, sh_kind: (
        *m._chunks(D), 1, w, m._PER_ROW in (sc_kind, sh_kind)))()} for w in (2, 4, 8, 16)})
    # a register cap (Triton's maxnreg, 52945b7-nreg.json, ledger L0028) lost everywhere and is gone with its knob
    # store hints on y and residual_out (evict_first, .cs; ca04c2f-store.json, ledger L0029) are gone with their knob
    # v8, the CUDA row kernel of upstream's launch shape (fcef0f8-cuda-row.json, 95d824d-cuda-loads.json, ledger
    # L0030), is gone with its knobs
    # scale and shift loaded with the row's inputs whatever their kind (PREFETCH, default: per-row ones only), alone
    # and with x and residual past L1
    default_layout = m._layout

    def prefetch_all(D, M, has_res, g_kind, sc_kind, sh_kind):
        return (*default_layout(D, M, has_res, g_kind, sc_kind, sh_kind)[:4], True)
    out["prefetch_all"] = {"_layout": prefetch_all}
    out["prefetch_all_cg"] = {"_layout": prefetch_all, "_STREAM_CG": True}
    # L0033's knobs (L2 eviction policies on the streamed loads and the stores; 8819d0f-evict.json,
    # 38d29f6-ldel-all.json) are gone: v10 loads x and residual evict_last
    # L0031's knobs (residual before x, weight and bias with the row, per-row modulation past L1, and combinations;
    # 5b1129e-knobs.json, c57f27c-knobs2.json, c57f27c-knobs3.json) are gone: v9 took what helped as layout rules
    out["default"] = {}
    return m, out


def _fuse_scale_shift_layouts():
    """select01's row warps, and the scale-shift flat kernel's tile, warps and streaming hints (and the 2-D kernel
    instead of the flat one)."""
    m = _solution_module("fuse_scale_shift", "select01")
    flat = _solution_module("fuse_scale_shift", "scale_shift")
    out = {f"row_w{w}": {"_row_warps": (lambda w=w: (lambda block_n: w))()} for w in (4, 8)}
    for block in (512, 1024, 2048, 4096):
        for warps in (4, 8):
            for hint in (True, False):
                if block // (32 * warps) >= 2:  # down to torch.compile's 2 elements per thread
                    out[f"flat_{block}_w{warps}{'_h' if hint else ''}"] = {
                        (flat, "_flat_config"): (lambda c=(block, warps, hint): (lambda numel: c))()}
    out["two_d"] = {(flat, "_flat_mode"): lambda t, layout, B, L, C: (None, 0)}
    out["default"] = {}
    return m, out


def _norm_infer_layouts():
    """Rows per program and warps of narrow (D <= 256) rows; warps and streaming hints of wide rows held as one
    power-of-two block, and warps of wide rows held as unpadded chunks."""
    m = _solution_module("norm_infer", "norm")
    default = m._layout
    out = {}

    def narrow(bm, w):
        return lambda rows, N, block_n: (bm, w, False, 0) if block_n <= 256 else default(rows, N, block_n)

    def wide(w, hint, chunked=0):
        return lambda rows, N, block_n: (1, w, hint, chunked) if block_n > 256 else default(rows, N, block_n)

    for bm in (4, 8, 16, 32):
        for w in (1, 2, 4, 8):
            if bm * 128 // (32 * w) >= 4:
                out[f"narrow_m{bm}_w{w}"] = {"_layout": narrow(bm, w)}
    for w in (4, 8, 16):
        for hint in (False, True):
            out[f"wide_w{w}{'_h' if hint else ''}"] = {"_layout": wide(w, hint)}
    for w in (4, 8, 16):
        out[f"chunked_w{w}"] = {"_layout": wide(w, False, 1)}
    out["default"] = {}
    return m, out


def _rotary_layouts():
    """The LTX-2 split kernel: (token, head block) grid at several heads per program and warps, or the flat row
    grid (v3)."""
    m = _solution_module("rotary_embedding", "rotary")
    out = {"rows_v3": {"_split_layout": lambda tokens, H, block_half: None}}
    for bh in (4, 8, 16, 32):
        for w in (2, 4, 8):
            out[f"tok_h{bh}_w{w}"] = {"_split_layout": (lambda c=(bh, w): (lambda tokens, H, block_half: c))()}
    out["default"] = {}
    return m, out


def _ntma_layouts():
    """Warps of a wide row's program (one row per program from 2K lanes on)."""
    m = _solution_module("cutedsl_norm_tanh_mul_add", "norm_tanh_mul_add")
    default = m._layout
    out = {f"wide_w{w}": {"_layout": (lambda w=w: lambda block_d: (1, w) if block_d >= 2048 else default(block_d))()}
           for w in (4, 8, 16, 32)}
    out["default"] = {}
    # scale and shift loaded with x (more registers: 53 -> 93 under Triton 3.9 on zimage_attn_norm_scale, kda
    # compile), at the default warps and at 16
    out["early"] = {"_EARLY_LOADS": True}
    out["early_w16"] = {"_EARLY_LOADS": True, **out["wide_w16"]}
    # L2 eviction policies of the loads (x, then the modulation tensors) for both forms, as cutedsl_norm_scale_shift's
    # v10 (1e14757-evict-*.json; v4 takes evict_last on the _norm_scale form, evict_first on the plain one)
    for ex, em in (("", ""), ("evict_last", ""), ("evict_last", "evict_last"), ("", "evict_last"), ("evict_first", ""),
                   ("evict_first", "evict_first")):
        out["ev_x{}_m{}".format(ex.replace("evict_", "") or "n", em.replace("evict_", "") or "n")] = {
            "_EVICTION": {True: (ex, em), False: (ex, em)}}
    return m, out


VARIANTS = {"cutedsl_norm_scale_shift": _nss_layouts, "cutedsl_norm_tanh_mul_add": _ntma_layouts,
            "fuse_scale_shift": _fuse_scale_shift_layouts, "norm_infer": _norm_infer_layouts,
            "rotary_embedding": _rotary_layouts}


def _task_variants(folder):
    """A task's variants kept in its own folder: `variants()` of TASK/tools/variants.py, which returns (module,
    {name: patch}) as the functions above do (a task's investigation tools live with the task, this sweep stays
    generic)."""
    def load():
        spec = importlib.util.spec_from_file_location(f"{folder.name}_variants", folder / "tools" / "variants.py")
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        return mod.variants()
    return load


VARIANTS.update({d.name: _task_variants(d) for d in all_task_dirs() if (d / "tools" / "variants.py").is_file()})


def upstream_entry_points(task) -> dict:
    """The vendored upstream functions by name (the pinned wheel must be in the cache already)."""
    from kda.vendor import load_entry_points, vendor_task
    load_entry_points(task.cfg, vendor_task(task.cfg, allow_download=False))
    return {e.split(":")[1]: getattr(sys.modules[e.split(":")[0]], e.split(":")[1])
            for e in task.cfg["task"]["entry_points"]}


def row_inputs(task, rid: str):
    """(row, inputs on the GPU filled from a fixed seed) of the workload row `rid`."""
    row = next(r for r in task.rows if r.id == rid)
    inp = build_inputs(row, "cuda")
    refill_inputs(row, inp, 12345)
    return row, inp


def row_case(task, rid: str):
    """(row, inputs, oracle outputs, output specs, preallocated outputs) of the workload row `rid`."""
    row, inp = row_inputs(task, rid)
    specs = task.adapter.output_specs(row, inp)
    out = {k: torch.empty(s[0], dtype=s[1], device="cuda") for k, s in specs.items()}
    return row, inp, task.oracle.reference(row, inp), specs, out


def worst_norm_err(out: dict, ref: dict, specs: dict, tol: dict) -> float:
    """The largest |out - ref| / (atol + rtol |ref|) over every output, with the task's tolerance for its dtype
    (`[check] tolerance`): above 1 the output would fail the correctness gate. Non-finite ratios are skipped (the
    gate judges NaN and inf on its own)."""
    worst = 0.0
    for k, (_, dtype) in specs.items():
        t = tol[str(dtype).split(".")[1]]
        err = (out[k].to(ref[k].dtype) - ref[k]).abs() / (t["atol"] + t["rtol"] * ref[k].abs())
        err = err[torch.isfinite(err)]
        if err.numel():
            worst = max(worst, float(err.max()))
    return worst


def _target(module, attr):
    """(module, name) of a variant's attribute key."""
    return attr if isinstance(attr, tuple) else (module, attr)


@contextlib.contextmanager
def patched(module, patch):
    """The variant's attributes swapped in for the block, launch plans cached by the modules involved cleared on
    the way in and out (a plan built under a variant must not serve the default, nor the reverse)."""
    targets = [(_target(module, k), v) for k, v in patch.items()]
    mods = {module} | {m for (m, _), _ in targets}
    saved = [((m, a), getattr(m, a)) for (m, a), _ in targets]
    for (m, a), v in targets:
        setattr(m, a, v)
    for m in mods:
        getattr(m, "_plans", {}).clear()
    try:
        yield
    finally:
        for (m, a), v in saved:
            setattr(m, a, v)
        for m in mods:
            getattr(m, "_plans", {}).clear()


def copy_share(nbytes: int, us: float, copy_tbps: float) -> float:
    """A row's rate (nbytes in `us` microseconds) as a share of the copy rate, the harness's `copy_frac`."""
    return nbytes / (us * 1e-6) / 1e12 / copy_tbps


def round_order(names, r):
    """The variants in round r's order: rotated by r, so that over len(names) rounds each goes first once and a drift
    of the clocks or the memory does not favour one variant."""
    k = r % len(names)
    return names[k:] + names[:k]


def _graph_us(steps, calls=10, replays=15):
    """Median time per repetition of `steps` (a callable, or callables run in order) over replays of one CUDA graph
    of `calls` repetitions."""
    if isinstance(steps, (list, tuple)):
        def fn():
            for f in steps:
                f()
    else:
        fn = steps
    fn()
    torch.cuda.synchronize()
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        fn()
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g, stream=s):
        for _ in range(calls):
            fn()
    times = []
    for _ in range(replays):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        g.replay()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b) * 1e3 / calls)
    return statistics.median(times)


def _stream_us(fn, calls=50):
    """Back-to-back calls between two events (the device_us method): host-bound calls show their host time."""
    fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(5):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        for _ in range(calls):
            fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b) * 1e3 / calls)
    return statistics.median(times)


def _kernel_us(steps, calls=20):
    """Mean GPU time per launch of each kernel that `steps` (a callable, or callables run in order) launch, back to
    back on one stream (torch.profiler's CUDA activity): which pass moved, and each kernel's time without gaps."""
    from torch.profiler import ProfilerActivity, profile
    steps = steps if isinstance(steps, (list, tuple)) else [steps]
    for f in steps:
        f()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            for f in steps:
                f()
        torch.cuda.synchronize()
    out = {}
    for e in prof.key_averages():
        total = getattr(e, "device_time_total", None) or getattr(e, "cuda_time_total", 0.0)
        if total > 0 and e.count:
            out[e.key[:60]] = round(total / e.count, 2)
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("task")
    ap.add_argument("--rows", required=True)
    ap.add_argument("--variants", default=None, help="comma-separated variant names (default: all)")
    ap.add_argument("--baseline", action="store_true", help="time the upstream baseline too (needs it importable)")
    ap.add_argument("--out", default=None)
    ap.add_argument("--kernels", action="store_true", help="also each kernel's GPU time per call (torch.profiler)")
    ap.add_argument("--compile", action="store_true", help="time the torch.compile peer too")
    ap.add_argument("--rounds", type=int, default=1,
                    help="time every variant this many times, the variants interleaved (each round in another "
                         "order); the medians are reported, each round's times kept in the JSON")
    ap.add_argument("--copy", action="store_true",
                    help="also print the best variant's share of the copy bandwidth the harness measures (1 GiB "
                         "device copy, kda.harness.timing), for the bytes the adapter says the row moves")
    args = ap.parse_args(argv)
    torch.set_grad_enabled(False)
    task = Task.load(args.task)
    module, variants = VARIANTS[args.task]()
    if args.variants:
        variants = {k: variants[k] for k in args.variants.split(",")}
    sol, ad = task.load_solution(), task.adapter
    upstream = upstream_entry_points(task) if args.baseline else None
    tol = task.cfg["check"]["tolerance"]
    results = []
    copy_tbps = None
    if args.copy:
        # Not a same-size copy_ under graph capture: that runs at ~2.4 TB/s on an H100 where the kernels of other
        # tasks stream 2.7-2.9 TB/s, and would flatter every variant.
        from kda.harness.timing import copy_bandwidth_tbps
        copy_tbps = copy_bandwidth_tbps()
    for rid in args.rows.split(","):
        row, inp, ref, specs, out = row_case(task, rid)
        rec = {"row": rid, "variants": {}}
        if upstream is not None:
            outb = {k: torch.empty_like(v) for k, v in out.items()}
            rec["baseline_us"] = _graph_us(lambda: ad.call_baseline(upstream, row, inp, outb))
            rec["baseline_stream_us"] = _stream_us(lambda: ad.call_baseline(upstream, row, inp, outb))
            if args.kernels:
                rec["baseline_kernel_us"] = _kernel_us(lambda: ad.call_baseline(upstream, row, inp, outb))
        if copy_tbps is not None:
            rec["bytes"], rec["copy_tbps"] = ad.bytes_moved(row), copy_tbps  # the bytes copy_frac counts
        if args.compile:
            from kda.harness.peers import peer_call, peer_math
            peer = peer_call(peer_math(task.oracle), row, inp, {k: s[1] for k, s in specs.items()}, "compile")
            rec["compile_us"] = _graph_us(peer)
            rec["compile_stream_us"] = _stream_us(peer)
            if args.kernels:
                rec["compile_kernel_us"] = _kernel_us(peer)
        names = list(variants)
        rounds = {k: {"graph_us": [], "stream_us": []} for k in names}
        for r in range(args.rounds):
            for name in round_order(names, r):
                with patched(module, variants[name]):
                    if r == 0:
                        ad.call_candidate(sol, row, inp, out)
                        rec["variants"][name] = {"worst_norm_err": worst_norm_err(out, ref, specs, tol)}
                        if args.kernels:
                            rec["variants"][name]["kernel_us"] = _kernel_us(
                                lambda: ad.call_candidate(sol, row, inp, out))
                    rounds[name]["graph_us"].append(_graph_us(lambda: ad.call_candidate(sol, row, inp, out)))
                    rounds[name]["stream_us"].append(_stream_us(lambda: ad.call_candidate(sol, row, inp, out)))
        for name in names:
            for key, vals in rounds[name].items():
                rec["variants"][name][key] = statistics.median(vals)
                if args.rounds > 1:
                    rec["variants"][name][key + "_rounds"] = vals
        best = min(rec["variants"], key=lambda k: rec["variants"][k]["graph_us"])
        line = " ".join(f"{k}={v['graph_us']:.1f}/{v['stream_us']:.1f}" + ("!" if v["worst_norm_err"] > 1 else "")
                        + (f"[{min(v['graph_us_rounds']):.1f}-{max(v['graph_us_rounds']):.1f}]"
                           if "graph_us_rounds" in v else "")
                        + ("(" + "+".join(f"{t:.1f}" for t in v["kernel_us"].values()) + ")" if "kernel_us" in v else "")
                        for k, v in rec["variants"].items())
        base = f" baseline={rec['baseline_us']:.1f}/{rec['baseline_stream_us']:.1f}" if "baseline_us" in rec else ""
        if "compile_us" in rec:
            base += f" compile={rec['compile_us']:.1f}/{rec['compile_stream_us']:.1f}"
            if "compile_kernel_us" in rec:
                base += "(" + "+".join(f"{t:.1f}" for t in rec["compile_kernel_us"].values()) + ")"
        if "copy_tbps" in rec:
            share = copy_share(rec["bytes"], rec["variants"][best]["graph_us"], copy_tbps)
            base += f" (best at {share:.0%} of copy, {copy_tbps:.2f} TB/s)"
        print(f"{rid}: best {best}{base} | {line}", flush=True)
        results.append(rec)
        if args.out:  # after every row, so a sweep cut off by a time limit keeps the rows it finished
            with open(args.out, "w") as f:
                json.dump({"task": args.task, "gpu": torch.cuda.get_device_name(), "rows": results}, f, indent=1)


if __name__ == "__main__":
    main()
