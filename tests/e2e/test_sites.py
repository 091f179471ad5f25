"""Every block's claims hold: the wheel files it follows are the pinned ones and hold the claimed text on the
claimed lines; every site's entry point is one its task exports. Bad claims are named errors."""
from __future__ import annotations

import shutil

import pytest

from kda.core.errors import KdaError
from kda.e2e.block import all_blocks, load_block
from kda.e2e.wheel import mirror_problems

BLOCKS = all_blocks()


def test_there_are_blocks():
    assert {"qwen_image", "zimage", "ltx2"} <= set(BLOCKS)


@pytest.mark.parametrize("name", BLOCKS)
def test_every_claimed_line_is_in_the_pinned_wheel(name):
    assert mirror_problems(load_block(name)) == []


@pytest.mark.parametrize("name", BLOCKS)
def test_every_site_names_an_exported_entry_point(name):
    from kda.definition.task import Task

    block = load_block(name)
    for s in block.sites:
        exported = {e.split(":")[1] for e in Task.load(s.task).cfg["task"]["entry_points"]}
        assert s.entry in exported, (name, s.name)


def _copy(tmp_path, name="qwen_image"):
    src = load_block(name).path
    dst = tmp_path / name
    shutil.copytree(src, dst, ignore=shutil.ignore_patterns("results", "__pycache__"))
    return dst


def _edit(path, old, new):
    text = (path / "block.toml").read_text()
    assert old in text
    (path / "block.toml").write_text(text.replace(old, new, 1))


def test_an_entry_point_the_task_does_not_export_is_named(tmp_path):
    d = _copy(tmp_path)
    _edit(d, 'entry = "fuse_scale_shift_kernel"', 'entry = "fuse_scale_shift_kernel_v2"')
    with pytest.raises(KdaError, match=r"block\.toml \(block 'qwen_image'\) site 'img_mul_add': task "
                                       r"'fuse_scale_shift' does not export 'fuse_scale_shift_kernel_v2'"):
        load_block(d)


def test_a_moved_line_is_named_with_where_the_text_is(tmp_path):
    d = _copy(tmp_path)
    _edit(d, "line = 35,", "line = 36,")
    problems = mirror_problems(load_block(d))
    assert problems and all("elementwise.py:36" in p and "found on line 35" in p for p in problems)


def test_an_unpinned_file_is_refused(tmp_path):
    d = _copy(tmp_path)
    _edit(d, 'file = "sglang/multimodal_gen/runtime/layers/elementwise.py", line = 35',
          'file = "sglang/multimodal_gen/runtime/layers/activation.py", line = 35')
    with pytest.raises(KdaError, match="site 'img_mul_add': mirrors .*activation.py, which \\[wheel\\].files"):
        load_block(d)


def test_a_wrong_pin_is_refused(tmp_path):
    d = _copy(tmp_path)
    _edit(d, "db5590db6c363e653582b50c21e557fe3bbc20a183a6dbdbaea7def3a777ed48", "0" * 64)
    with pytest.raises(KdaError, match="elementwise.py has sha256 db5590"):
        mirror_problems(load_block(d))
