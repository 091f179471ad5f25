#!/usr/bin/env bash
# One GPU session for a task: A/A noise floor, the benchmark, Nsight Compute profiles of the largest and smallest
# production rows. Run from the repository root on the GPU machine; copies what the project keeps to $OUT (ncu's
# raw CSV exports under $OUT/profile-csv/<gpu>/csv, outside profile.tar: they are not kept in the tree).
# Usage: KDA_COMMIT=<sha> scripts/gpu_run.sh TASK LARGEST_ROW SMALLEST_ROW
set -uo pipefail
task=${1:?task}; big=${2:?largest row}; small=${3:?smallest row}
out=${OUT:-/tmp/kda-out}; mkdir -p "$out"
export PYTHONUNBUFFERED=1
dir=$(python3 -c "from kda.core.paths import resolve_task; print(resolve_task('$task'))")
gpu=$(python3 -c "import torch; from kda.core.gpu import gpu_slug; print(gpu_slug(torch.cuda.get_device_name(0)))")
nvidia-smi --query-gpu=name,uuid,driver_version,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv
python3 -m kda bench "$task" --aa 2>&1 | tee "$out/aa.log" | tail -25
python3 -m kda bench "$task" 2>&1 | tee "$out/bench.log" | tail -45
for row in "$big" "$small"; do
  python3 -m kda profile "$task" --row "$row" --compare --save-csv "$out/profile-csv/$gpu/csv" 2>&1 | tail -8
done
cp "$dir/results/$gpu.jsonl.gz" "$dir/results/$gpu-aa.jsonl.gz" "$out/" 2>/dev/null
tar -C "$dir/docs" -cf "$out/profile.tar" --exclude='*.csv' --exclude='*.csv.gz' profile 2>/dev/null
ls -la "$out"
