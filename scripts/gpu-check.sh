#!/usr/bin/env bash
# CUDA checks of the collective layer, in two halves:
#   scripts/gpu-check.sh build   on a CPU-only build machine: release binaries -> target/gpu-check/
#   scripts/gpu-check.sh run     on the GPU machine (no internet, no cargo needed): runs them,
#                                across the GPUs present (with one GPU, N logical ranks on it)
# `run` exits 2 with a clear message where no GPU is present; it is sized to finish in < 8 min.
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
    strip "$OUT"/* 2>/dev/null || true
    ls -la "$OUT"
    ;;
run)
    if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L >/dev/null 2>&1; then
        echo "gpu-check: no NVIDIA GPU or driver on this machine; nothing to check" >&2
        exit 2
    fi
    [ -x "$OUT/cuda_collectives" ] || { echo "gpu-check: run '$0 build' first (missing $OUT/cuda_collectives)" >&2; exit 2; }
    nvidia-smi -L
    mkdir -p benches/results
    # Collective tests on CUDA: absence of a GPU is a failure here, not a skip.
    FIREMESH_REQUIRE_CUDA=1 timeout 300 "$OUT/cuda_collectives" --test-threads=1
    # Bandwidth table (CUDA rows, with burn-collective on NdArray beside it).
    timeout 150 "$OUT/allreduce" --no-wgpu --ranks 2,4,8 --min-kib 4 --max-mib 256 --iters 5 --out benches/results/cuda
    ;;
*)
    echo "usage: $0 build|run" >&2
    exit 2
    ;;
esac
