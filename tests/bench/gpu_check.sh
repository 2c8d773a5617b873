#!/usr/bin/env bash
# For a lent GPU, in one call under the device's 10-minute command limit (about 7 minutes):
# the CUDA checks, then the benchmarks (ours with graphs on and off against transformers; a live
# stream beside a 64-file queue). Logs go to $OUT (the device tool's folder) or /tmp/gpu_check.
#   bash tests/bench/gpu_check.sh [checks,bench,stream]     (BENCH_GPU_ARGS: more bench_gpu.py arguments)
# The lent machine is offline. Packages its image lacks (transformers >= 5.24 for Qwen3-ASR and
# its dependencies) travel as wheels in .whl/: fetch them here with
# `bash tests/bench/fetch_gpu_wheels.sh` and carry `.whl`. The live stream's espeak-ng sentences
# travel too: copy ~/.cache/qwen3-asr-bench/stream-sentences into .gpu_cache/ and carry it.
set -uo pipefail
cd "$(dirname "$0")/../.."
PARTS=${1:-checks,bench,stream}
PY=${PYTHON:-python3}
LOGS=${OUT:-/tmp/gpu_check}
mkdir -p "$LOGS"
if ls .whl/*.whl >/dev/null 2>&1; then
    $PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
        && export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
fi
[ -d .gpu_cache ] && export QWEN3_ASR_BENCH_CACHE=$PWD/.gpu_cache
export QT_QPA_PLATFORM=offscreen PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem --format=csv
$PY -c "import torch, triton, transformers; assert torch.cuda.is_available(); print(torch.cuda.get_device_name(0), 'torch', torch.__version__, 'triton', triton.__version__, 'transformers', transformers.__version__)" || exit 1
# flash-attn is used if the image has it; without it the engine attends through the Triton
# paged kernel, and the flash check is skipped.
$PY -c "import flash_attn" 2>/dev/null && echo "flash-attn installed" || echo "no flash-attn: attention through the Triton paged kernel"
status=0
if [[ $PARTS == *checks* ]]; then
    timeout 170 $PY -m pytest tests/bench/cuda_checks.py -q -s -p no:cacheprovider -o addopts="" 2>&1 | tee "$LOGS/checks.log"
    status=${PIPESTATUS[0]}
fi
if [[ $PARTS == *bench* || $PARTS == *stream* ]]; then
    # The 0.6B-dimension checkpoint (1.9 GB) is built before the timed parts, so their limits hold.
    t=$SECONDS
    $PY -c "import sys; sys.path.insert(0, 'tests/bench'); from common import real_size_checkpoint; real_size_checkpoint()"
    echo "checkpoint ready in $((SECONDS - t)) s"
fi
if [[ $PARTS == *bench* ]]; then
    timeout 220 $PY tests/bench/bench_gpu.py ${BENCH_GPU_ARGS:-} --json "$LOGS/bench_gpu.json" 2>&1 | grep -v "Loading weights" | tee "$LOGS/bench_gpu.log"
    [ "${PIPESTATUS[0]}" = 0 ] || status=1
fi
if [[ $PARTS == *stream* ]]; then
    timeout 110 $PY tests/bench/bench_stream.py --device cuda --minutes 0.75 --runs realtime --queue-clips 64 \
        2>&1 | tee "$LOGS/stream.log"
    [ "${PIPESTATUS[0]}" = 0 ] || status=1
fi
exit $status
