#!/usr/bin/env bash
# Wheels the offline GPU machine lacks, saved in .whl/ (git-ignored) for gpu_check.sh to install.
# Its image (Python 3.12) has torch, triton, numpy, tokenizers 0.23, safetensors 0.8, pyyaml,
# packaging, typer and pytest, but transformers 5.17, older than the 5.24 that has Qwen3-ASR, and
# a huggingface_hub 1.x that transformers 5.25 refuses at import. So: transformers with its
# dependencies for cp312, less what the image already has in a version that satisfies them
# (numpy above all: torch there is built against its own), and silero-vad for live streams: 34 MB.
set -euo pipefail
cd "$(dirname "$0")/../.."
grep -qx '/.whl/' .git/info/exclude 2>/dev/null || { mkdir -p .git/info; echo '/.whl/' >> .git/info/exclude; }
rm -rf .whl
python3 -m pip download -q --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 \
    --platform manylinux2014_x86_64 -d .whl "transformers==5.25.0" "kernels==0.19.1" "silero-vad==6.2.3"
for have in numpy pydantic pydantic_core annotated_doc annotated_types typing_inspection typer rich \
            pygments markdown_it_py mdurl shellingham packaging pyyaml safetensors tokenizers torch; do
    rm -f .whl/"$have"-*.whl
done
ls -l .whl
du -sh .whl
