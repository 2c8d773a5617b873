#!/usr/bin/env bash
# For a lent GPU (at most ~8 minutes): the CUDA checks, then the throughput benchmark.
#   bash tests/bench/gpu_check.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
python -c "import torch; assert torch.cuda.is_available(); print(torch.cuda.get_device_name(0))" || exit 1
# The lent machine cannot reach the network: flash-attn is used if its image has it; without it
# the engine attends through the Triton paged kernel, and the flash check is skipped.
python -c "import flash_attn" 2>/dev/null && echo "flash-attn installed" || echo "no flash-attn: attention through the Triton paged kernel"
export QT_QPA_PLATFORM=offscreen
timeout 240 python -m pytest tests/bench/cuda_checks.py -q -p no:cacheprovider; status=$?
timeout 300 python tests/bench/bench_throughput.py --device cuda --dtypes bfloat16 --clips 16
exit $status
