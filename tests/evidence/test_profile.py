"""kda.evidence.profile parses Nsight Compute's raw CSV export (fixtures taken on an H200) into a named bound."""
from pathlib import Path

import json

import pytest

from kda.core.errors import KdaError
from kda.evidence.profile import name_bound, parse_raw_csv, summarize, to_markdown

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "ncu"


def load(name):
    return parse_raw_csv((FIX / name).read_text())


def test_streaming_row_is_memory_bound():
    s = summarize(load("wan_t2v_s75600_c5120_fp32scale-candidate.csv"), copy_tbps=4.21)
    assert [k["name"] for k in s["kernels"]] == ["_scale_shift_kernel"]
    # 75600 x 5120 bf16 x, bf16 shift, bf16 y: about 2.32 GB must cross DRAM
    assert 2.2e9 < s["dram_bytes"] < 2.45e9
    assert 400 < s["duration_us"] < 800
    assert s["dram_tbps"] == pytest.approx(s["dram_bytes"] / s["duration_us"] / 1e6)
    assert s["pct_of_copy"] == pytest.approx(100 * s["dram_tbps"] / 4.21)
    assert s["bound"].startswith("memory")
    assert s["registers_per_thread"] > 0 and s["achieved_occupancy_pct"] > 0
    assert s["top_stalls"] and all(x["warps_per_issue"] >= 0 for x in s["top_stalls"])
    assert s["local_spill_insts"] == 0


def test_tiny_row_is_host_bound():
    s = summarize(load("qwen_image_s19_c3072_bcast11-baseline.csv"), copy_tbps=None)
    assert s["duration_us"] < 5
    assert s["bound"].startswith("host/launch")
    assert s["pct_of_copy"] is None


def test_markdown_side_by_side():
    a = summarize(load("wan_t2v_s75600_c5120_fp32scale-candidate.csv"), 4.21)
    b = summarize(load("qwen_image_s19_c3072_bcast11-baseline.csv"), 4.21)
    md = to_markdown("t", {"candidate": a, "baseline": b})
    assert "| metric | candidate | baseline |" in md
    assert md.count("\n|") >= 12


def test_bound_names():
    base = {"dram_pct_peak": 10, "sm_pct_peak": 10, "achieved_occupancy_pct": 50, "duration_us": 100, "top_stalls": [{"reason": "long_scoreboard"}]}
    assert name_bound({**base, "sm_pct_peak": 80}).startswith("compute")
    assert name_bound({**base, "achieved_occupancy_pct": 10}).startswith("occupancy")
    assert name_bound(base).startswith("latency")


def test_empty_export_is_an_error():
    with pytest.raises(KdaError, match="no kernel rows"):
        parse_raw_csv("==PROF== nothing\n")


def _export(duration: tuple[str, list[str]], read: tuple[str, list[str]]) -> str:
    """A minimal raw export: kernel names, duration and DRAM bytes read, in the units ncu chose."""
    n = len(duration[1])
    lines = ['"Kernel Name","gpu__time_duration.sum","dram__bytes_read.sum"', f'"","{duration[0]}","{read[0]}"']
    lines += [f'"k{i}","{duration[1][i]}","{read[1][i]}"' for i in range(n)]
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("unit,scale", [("ms", 1e3), ("msecond", 1e3), ("us", 1.0), ("usecond", 1.0), ("ns", 1e-3)])
def test_every_duration_is_scaled_by_its_columns_unit(unit, scale):
    # An export whose slowest kernel lasts milliseconds is in "ms" throughout (an H100 profile of group_norm_silu's
    # upstream on channels_last x, 2026-11-25): read as microseconds it made a 10 ms baseline 10 us.
    s = summarize(parse_raw_csv(_export((unit, ["9.485056", "0.392384"]), ("Gbyte", ["18.25", "0.57"]))), 2.96)
    assert s["duration_us"] == pytest.approx((9.485056 + 0.392384) * scale)
    assert s["dram_bytes"] == pytest.approx(18.82e9)


def test_an_unknown_unit_is_an_error_naming_the_metric():
    with pytest.raises(KdaError, match=r"gpu__time_duration.sum is in unit 'fortnight'"):
        summarize(parse_raw_csv(_export(("fortnight", ["1"]), ("MB", ["1"]))), None)


def test_resummarize_rebuilds_from_saved_csvs_and_keeps_what_the_profile_recorded(tmp_path):
    import json
    from types import SimpleNamespace

    from kda.evidence.profile import resummarize, save

    task = SimpleNamespace(name="t", path=tmp_path / "task")
    csv_dir = task.path / "docs" / "profile" / "h100" / "csv"
    csv_dir.mkdir(parents=True)
    (csv_dir / "r-baseline.csv").write_text(_export(("ms", ["10.0"]), ("Gbyte", ["20.0"])))
    (csv_dir / "r-candidate.csv").write_text(_export(("us", ["500.0"]), ("Mbyte", ["1000.0"])))
    # the summaries a profile wrote with the old parser: same kernels, its command and copy bandwidth
    old = {"kernels": [{"name": "k0"}], "copy_tbps": 2.5, "command": "ncu --section X"}
    for arm in ("baseline", "candidate"):
        (task.path / "docs" / "profile" / "h100" / f"r-{arm}.json").write_text(json.dumps(old))
    got = resummarize(task, "r", csv_dir, "h100")
    assert set(got) == {"baseline", "candidate"}
    assert got["baseline"]["duration_us"] == pytest.approx(1e4)
    assert got["baseline"]["dram_tbps"] == pytest.approx(2.0)
    assert got["candidate"]["pct_of_copy"] == pytest.approx(100 * 2.0 / 2.5)
    assert got["candidate"]["command"] == "ncu --section X" and got["candidate"]["gpu"] == "h100"
    written = save(task, "h100", "r", got)
    assert {p.name for p in written} >= {"r-baseline.json", "r-candidate.md", "r-compare.md"}
    # a CSV from another profile than the summary beside it is refused, naming both
    (task.path / "docs" / "profile" / "h100" / "r-candidate.json").write_text(json.dumps({"kernels": [{"name": "other"}]}))
    with pytest.raises(KdaError, match="from another profile"):
        resummarize(task, "r", csv_dir, "h100")
    with pytest.raises(KdaError, match="no raw CSV for row q"):
        resummarize(task, "q", csv_dir, "h100")


def _readme_csv_rows():
    """(task, summary, raw export, commit) for each row of a task's docs/profile/README.md table: the summaries that
    the raw exports, out of the tree since 2026-11-28, can rebuild, and the commit that holds both."""
    import re

    from kda.core.paths import all_task_dirs

    rows = []
    for task_dir in all_task_dirs():
        readme = task_dir / "docs" / "profile" / "README.md"
        if not readme.is_file():
            continue
        text = readme.read_text()
        commit = re.search(r"`([0-9a-f]{40})` is the last commit that holds them", text).group(1)
        rows += [(task_dir.name, m.group(1), m.group(2), commit)
                 for m in re.finditer(r"^\| `([^`]+\.json)` \| `([^`]+\.csv)` \|$", text, re.M)]
    return rows


def test_no_raw_export_is_left_in_a_task_profile_folder_and_each_has_a_readme():
    import subprocess

    from kda.core.paths import all_task_dirs, repo_root

    tracked = subprocess.run(["git", "ls-files", "--", "*/kernels/*/docs/profile/*"], cwd=repo_root(),
                             capture_output=True, text=True).stdout.split()
    assert tracked and not [f for f in tracked if f.endswith((".csv", ".csv.gz"))]
    assert all((d / "docs" / "profile" / "README.md").is_file() for d in all_task_dirs()
               if (d / "docs" / "profile").is_dir())
    assert _readme_csv_rows()


@pytest.mark.parametrize("task_name,summary_rel,csv_rel,commit", _readme_csv_rows())
def test_each_summary_the_readme_lists_rebuilds_from_its_raw_export_in_git(tmp_path, task_name, summary_rel,
                                                                          csv_rel, commit):
    """What a task's docs/profile/README.md says: at its commit, the raw export rebuilds the summary listed beside
    it (`kda profile --from-csv`). Both are read from git at that commit, so a later profile does not matter."""
    import subprocess
    from types import SimpleNamespace

    from kda.definition.task import Task
    from kda.core.paths import repo_root
    from kda.evidence.profile import resummarize

    task_dir = Task.load(task_name).path
    inside = task_dir.relative_to(repo_root()).as_posix() + "/docs/profile/"

    def show(rel):
        p = subprocess.run(["git", "cat-file", "blob", f"{commit}:{inside}{rel}"], cwd=repo_root(),
                           capture_output=True)
        if p.returncode:
            pytest.skip(f"{commit[:12]} is not in this clone (shallow?)")
        return p.stdout

    slug, name = summary_rel.split("/")[0], Path(summary_rel).stem       # h200, <row>-<arm>
    row_id, arm = name.rsplit("-", 1)
    task = SimpleNamespace(name=task_name, path=tmp_path / task_name)
    (task.path / "docs" / "profile" / slug / "csv").mkdir(parents=True)
    (task.path / "docs" / "profile" / summary_rel).write_bytes(show(summary_rel))
    (task.path / "docs" / "profile" / slug / "csv" / f"{name}.csv").write_bytes(show(csv_rel))
    rebuilt = resummarize(task, row_id, task.path / "docs" / "profile" / slug / "csv", slug)[arm]
    # Floats to 12 digits: a sum over the CSV's kernels may round differently in its last digit on another machine
    # (the GPU machine's summary of one row differed from this one's in the 16th digit).
    assert _rounded(json.loads(show(summary_rel))) == _rounded(json.loads(json.dumps(rebuilt)))


def _rounded(v):
    if isinstance(v, float):
        return float(f"{v:.12g}")
    if isinstance(v, dict):
        return {k: _rounded(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_rounded(x) for x in v]
    return v
