#!/usr/bin/env bash
# Run a benchmark with every library kept to AVX2 on a CPU that has AVX-512: an AVX2-only laptop's
# code paths (float32 with compact weights is then our default), on this machine's memory and cores.
#
#     bash tests/bench/avx2_only.sh .venv/bin/python tests/bench/bench_peers.py ...
#
# A proxy, not such a laptop: the memory system, caches and clock stay this machine's. It caps what
# has a switch: torch's kernels (and so engine.network.platform: no native bfloat16), oneDNN, fbgemm,
# numba's code generation, OpenBLAS (antirez/qwen-asr). ONNX Runtime (sherpa-onnx) has no such switch
# and keeps AVX-512; the CrispASR wheel is an AVX2 build already (its native build is this CPU's).
export ATEN_CPU_CAPABILITY=avx2
export ONEDNN_MAX_CPU_ISA=AVX2
export FBGEMM_ENABLE_INSTRUCTIONS=AVX2
export NUMBA_CPU_NAME=haswell
export OPENBLAS_CORETYPE=Haswell
exec "$@"
