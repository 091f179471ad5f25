"""Download the pinned upstream wheel, extract the files a task names, verify each file's sha256.

The wheel is fetched with `pip download --no-deps` into the ignored cache; extracted files land in
`.kda-cache/vendor/<package>-<version>/` with a MANIFEST.json recording the wheel's name and sha256, so a machine
without network (the GPU machine) can use a carried cache without the wheel itself.
"""
from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import zipfile
from dataclasses import dataclass
from pathlib import Path

from kda.definition.config import TaskConfig
from kda.core.errors import KdaError
from kda.core.paths import cache_dir
from kda.vendor.importer import SHIMS


@dataclass(frozen=True)
class VendorInfo:
    package: str
    version: str
    wheel: str
    wheel_sha256: str
    root: Path  # folder holding the extracted package tree
    files: dict[str, str]  # wheel path -> sha256

    def as_dict(self) -> dict:
        return {"package": self.package, "version": self.version, "wheel": self.wheel,
                "wheel_sha256": self.wheel_sha256, "files": self.files}


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def vendor_root(package: str, version: str) -> Path:
    return cache_dir() / "vendor" / f"{package}-{version}"


def download_wheel(package: str, version: str) -> Path:
    wheel_dir = cache_dir() / "wheels" / f"{package}-{version}"
    found = sorted(wheel_dir.glob("*.whl"))
    if found:
        return found[0]
    wheel_dir.mkdir(parents=True, exist_ok=True)
    print(f"kda vendor: downloading {package}=={version} (pip download --no-deps) ...", file=sys.stderr)
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "-q",
           f"{package}=={version}", "-d", str(wheel_dir)]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    found = sorted(wheel_dir.glob("*.whl"))
    if proc.returncode != 0 or not found:
        raise KdaError(f"could not download {package}=={version}: `{' '.join(cmd)}` failed:\n{proc.stderr.strip()[-2000:]}\n"
                       f"(on a machine without network, carry {vendor_root(package, version)} from one that has it)")
    return found[0]


def _manifest_path(root: Path) -> Path:
    return root / "MANIFEST.json"


def vendor_task(cfg: TaskConfig, *, allow_download: bool = True, section: str = "upstream") -> VendorInfo:
    """Ensure every upstream file of the task is extracted and matches its pinned sha256. section="upstream_latest":
    the later release beside the baseline (issue 40), where the task pins one (its version is not empty)."""
    up = cfg[section]
    package, version = up["package"], up["version"]
    if not version:
        raise KdaError(f"{cfg.path}: {section}.version is empty: the task pins no {section}")
    for shim in up["shims"]:
        if shim not in SHIMS:
            raise KdaError(f"{cfg.path}: {section}.shims names {shim!r}, which has no committed shim "
                           f"(known: {', '.join(sorted(SHIMS))})")
    root = vendor_root(package, version)
    manifest = json.loads(_manifest_path(root).read_text()) if _manifest_path(root).is_file() else None
    wanted = {f["path"]: f["sha256"] for f in up["files"]}
    missing = [p for p in wanted if not (root / p).is_file()]
    if missing or manifest is None:
        if not allow_download:
            raise KdaError(f"upstream files missing from {root}: {', '.join(missing) or 'MANIFEST.json'}; run `kda vendor {cfg['task']['name']}`")
        wheel = download_wheel(package, version)
        manifest = {"wheel": wheel.name, "wheel_sha256": sha256_file(wheel)}
        with zipfile.ZipFile(wheel) as zf:
            names = set(zf.namelist())
            for p in wanted:
                if p not in names:
                    raise KdaError(f"{cfg.path}: {section} file {p!r} is not in {wheel.name}")
                target = root / p
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(zf.read(p))
        _manifest_path(root).write_text(json.dumps(manifest, indent=1) + "\n")
    hashes = {}
    for p, expected in wanted.items():
        got = sha256_file(root / p)
        if got != expected:
            raise KdaError(f"{cfg.path}: {section} file {p} has sha256 {got}, but config.toml pins {expected}; "
                           f"the cache at {root} or the pin is wrong (delete the cache to re-extract)")
        hashes[p] = got
    return VendorInfo(package, version, manifest["wheel"], manifest["wheel_sha256"], root, hashes)


def write_baseline_source(cfg: TaskConfig, info: VendorInfo) -> Path:
    """docs/baseline_source.md: where the baseline came from, generated (never edited by hand)."""
    docs = cfg.path.parent / "docs"
    docs.mkdir(exist_ok=True)
    up = cfg["upstream"]
    lines = [
        "<!-- generated by `kda vendor`; do not edit -->",
        f"# Baseline source: {cfg['task']['name']}",
        "",
        f"The baseline is upstream `{info.package}=={info.version}` from PyPI, used byte for byte. `kda vendor` downloads",
        "the wheel (`pip download --no-deps`), extracts the files below into the ignored cache `.kda-cache/`, checks each",
        "file's sha256 against `config.toml`, and loads them under a guarded import root: an import of any other",
        f"`{info.package}` module fails, so the real package is never used.",
        "",
        f"- release: `{info.package}=={info.version}`",
        f"- wheel: `{info.wheel}`, sha256 `{info.wheel_sha256}` (the platform tag may differ per machine; the files below may not)",
        f"- entry points: {', '.join('`' + e + '`' for e in cfg['task']['entry_points'])}",
        "",
        "| file in the wheel | sha256 |",
        "|---|---|",
        *[f"| `{p}` | `{h}` |" for p, h in info.files.items()],
        "",
        "Outside modules the files import, replaced by committed shims in `kda/vendor/shims/`:",
        "",
        *[f"- `{m}` -> `kda/vendor/shims/{SHIMS[m]}`" for m in up["shims"]],
        "",
    ]
    out = docs / "baseline_source.md"
    out.write_text("\n".join(lines))
    return out


def pinned_wheel_files(package: str, version: str, wanted: dict[str, str], where: str, *,
                       allow_download: bool = True) -> dict[str, Path]:
    """Files of the pinned wheel that no task vendors (model and layer sources an e2e block follows), extracted
    beside the vendored ones and checked against the sha256 `where` pins; wheel path -> extracted file."""
    root = vendor_root(package, version)
    missing = [p for p in wanted if not (root / p).is_file()]
    if missing:
        if not allow_download and not sorted((cache_dir() / "wheels" / f"{package}-{version}").glob("*.whl")):
            raise KdaError(f"{where}: wheel files missing from {root}: {', '.join(missing)}; run `kda vendor`")
        wheel = download_wheel(package, version)
        with zipfile.ZipFile(wheel) as zf:
            names = set(zf.namelist())
            for p in missing:
                if p not in names:
                    raise KdaError(f"{where}: wheel file {p!r} is not in {wheel.name}")
                (root / p).parent.mkdir(parents=True, exist_ok=True)
                (root / p).write_bytes(zf.read(p))
    out = {}
    for p, expected in wanted.items():
        got = sha256_file(root / p)
        if got != expected:
            raise KdaError(f"{where}: wheel file {p} has sha256 {got}, but the pin is {expected} "
                           f"(delete {root / p} to re-extract, or fix the pin)")
        out[p] = root / p
    return out
