"""kda/loop/gate.py: every gate with its numbers, GPU and no-GPU paths, the ledger entry of each gate run, the scope check,
and `kda gate` on the command line. The harness is replaced by a fake runner fed with the committed H200 results,
except for one real CPU run of one small row."""
import copy
import json
import shutil
import subprocess
from pathlib import Path

import pytest

from kda import cli

from kda.loop import gate

from kda.evidence import ledger
from kda.harness import results_file
from kda.definition.config import load_config
from kda.core.errors import KdaError
from kda.definition.task import Task

ROOT = Path(__file__).resolve().parents[2]
TASK = ROOT / "diffusion" / "kernels" / "fuse_scale_shift"
RESULTS = TASK / "results" / "h200.jsonl.gz"
CACHE = ROOT / ".kda-cache"


@pytest.fixture
def task(tmp_path, monkeypatch):
    """A copy of the pilot task under a throwaway root, so ledger entries never land in the real task."""
    root = tmp_path / "root"
    (root / "diffusion" / "kernels").mkdir(parents=True)
    (root / "pyproject.toml").write_text("")
    dst = root / "diffusion" / "kernels" / "fuse_scale_shift"
    shutil.copytree(TASK, dst, ignore=shutil.ignore_patterns("results", "docs", "__pycache__"))
    monkeypatch.setenv("KDA_ROOT", str(root))
    if CACHE.is_dir():
        monkeypatch.setenv("KDA_CACHE", str(CACHE))
    return Task.load(dst)


def real_out() -> dict:
    recs = results_file.read_records(RESULTS)
    return {"provenance": recs[0], "rows": recs[1:-1], "summary": recs[-1]}


def runner_returning(out: dict, calls: list | None = None):
    def run(task, opts):
        if calls is not None:
            calls.append(opts)
        return copy.deepcopy(out)
    return run


def with_headline(out: dict, **changes) -> dict:
    out = copy.deepcopy(out)
    vb = out["summary"]["metrics"]["device_us"]["vs_baseline"]
    for k, v in changes.items():
        if k == "min_median":
            vb["min"]["median"] = v
        elif k == "noise":
            out["summary"]["noise_floor"] = v if v is None else {**out["summary"]["noise_floor"], "geomean": v}
        else:
            vb[k] = v
    return out


def gpu(**kw):
    return {"gpu_check": lambda: True, **kw}


def test_config_has_gates():
    g = load_config(TASK / "config.toml")["gates"]
    assert g == {"min_geomean": 1.0, "min_row": 0.97, "ci_over_noise": True, "min_graph_peer_row_ci": 1.0,
                 "max_rounds": 8}


def test_config_without_gates_names_the_key(tmp_path):
    d = tmp_path / "fuse_scale_shift"
    d.mkdir()
    text = (TASK / "config.toml").read_text()
    (d / "config.toml").write_text(text[: text.index("[gates]")])
    with pytest.raises(KdaError, match=r"config.toml: missing key 'gates'"):
        load_config(d / "config.toml")


def passing_out() -> dict:
    """The committed H200 run with every row passing and its headline set to values that clear every gate, whatever
    the file says now: a committed run with a failing row is an honest result, and must not decide these tests."""
    out = with_headline(real_out(), geomean=1.15, ci=[1.14, 1.16], min_median=0.99, noise=0.998)
    for r in out["rows"]:
        r.update(status="PASS", reasons=[], details=[])
        set_graph_peer(r, [1.02, 1.08])
    out["summary"]["rows_passed"] = out["summary"]["rows_total"]
    return out


def set_graph_peer(row: dict, ci: list[float], peer: str = "compile") -> dict:
    """The row's graph_us interval over the best peer (its median at the middle)."""
    row["speedup"]["graph_us"].update(best_peer=peer, vs_best_peer={"median": sum(ci) / 2, "ci": ci, "n": 21})
    return row


def prod_row(out: dict, k: int = 0) -> dict:
    return [r for r in out["rows"] if r["production"]][k]


def test_pass_on_gpu(task):
    calls = []
    res = gate.run_gate(task, runner=runner_returning(passing_out(), calls), **gpu())
    assert res.status == "PASS" and res.exit_code == 0 and res.decision == "IMPROVEMENT", res.text()
    assert calls[0].mode == "bench" and calls[0].device == "cuda"
    assert res.metrics["device_us_geomean"] == pytest.approx(1.15) and res.gpu == "h200"
    assert res.metrics["noise_floor_device_us"] == pytest.approx(0.998)
    assert "PASS on h200" in res.text()


@pytest.mark.parametrize("changes, gate_name, numbers", [
    ({"geomean": 0.95}, "min_geomean", "0.950x"),
    ({"min_median": 0.9}, "min_row", "is at 0.900x"),
    ({"ci": [0.99, 1.2]}, "ci_over_noise", "lower bound 0.990"),
])
def test_each_benchmark_gate_fails_with_numbers(task, changes, gate_name, numbers):
    res = gate.run_gate(task, runner=runner_returning(with_headline(passing_out(), **changes)), **gpu())
    assert res.status == "FAIL" and res.exit_code == 1 and res.decision == "NO-GO"
    hit = [f for f in res.findings if f.startswith(gate_name)]
    assert hit and numbers in hit[0], res.findings


def test_a_row_whose_graph_peer_interval_lies_below_one_fails_by_name(task):
    out = passing_out()
    row = set_graph_peer(prod_row(out), [0.95, 0.99])
    res = gate.run_gate(task, runner=runner_returning(out), **gpu())
    assert res.status == "FAIL" and res.findings == [
        f"min_graph_peer_row_ci: row {row['id']}: graph_us 0.970x [0.950, 0.990] over compile (the best peer), "
        "wholly below 1.0"], res.findings


def test_a_row_the_speed_gates_name_gets_a_pointer_to_its_profile(task):
    """issue 38: a failing round says where to look. A row with a committed comparison points at it (this GPU's
    first); one without gets the command that makes one."""
    out = passing_out()
    profiled, bare = set_graph_peer(prod_row(out, 0), [0.95, 0.99]), set_graph_peer(prod_row(out, 1), [0.9, 0.98])
    for slug in ("h100", "h200"):
        (task.path / "docs" / "profile" / slug).mkdir(parents=True, exist_ok=True)
        (task.path / "docs" / "profile" / slug / f"{profiled['id']}-compare.md").write_text("x")
    res = gate.run_gate(task, runner=runner_returning(out), **gpu())
    assert res.status == "FAIL" and res.gpu == "h200"
    assert f"evidence for row {profiled['id']}: docs/profile/h200/{profiled['id']}-compare.md (Nsight Compute, the " \
           "candidate beside the baseline, and the bound it hits)" in res.notes, res.notes
    assert f"evidence for row {bare['id']}: no committed profile; `kda profile fuse_scale_shift --row {bare['id']} " \
           "--compare` (GPU) names its bound" in res.notes, res.notes
    assert gate._rows_named(["min_row: row a.b-c_1 is at 0.9x", "min_graph_peer_row_ci: row x_y: graph_us"]) == \
        ["a.b-c_1", "x_y"]


def test_an_interval_straddling_one_passes(task):
    out = passing_out()
    set_graph_peer(prod_row(out), [0.95, 1.01])
    res = gate.run_gate(task, runner=runner_returning(out), **gpu())
    assert res.status == "PASS", res.text()


def test_the_graph_peer_gate_reads_passing_production_rows_only(task):
    """A test-only row is no user's loss; a failing row is the correctness gate's finding, not this one's."""
    out = passing_out()
    test_only = next(r for r in out["rows"] if not r["production"])
    set_graph_peer(test_only, [0.5, 0.6])
    findings, notes = gate.graph_peer_findings(out["rows"], {"min_graph_peer_row_ci": 1.0})
    assert findings == [] and notes == []
    set_graph_peer(prod_row(out), [0.5, 0.6])["status"] = "FAIL"
    assert gate.graph_peer_findings(out["rows"], {"min_graph_peer_row_ci": 1.0}) == ([], [])


def test_rows_without_a_graph_peer_interval_are_noted_not_passed_in_silence(task):
    out = passing_out()
    failed, lonely = prod_row(out, 0), prod_row(out, 1)
    failed["speedup"]["graph_us"].update(vs_best_peer=None, best_peer=None)
    failed["arms"]["candidate"]["graph_error"] = "RuntimeError: operation not permitted when stream is capturing"
    lonely["speedup"]["graph_us"].update(vs_best_peer=None, best_peer=None)
    res = gate.run_gate(task, runner=runner_returning(out), **gpu())
    assert res.status == "PASS"
    assert f"min_graph_peer_row_ci: row {failed['id']} not checked: the candidate's graph capture failed " \
           "(RuntimeError: operation not permitted when stream is capturing)" in res.notes
    assert f"min_graph_peer_row_ci: row {lonely['id']} not checked: no correct peer has a graph_us time" in res.notes


def test_the_graph_peer_findings_are_capped_worst_first():
    rows = [{"id": f"r{i}", "production": True, "status": "PASS", "arms": {},
             "speedup": {"graph_us": {"best_peer": "eager", "vs_best_peer": {"median": 0.9 + i / 1000,
                                                                             "ci": [0.8, 0.95]}}}}
            for i in range(gate.MAX_ROW_FINDINGS + 3)]
    findings, _ = gate.graph_peer_findings(rows[::-1], {"min_graph_peer_row_ci": 1.0})
    assert len(findings) == gate.MAX_ROW_FINDINGS + 1 and "row r0: graph_us 0.900x" in findings[0]
    assert findings[-1] == "... and 3 more rows below the bound (see the results file)"
    # the bound is the key's value: at 0.8 every interval reaches it
    assert gate.graph_peer_findings(rows, {"min_graph_peer_row_ci": 0.8}) == ([], [])


def test_a_written_results_file_is_gated_as_kda_gate_gates_its_run(task, tmp_path):
    out = passing_out()
    row = set_graph_peer(prod_row(out, 2), [0.90, 0.97], peer="baseline")
    path = tmp_path / "h200.jsonl.gz"
    results_file.write(path, [out["provenance"], *out["rows"], out["summary"]])
    gates = task.cfg["gates"]
    findings, notes = gate.results_file_findings(path, gates, task)
    assert findings == [f"min_graph_peer_row_ci: row {row['id']}: graph_us 0.935x [0.900, 0.970] over baseline "
                        "(the best peer), wholly below 1.0"]
    res = gate.run_gate(task, runner=runner_returning(out), **gpu())
    assert (res.findings, res.notes) == (findings, notes) and any(n.startswith("evidence for row") for n in notes)


def test_ci_over_noise_skipped_without_aa_file(task):
    res = gate.run_gate(task, runner=runner_returning(with_headline(passing_out(), noise=None)), **gpu())
    assert res.status == "PASS"
    assert any("ci_over_noise not checked" in n for n in res.notes)


def test_failing_row_is_named(task):
    out = passing_out()
    out["rows"][3].update(status="FAIL", reasons=["MISMATCH"], details=["y: 12 elements off by up to 0.5"])
    res = gate.run_gate(task, runner=runner_returning(out), **gpu())
    assert res.status == "FAIL"
    assert any(f.startswith(f"row {out['rows'][3]['id']}: FAIL (MISMATCH): y: 12") for f in res.findings)


def cpu_out(status="PASS") -> dict:
    rows = [{"id": "reg_tiny", "status": status, "reasons": [] if status == "PASS" else ["UNWRITTEN"],
             "details": [] if status == "PASS" else ["poison left in 3 elements"]}]
    return {"provenance": {"mode": "check", "gpu_slug": "cpu", "commit": None},
            "rows": rows, "summary": {"rows_total": 1, "rows_passed": int(status == "PASS"), "metrics": {},
                                      "headline_metric": "device_us"}}


def test_without_gpu_only_correctness_runs_and_it_is_blocked(task):
    calls = []
    res = gate.run_gate(task, runner=runner_returning(cpu_out(), calls), gpu_check=lambda: False,
                        compiler=compiler_returning())
    assert calls[0].mode == "check" and calls[0].device == "cpu" and calls[0].write is False
    assert res.status == "BLOCKED" and res.exit_code == 3 and res.decision == "BLOCKED" and not res.findings
    assert "GPU not reachable" in res.text() and "stays unpromoted" in res.text()


def test_without_gpu_a_failing_row_fails(task):
    res = gate.run_gate(task, runner=runner_returning(cpu_out("FAIL")), gpu_check=lambda: False,
                        compiler=compiler_returning())
    assert res.status == "FAIL" and "row reg_tiny: FAIL (UNWRITTEN)" in res.findings[0]


def compiler_returning(failures=(), traced_not=None, calls=None):
    def compile_task(task):
        if calls is not None:
            calls.append(task.name)
        return {"rows": 3, "launches": 2, "compiled": 2 - len(failures), "trace_failures": traced_not or {},
                "compile_failures": list(failures), "usage": []}
    return compile_task


def test_without_gpu_the_compile_gate_runs_and_names_what_does_not_lower(task, monkeypatch):
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    calls = []
    res = gate.run_gate(task, runner=runner_returning(cpu_out()), gpu_check=lambda: False,
                        compiler=compiler_returning(calls=calls))
    assert calls == ["fuse_scale_shift"] and res.status == "BLOCKED" and not res.findings
    assert "compile: 2/2 Triton launches of the production rows lower for sm_90" in res.notes
    bad = compiler_returning([("_k", "row_a", "CompilationError: at 3:4:\nloop-carried value changes type")],
                             {"row_b": "RuntimeError: needs CUDA"})
    res = gate.run_gate(task, runner=runner_returning(cpu_out()), gpu_check=lambda: False, compiler=bad)
    assert res.status == "FAIL" and res.findings == [
        "compile: _k (first planned for row row_a) does not lower for sm_90: CompilationError: at 3:4:"]
    assert any("row row_b not traced" in n for n in res.notes)
    # with a GPU the benchmark builds every kernel itself: no compile gate
    calls.clear()
    gate.run_gate(task, runner=runner_returning(passing_out()), compiler=compiler_returning(calls=calls), **gpu())
    assert calls == []


def test_the_compile_gate_steps_aside_under_the_interpreter(task, monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    calls = []
    res = gate.run_gate(task, runner=runner_returning(cpu_out()), gpu_check=lambda: False,
                        compiler=compiler_returning(calls=calls))
    assert calls == [] and any("compile gate not run: TRITON_INTERPRET=1" in n for n in res.notes)


def test_static_rule_and_round_budget(task):
    (task.path / "solution" / "cheat.py").write_text("import sglang\n")
    res = gate.run_gate(task, runner=runner_returning(passing_out()), rounds_used=9, **gpu())
    assert res.status == "FAIL"
    assert any(f.startswith("static rule: cheat.py:1") and "sglang" in f for f in res.findings)
    assert any(f.startswith("max_rounds: this is round 9, over the budget of 8") for f in res.findings)
    ok = gate.run_gate(task, runner=runner_returning(passing_out()), rounds_used=8, **gpu(device="auto"))
    assert "round 8 of 8" in ok.notes[0]


def test_harness_error_is_a_finding(task):
    def broken(task, opts):
        raise KdaError("the worker for fuse_scale_shift did not start: SyntaxError in solution")
    res = gate.run_gate(task, runner=broken, **gpu())
    assert res.status == "FAIL" and "could not run the candidate" in res.findings[0]


def test_partial_rows_never_pass(task):
    res = gate.run_gate(task, runner=runner_returning(passing_out()), rows=["a"], **gpu())
    assert res.status == "BLOCKED" and any("only the rows a" in n for n in res.notes)


def test_every_gate_run_appends_a_ledger_entry(task):
    out = passing_out()
    results = task.path / "results" / "h200.jsonl.gz"
    results.parent.mkdir()
    results.write_bytes(RESULTS.read_bytes())
    out["path"] = str(results)
    res, rec = gate.gate_and_record(task, runner=runner_returning(out), **gpu(),
                                    entry={"round": 2, "hypothesis": "2-D loads (predicted +10%)"})
    assert rec["decision"] == "IMPROVEMENT" and rec["round"] == 2 and rec["kind"] == "decision"
    assert rec["results_ref"]["path"] == "results/h200.jsonl.gz" and rec["metrics"]["gpu"] == "h200"
    assert rec["reason"].startswith("kda gate fuse_scale_shift: PASS")
    res2, rec2 = gate.gate_and_record(task, runner=runner_returning(cpu_out("FAIL")), gpu_check=lambda: False)
    assert rec2["id"] == "L0002" and rec2["decision"] == "NO-GO" and "reg_tiny" in rec2["reason"]
    assert [e["decision"] for e in ledger.read(task.path)] == ["IMPROVEMENT", "NO-GO"]
    assert (task.path / "docs" / "ledger.md").is_file()


def test_scope_violations(tmp_path):
    repo = tmp_path / "r"
    t = repo / "diffusion" / "kernels" / "x"
    for sub in ("solution", "bench", "docs"):
        (t / sub).mkdir(parents=True)
    (t / "solution" / "a.py").write_text("a\n")
    (t / "bench" / "adapter.py").write_text("a\n")
    run = lambda *a: subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *a], cwd=repo, check=True,
                                    capture_output=True)
    run("init", "-q")
    run("add", "-A")
    run("commit", "-q", "-m", "base")
    base = subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo, capture_output=True, text=True).stdout.strip()
    (t / "solution" / "a.py").write_text("b\n")
    (t / "docs" / "notes.md").write_text("n\n")
    assert gate.scope_violations(repo, base, "diffusion/kernels/x") == []
    (t / "bench" / "adapter.py").write_text("tampered\n")
    (repo / "evil.py").write_text("x\n")
    found = gate.scope_violations(repo, base, "diffusion/kernels/x")
    assert len(found) == 2 and "diffusion/kernels/x/bench/adapter.py" in found[0] and "evil.py" in found[1]


def test_cli_gate_reads_the_round_budget_file(task, tmp_path, monkeypatch, capsys):
    seen = {}

    def fake_run_gate(t, **kw):
        seen.update(kw)
        return gate.GateResult(task=t.name, status="FAIL", findings=["min_row: row r is at 0.900x"])
    monkeypatch.setattr(gate, "run_gate", fake_run_gate)
    budget = tmp_path / "rounds.json"
    budget.write_text('{"rounds": 5}')
    assert cli.main(["gate", str(task.path), "--round-budget-file", str(budget), "--cpu", "--record"]) == 1
    assert seen["rounds_used"] == 5 and seen["device"] == "cpu" and seen["base"] is None
    out = capsys.readouterr().out
    assert "min_row: row r is at 0.900x" in out and "ledger: L0001 (NO-GO)" in out
    budget.write_text('{"rounds": "five"}')
    assert cli.main(["gate", str(task.path), "--round-budget-file", str(budget)]) == 2
    assert "rounds must be an integer" in capsys.readouterr().err


@pytest.mark.skipif(not (CACHE / "vendor").is_dir(), reason="needs the vendored baseline in .kda-cache (kda vendor)")
def test_real_cpu_gate_on_one_small_row(task):
    """The real harness, no GPU: correctness only, so the verdict is BLOCKED, never PASS."""
    res = gate.run_gate(task, rows=["reg_tiny_b1_s1_c1"], gpu_check=lambda: False)
    assert res.findings == [], res.text()
    assert res.status == "BLOCKED" and res.gpu == "cpu" and res.metrics["rows_passed"] == 1
    assert "GPU not reachable" in res.text()


def test_a_floor_measured_another_way_is_named_not_failed():
    summary = copy.deepcopy(passing_out()["summary"])
    gates = {"min_geomean": 1.0, "min_row": 0.97, "ci_over_noise": True}
    summary["noise_floor"]["device_us_start"] = "idle GPU"
    findings, notes = gate.bench_findings(summary, gates)
    assert findings == [] and any("idle GPU" in n and "--aa" in n for n in notes), notes
    summary["noise_floor"]["device_us_start"] = "lead call"
    assert not any("idle GPU" in n for n in gate.bench_findings(summary, gates)[1])


def test_the_noise_floor_carries_the_protocol_of_its_aa_file(tmp_path, monkeypatch):
    from kda.harness import provenance
    from kda.harness.runner import noise_floor
    from kda.core.paths import all_task_dirs

    seen = 0
    for task_dir in all_task_dirs():
        for path in results_file.list_files(task_dir / "results"):
            if not results_file.stem(path).endswith("-aa"):
                continue
            slug = results_file.stem(path)[: -len("-aa")]
            first = results_file.read_records(path)[0]
            nf = noise_floor(Task.load(task_dir.name), slug)
            assert nf["file"] == path.name and nf["device_us_start"] == provenance.device_us_start(first), path
            seen += 1
    assert seen
    # an A/A file of the idle-GPU protocol (no field: named by its commit), as the committed files were before
    # 2026-11-27; norm_infer's superseded one (in git, where its ledger entry says) stands in for a current file, in
    # the plain encoding of the time
    task = Task.load("norm_infer")
    [ref] = [e["results_ref"] for e in ledger.read(task.path) if e["results_ref"]
             and e["results_ref"]["path"] == "results/history/h200-aa-v4c-idle-bfcf66c.jsonl.gz"]
    try:
        data = results_file.ref_bytes(task.path, ref)
    except KdaError as e:
        pytest.skip(f"the superseded A/A file is not readable here (a shallow clone?): {e}")
    (tmp_path / "h200-aa.jsonl").write_bytes(data)
    monkeypatch.setattr(type(task), "results_dir", lambda self: tmp_path)
    assert noise_floor(task, "h200")["device_us_start"] == "idle GPU"


def test_cli_gate_writes_nothing_in_the_task_folder_unless_asked(task, monkeypatch, capsys):
    """Issue 38: a gate run by hand (the main checkout, or an agent checking itself inside its run) leaves the
    committed ledger and results alone; --record appends the entry (and, on a GPU, keeps the bench's file)."""
    from kda.evidence import ledger

    seen = []

    def fake_run_gate(t, **kw):
        seen.append(kw.get("write", True))
        return gate.GateResult(task=t.name, status="BLOCKED", findings=[])
    monkeypatch.setattr(gate, "run_gate", fake_run_gate)
    path = ledger.ledger_path(task.path)
    before = path.read_text() if path.exists() else None
    cli.main(["gate", str(task.path), "--cpu"])
    assert (path.read_text() if path.exists() else None) == before and seen == [False]
    assert "not recorded" in capsys.readouterr().out
    cli.main(["gate", str(task.path), "--cpu", "--record"])
    assert path.read_text() != before and seen == [False, True]
