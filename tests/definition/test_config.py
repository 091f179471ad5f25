"""kda/definition/config.py: the real config loads; each kind of mistake is a KdaError naming the file and the key."""
import re
from pathlib import Path

import pytest

from kda.definition.config import TaskConfig, load_config
from kda.core.errors import KdaError

ROOT = Path(__file__).resolve().parents[2]
REAL = ROOT / "diffusion" / "kernels" / "fuse_scale_shift" / "config.toml"
TEXT = REAL.read_text()


def test_real_config_loads():
    cfg = load_config(REAL)
    assert cfg["task"]["name"] == "fuse_scale_shift"
    assert cfg["bench"]["metric"] in ("device_us", "wall_us", "graph_us")
    assert isinstance(cfg["bench"]["target_sample_us"], float)
    assert cfg.tolerance("bfloat16") == (2e-2, 1e-2)
    assert all(len(f["sha256"]) == 64 for f in cfg["upstream"]["files"])


def test_tolerance_unknown_dtype_names_file():
    cfg = load_config(REAL)
    with pytest.raises(KdaError, match=r"check\.tolerance has no entry for dtype 'int8'") as e:
        cfg.tolerance("int8")
    assert str(REAL) in str(e.value)


def write(tmp_path: Path, text: str, folder: str = "fuse_scale_shift") -> Path:
    d = tmp_path / folder
    d.mkdir()
    p = d / "config.toml"
    p.write_text(text)
    return p


def load_err(path: Path) -> str:
    with pytest.raises(KdaError) as e:
        load_config(path)
    msg = str(e.value)
    assert str(path) in msg, msg
    return msg


def sub(pattern: str, repl: str) -> str:
    out, n = re.subn(pattern, repl, TEXT, count=1, flags=re.M)
    assert n == 1, pattern
    return out


def test_copy_loads(tmp_path):
    cfg = load_config(write(tmp_path, TEXT))
    assert isinstance(cfg, TaskConfig) and cfg["check"]["trials"] == 2


def test_missing_key(tmp_path):
    msg = load_err(write(tmp_path, sub(r"^wall_repeats = 3\n", "")))
    assert "missing key 'bench.wall_repeats'" in msg and "an integer" in msg


def test_unknown_key(tmp_path):
    msg = load_err(write(tmp_path, sub(r"^seed = 20261122$", "seed = 20261122\nsed = 1")))
    assert "unknown key 'bench.sed'" in msg


def test_mistyped_key(tmp_path):
    msg = load_err(write(tmp_path, sub(r"^trials = 21$", 'trials = "21"')))
    assert "bench.trials must be an integer" in msg and "'21'" in msg


def test_bad_sha256(tmp_path):
    msg = load_err(write(tmp_path, sub(r'sha256 = "2b52', 'sha256 = "2B52')))
    assert "upstream.files[0].sha256" in msg and "64 lowercase hex" in msg


def test_short_sha256(tmp_path):
    msg = load_err(write(tmp_path, sub(r'sha256 = "[0-9a-f]{64}"', 'sha256 = "abc"')))
    assert "upstream.files[0].sha256" in msg


@pytest.mark.parametrize("entry", ["sglang.jit_kernel.scale_shift", "a:b:c", ":fn", "mod:"])
def test_bad_entry_point(tmp_path, entry):
    msg = load_err(write(tmp_path, sub(r"^entry_points = \[[^\]]*\]$", f'entry_points = ["{entry}"]')))
    assert "task.entry_points" in msg and "module.path:function" in msg and repr(entry) in msg


def test_empty_entry_points(tmp_path):
    msg = load_err(write(tmp_path, sub(r"^entry_points = \[[^\]]*\]$", "entry_points = []")))
    assert "task.entry_points" in msg and "at least one" in msg


def test_bad_metric(tmp_path):
    msg = load_err(write(tmp_path, sub(r'^metric = "device_us"$', 'metric = "cycles"')))
    assert "bench.metric" in msg and "device_us" in msg and "'cycles'" in msg


def test_bad_comparator(tmp_path):
    msg = load_err(write(tmp_path, sub(r'^comparators = .*$', 'comparators = ["compile", "jax"]')))
    assert "bench.comparators" in msg and "'jax'" in msg


def test_bad_tolerance_dtype(tmp_path):
    msg = load_err(write(tmp_path, sub(r"bfloat16 = \{", "bf16 = {")))
    assert "check.tolerance" in msg and "'bf16'" in msg


def test_non_positive(tmp_path):
    msg = load_err(write(tmp_path, sub(r"^k_error_ratio = 2.0$", "k_error_ratio = 0")))
    assert "check.k_error_ratio" in msg and "positive" in msg


def test_the_graph_peer_gate_is_a_positive_number(tmp_path):
    assert load_config(REAL)["gates"]["min_graph_peer_row_ci"] == 1.0
    msg = load_err(write(tmp_path, sub(r"^min_graph_peer_row_ci = 1.0$", "min_graph_peer_row_ci = true")))
    assert "gates.min_graph_peer_row_ci must be a number" in msg
    (tmp_path / "b").mkdir()
    msg = load_err(write(tmp_path / "b", sub(r"^min_graph_peer_row_ci = 1.0$", "min_graph_peer_row_ci = 0")))
    assert "gates.min_graph_peer_row_ci" in msg and "positive" in msg


def test_name_must_match_folder(tmp_path):
    msg = load_err(write(tmp_path, TEXT, folder="other_task"))
    assert "task.name" in msg and "'fuse_scale_shift'" in msg and "'other_task'" in msg


def test_not_toml(tmp_path):
    msg = load_err(write(tmp_path, TEXT + "\n[[[broken\n"))
    assert "not valid TOML" in msg


def test_no_such_file(tmp_path):
    msg = load_err(tmp_path / "fuse_scale_shift" / "config.toml")
    assert "no such file" in msg


def test_min_inner_above_max_inner_names_both_keys(tmp_path):
    text = re.sub(r"(?m)^min_inner = \d+$", "min_inner = 2048", TEXT)
    assert text != TEXT
    msg = load_err(write(tmp_path, text))
    assert "bench.min_inner" in msg and "2048" in msg and "max_inner (1024)" in msg


def test_min_inner_is_required(tmp_path):
    text = re.sub(r"(?m)^min_inner = \d+\n", "", TEXT)
    assert "min_inner" in load_err(write(tmp_path, text))
