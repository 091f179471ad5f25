#!/usr/bin/env bash
# A/A noise floor and benchmark of several tasks in one GPU session; the results files come back as one tar.
# Usage (GPU machine, repository root): KDA_COMMIT=<sha> scripts/gpu_tasks.sh [--aa-only] TASK...
set -uo pipefail
aa_only=0
if [ "${1:-}" = "--aa-only" ]; then aa_only=1; shift; fi
out=${OUT:-/tmp/kda-out}; mkdir -p "$out"
export PYTHONUNBUFFERED=1
for task in "$@"; do
  python3 -m kda bench "$task" --aa > "$out/$task-aa.log" 2>&1
  echo "$task A/A: rc=$? $(grep -E 'rows passed|device_us: geomean' "$out/$task-aa.log" | tr '\n' ' ')"
  if [ "$aa_only" = 0 ]; then
    python3 -m kda bench "$task" > "$out/$task-bench.log" 2>&1
    echo "$task bench: rc=$? $(grep -E 'rows passed|geomean over baseline' "$out/$task-bench.log" | tr '\n' ' ')"
  fi
done
dirs=()
for task in "$@"; do
  d=$(python3 -c "from kda.paths import resolve_task; import sys; print(resolve_task(sys.argv[1]).relative_to(__import__('kda.paths').paths.repo_root()))" "$task")
  dirs+=("$d/results" "$d/docs/ledger.jsonl")
done
tar -cf "$out/results.tar" "${dirs[@]}" 2>/dev/null
tar -cf "$out/logs.tar" -C "$out" $(cd "$out" && ls *.log) 2>/dev/null
