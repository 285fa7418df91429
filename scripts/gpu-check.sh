#!/usr/bin/env bash
# CUDA checks of the collective layer and of Sharded<Cuda> training, in two halves:
#   scripts/gpu-check.sh build   on a CPU-only build machine: release binaries -> target/gpu-check/
#   scripts/gpu-check.sh run     on the GPU machine (no internet, no cargo needed): runs them,
#                                across the GPUs present (with one GPU, N logical ranks on it)
# `run` exits 2 with a clear message where no GPU, driver or CUDA toolkit (NVRTC and headers,
# which CubeCL compiles its kernels with) is present; it is sized to finish in < 8 min.
# cudarc binds the CUDA version of the build machine's nvcc, or the newest it knows (13.x) when
# there is none: for a GPU machine whose driver is older, build with e.g. CUDARC_CUDA_VERSION=12080.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=target/gpu-check

case "${1:-}" in
build)
    mkdir -p "$OUT"
    test_bin=$(cargo test --release -p firemesh-collective --test cuda_collectives --no-run --message-format=json 2>/dev/null \
        | grep -o '"executable":"[^"]*cuda_collectives[^"]*"' | tail -1 | cut -d'"' -f4)
    cp "$test_bin" "$OUT/cuda_collectives"
    cargo build --release -p firemesh-benches --features burn-collective --bin allreduce
    cp target/release/allreduce "$OUT/allreduce"
    cargo build --release -p firemesh --bin firemesh
    cp target/release/firemesh "$OUT/firemesh"
    strip "$OUT"/* 2>/dev/null || true
    # Compressed, the three travel in about 20 MiB instead of 70 (`run` unpacks them).
    gzip -f -6 "$OUT/cuda_collectives" "$OUT/allreduce" "$OUT/firemesh"
    ls -la "$OUT"
    ;;
run)
    if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L >/dev/null 2>&1; then
        echo "gpu-check: no NVIDIA GPU or driver on this machine; nothing to check" >&2
        exit 2
    fi
    for bin in cuda_collectives allreduce firemesh; do
        if [ -f "$OUT/$bin.gz" ]; then
            gzip -dc "$OUT/$bin.gz" >"$OUT/$bin" && chmod +x "$OUT/$bin"
        fi
        [ -x "$OUT/$bin" ] || { echo "gpu-check: run '$0 build' first (missing $OUT/$bin.gz)" >&2; exit 2; }
    done
    # CubeCL compiles every kernel at run time with NVRTC, against the CUDA toolkit's headers:
    # the driver alone is not enough.
    cuda_home=${CUDA_PATH:-/usr/local/cuda}
    if [ ! -f "$cuda_home/include/cuda_runtime.h" ]; then
        echo "gpu-check: the CUDA toolkit's headers are missing ($cuda_home/include/cuda_runtime.h); install the toolkit or set CUDA_PATH" >&2
        exit 2
    fi
    if [ -d "$cuda_home/lib64" ]; then
        export LD_LIBRARY_PATH="$cuda_home/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    fi
    export CUDA_PATH="$cuda_home"
    nvidia-smi -L
    mkdir -p benches/results
    # Collective tests on CUDA: absence of a GPU or of NVRTC is a failure here, not a skip.
    FIREMESH_REQUIRE_CUDA=1 timeout 150 "$OUT/cuda_collectives" --test-threads=1
    # Sharded<Cuda> training: 2 ranks must reach the losses of 1 rank (same global batch).
    for ranks in 1 2; do
        timeout 75 "$OUT/firemesh" train --mesh cuda --ranks $ranks --steps 10 --log-every 5 \
            | tee "$OUT/train-$ranks.log"
    done
    losses() { grep -o 'loss [0-9.]* -> [0-9.]*' "$OUT/train-$1.log" | awk '{print $2, $4}'; }
    read -r a1 b1 <<<"$(losses 1)"
    read -r a2 b2 <<<"$(losses 2)"
    awk -v a1="$a1" -v b1="$b1" -v a2="$a2" -v b2="$b2" 'BEGIN {
        d = (a1 - a2) ^ 2 + (b1 - b2) ^ 2
        if (a1 == "" || a2 == "" || d > 1e-6) { print "gpu-check: 1 and 2 ranks trained differently: " a1 "->" b1 " vs " a2 "->" b2; exit 1 }
        print "gpu-check: 1 and 2 ranks reach the same losses: " a1 " -> " b1 }'
    # Bandwidth table (CUDA rows, with burn-collective on NdArray beside it; the table is
    # rewritten after each rank count, so a time limit still leaves the rows measured).
    timeout 150 "$OUT/allreduce" --no-wgpu --ranks 2,4,8 --min-kib 4 --max-mib 256 --cpu-max-mib 16 --iters 5 --out benches/results/cuda
    ;;
*)
    echo "usage: $0 build|run" >&2
    exit 2
    ;;
esac
