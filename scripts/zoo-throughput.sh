#!/usr/bin/env bash
# Training throughput of the zoo on the CPU mesh: ResNet-18 and ResNet-50 at 32x32 (images/s)
# and the tiny GPT (tokens/s), with N = 1, 2 and 4 ranks, through `firemesh train`. Each figure
# is the median over the measured steps (the first step, which warms up, is left out).
#   scripts/zoo-throughput.sh [FIREMESH_BINARY] [STEPS]
# Writes benches/results/zoo_cpu.md and prints it. Absolute figures of this machine only.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${1:-target/debug/firemesh}
steps=${2:-4}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
printf 'the quick brown fox jumps over the lazy dog. %.0s' $(seq 2000) > "$work/text.txt"

median() { # the median step throughput in a run folder's metrics.jsonl, step 1 left out
    python3 - "$1/metrics.jsonl" <<'EOF'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
print(f"{statistics.median(r['throughput'] for r in rows if r['kind'] == 'step' and r['step'] > 1):.1f}")
EOF
}

out=benches/results/zoo_cpu.md
{
    echo "# The zoo on the CPU mesh: median step throughput"
    echo
    echo "Measured at commit $(git rev-parse --short HEAD)$(git diff --quiet HEAD -- . ":(exclude)benches/results" && echo "" || echo " (with uncommitted changes)")."
    echo
    echo "$(date -u +%Y-%m-%d), $(nproc) CPU cores ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)),"
    echo "\`firemesh train --mesh cpu\` ($bin), $steps steps per run, step 1 left out. Absolute figures of this machine."
    echo
    echo "| model | input | batch | N = 1 | N = 2 | N = 4 | unit |"
    echo "|---|---|---|---|---|---|---|"
} > "$out"
row() { # model, label, batch, unit, extra args...
    local model=$1 label=$2 batch=$3 unit=$4
    shift 4
    local cells=""
    for n in 1 2 4; do
        "$bin" train --model "$model" --mesh cpu --ranks "$n" --batch "$batch" --steps "$steps" \
            --eval-samples "$batch" --checkpoint-every 1000000 --run-dir "$work/$model-$n" "$@" >/dev/null
        cells="$cells | $(median "$work/$model-$n")"
    done
    echo "| $model | $label | $batch$cells | $unit |" >> "$out"
}
row resnet18 "32×32 synthetic" 32 images/s --image-size 32 --samples 256
row resnet50 "32×32 synthetic" 32 images/s --image-size 32 --samples 256
row gpt-tiny "byte text, 256 tokens" 16 tokens/s --data "text:$work/text.txt"
cat "$out"
