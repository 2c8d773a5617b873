#!/usr/bin/env bash
# For a lent GPU (at most ~8 minutes): the CUDA checks, then the throughput benchmark.
#   bash tests/bench/gpu_check.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
python -c "import torch; assert torch.cuda.is_available(); print(torch.cuda.get_device_name(0))" || exit 1
python -c "import flash_attn" 2>/dev/null || pip install --quiet flash-attn --no-build-isolation || echo "flash-attn unavailable: graph checks will fail"
export QT_QPA_PLATFORM=offscreen
timeout 240 python -m pytest tests/bench/cuda_checks.py -q -p no:cacheprovider; status=$?
timeout 300 python tests/bench/bench_throughput.py --device cuda --dtypes bfloat16 --clips 16
exit $status
