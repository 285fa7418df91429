#!/usr/bin/env bash
# The cost of the level across processes, measured: the same training job on one process of
# 4 CPU ranks, on an `mpirun` world of 2 processes x 2 ranks, and on that world with its
# gradient buckets summed after the backward pass (`--late-buckets`), taken in turn REPEATS
# times on this machine. Each run's training throughput is read from its summary.json; the
# ratios (world / one process; early buckets / late buckets) are printed per round and as
# medians. Buckets of 0.02 MiB, so that the tiny models' backward passes fill several of them
# and their sums cross the processes during the backward pass (through MPI's side
# communicator). Results go to benches/results/world/ (JSON lines and a table).
#
#   scripts/bench-world.sh [REPEATS]        (default 5)
#
# Needs OpenMPI and a firemesh built with MPI (`cargo build --release -p firemesh-cli
# --features mpi`); FIREMESH=path/to/firemesh picks another binary.
set -euo pipefail
cd "$(dirname "$0")/.."

REPEATS=${1:-5}
BIN=${FIREMESH:-target/release/firemesh}
OUT=benches/results/world
SCRATCH=$(mktemp -d)
trap 'rm -rf "$SCRATCH"' EXIT
[ -x "$BIN" ] || { echo "error: $BIN not found: cargo build --release -p firemesh-cli --features mpi" >&2; exit 1; }
command -v mpirun >/dev/null || { echo "error: mpirun not found: apt-get install openmpi-bin libopenmpi-dev" >&2; exit 1; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
mkdir -p "$OUT"

JOBS=(
  "resnet-tiny|--model resnet-tiny --image-size 16 --batch 32 --samples 1024 --eval-samples 8 --steps 30"
  "gpt-tiny|--model gpt-tiny --data text:$SCRATCH/text.txt --seq-len 16 --batch 32 --eval-samples 8 --steps 30"
)
COMMON="--checkpoint-every 1000 --bucket-mib 0.02"
python3 -c "print('the quick brown fox jumps over the lazy dog. ' * 400, end='')" > "$SCRATCH/text.txt"

field() { python3 -c "import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])" "$1/summary.json" "$2"; }
world() { timeout 600 mpirun --oversubscribe --bind-to none -np 2 "$BIN" train --mesh cpu --ranks 2 "$@" >/dev/null; }

LINES="$OUT/cpu-2x2-vs-1x4.jsonl"
: > "$LINES"
for job in "${JOBS[@]}"; do
  name=${job%%|*}
  args=${job#*|}
  for i in $(seq 1 "$REPEATS"); do
    one="$SCRATCH/$name-one-$i"
    two="$SCRATCH/$name-two-$i"
    late="$SCRATCH/$name-late-$i"
    "$BIN" train --mesh cpu --ranks 4 $COMMON $args --run-dir "$one" >/dev/null
    world $COMMON $args --run-dir "$two"
    world $COMMON $args --late-buckets --run-dir "$late"
    a=$(field "$one" throughput)
    b=$(field "$two" throughput)
    c=$(field "$late" throughput)
    early=$(field "$two" early_gradient_collectives)
    ratio=$(python3 -c "print(f'{$b / $a:.3f}')")
    early_ratio=$(python3 -c "print(f'{$b / $c:.3f}')")
    echo "$name round $i: 1x4 $a, 2x2 $b ($early buckets early per step), 2x2 late $c; world/one $ratio, early/late $early_ratio"
    echo "{\"model\":\"$name\",\"pair\":$i,\"one_process_4_ranks\":$a,\"two_processes_2_ranks\":$b,\"two_processes_late_buckets\":$c,\"early_buckets_per_step\":$early,\"ratio\":$ratio,\"early_over_late\":$early_ratio}" >> "$LINES"
  done
done

python3 - "$LINES" "$OUT/cpu-2x2-vs-1x4.md" "$REPEATS" <<'EOF'
import json, statistics, sys, platform, os, datetime
lines, out, repeats = sys.argv[1], sys.argv[2], sys.argv[3]
rows = [json.loads(l) for l in open(lines)]
with open(out, "w") as f:
    f.write("# Training across processes on the CPU: 2 processes x 2 ranks against 1 process x 4\n\n")
    f.write(f"`scripts/bench-world.sh {repeats}` on {os.cpu_count()} cores ({platform.machine()}), "
            f"{datetime.date.today()}: the same job alternated, throughput from each run's "
            "summary.json (units per second of the training loop), buckets of 0.02 MiB. world / one: "
            "2x2 over 1x4; early / late: 2x2 over 2x2 `--late-buckets` (sums during the backward "
            "pass against after it).\n\n")
    f.write("| model | rounds | 1x4 median | 2x2 median | 2x2 late median | early buckets/step "
            "| world/one min | median | max | early/late min | median | max |\n"
            "|---|---|---|---|---|---|---|---|---|---|---|---|\n")
    for model in dict.fromkeys(r["model"] for r in rows):
        rs = [r for r in rows if r["model"] == model]
        med = lambda k: statistics.median(r[k] for r in rs)
        ratios = [r["ratio"] for r in rs]
        early = [r["early_over_late"] for r in rs]
        f.write(f"| {model} | {len(rs)} | {med('one_process_4_ranks'):.1f} | "
                f"{med('two_processes_2_ranks'):.1f} | {med('two_processes_late_buckets'):.1f} | "
                f"{rs[0]['early_buckets_per_step']} | {min(ratios):.3f} | "
                f"{statistics.median(ratios):.3f} | {max(ratios):.3f} | {min(early):.3f} | "
                f"{statistics.median(early):.3f} | {max(early):.3f} |\n")
print(open(out).read())
EOF
