#!/usr/bin/env bash
# One GPU session over several tasks: A/A noise floor, benchmark, Nsight Compute comparisons of named rows. What
# the project keeps (results files, ledgers, profile summaries) comes back as results.tar, the logs as logs.tar,
# with ncu's raw CSV exports under profile-csv/<task>/<gpu>/csv/ (not kept in the tree; `kda profile --from-csv`).
# Usage (GPU machine, repository root):
#   KDA_COMMIT=<sha> scripts/gpu_tasks.sh [--aa-only | --bench-only | --profile-only | --cold-only | --sweep-only]
#       TASK[=ROW,ROW...] ...
# --cold-only: `kda bench TASK --cold` (results/cold/<gpu>.jsonl.gz); --sweep-only: `kda bench TASK --sweep N` with
# N from KDA_SWEEP_N (default 64; results/sweep/<gpu>.jsonl.gz). Both after the static rules, neither ledgered.
# Rows after '=' are profiled with `kda profile --compare` after the benchmark; '@large' stands for the production
# rows of 256 MB or more that the new results file has below 85% of copy and without a profile of their kernels.
# --profile-only runs no A/A and no benchmark: it profiles the named rows ('@large': as read from the results file
# already there for this GPU), for a candidate whose kernels that file already recorded.
# KDA_WARM_JOBS=N first compiles every row's torch.compile peer, N rows at a time (scripts/warm_baseline.py --peer);
# with --sweep-only, the sweep rows' peers and baselines.
# results.tar and logs.tar are rewritten after every step, so a call cut off by its time limit still returns what
# finished; they are the only files left in $OUT (the logs are written beside it), since a call returns a limited
# number of files and on 2026-11-25 a results.tar was left behind among the logs.
set -uo pipefail
mode=all
case "${1:-}" in
  --aa-only) mode=aa; shift ;; --bench-only) mode=bench; shift ;; --profile-only) mode=profile; shift ;;
  --cold-only) mode=cold; shift ;; --sweep-only) mode=sweep; shift ;;
esac
out=${OUT:-/tmp/kda-out}; logs=$(mktemp -d /tmp/kda-logs.XXXX); mkdir -p "$out"
export PYTHONUNBUFFERED=1
# rich tables in the logs at full width (a narrow default cuts every cell)
export COLUMNS=${COLUMNS:-240}
# the package need not be installed on the GPU machine: the checkout is importable
export PYTHONPATH="$(pwd)${PYTHONPATH:+:$PYTHONPATH}"
gpu=$(python3 -c "import torch; from kda.core.gpu import gpu_slug; print(gpu_slug(torch.cuda.get_device_name(0)))")
keep=()
# each path once: a folder named twice (docs/profile, once per profiled row) would come back as hard links to its
# first copy, which kda intake refuses; raw ncu exports stay out (they go to logs.tar)
pack() {
  tar -cf "$out/results.tar" --exclude='*.csv' --exclude='*.csv.gz' \
    $(printf '%s\n' "${keep[@]}" | awk '!seen[$0]++') 2>/dev/null
  tar -cf "$out/logs.tar" -C "$logs" . 2>/dev/null
}
for spec in "$@"; do
  task=${spec%%=*}; rows=""; [ "$spec" != "$task" ] && rows=${spec#*=}
  dir=$(python3 -c "from kda.core.paths import resolve_task, repo_root; import sys; print(resolve_task(sys.argv[1]).relative_to(repo_root()))" "$task")
  keep+=("$dir/results" "$dir/docs/ledger.jsonl")
  if [ -n "${KDA_WARM_JOBS:-}" ] && [ "$mode" = all -o "$mode" = bench -o "$mode" = cold ]; then
    python3 scripts/warm_baseline.py "$task" --peer --jobs "$KDA_WARM_JOBS" > "$logs/$task-warm.log" 2>&1
    echo "$task peer warm-up: rc=$? $(grep -E 'built in' "$logs/$task-warm.log")"
  fi
  # A sweep's rows are new shapes: the peer, and a baseline compiled per signature (qknorm_rope), would otherwise
  # build one row after another inside the bench, most of its time.
  if [ -n "${KDA_WARM_JOBS:-}" ] && [ "$mode" = sweep ]; then
    for what in --peer ""; do
      python3 scripts/warm_baseline.py "$task" $what --sweep "${KDA_SWEEP_N:-64}" --jobs "$KDA_WARM_JOBS" \
        >> "$logs/$task-warm.log" 2>&1
      echo "$task sweep ${what:-baseline} warm-up: rc=$? $(grep -E 'built in' "$logs/$task-warm.log" | tail -1)"
    done
  fi
  if [ "$mode" = all -o "$mode" = aa ]; then
    python3 -m kda bench "$task" --aa > "$logs/$task-aa.log" 2>&1
    echo "$task A/A: rc=$? $(grep -E 'rows passed|device_us: geomean' "$logs/$task-aa.log" | tr '\n' ' ')"
    pack
  fi
  # The static rules fail every row of a bench; they need no GPU, so a broken candidate costs seconds, not a bench.
  if [ "$mode" != aa -a "$mode" != profile ] && ! python3 -m kda check "$task" --static > "$logs/$task-static.log" 2>&1; then
    echo "$task: static rules broken, no bench: $(head -3 "$logs/$task-static.log")"; pack; continue
  fi
  if [ "$mode" = cold -o "$mode" = sweep ]; then
    extra=(--cold); [ "$mode" = sweep ] && extra=(--sweep "${KDA_SWEEP_N:-64}")
    python3 -m kda bench "$task" "${extra[@]}" > "$logs/$task-$mode.log" 2>&1
    echo "$task $mode: rc=$? $(grep -E 'rows passed|geomean over baseline|share' "$logs/$task-$mode.log" | tr '\n' ' ')"
    pack; continue
  fi
  if [ "$mode" != aa ]; then
    if [ "$mode" != profile ]; then
      python3 -m kda bench "$task" > "$logs/$task-bench.log" 2>&1
      echo "$task bench: rc=$? $(grep -E 'rows passed|geomean over baseline' "$logs/$task-bench.log" | tr '\n' ' ')"
      pack
    fi
    if [ "$rows" = @large ]; then
      rows=$(python3 -c "import sys; from pathlib import Path; from kda.evidence.report import unprofiled_large_rows as u; \
from kda.harness.results_file import find; \
print(','.join(u(Path(sys.argv[1]), find(Path(sys.argv[1]) / 'results', sys.argv[2]))))" "$dir" "$gpu")
      echo "$task: large rows to profile: ${rows:-none}"
    fi
    for row in ${rows//,/ }; do
      python3 -m kda profile "$task" --row "$row" --compare --save-csv "$logs/profile-csv/$task/$gpu/csv" \
        > "$logs/$task-profile-$row.log" 2>&1
      echo "$task profile $row: rc=$?"; tail -6 "$logs/$task-profile-$row.log"
      keep+=("$dir/docs/profile")
      pack
    done
  fi
done
pack
