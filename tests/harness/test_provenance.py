"""kda/harness/provenance.py: the command line a results file records carries no machine's paths."""
import sys

from kda.harness import provenance
from kda.core.paths import repo_root


def test_shown_path_makes_repo_paths_relative_and_drops_other_machines_layouts(tmp_path):
    inside = repo_root() / "diffusion" / "kernels" / "group_norm_silu" / "tools" / "stale_graph_candidate.py"
    assert provenance.shown_path(str(inside)) == "diffusion/kernels/group_norm_silu/tools/stale_graph_candidate.py"
    assert provenance.shown_path(str(tmp_path / "out" / "gn-check.json")) == "gn-check.json"
    assert provenance.shown_path("hyvae_c512_t9_128x128_contig,reg_fp32_specials") == \
        "hyvae_c512_t9_128x128_contig,reg_fp32_specials"
    assert provenance.shown_path("results/h200.jsonl") == "results/h200.jsonl"  # relative: as given


def test_command_line_records_no_absolute_paths(monkeypatch, tmp_path):
    argv = [str(tmp_path / "bin" / "kda"), "check", "group_norm_silu", "--candidate",
            str(repo_root() / "diffusion/kernels/group_norm_silu/tools/stale_graph_candidate.py"), "--json",
            str(tmp_path / "out" / "gn.json")]
    monkeypatch.setattr(sys, "argv", argv)
    assert provenance.command_line() == ("kda check group_norm_silu --candidate "
                                         "diffusion/kernels/group_norm_silu/tools/stale_graph_candidate.py --json gn.json")
