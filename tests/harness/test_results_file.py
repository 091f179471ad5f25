"""kda.harness.results_file: the encoding of results files (rounded JSON lines, deterministic gzip), how they are
listed and read, and a ledger reference read through git."""
import gzip
import hashlib
import json
import math
import subprocess

import pytest

from kda.core.errors import KdaError
from kda.harness import results_file as rf

RECORDS = [{"type": "provenance", "commit": "0" * 40, "copy_tbps": 3.0123456789, "aa": False},
           {"type": "row", "id": "r1", "bytes": 123456789, "samples": {"candidate": {"device_us": [12.34567891, None]}},
            "speedup": {"device_us": {"vs_baseline": {"median": 1.23456789, "ci": [1.0000001, 1.5]}}},
            "nan": math.nan, "inf": math.inf, "flag": True},
           {"type": "summary", "metrics": {"device_us": {"vs_baseline": {"geomean": 2.9771234567}}}}]


def test_write_round_trips_the_records_with_floats_rounded_and_is_deterministic(tmp_path):
    path = rf.write(tmp_path / "results" / rf.file_name("h100"), RECORDS)
    assert path.name == "h100.jsonl.gz" and path.read_bytes()[:2] == rf.GZIP_MAGIC
    back = rf.read_records(path)
    assert [r["type"] for r in back] == ["provenance", "row", "summary"]
    assert back[0]["copy_tbps"] == 3.012346 and back[1]["bytes"] == 123456789 and back[1]["flag"] is True
    assert back[1]["samples"]["candidate"]["device_us"] == [12.34568, None]
    assert math.isnan(back[1]["nan"]) and back[1]["inf"] == math.inf
    assert back[2]["metrics"]["device_us"]["vs_baseline"]["geomean"] == 2.977123
    # the same records give the same bytes (gzip mtime 0, no name), and the stored bytes are gzip -9 of encode()
    first = path.read_bytes()
    rf.write(path, RECORDS)
    assert path.read_bytes() == first == gzip.compress(rf.encode(RECORDS), compresslevel=9, mtime=0)
    assert rf.read_bytes(path) == rf.encode(RECORDS) and rf.read_bytes(path).count(b"\n") == 3


def test_rounding_keeps_every_printed_figure_and_threshold_side():
    # a median computed a hair above the half (61.925 us): 7 digits would read back as 61.925, stored below the half
    v = 61.925 + 1e-12
    assert f"{float(f'{v:.7g}'):.2f}" != f"{v:.2f}"  # the trap the rounding avoids
    assert f"{rf.round_float(v):.2f}" == f"{v:.2f}"
    # a CI bound just above 1 stays above 1 (a false win in an A/A file is counted with ci[0] > 1)
    assert rf.round_float(1.0000001) > 1.0 and rf.round_float(0.8499999999) < 0.85
    assert rf.round_float(1.23456789) == 1.234568  # the common case: 7 significant digits
    assert len(json.dumps(rf.round_floats({"x": [0.1 + 0.2]}))) < len(json.dumps({"x": [0.1 + 0.2]}))


def test_a_new_file_replaces_the_plain_one_of_the_same_run_and_both_encodings_are_read(tmp_path):
    res = tmp_path / "results"
    res.mkdir()
    (res / "h100.jsonl").write_bytes(rf.encode(RECORDS))   # the older encoding, still read
    (res / "h100-aa.jsonl").write_bytes(rf.encode(RECORDS))
    (res / "h200-exploit-zoo.md").write_text("not a results file\n")
    assert [p.name for p in rf.list_files(res)] == ["h100-aa.jsonl", "h100.jsonl"]
    assert rf.read_records(res / "h100.jsonl") == rf.parse(rf.encode(RECORDS).decode(), "x")
    assert rf.find(res, "h100-aa") == res / "h100-aa.jsonl" and rf.find(res, "h200") is None
    rf.write(res / "h100.jsonl.gz", RECORDS)
    assert [p.name for p in rf.list_files(res)] == ["h100-aa.jsonl", "h100.jsonl.gz"]
    assert rf.stem(res / "h100.jsonl.gz") == "h100" and rf.stem("h100-aa.jsonl") == "h100-aa"


def test_two_files_of_one_run_are_an_error(tmp_path):
    res = tmp_path / "results"
    res.mkdir()
    (res / "h100.jsonl").write_bytes(rf.encode(RECORDS))
    (res / "h100.jsonl.gz").write_bytes(rf.compress(rf.encode(RECORDS)))
    with pytest.raises(KdaError, match="two results files of one run"):
        rf.list_files(res)
    with pytest.raises(KdaError, match=r"\.jsonl\.gz"):
        rf.write(res / "h100.jsonl", RECORDS)


def _git(repo, *args):
    return subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=repo, check=True,
                          capture_output=True, text=True).stdout.strip()


def test_a_reference_to_a_superseded_file_is_read_through_git_and_its_sha256_checked(tmp_path):
    repo = tmp_path / "repo"
    task = repo / "kernels" / "t"
    (task / "results").mkdir(parents=True)
    _git(repo, "init", "-q")
    old = rf.write(task / "results" / "h100.jsonl.gz", RECORDS)
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", "first run")
    commit = _git(repo, "rev-parse", "HEAD")
    data = rf.read_bytes(old)
    ref = {"path": "results/h100.jsonl.gz", "lines": 3, "sha256": hashlib.sha256(data).hexdigest()}
    assert rf.ref_bytes(task, ref) == data                      # in the work tree
    rf.write(old, RECORDS[:1] + RECORDS[2:])                    # a later run overwrote it
    with pytest.raises(KdaError, match="sha256"):
        rf.ref_bytes(task, ref)
    assert rf.ref_bytes(task, {**ref, "commit": commit}) == data  # read from the commit that holds it
    old.unlink()
    assert rf.ref_bytes(task, {**ref, "commit": commit}) == data
    with pytest.raises(KdaError, match="sha256"):
        rf.ref_bytes(task, {**ref, "commit": commit, "sha256": "0" * 64})
    with pytest.raises(KdaError, match="no such file in that commit"):
        rf.ref_bytes(task, {**ref, "commit": commit, "path": "results/h200.jsonl.gz"})
    with pytest.raises(KdaError, match="no commit recorded"):
        rf.ref_bytes(task, ref)
