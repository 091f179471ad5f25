"""kda/loop/evidence.py: the evidence a task folder holds, listed in the agent's brief."""
import json

from kda.loop import evidence
from kda.loop.agentrun import BRIEF


def _task(tmp_path, name="norm_infer"):
    task = tmp_path / "diffusion" / "kernels" / name
    (task / "docs" / "profile" / "h200").mkdir(parents=True)
    entries = [{"id": f"L{i:04d}", "decision": d} for i, d in enumerate(
        ["IMPROVEMENT", "NO-GO", "BLOCKED", "NO-GO", None], start=1)]
    (task / "docs" / "ledger.jsonl").write_text("\n".join(json.dumps(e) for e in entries) + "\n")
    return task


def test_each_kind_of_evidence_is_listed_with_its_path_and_command(tmp_path):
    task = _task(tmp_path)
    for row in ("wan_s37800", "helios_s8640"):
        (task / "docs" / "profile" / "h200" / f"{row}-compare.md").write_text("x")
    (task / "docs" / "profile" / "h200" / "wan_s37800-candidate.md").write_text("x")  # not a comparison
    (task / "results" / "sweep").mkdir(parents=True)
    (task / "results" / "sweep" / "h200-abc.jsonl.gz").write_bytes(b"x")
    (tmp_path / "external" / "norm_infer").mkdir(parents=True)
    (tmp_path / "external" / "norm_infer" / "techniques.md").write_text("x")
    text = "\n".join(evidence.lines(task, "diffusion/kernels/norm_infer", tmp_path))
    assert "in `diffusion/kernels/norm_infer/docs/profile/` (h200: helios_s8640, wan_s37800)" in text
    assert "`kda profile diffusion/kernels/norm_infer --row ROW --compare` (GPU)" in text
    assert "- 2 NO-GO entries in `diffusion/kernels/norm_infer/docs/ledger.md`" in text and ": L0002, L0004." in text
    assert "- 1 BLOCKED entries" in text and ": L0003." in text
    assert "`kda bench diffusion/kernels/norm_infer --sweep N`" in text
    assert "`external/norm_infer/` (techniques.md)" in text


def test_a_bare_task_says_how_to_get_a_profile_and_lists_nothing_else(tmp_path):
    task = tmp_path / "llm" / "kernels" / "silu_and_mul"
    task.mkdir(parents=True)
    out = evidence.lines(task, "llm/kernels/silu_and_mul", tmp_path)
    assert len(out) == 1 and out[0].startswith("- No committed profile yet: `kda profile llm/kernels/silu_and_mul")


def test_long_lists_are_cut_with_a_count(tmp_path):
    assert evidence._listed([f"r{i}" for i in range(11)]) == "r0, r1, r2, r3, r4, r5, r6, r7 and 3 more"
    assert "## Evidence already here" in BRIEF and "{{ evidence }}" in BRIEF
