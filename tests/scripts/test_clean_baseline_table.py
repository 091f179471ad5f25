"""scripts/clean_baseline_table.py: the committed evidence markdown is what the script makes of the committed
results file (docs/evidence/a9fdf61-*), and its counts follow the rule it is given."""
import importlib.util
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("clean_baseline_table", REPO / "scripts" / "clean_baseline_table.py")
table = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(table)
RESULTS = REPO / "docs" / "evidence" / "a9fdf61-fuse_scale_shift-rotated-h100.jsonl.gz"
MD = REPO / "docs" / "evidence" / "a9fdf61-clean-baseline-h100.md"


def test_the_committed_evidence_is_generated():
    assert table.main([str(RESULTS), "--check", str(MD)]) == 0


def test_the_rule_it_is_given_decides_what_fails_now():
    text = table.render(RESULTS, 1.3)
    assert "- failed BASELINE_SLOWED at that commit (one metric over 1.25): 7" in text
    assert "would fail under this checkout's rule (both over 1.3): 4" in text  # device and graph both over 1.3
    assert "(both over 1.6): 0" in table.render(RESULTS, 1.6)


SUMMARY = REPO / "docs" / "evidence" / "8c9b2e9-clean-baseline-h200.md"
HOLDS = "9c6c03d"  # the commit that took these results files in (kda intake)


def test_the_committed_summary_is_generated_from_the_files_that_commit_holds(tmp_path):
    """The H200 runs of 2026-11-28 (four GPUs, one queue): read from git, so the evidence stays checkable after the
    task folders take newer results files."""
    import subprocess

    names = subprocess.run(["git", "ls-tree", "-r", "--name-only", HOLDS, "diffusion/kernels"], cwd=REPO,
                           capture_output=True, text=True, check=True).stdout.split()
    wanted = [n for n in names if n.endswith("h200.jsonl.gz") and "-aa" not in n]
    paths = []
    for name in wanted:
        data = subprocess.run(["git", "show", f"{HOLDS}:{name}"], cwd=REPO, capture_output=True, check=True).stdout
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        paths.append(path)
    import gzip
    import json

    mine = [p for p in sorted(paths) if json.loads(gzip.decompress(p.read_bytes()).split(b"\n")[0])["commit"][:7]
            in ("9e308aa", "8c9b2e9")]
    assert len(mine) == 16
    assert table.summary(mine, 1.6) == SUMMARY.read_text()


def test_a_cold_run_is_never_failed_by_the_summary_rule():
    text = SUMMARY.read_text()
    cold = [line for line in text.splitlines() if "| cold |" in line]
    assert cold and all(line.rstrip(" |").endswith("| 0") for line in cold)
    assert any(int(line.split("|")[7]) > 0 for line in cold)  # ... though some failed under the rule of their commit
