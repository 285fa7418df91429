#!/usr/bin/env bash
# firemesh's check of a lent GPU machine, in two phases that each fit one call of it (at most
# 10 minutes a call, 15 minutes in all; only the files under $OUT come back, 8 at most).
#
#   scripts/gpu-check.sh build                   here, on a CPU machine: release binaries,
#                                                stripped and gzipped, in target/gpu-check/bin
#                                                (at most 64 MiB; carry target/gpu-check)
#   scripts/gpu-check.sh run correct|speed       there: one phase, under PHASE_SECONDS (510 s)
#   scripts/gpu-check.sh rehearse correct|speed  here: the same phase, with wgpu over Mesa's
#                                                lavapipe standing in for CUDA
#
# correct: the collective suites (synchronous and stream-ordered copies; ranks on one GPU copying
#   as two GPUs would; the stream-ordered suite with every stream in one hardware queue),
#   compute-sanitizer's memcheck on the collectives, the NCCL link (a world of one process:
#   NCCL takes one GPU per process), the stress test of streams, and Sharded<Cuda> training on
#   1 and 2 ranks (in turn and on rank threads), which must agree.
# speed: the all-reduce benchmark (both copies, NCCL, the device's copy bound), firemesh bench
#   (ResNet-50 at batch 256 and the zoo on 1 and 2 ranks, in f32 and bf16, against plain Burn
#   CUDA), PyTorch's
#   ResNet-50 and GPT-2 small in FP32, TF32 and AMP on the same GPU (scripts/torch_peers.py),
#   and burn-train's DDP strategy.
#
# Each phase writes to $OUT (target/gpu-check/out when unset) summary-PHASE.md, whose first lines say
# what the machine has (GPU, driver, CUDA, NCCL, sanitizer) and then each step's verdict and
# time, PHASE.log (all output), and the phase's tables. The steps' time limits add up to at most
# the phase's budget; the script checks that before it starts a step.
#
# CUDA_VERSION (default 13000, what driver 580 runs) is the CUDA API the binaries are built
# against: cudarc binds the newest it knows when no toolkit is on the build machine, which can
# be newer than the lent machine's driver. GPU_CHECK_QUICK=1 shrinks every step (the rehearsal
# in the tests uses it); GPU_CHECK_BIN names a folder of unpacked binaries to use instead.
set -uo pipefail
cd "$(dirname "$0")/.."
BUNDLE=target/gpu-check
OUT=${OUT:-$BUNDLE/out}
CUDA_VERSION=${CUDA_VERSION:-13000}
PHASE_SECONDS=${PHASE_SECONDS:-510}
QUICK=${GPU_CHECK_QUICK:-0}
BINARIES=(firemesh collectives backend nccl allreduce ddp_step)
MAX_BUNDLE_BYTES=$((64 * 1024 * 1024))

# The test binary of package $1's integration test $2, built in release.
test_binary() {
    cargo test --release -p "$1" --test "$2" --no-run --message-format=json 2>/dev/null |
        grep -o "\"executable\":\"[^\"]*/$2-[^\"]*\"" | tail -1 | cut -d'"' -f4
}

build() {
    export CUDARC_CUDA_VERSION=$CUDA_VERSION
    rm -rf "$BUNDLE/bin" && mkdir -p "$BUNDLE/bin" || return 1
    local staged=$BUNDLE/staged
    mkdir -p "$staged"
    cargo build --release -p firemesh-cli --bin firemesh || return 1
    cp target/release/firemesh "$staged/firemesh"
    cp "$(test_binary firemesh-collective collective)" "$staged/collectives" || return 1
    cp "$(test_binary firemesh-backend backend)" "$staged/backend" || return 1
    cp "$(test_binary firemesh-nccl gpu)" "$staged/nccl" || return 1
    # `nccl` and `ddp` turn on Burn's `distributed` feature, for these two binaries only.
    cargo build --release -p firemesh-benches --features burn-collective,nccl --bin allreduce || return 1
    cp target/release/allreduce "$staged/allreduce"
    cargo build --release -p firemesh-peers --features ddp --bin ddp_step || return 1
    cp target/release/ddp_step "$staged/ddp_step"
    local b
    for b in "${BINARIES[@]}"; do
        strip "$staged/$b" 2>/dev/null
        gzip -c -9 "$staged/$b" >"$BUNDLE/bin/$b.gz" || return 1
    done
    rm -rf "$staged"
    local bytes
    bytes=$(du -cb "$BUNDLE"/bin/*.gz | tail -1 | cut -f1)
    ls -la "$BUNDLE/bin"
    echo "gpu-check: bundle of $((bytes / 1024 / 1024)) MiB built against CUDA $CUDA_VERSION"
    if [ "$bytes" -gt "$MAX_BUNDLE_BYTES" ]; then
        echo "gpu-check: the bundle is over 64 MiB: it cannot travel to the lent machine" >&2
        return 1
    fi
}

# The folder of unpacked binaries: $GPU_CHECK_BIN, or the bundle unpacked into a scratch folder.
unpack() {
    if [ -n "${GPU_CHECK_BIN:-}" ]; then
        BIN=$GPU_CHECK_BIN
        return 0
    fi
    BIN=$(mktemp -d)
    local b
    for b in "${BINARIES[@]}"; do
        [ -f "$BUNDLE/bin/$b.gz" ] || { echo "gpu-check: run '$0 build' first (missing $BUNDLE/bin/$b.gz)" >&2; return 2; }
        gzip -dc "$BUNDLE/bin/$b.gz" >"$BIN/$b" && chmod +x "$BIN/$b" || return 2
    done
}

# Finds the CUDA pieces a pip-installed PyTorch brings when no toolkit is installed, and makes
# the names cudarc and CubeCL look for: CUDA_PATH with the runtime's headers (CubeCL compiles
# its kernels with NVRTC against them), unversioned libnvrtc and libnccl (a pip NCCL ships only
# libnccl.so.2). Sets FOUND_* for the summary.
find_cuda() {
    local libs
    libs=$(mktemp -d)
    export LD_LIBRARY_PATH="$libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    local site
    site=$(python3 -c 'import site; print(" ".join(site.getsitepackages()))' 2>/dev/null)
    local roots=(/usr/local/cuda /opt/cuda /usr)
    local d
    for d in $site; do roots+=("$d/nvidia"); done
    first_file() { find "${roots[@]}" -maxdepth 6 -name "$1" 2>/dev/null | head -1; }
    if [ -z "${CUDA_PATH:-}" ] || [ ! -f "$CUDA_PATH/include/cuda_fp16.h" ]; then
        local header
        header=$(first_file cuda_fp16.h)
        if [ -n "$header" ]; then
            local home
            home=$(mktemp -d)
            ln -s "$(dirname "$header")" "$home/include"
            export CUDA_PATH=$home
        fi
    fi
    FOUND_HEADERS=${CUDA_PATH:-none}
    local name lib
    for name in nvrtc nccl; do
        lib=$(first_file "lib$name.so*")
        if [ -n "$lib" ]; then
            ln -sf "$lib" "$libs/lib$name.so"
            eval "FOUND_${name^^}=\$lib"
        else
            eval "FOUND_${name^^}=none"
        fi
    done
    # NVRTC's builtins library sits beside it.
    [ "$FOUND_NVRTC" != none ] && export LD_LIBRARY_PATH="$(dirname "$FOUND_NVRTC"):$LD_LIBRARY_PATH"
    [ "$FOUND_NCCL" != none ] && export LD_LIBRARY_PATH="$(dirname "$FOUND_NCCL"):$LD_LIBRARY_PATH"
    if command -v compute-sanitizer >/dev/null 2>&1; then
        FOUND_SANITIZER=$(command -v compute-sanitizer)
    elif [ -x "${CUDA_PATH:-/nonexistent}/bin/compute-sanitizer" ]; then
        FOUND_SANITIZER=$CUDA_PATH/bin/compute-sanitizer
    else
        FOUND_SANITIZER=none
    fi
}

# The first lines of the summary: what this machine is.
header() {
    {
        echo "# gpu-check: $PHASE ($RT)"
        echo
        echo "- date: $(date -u +%FT%TZ); commit: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
        if [ "$RT" = cuda ]; then
            echo "- GPU: $(nvidia-smi --query-gpu=name,memory.total --format=csv,noheader | paste -sd ';')"
            echo "- driver: $(nvidia-smi --query-gpu=driver_version --format=csv,noheader | head -1), CUDA $(nvidia-smi | grep -o 'CUDA Version: [0-9.]*' | cut -d' ' -f3); built against $CUDA_VERSION"
            echo "- CUDA headers: $FOUND_HEADERS; NVRTC: $FOUND_NVRTC; NCCL: $FOUND_NCCL; compute-sanitizer: $FOUND_SANITIZER"
            echo "- PyTorch: $(python3 -c 'import torch; print(torch.__version__, "CUDA", torch.version.cuda)' 2>/dev/null || echo none)"
        else
            echo "- rehearsal: wgpu (Mesa's lavapipe where no GPU is present) stands in for CUDA; steps with no wgpu counterpart say so"
        fi
        echo "- cores: $(nproc); phase budget: ${PHASE_SECONDS} s"
        echo
        echo "| step | verdict | seconds (limit) |"
        echo "|---|---|---|"
    } >"$SUMMARY"
    head -7 "$SUMMARY"
}

# step NAME LIMIT COMMAND...: runs COMMAND under LIMIT seconds, appending its output to the
# phase's log; its verdict and time go to the summary. A step whose command is `-` has no
# counterpart on this runtime.
SPENT=0
FAILED=()
step() {
    local name=$1 limit=$2
    shift 2
    if [ "$1" = - ]; then
        echo "| $name | not on $RT${2:+: $2} | - |" >>"$SUMMARY"
        return 0
    fi
    if [ $((SPENT + limit)) -gt "$PHASE_SECONDS" ]; then
        echo "gpu-check: step '$name' would pass the phase's budget ($SPENT + $limit > $PHASE_SECONDS s)" >&2
        echo "| $name | over the phase's budget | - |" >>"$SUMMARY"
        FAILED+=("$name")
        return 0
    fi
    SPENT=$((SPENT + limit))
    echo "== gpu-check: $name" | tee -a "$LOG"
    local start rc=0 verdict
    start=$(date +%s)
    if declare -F "$1" >/dev/null; then
        # A function of this script: run in a shell of its own, which `timeout` can stop.
        timeout --kill-after=5 "$limit" bash -c "$(declare -f "$1" same_losses); $1 \"\$@\"" _ "${@:2}" >>"$LOG" 2>&1 || rc=$?
    else
            { timeout --kill-after=5 "$limit" "$@" >>"$LOG" 2>&1; } 2>/dev/null || rc=$?
    fi
    local took=$(($(date +%s) - start))
    case $rc in
    0) verdict=passed ;;
    124 | 137) verdict="timed out"; FAILED+=("$name") ;;
    *) verdict="failed (exit $rc)"; FAILED+=("$name") ;;
    esac
    echo "   $verdict in $took s" | tee -a "$LOG"
    echo "| $name | $verdict | $took ($limit) |" >>"$SUMMARY"
}

# train RANKS LABEL [ENV...]: a short Sharded training run; its loss line goes to the log.
train() {
    local ranks=$1 label=$2
    shift 2
    local steps=10
    [ "$QUICK" = 1 ] && steps=4
    env "$@" "$BIN/firemesh" train --mesh "$RT" --ranks "$ranks" --share-devices --steps "$steps" \
        --log-every "$steps" --run-dir "$SCRATCH/run-$label" >"$SCRATCH/train-$label.log" 2>&1
    local rc=$?
    cat "$SCRATCH/train-$label.log"
    return $rc
}

# same_losses A B: the training runs labelled A and B reached the same first and last losses.
same_losses() {
    local l1 l2
    l1=$(grep -Eo 'loss [0-9]+\.[0-9]+ -> [0-9]+\.[0-9]+' "$SCRATCH/train-$1.log" | awk '{print $2, $4}')
    l2=$(grep -Eo 'loss [0-9]+\.[0-9]+ -> [0-9]+\.[0-9]+' "$SCRATCH/train-$2.log" | awk '{print $2, $4}')
    awk -v l1="$l1" -v l2="$l2" -v a="$1" -v b="$2" 'BEGIN {
        split(l1, x, " "); split(l2, y, " ")
        if (x[2] == "" || y[2] == "") { print "no final loss in a training log"; exit 1 }
        if (!(x[2] < x[1])) { print "the loss did not fall: " l1; exit 1 }
        for (i = 1; i <= 2; i++) {
            d = x[i] - y[i]; if (d < 0) d = -d
            if (d > 1e-3 * x[i]) { print a " and " b " trained differently: " l1 " vs " l2; exit 1 }
        }
        print a " and " b ": the same losses, " l1 " vs " l2 }'
}

compare_runs() {
    same_losses 1 2 && same_losses 2 2-threads
}

phase_correct() {
    local c=$BIN/collectives
    if [ "$RT" = cuda ]; then
        local quick=()
        [ "$QUICK" = 1 ] && quick=(rounding)
        step "collectives, synchronous copies" 75 env FIREMESH_REQUIRE_CUDA=1 "$c" "cuda::sync::${quick[*]:-}" --test-threads=1
        step "collectives, stream-ordered copies" 75 env FIREMESH_REQUIRE_CUDA=1 "$c" "cuda::stream::${quick[*]:-}" --test-threads=1
        step "collectives, one GPU as two" 60 env FIREMESH_REQUIRE_CUDA=1 "$c" cuda::sync_as_peers:: cuda::stream_as_peers:: --test-threads=1
        step "stream-ordered, one hardware queue" 50 env FIREMESH_REQUIRE_CUDA=1 CUDA_DEVICE_MAX_CONNECTIONS=1 "$c" cuda::stream:: --test-threads=1
        step "NCCL link: join, gather, a side channel, a lost peer" 15 env FIREMESH_REQUIRE_CUDA=1 "$BIN/nccl" --test-threads=1
        if [ "$FOUND_SANITIZER" != none ]; then
            step "memcheck of the collectives" 60 "$FOUND_SANITIZER" --tool memcheck --error-exitcode 3 "$c" cuda::stream::rounding_and_agreement cuda::sync::rounding_and_agreement --test-threads=1
        else
            step "memcheck of the collectives" 0 - "compute-sanitizer is not installed"
        fi
        step "streams: Burn ops and collectives from many threads" 50 env FIREMESH_REQUIRE_CUDA=1 "$BIN/backend" stress::burn_ops_and_collectives_share_cuda_devices_from_many_threads
    else
        local filter=wgpu::
        [ "$QUICK" = 1 ] && filter=wgpu::rounding
        step "collectives, synchronous copies" 75 env FIREMESH_REQUIRE_WGPU=1 "$c" "$filter"
        step "collectives, stream-ordered copies" 0 - "wgpu transfers are read-backs"
        step "collectives, one GPU as two" 0 - "wgpu clients are separate devices already"
        step "stream-ordered, one hardware queue" 0 - "CUDA_DEVICE_MAX_CONNECTIONS is CUDA's"
        step "NCCL link: join, gather, a side channel, a lost peer" 0 - "NCCL is CUDA's"
        step "memcheck of the collectives" 0 - "compute-sanitizer is CUDA's"
        local stress=stress::burn_ops_and_collectives_share_one_wgpu_device
        [ "$QUICK" = 1 ] && stress=stress::every_part_of_a_wgpu_run
        step "streams: Burn ops and collectives from many threads" 50 env FIREMESH_REQUIRE_WGPU=1 "$BIN/backend" "$stress"
    fi
    step "train on 1 rank" 40 train 1 1
    step "train on 2 ranks" 40 train 2 2
    step "train on 2 ranks, rank threads" 40 train 2 2-threads FIREMESH_RANK_THREADS=1
    step "1 vs 2 ranks, in turn vs rank threads" 5 compare_runs
}

phase_speed() {
    local tables=$SCRATCH/tables
    mkdir -p "$tables"
    if [ "$RT" = cuda ]; then
        local sizes=(--max-mib 256 --cpu-max-mib 16) steps=3
        [ "$QUICK" = 1 ] && sizes=(--max-mib 4 --cpu-max-mib 1) && steps=1
        step "all-reduce: ours, NCCL, the copy bound" 90 "$BIN/allreduce" --no-wgpu --nccl --ranks 2,4,8 --min-kib 4 "${sizes[@]}" --iters 5 --out "$tables/allreduce"
        # f32 and bf16 side by side (issue 31): the bf16 rows are the ones PyTorch's AMP is
        # compared with.
        step "bench: ResNet-50 at batch 256, one rank, f32 and bf16" 130 "$BIN/firemesh" bench --runtimes cuda --models resnet50 --ranks 1 --batch-per-rank 256 --steps "$steps" --repeats 3 --precision f32,bf16 --out "$tables/bench-256"
        step "bench: ResNet-50 and GPT-2 small on 1, 2 ranks, f32 and bf16" 110 "$BIN/firemesh" bench --runtimes cuda --models resnet50,gpt2-small --ranks 1,2 --steps "$steps" --repeats 3 --precision f32,bf16 --out "$tables/bench"
        if python3 -c 'import torch, torchvision' 2>/dev/null; then
            step "PyTorch: ResNet-50 and GPT-2 small, FP32/TF32/AMP" 110 python3 scripts/torch_peers.py time --seconds 100 --out "$tables/torch.json"
            step "firemesh against PyTorch" 10 python3 scripts/torch_peers.py compare --torch "$tables/torch.json" --bench "$tables/bench-256/bench.json" --bench "$tables/bench/bench.json" --out "$tables/peers.md"
        else
            step "PyTorch: ResNet-50 and GPT-2 small, FP32/TF32/AMP" 0 - "PyTorch with torchvision is not installed"
        fi
        step "burn-train DDP (the peer)" 60 "$BIN/ddp_step" --models resnet50,gpt2-small --steps 2 --out "$tables/ddp"
    else
        if [ -x "$BIN/allreduce" ]; then
            step "all-reduce: ours, the copy bound" 90 "$BIN/allreduce" --ranks 2,4 --min-kib 4 --max-mib 4 --cpu-max-mib 1 --iters 3 --out "$tables/allreduce"
        else
            # The tests' rehearsal has no benchmark binaries: the CLI's all-reduce stands in.
            step "all-reduce: ours, the copy bound" 90 "$BIN/firemesh" demo --mesh wgpu --ranks 2 --mib 4
        fi
        step "bench: ResNet-50 at batch 256, one rank, f32 and bf16" 0 - "a software Vulkan driver trains the tiny ResNet instead (next step)"
        local models=resnet-tiny,gpt-tiny
        [ "$QUICK" = 1 ] && models=gpt-tiny
        step "bench: the tiny ResNet and GPT on 1, 2 ranks" 100 "$BIN/firemesh" bench --runtimes wgpu --models "$models" --ranks 1,2 --steps 2 --warmup 1 --repeats 1 --out "$tables/bench"
        step "PyTorch: ResNet-50 and GPT-2 small, FP32/TF32/AMP" 0 - "PyTorch's peer runs on a GPU"
        step "burn-train DDP (the peer)" 0 - "DDP runs NCCL on CUDA"
    fi
    # The tables under their own names, and one archive of their JSON files and charts.
    local from to
    for from in allreduce/allreduce.md bench-256/bench.md bench/bench.md peers.md ddp/ddp.md; do
        to=${from%/bench.md}
        to=${to##*/}
        to=${to%.md}.md
        [ -f "$tables/$from" ] && cp "$tables/$from" "$OUT/$to"
    done
    (cd "$tables" && find . -name '*.json' -o -name '*.png' | tar -czf "$OUT/results.tar.gz" -T -) 2>/dev/null
}

run_phase() {
    PHASE=$1
    case $PHASE in correct | speed) ;; *) echo "usage: $0 $MODE correct|speed" >&2; return 2 ;; esac
    mkdir -p "$OUT" || return 2
    LOG=$OUT/$PHASE.log
    SUMMARY=$OUT/summary-$PHASE.md
    : >"$LOG"
    SCRATCH=$(mktemp -d)
    export RT QUICK SCRATCH
    if [ "$RT" = cuda ]; then
        if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L >/dev/null 2>&1; then
            echo "gpu-check: no NVIDIA GPU or driver on this machine; nothing to check" >&2
            return 2
        fi
        find_cuda
    fi
    unpack || return 2
    export BIN
    header
    "phase_$PHASE"
    {
        echo
        if [ ${#FAILED[@]} -eq 0 ]; then
            echo "All steps passed; the steps' limits add up to $SPENT of the phase's $PHASE_SECONDS s."
        else
            echo "FAILED: ${FAILED[*]} (their output is in $PHASE.log)."
        fi
    } >>"$SUMMARY"
    tail -1 "$SUMMARY"
    [ ${#FAILED[@]} -eq 0 ]
}

MODE=${1:-}
case $MODE in
build) build ;;
run) RT=cuda && run_phase "${2:-}" ;;
rehearse) RT=wgpu && run_phase "${2:-}" ;;
*)
    echo "usage: $0 build | run correct|speed | rehearse correct|speed" >&2
    exit 2
    ;;
esac
