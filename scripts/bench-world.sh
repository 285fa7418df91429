#!/usr/bin/env bash
# The cost of the level across processes, measured: the same training job on one process of
# 4 CPU ranks and on an `mpirun` world of 2 processes x 2 ranks, alternated REPEATS times on
# this machine; each run's training throughput is read from its summary.json, and the ratio
# (world / one process) is printed per pair and as the median. Results go to
# benches/results/world/ (JSON lines and a table).
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
python3 -c "print('the quick brown fox jumps over the lazy dog. ' * 400, end='')" > "$SCRATCH/text.txt"

throughput() { python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['throughput'])" "$1/summary.json"; }

LINES="$OUT/cpu-2x2-vs-1x4.jsonl"
: > "$LINES"
for job in "${JOBS[@]}"; do
  name=${job%%|*}
  args=${job#*|}
  for i in $(seq 1 "$REPEATS"); do
    one="$SCRATCH/$name-one-$i"
    two="$SCRATCH/$name-two-$i"
    "$BIN" train --mesh cpu --ranks 4 --checkpoint-every 1000 $args --run-dir "$one" >/dev/null
    timeout 600 mpirun --oversubscribe --bind-to none -np 2 "$BIN" train --mesh cpu --ranks 2 \
      --checkpoint-every 1000 $args --run-dir "$two" >/dev/null
    a=$(throughput "$one")
    b=$(throughput "$two")
    ratio=$(python3 -c "print(f'{$b / $a:.3f}')")
    echo "$name pair $i: 1x4 $a, 2x2 $b, ratio $ratio"
    echo "{\"model\":\"$name\",\"pair\":$i,\"one_process_4_ranks\":$a,\"two_processes_2_ranks\":$b,\"ratio\":$ratio}" >> "$LINES"
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
            "summary.json (units per second of the training loop); ratio = world / one process.\n\n")
    f.write("| model | pairs | 1x4 median | 2x2 median | ratio min | ratio median | ratio max |\n|---|---|---|---|---|---|---|\n")
    for model in dict.fromkeys(r["model"] for r in rows):
        rs = [r for r in rows if r["model"] == model]
        ratios = [r["ratio"] for r in rs]
        f.write(f"| {model} | {len(rs)} | {statistics.median(r['one_process_4_ranks'] for r in rs):.1f} | "
                f"{statistics.median(r['two_processes_2_ranks'] for r in rs):.1f} | {min(ratios):.3f} | "
                f"{statistics.median(ratios):.3f} | {max(ratios):.3f} |\n")
print(open(out).read())
EOF
