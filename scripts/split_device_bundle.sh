#!/usr/bin/env bash
# Splits the CuTe DSL + tvm-ffi bundle (built by the shared make-cutedsl-bundle.sh into .kda-device/) into parts that
# each travel to the GPU machine under its 64 MiB limit together with the working tree, so that no single call has
# to carry the whole bundle. Usage (repository root): scripts/split_device_bundle.sh [DIR]   (default .kda-device)
# Writes DIR/b/part.tar.zst (everything but the 190 MB MLIR library: tvm-ffi, the DSL's Python packages) and
# DIR/a1/part ... DIR/aN/part (the library's compressed archive cut in N pieces, N >= 2, each small enough to travel
# with the tracked tree as it is now, with 2 MB to spare: on 2026-11-25 the tree had grown to 42 MB and a half of the
# archive, 27 MB, no longer fit). docs/gpu-sessions.md says how to send them.
set -euo pipefail
dir=${1:-.kda-device}
big=nvidia_cutlass_dsl/dsl_packages/cutlass/_mlir/_mlir_libs/_cutlass_ir.cu13.cpython-312-x86_64-linux-gnu.so
[[ -s $dir/cutedsl.tar.zst ]] || { echo "no bundle at $dir/cutedsl.tar.zst: run make-cutedsl-bundle.sh first" >&2; exit 2; }
site=$(mktemp -d); trap 'rm -rf "$site"' EXIT
zstd -d --long=31 -c "$dir/cutedsl.tar.zst" | tar -C "$site" -xf -
mkdir -p "$dir/b"
tar -C "$site" -cf - "$big" | zstd -q -19 --long=31 -T0 -o "$dir/a.tar.zst" -f
tar -C "$site" --exclude="./$big" -cf - . | zstd -q -19 --long=31 -T0 -o "$dir/b/part.tar.zst" -f
total=$(stat -c %s "$dir/a.tar.zst")
tree=$(git ls-files -z | xargs -0 stat -c %s | awk '{s += $1} END {print s + 0}')
room=$(( (64 << 20) - tree - (2 << 20) ))
(( room > (1 << 20) )) || { echo "the tracked tree ($tree bytes) leaves no room to carry a part" >&2; exit 2; }
n=$(( (total + room - 1) / room )); (( n >= 2 )) || n=2
rm -rf "$dir"/a[0-9]*
split -n "$n" -d -a 2 "$dir/a.tar.zst" "$dir/a.part."
for i in $(seq 1 "$n"); do
  mkdir -p "$dir/a$i"; mv "$dir/a.part.$(printf %02d $((i - 1)))" "$dir/a$i/part"
done
rm -f "$dir/a.tar.zst"
echo "$n parts of the MLIR library, one call each (tracked tree $tree bytes):"
ls -la "$dir"/a[0-9]*/part "$dir/b"
