#!/usr/bin/env bash
# firemesh's check of a lent GPU machine, in two phases that each fit one call of it (a call
# runs at most 10 minutes, a session has 15 in all, machine start included; only the files
# under $OUT come back, 8 at most per call).
#
#   scripts/gpu-check.sh build                   here, on a CPU machine: release binaries,
#                                                stripped and xz-packed, in target/gpu-check/bin;
#                                                refused when they and the tree that travels
#                                                with them pass 60 MiB (carry target/gpu-check/bin)
#   scripts/gpu-check.sh run correct|speed       there: one phase, within its budget
#   scripts/gpu-check.sh rehearse correct|speed  here: the same steps under the same budgets,
#                                                wgpu over Mesa's lavapipe standing in for CUDA
#
# Budgets: correct 270 s, speed 360 s; with a machine start of about 90 s both fit 12 minutes.
# Call `run correct`, then `run speed` at once (the machine stays warm 30 s).
#
# correct: the collective suites (synchronous and stream-ordered copies, where one copy that
#   falls back to a synchronous one fails; ranks on one GPU copying as two GPUs would; one
#   hardware queue), compute-sanitizer's memcheck, Burn ops and collectives from many threads,
#   autocast convolutions adding in f32, Sharded<Cuda> training on 1 and 2 ranks (in turn and on
#   rank threads, which must agree) and in bf16 (whose losses must follow f32's within the CPU
#   test's bounds), the NCCL link (a world of one process), and last, in a process of its own,
#   an NCCL join whose peer never comes.
# speed: the all-reduce benchmark (ours, NCCL, the device's copy bound), firemesh bench (ResNet-50
#   at batch 256 on one rank in f32 and bf16, with CubeCL's autotune and without; ResNet-50 and
#   GPT-2 small on 1 and 2 ranks), PyTorch's ResNet-50 and GPT-2 small in FP32, TF32 and AMP on
#   the same GPU (scripts/torch_peers.py), and burn-train's DDP.
#
# $OUT gets, as each step ends: summary-PHASE.md (what the machine has, then each step's
# verdict, time and what it ran), PHASE.log (all output), tables-PHASE.md (every table made so
# far) and results-PHASE.tar.gz (their JSON files and charts). A phase cut short keeps what its
# finished steps measured. The steps run in a scratch folder whose cubecl.toml shares CubeCL's
# compilation and autotune caches between the phase's processes.
#
# CUDA_VERSION (default 13000, what driver 580 runs) is the CUDA API the binaries are built
# against. GPU_CHECK_QUICK=1 shrinks every step (the tests' rehearsal); GPU_CHECK_BIN names a
# folder of unpacked binaries to use instead of the bundle; PHASE_SECONDS overrides a budget.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT" || exit 2
BUNDLE=$ROOT/target/gpu-check/bin
CUDA_VERSION=${CUDA_VERSION:-13000}
QUICK=${GPU_CHECK_QUICK:-0}
# firemesh: the CLI with CubeCL's autotune (as Burn's default features build it), both built with
# the experimental NCCL worlds;
# firemesh-fixed: the same without it, timed once beside it.
BINARIES=(firemesh firemesh-fixed collectives backend nccl allreduce ddp_step)
MAX_TRAVEL_BYTES=$((60 * 1024 * 1024))

# The test binary of package $1's integration test $2, built in release.
test_binary() {
    cargo test --release -p "$1" --test "$2" "${@:3}" --no-run --message-format=json 2>/dev/null |
        grep -o "\"executable\":\"[^\"]*/$2-[^\"]*\"" | tail -1 | cut -d'"' -f4
}

# Bytes that travel to the lent machine: the bundle and the working tree's files (tracked, or
# untracked and not ignored; target/ is ignored).
travel_bytes() {
    local tree bundle=0
    if git -C "$ROOT" rev-parse >/dev/null 2>&1; then
        tree=$(git -C "$ROOT" ls-files -z --cached --others --exclude-standard |
            (cd "$ROOT" && xargs -0 stat -c %s 2>/dev/null) | awk '{s += $1} END {print s + 0}')
    else
        tree=$(find "$ROOT" -path "$ROOT/target" -prune -o -type f -printf '%s\n' | awk '{s += $1} END {print s + 0}')
    fi
    [ -d "$BUNDLE" ] && bundle=$(find "$BUNDLE" -type f -printf '%s\n' | awk '{s += $1} END {print s + 0}')
    echo $((tree + bundle))
}

check_travel() {
    local bytes
    bytes=$(travel_bytes)
    echo "gpu-check: $((bytes / 1024 / 1024)) MiB travel (the bundle and the tree; at most 60)"
    if [ "$bytes" -gt "$MAX_TRAVEL_BYTES" ]; then
        echo "gpu-check: the bundle and the tree pass 60 MiB: they cannot travel to the lent machine" >&2
        return 1
    fi
}

build() {
    export CUDARC_CUDA_VERSION=$CUDA_VERSION
    local staged=$ROOT/target/gpu-check/staged
    rm -rf "$BUNDLE" "$staged" && mkdir -p "$BUNDLE" "$staged" || return 1
    cargo build --release -p firemesh-cli --features experimental --bin firemesh || return 1
    cp target/release/firemesh "$staged/firemesh-fixed"
    cargo build --release -p firemesh-cli --features autotune,experimental --bin firemesh || return 1
    cp target/release/firemesh "$staged/firemesh"
    cp "$(test_binary firemesh-collective collective)" "$staged/collectives" || return 1
    cp "$(test_binary firemesh-backend backend)" "$staged/backend" || return 1
    cp "$(test_binary firemesh-world nccl_gpu --features nccl)" "$staged/nccl" || return 1
    # `nccl` and `ddp` turn on Burn's `distributed` feature, for these two binaries only.
    cargo build --release -p firemesh-benches --features burn-collective,nccl --bin allreduce || return 1
    cp target/release/allreduce "$staged/allreduce"
    cargo build --release -p firemesh-peers --features ddp --bin ddp_step || return 1
    cp target/release/ddp_step "$staged/ddp_step"
    # xz: 46 MiB for the seven, where gzip -9 made 75 (stripped; at commit b9497d3).
    local b
    for b in "${BINARIES[@]}"; do
        strip "$staged/$b" 2>/dev/null
        xz -9e -T2 -c "$staged/$b" >"$BUNDLE/$b.xz" || return 1
    done
    rm -rf "$staged"
    ls -la "$BUNDLE"
    echo "gpu-check: bundle built against CUDA $CUDA_VERSION"
    check_travel
}

# The folder of unpacked binaries: $GPU_CHECK_BIN, or the bundle unpacked into the scratch folder.
unpack() {
    if [ -n "${GPU_CHECK_BIN:-}" ]; then
        BIN=$GPU_CHECK_BIN
        return 0
    fi
    BIN=$SCRATCH/bin
    mkdir -p "$BIN"
    local b
    for b in "${BINARIES[@]}"; do
        [ -f "$BUNDLE/$b.xz" ] || { echo "gpu-check: run '$0 build' first (missing $BUNDLE/$b.xz)" >&2; return 2; }
        if command -v xz >/dev/null 2>&1; then
            xz -dc "$BUNDLE/$b.xz" >"$BIN/$b" || return 2
        else
            # Python's lzma where the xz tool is not installed.
            python3 -c 'import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2], "wb"))' \
                "$BUNDLE/$b.xz" "$BIN/$b" || return 2
        fi
        chmod +x "$BIN/$b" || return 2
    done
}

# The CUDA pieces CubeCL and cudarc need, found in this order: $CUDA_PATH, /usr/local/cuda (its
# links followed), then the NVIDIA folders of the Python packages (a pip PyTorch brings them).
# Headers (cuda_fp16.h, which CubeCL's kernels include through NVRTC) and NVRTC come from the
# same root where it has both. Makes the names cudarc looks for (unversioned libnvrtc and
# libnccl: a pip NCCL ships only libnccl.so.2); sets FOUND_* for the summary.
find_cuda() {
    local links
    links=$SCRATCH/lib
    mkdir -p "$links"
    export LD_LIBRARY_PATH="$links${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    local roots=()
    [ -n "${CUDA_PATH:-}" ] && roots+=("$(readlink -f "$CUDA_PATH")")
    [ -e /usr/local/cuda ] && roots+=("$(readlink -f /usr/local/cuda)")
    local site d
    site=$(python3 -c 'import site; print(" ".join(site.getsitepackages()))' 2>/dev/null)
    for d in $site; do [ -d "$d/nvidia" ] && roots+=("$d/nvidia"); done
    first() { # first NAME ROOT...: the first file NAME under the roots, links followed
        local name=$1 r hit
        shift
        for r in "$@"; do
            # (find fails on an unreadable folder or a link loop even after a match.)
            hit=$(find -L "$r" -maxdepth 5 -name "$name" -print -quit 2>/dev/null)
            [ -n "$hit" ] && { echo "$hit"; return 0; }
        done
        return 1
    }
    FOUND_HEADERS=none FOUND_NVRTC=none FOUND_NCCL=none
    local r header nvrtc
    for r in "${roots[@]}"; do
        header=$(first cuda_fp16.h "$r") || continue
        nvrtc=$(first 'libnvrtc.so*' "$r") || nvrtc=
        FOUND_HEADERS=$(dirname "$header")
        [ -n "$nvrtc" ] && FOUND_NVRTC=$nvrtc && break
    done
    [ "$FOUND_NVRTC" = none ] && FOUND_NVRTC=$(first 'libnvrtc.so*' "${roots[@]}" || echo none)
    FOUND_NCCL=$(first 'libnccl.so*' "${roots[@]}" || echo none)
    if [ "$FOUND_HEADERS" != none ]; then
        local home=$SCRATCH/cuda
        mkdir -p "$home"
        ln -sfn "$FOUND_HEADERS" "$home/include"
        export CUDA_PATH=$home
    fi
    local name lib
    for name in nvrtc nccl; do
        lib=$(eval echo "\$FOUND_${name^^}")
        [ "$lib" = none ] && continue
        ln -sf "$lib" "$links/lib$name.so"
        # NVRTC's builtins library sits beside it.
        export LD_LIBRARY_PATH="$(dirname "$lib"):$LD_LIBRARY_PATH"
    done
    NVRTC_VERSION=$( [ "$FOUND_NVRTC" != none ] && python3 -c '
import ctypes, sys
lib = ctypes.CDLL(sys.argv[1]); a, b = ctypes.c_int(), ctypes.c_int()
lib.nvrtcVersion(ctypes.byref(a), ctypes.byref(b)); print(f"{a.value}.{b.value}")' "$FOUND_NVRTC" 2>/dev/null || echo unknown)
    HEADERS_VERSION=unknown
    local h
    for h in cuda.h cuda_runtime_api.h; do
        if [ "$FOUND_HEADERS" != none ] && [ -f "$FOUND_HEADERS/$h" ]; then
            HEADERS_VERSION=$(grep -m1 -Eo '#define (CUDA_VERSION|CUDART_VERSION) [0-9]+' "$FOUND_HEADERS/$h" | awk '{print $3}')
            break
        fi
    done
    if command -v compute-sanitizer >/dev/null 2>&1; then
        FOUND_SANITIZER=$(command -v compute-sanitizer)
    else
        FOUND_SANITIZER=$(first compute-sanitizer "${roots[@]}" || echo none)
    fi
}

# The first lines of the summary: what this machine is.
header() {
    {
        echo "# gpu-check: $PHASE ($RT)"
        echo
        echo "- date: $(date -u +%FT%TZ); commit: $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)"
        if [ "$RT" = cuda ]; then
            echo "- GPU: $(nvidia-smi --query-gpu=name,memory.total --format=csv,noheader | paste -sd ';')"
            echo "- driver: $(nvidia-smi --query-gpu=driver_version --format=csv,noheader | head -1), CUDA $(nvidia-smi | grep -o 'CUDA Version: [0-9.]*' | cut -d' ' -f3); built against $CUDA_VERSION"
            echo "- NVRTC $NVRTC_VERSION ($FOUND_NVRTC); CUDA headers $HEADERS_VERSION ($FOUND_HEADERS); NCCL: $FOUND_NCCL; compute-sanitizer: $FOUND_SANITIZER"
            echo "- PyTorch: $(python3 -c 'import torch; print(torch.__version__, "CUDA", torch.version.cuda)' 2>/dev/null || echo none)"
        else
            echo "- rehearsal: wgpu (Mesa's lavapipe where no GPU is present) stands in for CUDA, with smaller work; steps with no wgpu counterpart say so; each step may take ${REHEARSAL_ROOM}× the limit shown (debug binaries on a shared CPU), the limits counted are the GPU run's"
        fi
        echo "- cores: $(nproc); phase budget: ${PHASE_SECONDS} s; CubeCL caches: $SCRATCH/cache"
        echo
        echo "| step | verdict | seconds (limit) | ran |"
        echo "|---|---|---|---|"
    } >"$SUMMARY"
    head -7 "$SUMMARY"
}

# step NAME LIMIT RAN [--cuda-only REASON | --skip REASON] COMMAND...: runs COMMAND in the work
# folder under LIMIT seconds, appending its output to the phase's log; its verdict, time and
# RAN (what it ran, in a few words) go to the summary. `--cuda-only REASON`: on wgpu the step
# has no counterpart and is recorded as such; `--skip REASON`: this machine lacks what it
# needs. Every step's limit counts against the phase's budget, whatever runs, so a rehearsal
# checks the GPU run's budget.
SPENT=0
FAILED=()
# Seconds of a phase kept for what no step's limit counts: unpacking the binaries, finding
# CUDA, the summary's first lines, the archives, `timeout`'s grace after a limit.
RESERVE=20
# A rehearsal runs debug binaries on a shared CPU, often beside other tests: it checks the
# harness and the GPU run's accounting, not speed, so each step may run this many times its
# limit there. The limits counted and shown stay the GPU run's.
REHEARSAL_ROOM=4
step() {
    local name=$1 limit=$2 ran=$3
    shift 3
    if [ $((SPENT + limit + RESERVE)) -gt "$PHASE_SECONDS" ]; then
        echo "gpu-check: step '$name' would pass the phase's budget ($SPENT + $limit + $RESERVE kept > $PHASE_SECONDS s)" >&2
        echo "| $name | over the phase's budget | - | - |" >>"$SUMMARY"
        FAILED+=("$name")
        return 0
    fi
    SPENT=$((SPENT + limit))
    if [ "$1" = --skip ]; then
        echo "| $name | skipped: $2 | - ($limit) | - |" >>"$SUMMARY"
        return 0
    fi
    if [ "$1" = --cuda-only ]; then
        if [ "$RT" != cuda ]; then
            echo "| $name | not on $RT: $2 | - ($limit) | - |" >>"$SUMMARY"
            return 0
        fi
        shift 2
    fi
    echo "== gpu-check: $name ($ran)" | tee -a "$LOG"
    local start rc=0 verdict room=$limit
    [ "$RT" = cuda ] || room=$((limit * REHEARSAL_ROOM))
    start=$(date +%s)
    if declare -F "$1" >/dev/null; then
        # A function of this script: run in a shell of its own, which `timeout` can stop.
        (cd "$WORK" && timeout --kill-after=5 "$room" bash -c "$(declare -f $HELPERS); $1 \"\$@\"" _ "${@:2}") >>"$LOG" 2>&1 || rc=$?
    else
        (cd "$WORK" && timeout --kill-after=5 "$room" "$@") >>"$LOG" 2>&1 || rc=$?
    fi
    local took=$(($(date +%s) - start))
    case $rc in
    0) verdict=passed ;;
    124 | 137) verdict="timed out"; FAILED+=("$name") ;;
    *) verdict="failed (exit $rc)"; FAILED+=("$name") ;;
    esac
    echo "   $verdict in $took s" | tee -a "$LOG"
    echo "| $name | $verdict | $took ($limit) | $ran |" >>"$SUMMARY"
}

# publish FILE TITLE: archives every JSON file and chart made so far in results-PHASE.tar.gz
# (made aside, then moved), then appends the table FILE (under the phase's tables folder) to
# tables-PHASE.md in $OUT; a step that made none (it failed early) adds a line saying so.
publish() {
    local file=$TABLES/$1 archive=$OUT/results-$PHASE.tar.gz
    (cd "$TABLES" && find . \( -name '*.json' -o -name '*.png' \) -print | tar -czf "$SCRATCH/results.tar.gz" -T -) 2>/dev/null &&
        mv "$SCRATCH/results.tar.gz" "$archive"
    # One write: a reader (or a kill) between the heading and its table sees neither.
    local table="(no table: see $PHASE.log)"
    [ -f "$file" ] && table=$(cat "$file")
    printf '\n# %s\n\n%s\n' "$2" "$table" >>"$OUT/tables-$PHASE.md"
}

# The helpers steps call (exported to their shells with `declare -f`).
HELPERS="train same_losses compare_runs track_bf16 collectives nccl_link nccl_lost_peer"

# collectives SUITE...: the collective test binary on the suites named (each a test filter).
collectives() {
    local required=FIREMESH_REQUIRE_WGPU
    [ "$RT" = cuda ] && required=FIREMESH_REQUIRE_CUDA
    env "$required=1" "$BIN/collectives" "$@" --test-threads=1
}

# train LABEL RANKS THREADS [OPTION...]: a short Sharded training run (THREADS on|off: rank
# threads or ranks in turn); its output and run folder stay in the scratch folder.
train() {
    local label=$1 ranks=$2 threads=$3
    shift 3
    local steps=10
    [ "$QUICK" = 1 ] && steps=4
    FIREMESH_RANK_THREADS=$threads "$BIN/firemesh" train --mesh "$RT" --ranks "$ranks" \
        --share-devices --steps "$steps" --log-every "$steps" --run-dir "$SCRATCH/run-$label" \
        "$@" >"$SCRATCH/train-$label.log" 2>&1
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
    same_losses 1 2-in-turn && same_losses 2-in-turn 2-threads
}

# track_bf16 LOW: the LOW-precision run's losses follow the f32 run's (1 rank) within the
# bounds of the CPU precision test (`firemesh compare --track-losses`).
track_bf16() {
    "$BIN/firemesh" compare --track-losses --out "$TABLES/precision" "$SCRATCH/run-1" "$SCRATCH/run-1-$1"
}

# The NCCL link's tests but the lost peer's, whose join leaves a thread blocked in NCCL.
nccl_link() {
    FIREMESH_REQUIRE_CUDA=1 "$BIN/nccl" --test-threads=1 --skip a_join_whose_other_process_never_comes
}

nccl_lost_peer() {
    FIREMESH_REQUIRE_CUDA=1 "$BIN/nccl" --exact a_join_whose_other_process_never_comes_fails_within_its_timeout
}

phase_correct() {
    local cuda=0 low=f16 q=
    [ "$RT" = cuda ] && cuda=1 && low=bf16
    [ "$QUICK" = 1 ] && q=rounding
    local suites=wgpu::$q
    [ $cuda = 1 ] && suites=cuda::sync::$q
    step "collectives, synchronous copies" 30 "every op, dtype and length${q:+ (rounding only)}" \
        collectives "$suites"
    step "collectives, stream-ordered copies" 30 "as above; a copy made synchronously fails" \
        --cuda-only "wgpu transfers are read-backs" collectives "cuda::stream::$q"
    step "collectives, one GPU as two" 22 "ranks on one GPU through the peer path" \
        --cuda-only "wgpu clients are separate devices already" \
        collectives cuda::sync_as_peers:: cuda::stream_as_peers::
    step "stream-ordered, one hardware queue" 20 "CUDA_DEVICE_MAX_CONNECTIONS=1" \
        --cuda-only "CUDA_DEVICE_MAX_CONNECTIONS is CUDA's" \
        env CUDA_DEVICE_MAX_CONNECTIONS=1 FIREMESH_REQUIRE_CUDA=1 "$BIN/collectives" cuda::stream:: --test-threads=1
    if [ "$RT" = cuda ] && [ "$FOUND_SANITIZER" = none ]; then
        step "memcheck of the collectives" 22 - --skip "compute-sanitizer is not installed" true
    elif [ "$RT" = cuda ]; then
        step "memcheck of the collectives" 22 "rounding and agreement, both copies" \
            env FIREMESH_REQUIRE_CUDA=1 "$FOUND_SANITIZER" --tool memcheck --error-exitcode 3 "$BIN/collectives" \
            cuda::stream::rounding_and_agreement cuda::sync::rounding_and_agreement --test-threads=1
    else
        step "memcheck of the collectives" 22 - --cuda-only "compute-sanitizer is CUDA's" true
    fi
    local stress=stress::burn_ops_and_collectives_share_cuda_devices_from_many_threads
    [ $cuda = 0 ] && stress=stress::burn_ops_and_collectives_share_one_wgpu_device
    [ $cuda = 0 ] && [ "$QUICK" = 1 ] && stress=stress::every_part_of_a_wgpu_run
    step "streams: Burn ops and collectives from many threads" 15 "$stress" \
        env FIREMESH_REQUIRE_CUDA=$cuda FIREMESH_REQUIRE_WGPU=$((1 - cuda)) "$BIN/backend" "$stress"
    # On wgpu every test of the file, the kernels' declining included (the CUDA one skips).
    local autocast=cube_autocast::cuda
    [ $cuda = 0 ] && autocast=cube_autocast::
    step "autocast convolutions add in f32" 20 "$autocast ($([ $cuda = 1 ] && echo 'bf16, f16' || echo f16))" \
        env FIREMESH_REQUIRE_CUDA=$cuda FIREMESH_REQUIRE_WGPU=$((1 - cuda)) "$BIN/backend" "$autocast" --test-threads=1
    local steps=10
    [ "$QUICK" = 1 ] && steps=4
    step "train on 1 rank" 14 "resnet-tiny, $steps steps" train 1 1 on
    step "train on 2 ranks, in turn" 14 "the same, ranks in turn" train 2-in-turn 2 off
    step "train on 2 ranks, rank threads" 14 "the same, rank threads" train 2-threads 2 on
    step "train on 1 rank in $low" 14 "the same, --precision $low" train "1-$low" 1 on --precision "$low"
    step "1 vs 2 ranks, in turn vs rank threads" 3 "first and last losses within 0.1%" compare_runs
    step "$low against f32: losses within the precision bounds" 3 "firemesh compare --track-losses" \
        track_bf16 "$low"
    publish precision/compare.md "$low against f32 (1 rank)"
    step "NCCL link: join, gather, a side channel" 15 "a world of one process" \
        --cuda-only "NCCL is CUDA's" nccl_link
    step "NCCL: a join whose peer never comes fails (its own process, last)" 12 "3 s join timeout" \
        --cuda-only "NCCL is CUDA's" nccl_lost_peer
    {
        echo
        if [ $cuda = 1 ] && [ "$(nvidia-smi -L | wc -l)" -lt 2 ]; then
            echo "Not tested with one GPU: peer access grants between two GPUs (a device is not its own peer; the 'one GPU as two' suite takes the peer path without a grant), NCCL across processes on separate GPUs (the link test is a world of one process), and real links between GPUs (NVLink, PCIe): every copy here stays in one GPU's memory."
        fi
    } >>"$SUMMARY"
}

phase_speed() {
    # Each step once, its command chosen by the runtime: tiny work on lavapipe in a rehearsal.
    local cuda=0
    [ "$RT" = cuda ] && cuda=1
    local steps=3 sizes=(--max-mib 256 --cpu-max-mib 16)
    [ "$QUICK" = 1 ] && steps=1 && sizes=(--max-mib 4 --cpu-max-mib 1)
    local one=(bench --runtimes cuda --models resnet50 --ranks 1 --batch-per-rank 256
        --steps "$steps" --warmup 1 --repeats 1 --precision f32,bf16 --no-peers)
    local one_ran="resnet50 at batch 256, f32 and bf16, $steps steps after a warm-up"
    local both=(bench --runtimes cuda --models resnet50,gpt2-small --ranks 1,2 --steps "$steps"
        --warmup 1 --repeats 1 --precision f32,bf16)
    local both_ran="resnet50 and gpt2-small, 2 ranks sharing the GPU, f32 and bf16, the peers"
    local allreduce=("$BIN/allreduce" --no-wgpu --nccl --ranks 2,4,8 --min-kib 4 "${sizes[@]}"
        --iters 5 --out "$TABLES/allreduce")
    local allreduce_ran="2, 4, 8 ranks on the GPU, 4 KiB to ${sizes[1]} MiB"
    local no_torch=
    python3 -c 'import torch, torchvision' 2>/dev/null || no_torch="PyTorch with torchvision is not installed"
    if [ $cuda = 0 ]; then
        one=(bench --runtimes wgpu --models resnet-tiny --ranks 1 --batch-per-rank 4 --steps 1
            --warmup 1 --repeats 1 --precision f32,f16 --no-peers)
        one_ran="resnet-tiny at batch 4, f32 and f16"
        local models=resnet-tiny,gpt-tiny
        [ "$QUICK" = 1 ] && models=gpt-tiny
        both=(bench --runtimes wgpu --models "$models" --ranks 1,2 --steps 1 --warmup 1 --repeats 1)
        both_ran="$models on 1 and 2 wgpu ranks"
        allreduce=("$BIN/firemesh" demo --mesh wgpu --ranks 2 --mib 4)
        allreduce_ran="firemesh demo, 2 wgpu ranks, 4 MiB"
    fi
    step "all-reduce: ours, NCCL, the copy bound" 45 "$allreduce_ran" "${allreduce[@]}"
    publish allreduce/allreduce.md "All-reduce"
    step "bench: ResNet-50 at batch 256, one rank, autotuned" 115 "$one_ran" \
        "$BIN/firemesh" "${one[@]}" --out "$TABLES/bench-256"
    publish bench-256/bench.md "$one_ran, one rank, the autotuned binary"
    step "bench: the same, fixed kernels" 45 "the same, the binary built without autotune" \
        "$BIN/firemesh-fixed" "${one[@]}" --out "$TABLES/bench-256-fixed"
    publish bench-256-fixed/bench.md "$one_ran, one rank, the fixed-kernel binary"
    step "bench: ResNet-50 and GPT-2 small on 1 and 2 ranks" 70 "$both_ran" \
        "$BIN/firemesh" "${both[@]}" --out "$TABLES/bench"
    publish bench/bench.md "$both_ran"
    local torch=(--cuda-only "PyTorch's peer runs on a GPU")
    [ $cuda = 1 ] && [ -n "$no_torch" ] && torch=(--skip "$no_torch")
    [ $cuda = 1 ] && [ -z "$no_torch" ] && torch=()
    step "PyTorch: ResNet-50 and GPT-2 small, FP32/TF32/AMP" 47 "torch_peers.py, 40 s" "${torch[@]}" \
        python3 "$ROOT/scripts/torch_peers.py" time --seconds 40 --out "$TABLES/torch.json"
    step "firemesh against PyTorch" 3 "the same sizes, like for like" "${torch[@]}" \
        python3 "$ROOT/scripts/torch_peers.py" compare --torch "$TABLES/torch.json" \
        --bench "$TABLES/bench-256/bench.json" --bench "$TABLES/bench-256-fixed/bench.json" \
        --bench "$TABLES/bench/bench.json" --out "$TABLES/peers.md"
    [ -f "$TABLES/peers.md" ] && publish peers.md "One GPU: firemesh against PyTorch"
    step "burn-train DDP (the peer)" 15 "resnet50, 2 steps" --cuda-only "DDP runs NCCL on CUDA" \
        "$BIN/ddp_step" --models resnet50 --steps 2 --out "$TABLES/ddp"
    [ -d "$TABLES/ddp" ] && publish ddp/ddp.md "burn-train DDP"
    return 0
}

run_phase() {
    PHASE=$1
    local budget
    case $PHASE in
    correct) budget=270 ;;
    speed) budget=360 ;;
    *) echo "usage: $0 $MODE correct|speed" >&2; return 2 ;;
    esac
    PHASE_SECONDS=${PHASE_SECONDS:-$budget}
    SCRATCH=$(mktemp -d)
    if [ "$RT" = cuda ]; then
        OUT=${OUT:-$ROOT/target/gpu-check/out}
    else
        # A rehearsal writes outside the tree.
        OUT=${OUT:-$SCRATCH/out}
    fi
    mkdir -p "$OUT" || return 2
    LOG=$OUT/$PHASE.log
    SUMMARY=$OUT/summary-$PHASE.md
    : >"$LOG"
    : >"$OUT/tables-$PHASE.md"
    if [ "$RT" = cuda ]; then
        if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L >/dev/null 2>&1; then
            echo "gpu-check: no NVIDIA GPU or driver on this machine; nothing to check" | tee "$SUMMARY" >&2
            return 2
        fi
        find_cuda
        if [ "$FOUND_NVRTC" = none ] || [ "$FOUND_HEADERS" = none ]; then
            echo "gpu-check: CUDA's NVRTC or headers not found (CUDA_PATH, /usr/local/cuda, pip's nvidia folders): CubeCL cannot compile kernels" | tee "$SUMMARY" >&2
            return 2
        fi
    fi
    check_travel >>"$LOG" 2>&1 || { tail -2 "$LOG" | tee "$SUMMARY" >&2; return 2; }
    unpack || return 2
    WORK=$SCRATCH/work
    TABLES=$SCRATCH/tables
    mkdir -p "$WORK" "$TABLES" "$SCRATCH/cache"
    # CubeCL reads cubecl.toml from the working folder: every process of the phase shares its
    # compiled kernels and autotune choices.
    cat >"$WORK/cubecl.toml" <<EOF
[compilation]
cache = { file = "$SCRATCH/cache" }

[autotune]
cache = { file = "$SCRATCH/cache" }
EOF
    export RT QUICK SCRATCH BIN TABLES
    header
    "phase_$PHASE"
    {
        echo
        if [ ${#FAILED[@]} -eq 0 ]; then
            echo "All steps passed; the steps' limits add up to $SPENT of the phase's $PHASE_SECONDS s ($RESERVE kept for the rest)."
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
