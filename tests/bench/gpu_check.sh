#!/usr/bin/env bash
# For a lent GPU (at most ~9 minutes, under the device's 10-minute command limit): the CUDA
# checks, then the throughput benchmark.
#   bash tests/bench/gpu_check.sh
# The lent machine is offline. Packages its image lacks (transformers >= 5.24 for Qwen3-ASR)
# travel as wheels in .whl/: fetch them here with `bash tests/bench/fetch_gpu_wheels.sh` and
# carry `.whl` with the run.
set -uo pipefail
cd "$(dirname "$0")/../.."
PY=${PYTHON:-python3}
if ls .whl/*.whl >/dev/null 2>&1; then
    $PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
        && export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
fi
$PY -c "import torch, transformers; assert torch.cuda.is_available(); print(torch.cuda.get_device_name(0), 'torch', torch.__version__, 'transformers', transformers.__version__)" || exit 1
# flash-attn is used if the image has it; without it the engine attends through the Triton
# paged kernel, and the flash check is skipped.
$PY -c "import flash_attn" 2>/dev/null && echo "flash-attn installed" || echo "no flash-attn: attention through the Triton paged kernel"
export QT_QPA_PLATFORM=offscreen PYTHONUNBUFFERED=1
# The 0.6B-dimension checkpoint (2.4 GB) is built before the timed parts, so their limits hold.
$PY -c "import sys; sys.path.insert(0, 'tests/bench'); from common import real_size_checkpoint; real_size_checkpoint()"
timeout 200 $PY -m pytest tests/bench/cuda_checks.py -q -s -p no:cacheprovider; status=$?
timeout 280 $PY tests/bench/bench_throughput.py --device cuda --dtypes bfloat16 --clips 16
exit $status
