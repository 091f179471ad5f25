"""kda report: the committed README table, docs and plots match the committed results files."""
import json
import shutil

import pytest

from kda.e2e.inventory import INVENTORY_METHOD
from kda.evidence import report
from kda.harness import results_file
from kda.harness.provenance import LEAD_CALL_BEFORE_FIELD, device_us_start
from kda.core.paths import all_task_dirs, repo_root


def _committed_results(aa=None):
    files = [p for d in all_task_dirs() for p in results_file.list_files(d / "results")]
    return [p for p in files if aa is None or results_file.stem(p).endswith("-aa") == aa]


def test_committed_docs_match_results():
    # the plots' data digests, sizes and links; drawing every plot again is `kda report --check`'s (seconds)
    assert report.check(render=False) == []


def test_a_committed_plot_is_the_bytes_kda_report_draws_from_its_data():
    """Deterministic SVG (fixed hash salt, no date or creator): drawing a plot again gives the committed bytes, so
    `kda report --check` can compare them. The smallest task's A/A roofline keeps the test fast."""
    import matplotlib

    results = report.all_results()
    path, data = min(report.plot_files(results).items(), key=lambda kv: (len(kv[1]["ids"]), str(kv[0])))
    raw = path.read_bytes()
    if f"matplotlib {matplotlib.__version__} -->".encode() not in raw[:400]:
        pytest.skip("the committed plots were drawn by another matplotlib")
    assert report.render_plot(data) == raw == report.render_plot(data)


def test_every_linked_plot_is_small_and_no_other_plot_is_kept():
    results = report.all_results()
    plots = report.plot_files(results)
    assert plots and all(p.suffix == ".svg" and p.stat().st_size <= report.PLOT_MAX_BYTES for p in plots)
    assert report.stray_plots(results) == []
    for task_dir, files in results.items():  # what results.md links is what plot_files lists
        md = (task_dir / "docs" / "results.md").read_text()
        assert {p.name for p in plots if p.parent.parent.parent == task_dir} == set(
            __import__("re").findall(r"\]\(plots/([^)]+)\)", md))


def test_check_notices_a_changed_results_file_and_a_stray_or_stale_plot(tmp_path, monkeypatch):
    root = repo_root()
    results = _committed_results(aa=False)
    if not results:
        pytest.skip("no committed results yet")
    clone = tmp_path / "repo"
    shutil.copytree(root, clone, ignore=shutil.ignore_patterns(".git", ".venv", ".kda-cache", "__pycache__", "*.csv"))
    monkeypatch.setenv("KDA_ROOT", str(clone))
    assert report.check(render=False) == []
    target = clone / results[0].relative_to(root)
    recs = results_file.read_records(target)
    recs[-1]["rows_passed"] -= 1
    results_file.write(target, recs)
    stray = target.parent.parent / "docs" / "plots" / "h100-speedup.png"
    stray.write_bytes(b"an old plot")
    stale = report.check(render=False)
    assert "README.md" in stale
    assert any(s.endswith("h100-speedup.png (no results page links it)") for s in stale)
    # a plot drawn from other data: its digest no longer matches the file's rows
    rows = next(r for r in recs if r.get("type") == "row" and r.get("speedup"))
    rows["speedup"]["device_us"]["vs_baseline"]["median"] += 0.5
    results_file.write(target, recs)
    speedup = f"{results_file.stem(target)}-speedup.svg (drawn from other data"
    assert any(speedup in s for s in report.check(render=False))
    # kda report writes the plots again and deletes the one no page links (drawing stubbed: seconds per task)
    monkeypatch.setattr(report, "render_plot", lambda data: (
        f'<?xml version="1.0"?>\n<!-- kda report: data sha256 {report.data_digest(data)}, matplotlib stub -->\n'
        '<svg xmlns="http://www.w3.org/2000/svg"/>\n').encode())
    written = report.write()
    assert stray in written and not stray.exists() and report.check(render=False) == []


def test_fast_p_counts_only_correct_tasks(monkeypatch):
    monkeypatch.setattr(report, "detail_table", lambda results: "")  # the fakes below carry only what fast_p reads

    class F:
        aa = False
        def __init__(self, passed, total, g):
            self.summary = {"rows_passed": passed, "rows_total": total,
                            "metrics": {"device_us": {"vs_baseline": {"geomean": g, "ci": [g, g]}}}}
            self.provenance = {"gpu": {"name": "X"}}
    from pathlib import Path
    md = report.campaign_md({Path("a"): [F(3, 3, 1.3)], Path("b"): [F(2, 3, 2.0)], Path("c"): [F(3, 3, 0.9)]})
    assert "| X | 3 | 1/3 | 1/3 | 0/3 |" in md


def test_device_us_start_reads_provenance_and_names_the_older_protocol():
    assert device_us_start({"device_us_start": "lead call", "commit": "0" * 40}) == "lead call"
    lead = next(iter(LEAD_CALL_BEFORE_FIELD))
    assert device_us_start({"commit": lead}) == "lead call"
    assert device_us_start({"commit": "1" * 40}) == "idle GPU"
    assert device_us_start({}) == "idle GPU"


def _readme_table():
    readme = (repo_root() / "README.md").read_text()
    block = readme.split("<!-- kda:results:start -->")[1].split("<!-- kda:results:end -->")[0]
    header, _, *rows = [line for line in block.splitlines() if line.startswith("|")]
    return header.split(" | "), rows


def _detail_table():
    text = (repo_root() / "docs" / "campaign.md").read_text().split("## Every summary figure")[1].split("\n## ")[0]
    header, _, *rows = [line for line in text.splitlines() if line.startswith("|")]
    return header.split(" | "), rows


def test_every_committed_results_row_of_the_detail_table_names_its_device_us_start():
    header, rows = _detail_table()
    col = header.index("device_us start")
    assert rows and all(r.split(" | ")[col] in ("lead call", "idle GPU") for r in rows)


def _large_row(rid, mb, copy_frac, kernels, production=True):
    return {"id": rid, "production": production, "bytes": mb * 1e6, "kernels": kernels,
            "arms": {"candidate": {"device_us": {"copy_frac": copy_frac}}}}


def test_large_rows_below_copy_share_show_the_bound_of_a_profile_of_the_same_kernels(tmp_path):
    import json

    from kda.evidence.report import ResultsFile, large_rows_section

    prof = tmp_path / "docs" / "profile" / "h100"
    prof.mkdir(parents=True)
    (prof / "same-candidate.json").write_text(json.dumps(
        {"kernels": [{"name": "k_b"}, {"name": "k_a"}], "dram_bytes": 300e6, "bound": "latency: DRAM at 57%"}))
    (prof / "twice-candidate.json").write_text(json.dumps(
        {"kernels": [{"name": "k_a"}], "dram_bytes": 453e6, "pct_of_copy": 88.0, "bound": "memory: DRAM at 77%"}))
    (prof / "older-candidate.json").write_text(json.dumps({"kernels": [{"name": "k_old"}], "bound": "memory"}))
    rows = [_large_row("same", 302, 0.70, ["k_a", "k_b"]), _large_row("older", 400, 0.60, ["k_a"]),
            _large_row("unprofiled", 300, 0.50, ["k_a"]), _large_row("fast", 300, 0.90, ["k_a"]),
            _large_row("small", 100, 0.30, ["k_a"]), _large_row("test_only", 300, 0.30, ["k_a"], production=False),
            _large_row("twice", 302, 0.59, ["k_a"])]
    f = ResultsFile(tmp_path / "h100.jsonl.gz", {"gpu_slug": "h100"}, rows, {})
    text = "\n".join(large_rows_section(tmp_path, f))
    lines = {ln.split(" | ")[0].lstrip("| "): ln for ln in text.splitlines() if ln.startswith("| ") and " | " in ln}
    assert set(lines) - {"row"} == {"same", "older", "unprofiled", "twice"}  # large, production, below 85%
    cells = {k: [c.strip() for c in v.strip("| ").split(" | ")] for k, v in lines.items()}
    # 300 MB of DRAM traffic for 302 MB moved: at the copy rate that traffic allows all of copy (capped at 100%); the
    # summary has no rate
    assert cells["same"][3:] == ["300 / 302", "-", "100", "latency: DRAM at 57%"]
    # x read twice: 453 MB of traffic for 302 MB moved caps the row at 67% of copy; the kernels ran at 88% of it
    assert cells["twice"][3:] == ["453 / 302", "88", "67", "memory: DRAM at 77%"]
    assert "other kernels (k_old), not this file's candidate" in lines["older"] and "memory" not in lines["older"]
    assert cells["older"][3:] == ["-", "-", "-", "-"]
    assert cells["unprofiled"][2:] == ["none", "-", "-", "-", "-"]
    assert large_rows_section(tmp_path, ResultsFile(tmp_path / "x.jsonl", {"gpu_slug": "h100"}, rows[3:4], {})) == []


@pytest.mark.parametrize("ncu_name, torch_name", [
    # a kernel in an anonymous namespace: ncu drops the scope and the parameters' namespaces
    ("void unnamed>::gn_held_kernel<__half, 16>(HeldParams, DType)",
     "void kda_gn::(anonymous namespace)::gn_held_kernel<__half, 16>(kda_gn::HeldParams, kda_gn::DType)"),
    ("_gn_apply_kernel", "_gn_apply_kernel"),  # Triton kernels carry no scope or parameters
])
def test_a_profile_matches_the_recorded_kernels_whatever_scope_ncu_writes(tmp_path, ncu_name, torch_name):
    import json

    from kda.evidence.report import ResultsFile, slow_large_rows

    prof = tmp_path / "docs" / "profile" / "h200"
    prof.mkdir(parents=True)
    (prof / "r-candidate.json").write_text(json.dumps({"kernels": [{"name": ncu_name}], "bound": "memory"}))
    f = ResultsFile(tmp_path / "h200.jsonl", {"gpu_slug": "h200"}, [_large_row("r", 300, 0.7, [torch_name])], {})
    [(_, _, _, summary)] = slow_large_rows(tmp_path, f)
    assert summary == {"kernels": [{"name": ncu_name}], "bound": "memory"}


def test_bool_template_arguments_match_across_the_two_spellings():
    from kda.evidence.report import kernel_key

    torch_name = "void ns::(anonymous namespace)::k<__half, 4, 12, false>(ns::P, ns::D)"
    assert kernel_key(torch_name) == kernel_key("void unnamed>::k<__half, 4, 12, 0>(P, D)")
    assert kernel_key(torch_name) != kernel_key("void unnamed>::k<__half, 4, 12, 1>(P, D)")
    assert kernel_key("void ns::k<true>(P)") == "k<1>"
    assert kernel_key("void ns::falsehood<2>(P)") == "falsehood<2>"  # a word, not the argument


def test_kernels_differing_in_template_arguments_do_not_match():
    from kda.evidence.report import kernel_key

    assert kernel_key("void ns::k<__half, 16>(P)") != kernel_key("void unnamed>::k<__half, 8>(P)")
    assert kernel_key("void ns::k<__half, 16>(P)") != kernel_key("void ns::j<__half, 16>(P)")


def test_unprofiled_large_rows_are_those_without_a_profile_of_their_kernels(tmp_path):
    import json

    from kda.evidence.report import unprofiled_large_rows

    prof = tmp_path / "docs" / "profile" / "h100"
    prof.mkdir(parents=True)
    (prof / "same-candidate.json").write_text(json.dumps({"kernels": [{"name": "k_a"}], "bound": "memory"}))
    (prof / "older-candidate.json").write_text(json.dumps({"kernels": [{"name": "k_old"}], "bound": "memory"}))
    rows = [_large_row("same", 302, 0.70, ["k_a"]), _large_row("older", 400, 0.60, ["k_a"]),
            _large_row("unprofiled", 300, 0.50, ["k_a"]), _large_row("fast", 300, 0.90, ["k_a"])]
    path = tmp_path / "results" / "h100.jsonl"
    path.parent.mkdir()
    lines = [{"type": "provenance", "gpu_slug": "h100"}, *[{"type": "row", **r} for r in rows], {"type": "summary"}]
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    assert unprofiled_large_rows(tmp_path, path) == ["older", "unprofiled"]


def test_rows_below_one_counts_the_intervals_wholly_below_one_of_all_passing_rows():
    assert report.rows_below_one({"rows_ci_below_1": 2, "rows": 25}) == "2/25"
    assert report.rows_below_one(None) == "-"


def test_the_readme_leads_with_kernel_vs_best_peer_beside_eager_call_vs_upstream():
    """The lead table: graph_us over the best peer and device_us over upstream, as the summaries have them, with
    the rows whose graph_us interval over the best peer lies wholly below 1, and the candidate over today's SGLang
    (issue 40) from the rows' samples; at most 8 columns."""
    cols, rows = _readme_table()
    assert len(cols) <= 8
    latest = cols.index("over today's SGLang")
    kernel, eager, below = (cols.index(c) for c in ("kernel vs best peer", "eager call vs upstream", "rows below 1"))
    files = [report.load_results(p) for p in _committed_results(aa=False)]
    for f in files:
        m = f.summary["metrics"]
        line = next(r for r in rows if f"[{f.task}]" in r and f" {f.gpu.upper()} " in r).split(" | ")
        assert line[kernel] == report._ci(m["graph_us"]["vs_best_peer"]), (f.task, f.gpu)
        assert line[eager] == report._ci(m["device_us"]["vs_baseline"]), (f.task, f.gpu)
        assert line[below] == report.rows_below_one(m["graph_us"]["vs_best_peer"]), (f.task, f.gpu)
        note = report.latest_note(f.path.parent.parent)
        assert line[latest] == report.latest_cell(f, note), (f.task, f.gpu)
    assert len(files) == len(rows)
    assert any(report.vs_latest(f) for f in files)  # the committed H200 files of the tasks that pin 0.5.23
    assert "**Kernel vs best peer**" in (repo_root() / "README.md").read_text()  # the sentence saying what it means


def test_the_detail_table_shows_rows_below_one_against_baseline_and_best_peer_as_the_summaries_count_them():
    cols, rows = _detail_table()
    col = cols.index("rows CI < 1 vs baseline / best peer (device_us)")
    files = [report.load_results(p) for p in _committed_results(aa=False)]
    # every committed bench file's row, in the README's order, carries its summary's two counts
    seen = 0
    for f in files:
        m = f.summary["metrics"]["device_us"]
        want = f"{report.rows_below_one(m['vs_baseline'])} / {report.rows_below_one(m['vs_best_peer'])}"
        line = next(r for r in rows if f"[{f.task}]" in r and f" {f.provenance['gpu']['name']} " in r)
        assert line.split(" | ")[col] == want, (f.task, f.gpu)
        seen += 1
    assert seen == len(rows)


def test_report_finds_the_profile_summaries_it_links_with_no_raw_export_in_the_tree():
    """kda report reads only the .json summaries of docs/profile/ (raw CSV exports are out of the tree): the large
    rows of the committed results still name the bound of their candidate's profile."""
    named = 0
    for task_dir, files in report.all_results().items():
        md = (task_dir / "docs" / "results.md").read_text()
        for f in (f for f in files if not f.aa):
            for _, _, prof, summary in report.slow_large_rows(task_dir, f):
                if summary is not None and "other_kernels" not in summary:
                    assert prof.suffix == ".json" and prof.is_file()
                    assert f"]({prof.relative_to(task_dir / 'docs').as_posix()})" in md
                    named += 1
    assert named


def _graph_row(rid, ci, production=True, status="PASS", peer="compile", graph_error=None):
    e = {"median": sum(ci) / 2, "ci": ci, "n": 21} if ci else None
    return {"id": rid, "production": production, "status": status,
            "arms": {"candidate": {"graph_error": graph_error}},
            "speedup": {"graph_us": {"best_peer": peer if ci else None, "vs_best_peer": e}}}


GRAPH_ROWS = [_graph_row("below", [0.95, 0.99]), _graph_row("worst", [0.80, 0.90], peer="baseline"),
              _graph_row("straddles", [0.97, 1.02]), _graph_row("above", [1.05, 1.10]),
              _graph_row("test_only", [0.5, 0.6], production=False), _graph_row("failed", [0.5, 0.6], status="FAIL"),
              _graph_row("uncaptured", None, graph_error="RuntimeError: capture\nmore"),
              _graph_row("no_peer", None)]


def test_graph_peer_losses_are_the_passing_production_rows_wholly_below_the_bound_worst_first():
    losses = report.graph_peer_losses(GRAPH_ROWS)
    assert [r["id"] for r in losses.below] == ["worst", "below"] and losses.below[0]["peer"] == "baseline"
    assert losses.rows == 4  # below, worst, straddles, above: the rows with an interval
    assert losses.unmeasured == [("uncaptured", "the candidate's graph capture failed (RuntimeError: capture)"),
                                 ("no_peer", "no correct peer has a graph_us time")]
    assert [r["id"] for r in report.graph_peer_losses(GRAPH_ROWS, bound=1.03).below] == ["worst", "below",
                                                                                         "straddles"]


def test_results_md_leads_with_both_figures_the_rows_below_one_and_the_readmes_reading(tmp_path):
    summary = {"metrics": {"graph_us": {"vs_best_peer": {"geomean": 1.1, "ci": [1.05, 1.15]}},
                           "device_us": {"vs_baseline": {"geomean": 1.6, "ci": [1.5, 1.7]}}}}
    f = report.ResultsFile(tmp_path / "h100.jsonl.gz", {"gpu_slug": "h100"}, GRAPH_ROWS, summary)
    aa = report.ResultsFile(tmp_path / "h100-aa.jsonl.gz", {"gpu_slug": "h100", "aa": True}, [], summary)
    text = "\n".join(report.lead_section([aa, f]))
    assert "| GPU | kernel vs best peer | eager call vs upstream | rows below 1 | worst row below 1 | over today's " \
           "SGLang |" in text
    assert "| H100 | 1.100 [1.050, 1.150] | 1.600 [1.500, 1.700] | 2/4 | worst: 0.850 [0.800, 0.900] vs baseline " \
           "| - |" in text  # no row ran the peer latest
    assert text.count("| H100 |") == 1  # the A/A file has no user reading
    assert "H100, uncaptured: no graph_us interval over a peer, the candidate's graph capture failed" in text
    assert report.READ_RIGHT in text and report.lead_section([aa]) == []


def test_each_committed_results_md_leads_with_what_the_summaries_count():
    """The lead comes before any GPU's detail, and its count of rows below 1 is the summary's rows_ci_below_1."""
    for task_dir, files in report.all_results().items():
        md = (task_dir / "docs" / "results.md").read_text()
        lead = md.split("\n## ")[1]
        assert lead.startswith("At a glance") and report.READ_RIGHT in lead
        for f in (f for f in files if not f.aa):
            kernel = f.summary["metrics"]["graph_us"]["vs_best_peer"]
            line = next(ln for ln in lead.splitlines() if ln.startswith(f"| {f.gpu.upper()} |")).split(" | ")
            assert line[1] == report._ci(kernel) and line[3] == report.rows_below_one(kernel), (f.task, f.gpu)
def test_a_sweep_results_file_renders_its_verdict_domain_and_rows_into_the_task_page(tmp_path):
    from kda.harness import sweep_verdict

    task_dir = tmp_path / "fuse_scale_shift"
    rows = [{"type": "row", "id": f"sweep_{i}_bcast11_b1_s{i}", "status": "PASS", "reasons": [], "production": False,
             "model": "sweep", "params": {"S": i},
             "arms": {"candidate": {"graph_us": {"median": 10.0 + i}}},
             "speedup": {"graph_us": {"vs_best_peer": {"median": m, "ci": [m - 0.05, m + 0.05]},
                                      "best_peer": "compile"}}}
            for i, m in enumerate((1.2, 0.8, 1.05))]
    domain = [{"name": "S", "why": "tokens around production", "choices": None, "cpu_choices": None, "min": 16,
               "max": 80000, "scale": None, "multiple_of": None, "cpu_min": 1, "cpu_max": 24}]
    prov = {"type": "provenance", "task": "fuse_scale_shift", "mode": "bench", "aa": False,
            "time_utc": "2026-12-01T00:00:00Z", "commit": "0123456789abcdef", "command": "kda bench --sweep 3",
            "duration_s": 12.0, "gpu": {"name": "NVIDIA H200"}, "gpu_slug": "h200",
            "sweep": {"seed": 5, "n": 3, "cpu": False, "domain": domain, "draws": []}}
    summary = {"type": "summary", "rows_total": 3, "rows_passed": 3, "sweep": sweep_verdict.verdict(rows, 0.9, 0.9)}
    path = results_file.write(task_dir / "results" / "sweep" / "h200.jsonl.gz", [prov, *rows, summary])
    f = report.load_results(path)
    text = report.generate({}, {task_dir: [f]})[task_dir / "docs" / "results.md"]
    assert "## Sweep on NVIDIA H200 (results/sweep/h200.jsonl.gz): 3 rows drawn at random" in text
    assert "**target not met**: 2/3 rows (67%)" in text and "`sweep_1_bcast11_b1_s1` 0.800 [0.750, 0.850]" in text
    assert "`kda bench fuse_scale_shift --sweep 3 --sweep-seed 5` draws the same rows" in text
    assert "| S | 16 .. 80000, log (CPU: 1 .. 24) | tokens around production |" in text
    assert "| sweep_1_bcast11_b1_s1 | PASS | 0.800 [0.750, 0.850] | compile | 11.00 | **no** |" in text
    # where it holds, by parameter: three values of S in three groups of one row each
    assert "| S | 0 | 1 | 1 | 1.200 |" in text and "|  | 1 | 1 | 0 | 0.800 |" in text
    assert results_file.list_files(task_dir / "results") == []  # the production readers never see it


def test_the_readme_says_which_files_timed_over_rotated_input_sets(tmp_path):
    summary = {"metrics": {}}
    old = report.ResultsFile(tmp_path / "h100.jsonl.gz", {"gpu_slug": "h100", "task": "t"}, [], summary)
    new = report.ResultsFile(tmp_path / "h200.jsonl.gz", {"gpu_slug": "h200", "task": "t", "rotate": True}, [],
                             summary)
    assert report.timing_method({tmp_path: [old]}).startswith("Every file above timed its calls on one set of inputs")
    assert "(`bench.rotate`): t H200; every other file on one set" in report.timing_method({tmp_path: [old, new]})
    assert report.timing_method({}) == ""


def test_a_cold_l2_file_is_reported_beside_the_hot_file_of_its_gpu(tmp_path):
    def f(name, prov, geo):
        summary = {"metrics": {"graph_us": {"vs_best_peer": {"geomean": geo, "ci": [geo - 0.01, geo + 0.01],
                                                             "rows_ci_below_1": 0, "rows": 7}},
                               "device_us": {"vs_baseline": {"geomean": 1.5, "ci": [1.4, 1.6]}}}}
        return report.ResultsFile(tmp_path / name, {"gpu_slug": "h100", "commit": "abcdef0123", **prov}, [], summary)

    cold, hot = f("h100.jsonl.gz", {"l2": "cold"}, 1.2), f("h100.jsonl.gz", {"l2": "hot"}, 1.05)
    text = "\n".join(report.cold_section([cold], [hot]))
    assert "| H100 | cold | 1.200 [1.190, 1.210] | 1.500 [1.400, 1.600] | 0/7 |" in text
    assert "| H100 | hot | 1.050 [1.040, 1.060] |" in text and "results/cold/h100.jsonl.gz (`abcdef0`)" in text
    assert "no hot file for this GPU" in "\n".join(report.cold_section([cold], []))


def test_the_e2e_table_reads_a_blocks_results_file(tmp_path):
    from kda.harness import results_file

    sp = lambda m: {"median": m, "ci": [m - 0.01, m + 0.01], "n": 15}  # noqa: E731
    row = {"type": "row", "id": "qwen_image_1024px_txt47",
           "speedup": {"candidate/upstream": {"eager_us": sp(1.04), "graph_us": sp(1.02)},
                       "candidate/compile": {"graph_us": sp(0.97)}, "candidate/latest": {"graph_us": sp(1.01)}},
           "predicted": {"graph_us": 1.031}}
    path = results_file.write(tmp_path / "h100.jsonl.gz", [
        {"type": "provenance", "block": "qwen_image", "gpu_slug": "h100", "not_yet_validated": True,
         "inventory": INVENTORY_METHOD, "latest": {"tasks": {"fuse_scale_shift": "sglang==0.5.23",
                                                             "qknorm_rope": "sglang==0.5.15 (JIT rewrite)"}}},
        row, {"type": "summary", "rows": 1}])
    text = report.e2e_table([path])
    assert "| qwen_image | H100 | qwen_image_1024px_txt47 | 1.040 [1.030, 1.050] | 1.020 [1.010, 1.030] " \
           "| 0.970 [0.960, 0.980] | 1.010 [1.000, 1.020] | 1.031 |" in text
    # the latest arm's tasks that ran the baseline's release are named, with why
    assert "qwen_image runs qknorm_rope on sglang==0.5.15 (JIT rewrite)" in text and "fuse_scale_shift on" not in text
    assert "(not yet validated" in text and "No prediction is shown" not in text
    # a file from before the inventory attributed by time window: its prediction is not shown, and why
    old = results_file.write(tmp_path / "h200.jsonl.gz", [
        {"type": "provenance", "block": "wan", "gpu_slug": "h200"}, {**row, "id": "wan_t2v"}, {"type": "summary"}])
    text = report.e2e_table([path, old])
    assert "| wan | H200 | wan_t2v | 1.040 [1.030, 1.050] | 1.020 [1.010, 1.030] | 0.970 [0.960, 0.980] " \
           "| 1.010 [1.000, 1.020] | - |" in text
    assert "No prediction is shown for wan:" in text and "| 1.031 |" in text
    # the second run's: windows opened before the synchronize, attention counted as a site's
    flawed = results_file.write(tmp_path / "h100-b.jsonl.gz", [
        {"type": "provenance", "block": "zimage", "gpu_slug": "h100", "inventory": "site windows"},
        {**row, "id": "zimage_1024"}, {"type": "summary"}])
    text = report.e2e_table([path, flawed])
    assert "| zimage | H100 | zimage_1024 |" in text and text.count("| 1.031 |") == 1
    assert "No prediction is shown for zimage: their inventories opened each site's window before" in text
    assert report.e2e_table([]).startswith("No model block has been timed on a GPU yet")


def test_the_e2e_table_predicts_from_a_third_run_file_with_its_ranges_left_out(tmp_path):
    """The third GPU run's files listed each site's range as a kernel of its task: the table predicts again from
    the cleaned inventory and the speedups the run read, and says so."""
    from kda.harness import results_file

    up = {"total_us": 140.0, "tasks": {"norm_infer": 40.0}, "kernels": [
        {"kernel": "nvjet", "owner": "gemm", "us": 80.0}, {"kernel": "_norm", "owner": "norm_infer", "us": 20.0},
        {"kernel": "kda.site:n1:norm_infer", "owner": "norm_infer", "us": 20.0},
        {"kernel": "elementwise", "owner": "other", "us": 20.0}]}
    row = {"type": "row", "id": "wan_ti2v", "arms": {"upstream": {"inventory": up}},
           "predicted": {"graph_us": 9.9, "task_speedups": {"norm_infer": 2.0}}}
    path = results_file.write(tmp_path / "h200.jsonl.gz", [
        {"type": "provenance", "block": "wan", "gpu_slug": "h200",
         "inventory": "site windows, opened after a synchronize"}, row, {"type": "summary"}])
    text = report.e2e_table([path])
    assert text.splitlines()[2].endswith(f"| {120.0 / 110.0:.3f} |")  # not the recorded 9.9
    assert "The inventories of wan listed each site's profiler range as a kernel" in text


def _latest_row(rid, latest, cand, production=True, status="PASS", failed=0):
    return {"id": rid, "production": production, "status": status,
            "checks": {"latest": {"checks": 1, "failed": failed}},
            "samples": {"latest": {"graph_us": latest}, "candidate": {"graph_us": cand}}}


def test_over_todays_sglang_reads_the_latest_arms_samples_of_passing_production_rows_where_it_was_correct(tmp_path):
    rows = [_latest_row("faster", [2.0, 2.0, 2.1], [1.0, 1.0, 1.0]),  # 2x, interval above 1
            _latest_row("slower", [1.0, 1.0, 1.0], [2.0, 2.0, 2.0]),  # 0.5x: wholly below 1
            _latest_row("latest_wrong", [9.0] * 3, [1.0] * 3, failed=1),  # the peer failed its check: not a peer
            _latest_row("test_only", [9.0] * 3, [1.0] * 3, production=False),
            _latest_row("cand_failed", [9.0] * 3, [1.0] * 3, status="FAIL"),
            {"id": "no_latest", "production": True, "status": "PASS", "checks": {}, "samples": {}}]
    f = report.ResultsFile(tmp_path / "h200.jsonl.gz", {"gpu_slug": "h200"}, rows, {})
    e = report.vs_latest(f)
    assert e["rows"] == 2 and e["rows_ci_below_1"] == 1 and e["min"]["id"] == "slower"
    assert abs(e["geomean"] - 1.0) < 1e-9  # sqrt(2 * 0.5)
    assert report.latest_cell(f) == f"{report._ci(e)}, 1/2 below 1"
    none = report.ResultsFile(tmp_path / "h100.jsonl.gz", {"gpu_slug": "h100"}, rows[2:], {})
    assert report.vs_latest(none) is None and report.latest_cell(none) == "-"
    assert report.latest_cell(none, "= upstream: same kernel") == "= upstream: same kernel"  # none pinned: why
    assert report.latest_note(repo_root() / "diffusion/kernels/group_norm_silu")  # every unpinned task says why


def _e2e_file(path, inventory_method=INVENTORY_METHOD):
    from kda.harness import results_file

    inv = lambda total, task, gemm: {"total_us": total, "tasks": {"group_norm_silu": task},  # noqa: E731
                                     "families": {"gemm": gemm, "attention": 0.0, "copy": 0.0,
                                                  "other": total - task - gemm}}
    sp = {"median": 1.2, "ci": [1.1, 1.3], "n": 5}
    row = {"type": "row", "id": "hyvae_up3", "speedup": {"candidate/upstream": {"eager_us": sp, "graph_us": sp}},
           "arms": {"upstream": {"inventory": inv(100.0, 40.0, 50.0)},
                    "candidate": {"inventory": inv(70.0, 10.0, 50.0)}}}
    prov = {"type": "provenance", "block": "hunyuanvae_up_block", "gpu": "NVIDIA H200", "gpu_slug": "h200",
            "arms": ["upstream", "candidate"], "trials": 5, "time_utc": "2026-11-28T00:00:00+00:00",
            "commit": "abcdef0123456789"}
    if inventory_method:
        prov["inventory"] = inventory_method
    return results_file.write(path, [prov, row, {"type": "summary"}])


def test_a_blocks_inventory_plot_draws_both_arms_as_shares_of_upstream_and_its_page_links_it(tmp_path):
    path = _e2e_file(tmp_path / "h200.jsonl.gz")
    data = report.e2e_plot_data(path)
    assert data["ids"] == ["hyvae_up3 upstream", "hyvae_up3 candidate"]
    assert data["categories"] == ["group_norm_silu", "gemm", "attention", "copy", "other"]
    assert data["series"] == [[0.4, 0.5, 0.0, 0.0, 0.1], [0.1, 0.5, 0.0, 0.0, 0.1]]  # candidate: 0.7 of upstream
    svg = report.render_plot(data)
    assert svg == report.render_plot(data) and len(svg) <= report.PLOT_MAX_BYTES and b"group_norm_silu" in svg
    page = report.e2e_block_md(tmp_path, [path])
    assert "![inventory](plots/h200-inventory.svg)" in page and "| hunyuanvae_up_block | H200 | hyvae_up3 |" in page
    # inventories from before attribution by time window (the first GPU run): no plot, and the page says why
    old = _e2e_file(tmp_path / "h100.jsonl.gz", inventory_method=None)
    assert report.e2e_plot_data(old) is None
    assert "No inventory plot" in report.e2e_block_md(tmp_path, [old])
    flawed = _e2e_file(tmp_path / "h100-b.jsonl.gz", inventory_method="site windows")
    assert report.e2e_plot_data(flawed) is None
    assert "opened each site's window before synchronizing" in report.e2e_block_md(tmp_path, [flawed])


def test_every_block_with_results_has_its_page_and_readme_links_it():
    readme = (repo_root() / "README.md").read_text()
    pages = report.e2e_by_block()
    assert pages  # the first GPU runs committed block results
    for block_dir in pages:
        assert (block_dir / "results.md").is_file()
        assert f"[{block_dir.name}](diffusion/e2e/{block_dir.name}/results.md)" in readme


def test_the_lead_counts_the_rows_bit_exact_to_sglangs_eager_chain_where_a_file_records_them(tmp_path):
    summary = {"metrics": {}, "bitexact": {"rows": 23, "exact": 3}, "contract": "close"}
    f = report.ResultsFile(tmp_path / "h200.jsonl.gz", {"gpu_slug": "h200"}, [], summary)
    old = report.ResultsFile(tmp_path / "h100.jsonl.gz", {"gpu_slug": "h100"}, [], {"metrics": {}})
    text = "\n".join(report.lead_section([f, old]))
    assert "- H200: 3/23 (close)" in text and "- H100" not in text
    assert "Equal bits" not in "\n".join(report.lead_section([old]))


def test_the_trajectory_table_gives_each_arms_psnr_the_gap_and_the_verdict(tmp_path):
    row = {"type": "row", "id": "wan_ti2v", "steps": 50, "depth": 4,
           "psnr": {"upstream": 68.62, "candidate": 68.0, "eager": 67.5}, "problem": None}
    bad = {**row, "id": "wan_t2v", "psnr": {"upstream": 68.62, "candidate": 60.0, "eager": 67.5},
           "problem": "the candidate's final latent is 8.62 dB further"}
    path = results_file.write(tmp_path / "h200.jsonl.gz", [
        {"type": "provenance", "block": "wan", "gpu_slug": "h200"}, row, bad])
    text = report.trajectory_table([path])
    assert "| wan | H200 | wan_ti2v | 4 x 50 steps | 68.62 | 68.00 | 67.50 | -0.62 | ok |" in text
    assert "| -8.62 | FAIL: the candidate's final latent is 8.62 dB further |" in text
    assert "at most 0.5 dB below upstream" in text
    assert report.trajectory_table([]).startswith("No trajectory has run on a GPU yet")


def test_every_committed_trajectory_is_in_readme_and_on_its_blocks_page():
    readme = (repo_root() / "README.md").read_text()
    files = report.trajectory_files()
    assert files  # the nineteenth-session queue ran the six DiT blocks' trajectories on an H200
    for path in files:
        block_dir = path.parents[2]
        rid = results_file.read_records(path)[1]["id"]
        assert f"| [{block_dir.name}](diffusion/e2e/{block_dir.name}/results.md) | " in readme and rid in readme
        assert "## Trajectories" in (block_dir / "results.md").read_text()


def test_the_family_table_groups_every_kernel_by_name_and_bounds_the_gain(tmp_path):
    """Told apart by name alone, so it holds even where the site attribution was flawed; the first run's files (no
    inventory method) lost the Triton kernels and are left out."""
    kernels = [{"kernel": "flash_fwd_kernel", "owner": "norm", "us": 500.0},  # a flawed window gave it to a site
               {"kernel": "nvjet_sm90_tst", "owner": "gemm", "us": 300.0},
               {"kernel": "direct_copy_kernel", "owner": "copy", "us": 50.0}]
    # the third run's files list each site's range as a kernel too (its time twice; "attn" in its name): left out
    inv = {"total_us": 1150.0, "kernels": [*kernels, {"kernel": "_fused_norm_kernel", "owner": "norm", "us": 150.0},
                                           {"kernel": "kda.site:attn_norm:norm", "owner": "norm", "us": 150.0}]}
    cand = {"total_us": 950.0, "kernels": [*kernels, {"kernel": "_norm_v2", "owner": "norm", "us": 100.0}]}
    row = {"type": "row", "id": "wan_ti2v", "arms": {"upstream": {"inventory": inv},
                                                     "candidate": {"inventory": cand}}}
    path = results_file.write(tmp_path / "h200.jsonl.gz", [
        {"type": "provenance", "block": "wan", "gpu_slug": "h200", "inventory": "site windows"}, row])
    text = report.e2e_family_table([path])
    assert "| wan_ti2v | H200 | 1.00 | 30% | 50% | 5% | 15% | 1.25 | 1.053 |" in text
    first = results_file.write(tmp_path / "h100.jsonl.gz", [
        {"type": "provenance", "block": "wan", "gpu_slug": "h100"}, row])
    assert report.e2e_family_table([first]) == ""


def test_the_error_table_gives_each_workloads_arms_against_fp32_and_the_arms_that_failed(tmp_path):
    row = {"type": "row", "id": "wan_ti2v", "arms": {
        "upstream": {"passed": True, "errors": [0.002, 0.003]}, "candidate": {"passed": True, "errors": [0.0045]},
        "eager": {"passed": False, "errors": [0.5]}, "compile": {"error": "RuntimeError: inductor"}}}
    path = results_file.write(tmp_path / "h200.jsonl.gz", [{"type": "provenance", "block": "wan", "gpu_slug": "h200"},
                                                          row])
    text = report.e2e_error_table([path])
    assert "| wan_ti2v | H200 | 0.00300 | 0.00450 | 1.50 | eager, compile |" in text
    assert report.e2e_error_table([results_file.write(tmp_path / "h100.jsonl.gz", [{"type": "provenance"}])]) == ""


def test_the_e2e_table_withholds_what_the_peers_alone_refused_or_never_judged(tmp_path):
    from kda.harness import results_file

    sp = {"median": 1.2, "ci": [1.1, 1.3], "n": 5}
    ok = {"type": "row", "id": "w1", "speedup": {"candidate/upstream": {"eager_us": sp, "graph_us": sp}}}
    refused = {"type": "row", "id": "w2", "speedup": {}, "speedup_withheld": ok["speedup"],
               "error": "peers alone: upstream: its sites launched other work beside the candidate (t 2 beside, 1 alone)"}
    prov = {"type": "provenance", "block": "wan", "gpu_slug": "h200", "inventory": INVENTORY_METHOD,
            "alone": {"arms": ["upstream"], "state": "done"}}
    done = results_file.write(tmp_path / "h200.jsonl.gz", [prov, ok, refused, {"type": "summary"}])
    text = report.e2e_table([done])
    assert "| wan | H200 | w1 | 1.200 [1.100, 1.300] |" in text and "| wan | H200 | w2 | - | - |" in text
    assert "Speedups withheld (the peers timed alone, kda.e2e.alone): wan w2: peers alone: upstream: its sites" in text
    pending = results_file.write(tmp_path / "h100.jsonl.gz", [
        {**prov, "gpu_slug": "h100", "alone": {"arms": ["upstream"], "state": "pending"}}, ok, {"type": "summary"}])
    text = report.e2e_table([pending])
    assert "| wan | H100 | w1 | - | - |" in text and "wan w1: the run ended before its peers were timed alone" in text
