"""kda/vendor/mirror.py: a task's baseline/ holds read-only copies of exactly the files its pin verified."""
import hashlib
import os
import stat
import subprocess

from kda.core.paths import repo_root
from kda.vendor.fetch import VendorInfo
from kda.vendor.mirror import mirror


def _info(root, files: dict[str, str]) -> VendorInfo:
    for path, text in files.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(text)
    digests = {p: hashlib.sha256(t.encode()).hexdigest() for p, t in files.items()}
    return VendorInfo("pkg", "1.0", "pkg-1.0.whl", "0" * 64, root, digests)


def test_the_verified_files_are_copied_read_only_and_a_later_pin_replaces_and_prunes(tmp_path):
    task = tmp_path / "task"
    (task / "baseline").mkdir(parents=True)
    (task / "baseline" / "README.md").write_text("kept")
    first = _info(tmp_path / "cache1", {"pkg/a.py": "a = 1\n", "pkg/sub/b.py": "b = 2\n"})
    dest = mirror(task, first)
    assert dest == task / "baseline" / "pkg-1.0"
    assert (dest / "pkg/a.py").read_text() == "a = 1\n" and (dest / "pkg/sub/b.py").read_text() == "b = 2\n"
    assert not os.access(dest / "pkg/a.py", os.W_OK) or os.geteuid() == 0  # root writes anything
    assert stat.S_IMODE((dest / "pkg/a.py").stat().st_mode) & 0o222 == 0
    # the pin moves: a.py changed, sub/b.py dropped, c.py added; the README beside it is not touched
    later = _info(tmp_path / "cache2", {"pkg/a.py": "a = 3\n", "pkg/c.py": "c = 4\n"})
    mirror(task, later)
    assert (dest / "pkg/a.py").read_text() == "a = 3\n" and (dest / "pkg/c.py").is_file()
    assert not (dest / "pkg/sub").exists() and (task / "baseline" / "README.md").read_text() == "kept"
    mirror(task, later)  # again: nothing to do, nothing fails on the read-only copies
    assert sorted(p.relative_to(dest).as_posix() for p in dest.rglob("*.py")) == ["pkg/a.py", "pkg/c.py"]


def test_git_ignores_every_copy_and_keeps_the_generated_readme():
    root = repo_root()
    copy = "diffusion/kernels/fuse_scale_shift/baseline/sglang-0.5.15/sglang/jit_kernel/x.py"
    readme = "diffusion/kernels/fuse_scale_shift/baseline/README.md"
    got = subprocess.run(["git", "check-ignore", "--no-index", copy, readme], cwd=root, capture_output=True,
                         text=True).stdout.split()
    assert got == [copy]
