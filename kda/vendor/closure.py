"""Which files of a wheel a JIT-compiled upstream kernel needs, with the sha256 lines for config.toml.

Upstream CUDA kernels built at run time (SGLang's `jit_kernel/utils.py` through tvm-ffi) compile a `.cuh` that
includes headers of the same wheel; the harness must vendor that whole include closure, each file pinned by hash,
or the build silently picks up nothing (and fails) or, worse, a different release's header. Listing the closure by
hand is error-prone, so this walks the `#include` graph inside the wheel itself:

    python3 -m kda.vendor.closure sglang==0.5.15 sglang/jit_kernel/diffusion/qknorm_rope.py \\
        sglang/jit_kernel/utils.py sglang/jit_kernel/csrc/diffusion/qknorm_rope.cuh

prints a `files = [...]` block for `[upstream]` and the includes that come from outside the wheel (tvm-ffi,
dlpack, the CUDA toolkit), which must exist on the machine that builds. Python files are listed as given (their
imports are resolved by the guarded importer, which names anything missing).
"""
from __future__ import annotations

import argparse
import hashlib
import posixpath
import re
import sys
import zipfile

from kda.vendor.importer import NATIVE_SOURCES

_INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]', re.MULTILINE)


def include_closure(read, names: set[str], roots: list[str], include_dirs: list[str]) -> tuple[list[str], list[str]]:
    """(wheel paths needed, includes found nowhere in the wheel). `read(path) -> bytes`; `names`: the wheel's files.

    A quoted include is looked up next to the including file first, then in `include_dirs`; an angle include only in
    `include_dirs` (the `-I` paths the upstream build passes)."""
    needed, external, stack = [], set(), list(roots)
    while stack:
        path = stack.pop()
        if path in needed:
            continue
        if path not in names:
            raise FileNotFoundError(f"{path} is not in the wheel")
        needed.append(path)
        if not path.endswith(NATIVE_SOURCES):
            continue
        for kind, inc in _INCLUDE.findall(read(path).decode("utf-8", errors="replace")):
            places = ([posixpath.dirname(path)] if kind == '"' else []) + list(include_dirs)
            hit = next((p for p in (posixpath.normpath(posixpath.join(d, inc)) for d in places) if p in names), None)
            if hit is None:
                external.add(inc)
            elif hit not in needed:
                stack.append(hit)
    return needed, sorted(external)


def toml_files(read, paths: list[str]) -> str:
    lines = ["files = ["]
    for p in paths:
        lines.append(f'  {{ path = "{p}", sha256 = "{hashlib.sha256(read(p)).hexdigest()}" }},')
    lines.append("]")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python3 -m kda.vendor.closure", description=__doc__.split("\n\n")[0])
    ap.add_argument("release", help="package==version, e.g. sglang==0.5.15 (the wheel is fetched into .kda-cache)")
    ap.add_argument("roots", nargs="+", help="wheel paths the entry point needs directly (.py and the .cuh it builds)")
    ap.add_argument("--include-dir", action="append", default=None,
                    help="wheel folder the build passes as -I (default: sglang/jit_kernel/include)")
    args = ap.parse_args(argv)
    from kda.vendor.fetch import download_wheel

    package, _, version = args.release.partition("==")
    wheel = download_wheel(package, version)
    with zipfile.ZipFile(wheel) as zf:
        names = set(zf.namelist())
        paths, external = include_closure(zf.read, names, args.roots, args.include_dir or ["sglang/jit_kernel/include"])
        # Sorted so the block is stable however the roots were ordered.
        print(toml_files(zf.read, sorted(paths)))
    if external:
        print("# from outside the wheel (must exist where the build runs): " + ", ".join(external), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
