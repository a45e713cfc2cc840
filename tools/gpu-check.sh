#!/usr/bin/env bash
# Builds cellsched's GPU code paths and runs the GPU tests in one go, on a
# machine with an NVIDIA GPU, the CUDA toolkit (with CUPTI and NCCL) under
# /usr/local/cuda, and Debian's build dependencies (scripts/setup --no-build).
#
#   tools/gpu-check.sh [BUILD_DIR]      (default: build-gpu)
#
# 1. configures with CELLSCHED_WITH_CUDA=ON; when a Python with a CUDA-enabled
#    PyTorch is found (CELLSCHED_PYTHON, else python3), its LibTorch is used, so
#    `profile compute --device cuda:0` runs layers on the GPU;
# 2. builds cellsched and the profiler tests;
# 3. runs test_cuda_profiler (CUPTI buffer parsing; CUPTI and CUDA-event timers
#    around a real kernel; NCCL between processes) and fails if they skip;
#    and cellsched-gpu-smoke (the same paths without LibTorch);
# 4. runs a short `profile comm --backend nccl` and, with a CUDA LibTorch,
#    a short `profile compute --device cuda:0` (CUPTI, then CUDA events).
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build-gpu}
jobs=$(nproc 2>/dev/null || echo 2)

nvidia-smi -L || { echo "gpu-check: no NVIDIA GPU visible (nvidia-smi failed)" >&2; exit 1; }

torch_args=()
py=${CELLSCHED_PYTHON:-python3}
if prefix=$("$py" -c 'import torch; assert torch.cuda.is_available(); print(torch.utils.cmake_prefix_path)' 2>/dev/null); then
  echo "gpu-check: using PyTorch's LibTorch with CUDA from $prefix"
  torch_args=(-DCMAKE_PREFIX_PATH="$prefix")
  cuda_torch=1
else
  echo "gpu-check: no CUDA-enabled PyTorch; LibTorch (if any) is CPU-only: compute on cuda is skipped"
  cuda_torch=0
fi

cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCELLSCHED_BUILD_BENCHMARKS=OFF \
  -DCELLSCHED_WITH_CUDA=ON "${torch_args[@]}"
cmake --build "$build" -j "$jobs" --target cellsched cellsched-gpu-smoke test_cuda_profiler test_profiler
"$build/cellsched-gpu-smoke"

"$build/tests/test_cuda_profiler" --gtest_brief=0 | tee "$build/gpu-check-tests.txt"
if grep -q "SKIPPED" "$build/gpu-check-tests.txt"; then
  echo "gpu-check: GPU tests skipped although a GPU is visible" >&2
  exit 1
fi
"$build/tests/test_profiler"

db="$build/gpu-check.db"
rm -f "$db"
ngpu=$(nvidia-smi -L | wc -l)
"$build/cellsched" profile comm --backend nccl --ranks "$ngpu" --sizes 1K..256M --reps 10 --db "$db"
if [ "$ngpu" -ge 2 ]; then
  "$build/cellsched" profile comm --backend nccl --ranks "$ngpu" --devices-per-process "$ngpu" \
    --sizes 1M..64M --reps 5 --db "$db"
fi
if [ "$cuda_torch" = 1 ]; then
  "$build/cellsched" profile compute --model gpt-350m --device cuda:0 --timer cupti \
    --micro-batches 1,4 --tp 1,2 --db "$db"
  "$build/cellsched" profile compute --model gpt-tiny --device cuda:0 --timer cuda_events --db "$db"
fi
"$build/cellsched" profile list --db "$db"
echo "gpu-check: OK"
