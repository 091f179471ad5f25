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
