#!/usr/bin/env bash
# CUDA checks of the collective layer, of Sharded<Cuda> training and of its throughput (firemesh
# bench), in two halves:
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
    # The collective test suite (one binary); `run` selects its CUDA tests.
    test_bin=$(cargo test --release -p firemesh-collective --test collective --no-run --message-format=json 2>/dev/null \
        | grep -o '"executable":"[^"]*/collective-[^"]*"' | tail -1 | cut -d'"' -f4)
    cp "$test_bin" "$OUT/cuda_collectives"
    # The backend's test binary, for its stress test of streams on CUDA.
    test_bin=$(cargo test --release -p firemesh-backend --test backend --no-run --message-format=json 2>/dev/null \
        | grep -o '"executable":"[^"]*/backend-[^"]*"' | tail -1 | cut -d'"' -f4)
    cp "$test_bin" "$OUT/cuda_backend"
    # `nccl` turns on Burn's `distributed` feature for this binary only (the Burn crates are
    # rebuilt once for it).
    cargo build --release -p firemesh-benches --features burn-collective,nccl --bin allreduce
    cp target/release/allreduce "$OUT/allreduce"
    cargo build --release -p firemesh --bin firemesh
    cp target/release/firemesh "$OUT/firemesh"
    # burn-train's DDP strategy, the peer of `firemesh bench` on CUDA: Burn's `distributed`
    # feature is on in this package's build only (it cannot be in a build with the CPU mesh).
    cargo build --release -p firemesh-peers --features ddp --bin ddp_step
    cp target/release/ddp_step "$OUT/ddp_step"
    strip "$OUT"/* 2>/dev/null || true
    # Compressed, the four travel in about a third of their size (`run` unpacks them).
    gzip -f -6 "$OUT/cuda_collectives" "$OUT/cuda_backend" "$OUT/allreduce" "$OUT/firemesh" "$OUT/ddp_step"
    ls -la "$OUT"
    ;;
run)
    if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L >/dev/null 2>&1; then
        echo "gpu-check: no NVIDIA GPU or driver on this machine; nothing to check" >&2
        exit 2
    fi
    for bin in cuda_collectives cuda_backend allreduce firemesh ddp_step; do
        if [ -f "$OUT/$bin.gz" ]; then
            gzip -dc "$OUT/$bin.gz" >"$OUT/$bin.tmp" || { echo "gpu-check: cannot unpack $OUT/$bin.gz" >&2; exit 2; }
            chmod +x "$OUT/$bin.tmp" && mv "$OUT/$bin.tmp" "$OUT/$bin"
        fi
        [ -x "$OUT/$bin" ] || { echo "gpu-check: run '$0 build' first (missing $OUT/$bin.gz)" >&2; exit 2; }
    done
    # CubeCL compiles every kernel at run time with NVRTC, against the CUDA toolkit's headers:
    # the driver alone is not enough. The toolkit is looked for where CubeCL looks.
    if [ -n "${CUDA_PATH:-}" ]; then cuda_home=$CUDA_PATH
    elif [ -d /usr/local/cuda ]; then cuda_home=/usr/local/cuda
    elif [ -d /opt/cuda ]; then cuda_home=/opt/cuda
    elif [ -x /usr/bin/nvcc ]; then cuda_home=/usr
    else cuda_home=/usr/local/cuda
    fi
    if [ ! -f "$cuda_home/include/cuda_runtime.h" ]; then
        echo "gpu-check: the CUDA toolkit's headers are missing ($cuda_home/include/cuda_runtime.h); install the toolkit or set CUDA_PATH" >&2
        exit 2
    fi
    for lib in lib64 lib; do
        if [ -d "$cuda_home/$lib" ]; then
            export LD_LIBRARY_PATH="$cuda_home/$lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
        fi
    done
    nvrtc_found() {
        ldconfig -p 2>/dev/null | grep -q 'libnvrtc\.so' && return 0
        for f in "$cuda_home"/lib64/libnvrtc.so* "$cuda_home"/lib/libnvrtc.so*; do
            [ -e "$f" ] && return 0
        done
        return 1
    }
    if ! nvrtc_found; then
        echo "gpu-check: the CUDA runtime compiler (libnvrtc) is missing; install the CUDA toolkit" >&2
        exit 2
    fi
    export CUDA_PATH="$cuda_home"
    nvidia-smi -L
    gpus=$(nvidia-smi -L | grep -c '^GPU')
    mkdir -p benches/results
    failed=()
    # Runs one step; a failure or a time-out is reported and the other steps still run.
    step() {
        local name=$1 rc=0
        shift
        echo "== gpu-check: $name"
        "$@" || rc=$?
        if [ "$rc" -ne 0 ]; then
            echo "gpu-check: step '$name' failed (exit $rc; 124 is a time-out)" >&2
            failed+=("$name")
        fi
    }
    # Collective tests on CUDA: absence of a GPU or of NVRTC is a failure here, not a skip.
    # Each suite twice: transfers waiting on the host (the default), then stream-ordered ones
    # (FIREMESH_CUDA_COPY=stream), which wait for each other on the devices: a hang there is a
    # time-out of its own step.
    step "collective tests, synchronous copies" env FIREMESH_REQUIRE_CUDA=1 timeout 150 "$OUT/cuda_collectives" cuda::sync:: --test-threads=1
    step "collective tests, stream-ordered copies" env FIREMESH_REQUIRE_CUDA=1 timeout 150 "$OUT/cuda_collectives" cuda::stream:: --test-threads=1
    # Burn ops and collectives from many threads on the same GPUs for 30 s (issue 28): every sum
    # exact, every training run equal to the first bit for bit.
    step "streams: Burn ops and collectives from many threads" env FIREMESH_REQUIRE_CUDA=1 timeout 90 "$OUT/cuda_backend" stress::burn_ops_and_collectives_share_cuda_devices_from_many_threads
    # Sharded<Cuda> training: 2 ranks must reach the losses of 1 rank (same global batch).
    # train RANKS [LABEL]: its log is train-LABEL.log (LABEL defaults to RANKS).
    train() { local label=${2:-$1}; timeout 60 "$OUT/firemesh" train --mesh cuda --ranks "$1" --share-devices --steps 10 --log-every 5 --run-dir "$OUT/run-$label" >"$OUT/train-$label.log" 2>&1; local rc=$?; cat "$OUT/train-$label.log"; return $rc; }
    # The same on rank threads: each rank issues its work from its own thread.
    train_on_rank_threads() { FIREMESH_RANK_THREADS=1 train 2 2-rank-threads; }
    step "train on 1 rank" train 1
    step "train on 2 ranks" train 2
    step "train on 2 ranks, rank threads" train_on_rank_threads
    # "first last" loss of the run on $1 ranks, from its log.
    losses() { grep -Eo 'loss [0-9]+\.[0-9]+ -> [0-9]+\.[0-9]+' "$OUT/train-$1.log" | awk '{print $2, $4}'; }
    # same_losses A B: the runs labelled A and B reach the same first and last losses.
    same_losses() {
        local l1 l2
        l1=$(losses "$1")
        l2=$(losses "$2")
        awk -v l1="$l1" -v l2="$l2" 'BEGIN {
            split(l1, a, " "); split(l2, b, " ")
            if (a[2] == "" || b[2] == "") { print "no final loss in a training log"; exit 1 }
            if (!(a[2] < a[1])) { print "the loss did not fall: " l1; exit 1 }
            for (i = 1; i <= 2; i++) {
                d = a[i] - b[i]; if (d < 0) d = -d
                if (d > 1e-3 * a[i]) { print "the runs trained differently: " l1 " vs " l2; exit 1 }
            }
            print "the same losses: " l1 " vs " l2 }'
    }
    compare() {
        same_losses 1 2 || return 1
        # With 2 GPUs the ranks are on different devices, so the sums must go through our group.
        if [ "$gpus" -ge 2 ]; then
            grep -q "[0-9] mesh-group" "$OUT/train-2.log" || { echo "no sums through the CubeCL group"; return 1; }
        else
            echo "one GPU: both ranks share it and sum in place; the CubeCL group was not used by training"
        fi
    }
    step "1 vs 2 ranks" compare
    step "2 ranks in turn vs on rank threads" same_losses 2 2-rank-threads
    # With 2 GPUs the sums cross devices: the same run with stream-ordered copies.
    if [ "$gpus" -ge 2 ]; then
        train_stream_ordered() { FIREMESH_CUDA_COPY=stream train 2 2-stream; }
        step "train on 2 GPUs, stream-ordered copies" train_stream_ordered
        step "synchronous vs stream-ordered copies" same_losses 2 2-stream
    fi
    # Bandwidth table: CUDA rows of both transfers (`stream/sync` compares them) beside NCCL's all-reduce on the same sizes (where the ranks
    # are on distinct GPUs: NCCL takes a GPU once per communicator), the device's copy
    # bandwidth (the HBM bound) and burn-collective on Flex; the table is rewritten after each
    # rank count, so a time limit still leaves the rows measured.
    step "allreduce benchmark" timeout 140 "$OUT/allreduce" --no-wgpu --nccl --ranks 2,4,8 --min-kib 4 --max-mib 256 --cpu-max-mib 16 --iters 5 --out benches/results/cuda
    # Zoo throughput through Sharded<Cuda> against plain Burn CUDA and burn-train's MultiDevice:
    # ResNet-50 at batch 256 on one rank (the overhead), then N logical ranks of 64 images or
    # 8 GPT-2 sequences each (weak scaling; with one GPU they share it).
    step "bench: ResNet-50 batch 256, one rank" timeout 90 "$OUT/firemesh" bench --runtimes cuda --models resnet50 --ranks 1 --batch-per-rank 256 --steps 3 --out benches/results/cuda/bench-batch256
    step "bench: zoo on N ranks" timeout 150 "$OUT/firemesh" bench --runtimes cuda --models resnet50,gpt2-small --ranks 1,2 --steps 3 --out benches/results/cuda/bench
    # Rank threads on CUDA (off by default until measured): the same ResNet-50 rows at N = 2.
    step "bench: ResNet-50 on rank threads" env FIREMESH_RANK_THREADS=1 timeout 60 "$OUT/firemesh" bench --runtimes cuda --models resnet50 --ranks 2 --steps 3 --out benches/results/cuda/bench-rank-threads
    # The peer: burn-train's Learner on one GPU, and its DDP strategy (NCCL, loaded at run
    # time) over 1 to 8 GPUs, on the zoo's models at the sizes of the bench above.
    step "bench: burn-train DDP (the peer)" timeout 150 "$OUT/ddp_step" --models resnet50,gpt2-small --steps 2 --out benches/results/cuda/ddp
    if [ ${#failed[@]} -ne 0 ]; then
        echo "gpu-check: FAILED: ${failed[*]}" >&2
        exit 1
    fi
    echo "gpu-check: all steps passed"
    ;;
*)
    echo "usage: $0 build|run" >&2
    exit 2
    ;;
esac
