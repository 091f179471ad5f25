#!/usr/bin/env bash
# Splits the CuTe DSL + tvm-ffi bundle (built by the shared make-cutedsl-bundle.sh into .kda-device/) into parts that
# each travel to the GPU machine under its 64 MiB limit together with the working tree, so that no single call has
# to carry the whole bundle. Usage (repository root): scripts/split_device_bundle.sh [DIR]   (default .kda-device)
# Writes DIR/b/part.tar.zst (everything but the 190 MB MLIR library: tvm-ffi, the DSL's Python packages) and
# DIR/a1/part, DIR/a2/part (the library's compressed archive cut in two). docs/gpu-sessions.md says how to send them.
set -euo pipefail
dir=${1:-.kda-device}
big=nvidia_cutlass_dsl/dsl_packages/cutlass/_mlir/_mlir_libs/_cutlass_ir.cu13.cpython-312-x86_64-linux-gnu.so
[[ -s $dir/cutedsl.tar.zst ]] || { echo "no bundle at $dir/cutedsl.tar.zst: run make-cutedsl-bundle.sh first" >&2; exit 2; }
site=$(mktemp -d); trap 'rm -rf "$site"' EXIT
zstd -d --long=31 -c "$dir/cutedsl.tar.zst" | tar -C "$site" -xf -
mkdir -p "$dir/a1" "$dir/a2" "$dir/b"
tar -C "$site" -cf - "$big" | zstd -q -19 --long=31 -T0 -o "$dir/a.tar.zst" -f
tar -C "$site" --exclude="./$big" -cf - . | zstd -q -19 --long=31 -T0 -o "$dir/b/part.tar.zst" -f
half=$(( $(stat -c %s "$dir/a.tar.zst") / 2 + 1 ))
split -b "$half" -d "$dir/a.tar.zst" "$dir/a.part."
mv "$dir/a.part.00" "$dir/a1/part"; mv "$dir/a.part.01" "$dir/a2/part"; rm -f "$dir/a.tar.zst"
ls -la "$dir/a1" "$dir/a2" "$dir/b"
