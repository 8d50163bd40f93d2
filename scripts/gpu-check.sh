#!/usr/bin/env bash
# One-shot GPU check of the H.265 video layer (hyperframes.video): the gpu-marked tests and
# the decode benchmark (CPU vs NVDEC), on a machine with an NVIDIA GPU.
#
#   scripts/gpu-check.sh --prepare   # on a machine with PyPI access: wheels for the GPU host's
#                                    # Python (GPU_PYTHON=3.12) unpacked into one archive,
#                                    # build/gpu-site.tar.xz (~54 MB), for hosts without network
#   scripts/gpu-check.sh             # on the GPU host: uses build/gpu-site.tar.xz when present
#                                    # (else the installed packages), runs tests and benchmark
#
# Results go to $OUT (or build/gpu-check): pytest.txt, bench.txt, probe.txt.
# Env: PYTHON (default python3), BENCH_FRAMES (default 60), BENCH_SIZE (default 1600x900).
set -euo pipefail
cd "$(dirname "$0")/.."
py="${PYTHON:-python3}"

if [ "${1:-}" = --prepare ]; then
    pyver="${GPU_PYTHON:-3.12}"
    tmp=$(mktemp -d)
    trap 'rm -rf "$tmp"' EXIT
    "$py" -m pip download -q --no-deps --only-binary=:all: --python-version "$pyver" \
        --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
        --platform manylinux2014_x86_64 --platform manylinux1_x86_64 -d "$tmp/wheels" \
        av simplejpeg 'PyNvVideoCodec>=2.2,<3' lz4 zstandard crc32c
    mkdir -p "$tmp/site" build
    for w in "$tmp"/wheels/*.whl; do
        "$py" -m zipfile -e "$w" "$tmp/site"
    done
    tar -C "$tmp/site" -cf - . | xz -T0 -6 > build/gpu-site.tar.xz
    ls -la build/gpu-site.tar.xz
    echo "carry build/gpu-site.tar.xz to the GPU host (build/ is git-ignored)"
    exit 0
fi

out="${OUT:-build/gpu-check}"
mkdir -p "$out"
export PYTHONUNBUFFERED=1
if [ -f build/gpu-site.tar.xz ]; then
    site=/tmp/hf-gpu-site
    rm -rf "$site" && mkdir -p "$site"
    tar -C "$site" -xJf build/gpu-site.tar.xz
    export PYTHONPATH="$site:$PWD${PYTHONPATH:+:$PYTHONPATH}"
else
    export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
fi
{
    nvidia-smi -L 2>&1 || echo "nvidia-smi failed"
    "$py" -c 'import sys; print("python", sys.version.split()[0])'
    "$py" -c 'from hyperframes.video._nvprobe import probe; c = probe(); print(c); print(c.summary())'
} 2>&1 | tee "$out/probe.txt"

set +e
"$py" -m pytest -q -p no:cacheprovider -rs tests/test_video_gpu.py tests/test_video_codec.py \
    tests/test_video_stream.py 2>&1 | tee "$out/pytest.txt"
tests_rc=${PIPESTATUS[0]}
size="${BENCH_SIZE:-1600x900}"
"$py" bench/bench_video.py --skip-encoder --width "${size%x*}" --height "${size#*x}" \
    --frames "${BENCH_FRAMES:-60}" 2>&1 | tee "$out/bench.txt"
bench_rc=${PIPESTATUS[0]}
set -e
echo "gpu-check: tests exit $tests_rc, bench exit $bench_rc; results in $out"
[ "$tests_rc" -eq 0 ] && [ "$bench_rc" -eq 0 ]
