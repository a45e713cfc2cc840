#!/usr/bin/env bash
# The GPU checks for a lent machine that has the NVIDIA driver, CUDA runtimes
# and PyTorch but none of cellsched's build dependencies (the `device` tool's
# machines). tools/gpu-check.sh is the full check for a machine that can build
# cellsched; this one runs what can travel:
#
#   tools/gpu-lent-check.sh DIR [OUT]
#
# DIR holds cellsched-gpu-smoke (built here with the CUDA toolkit: `cmake
# --build build --target cellsched-gpu-smoke`) and the libcudart.so.13 and
# libcupti.so.13 it was linked against; NCCL is taken from the machine's
# PyTorch (the nvidia-nccl wheel) or found on disk. OUT (default: ./gpu-out)
# receives nvidia-smi's report, the smoke's output and tools/gpu-measure.py's
# measured iteration times (GPU_TYPE.csv, GPU_TYPE.json).
set -uo pipefail
dir=$(cd "${1:?usage: tools/gpu-lent-check.sh DIR [OUT]}" && pwd)
out=${2:-gpu-out}
mkdir -p "$out"
cd "$(dirname "$0")/.."
nvidia-smi 2>&1 | tee "$out/nvidia-smi.txt" || { echo "gpu-lent-check: no NVIDIA GPU visible" >&2; exit 1; }
nccl=$(python3 -c 'import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], "lib"))' 2>/dev/null ||
       dirname "$(find / -name 'libnccl.so.2' -not -path '/proc/*' 2>/dev/null | head -1)")
export LD_LIBRARY_PATH="$dir:$nccl:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
echo "gpu-lent-check: NCCL from $nccl"
rc=0
"$dir/cellsched-gpu-smoke" 2>&1 | tee "$out/smoke.txt" || rc=1
gpu_type=${GPU_TYPE:-$(sed -n "s/^device 0: catalogue type '\([a-z0-9-]*\)'.*/\1/p" "$out/smoke.txt")}
PYTHONUNBUFFERED=1 python3 tools/gpu-measure.py --gpu-type "${gpu_type:-h100}" \
  --out "$out/${gpu_type:-h100}.csv" --json "$out/${gpu_type:-h100}.json" ${MEASURE_ARGS:-} 2>&1 | tee "$out/measure.txt" || rc=1
echo "gpu-lent-check: rc=$rc"
exit $rc
