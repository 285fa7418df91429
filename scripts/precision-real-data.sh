#!/usr/bin/env bash
# The same jobs in f32, bf16 and f16 on small real data, compared: the UCI optical
# digits (1,797 8×8 images, as scikit-learn ships them: its wheel is fetched from PyPI with pip,
# not installed) and the licence texts under /usr/share/common-licenses (112 KB of English).
# Writes benches/results/precision/{digits,text}.md and their loss charts, and seeds.md: the
# digits job over SEEDS (default 1-5) in each precision, held-out loss and accuracy as mean and
# spread, since one seed of f32 against another moves the held-out loss by several percent.
set -euo pipefail
cd "$(dirname "$0")/.."
WORK=${WORK:-target/precision-real-data}
OUT=benches/results/precision
mkdir -p "$WORK" "$OUT"
cargo build -p firemesh-cli
BIN=target/debug/firemesh

[ -d "$WORK/digits" ] || {
    pip download scikit-learn --no-deps --only-binary=:all: -d "$WORK/wheel" -q
    python3 - "$WORK" <<'PY'
import gzip, os, struct, sys, zipfile, zlib
work = sys.argv[1]
wheel = zipfile.ZipFile(os.path.join(work, "wheel", os.listdir(os.path.join(work, "wheel"))[0]))
name = next(n for n in wheel.namelist() if n.endswith("digits.csv.gz"))
rows = gzip.decompress(wheel.read(name)).decode().split()
def png(path, pixels):  # an 8×8 grayscale PNG
    raw = b"".join(b"\0" + bytes(pixels[8 * y:8 * y + 8]) for y in range(8))
    chunk = lambda t, d: struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d))
    head = struct.pack(">IIBBBBB", 8, 8, 8, 0, 0, 0, 0)
    open(path, "wb").write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", head) + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))
for i, row in enumerate(rows):
    v = [int(float(x)) for x in row.split(",")]
    folder = os.path.join(work, "digits", "val" if i % 5 == 0 else "train", str(v[64]))
    os.makedirs(folder, exist_ok=True)
    png(os.path.join(folder, f"{i:04d}.png"), [min(255, p * 16) for p in v[:64]])
PY
}
cat /usr/share/common-licenses/{GPL-3,GPL-2,Apache-2.0,GFDL-1.3,LGPL-3,MPL-2.0} >"$WORK/licenses.txt"

for p in f32 bf16 f16; do
    "$BIN" train --model resnet-tiny --data "images:$WORK/digits" --image-size 8 --mesh cpu --ranks 2 \
        --epochs 4 --batch 32 --seed 1 --eval-samples 0 --precision $p --run-dir "$WORK/runs/digits-$p"
    "$BIN" train --model gpt-tiny --data "text:$WORK/licenses.txt" --mesh cpu --ranks 2 \
        --steps 400 --batch 32 --seed 1 --eval-samples 0 --precision $p --run-dir "$WORK/runs/text-$p"
done
for job in digits text; do
    "$BIN" compare "$WORK/runs/$job-f32" "$WORK/runs/$job-bf16" "$WORK/runs/$job-f16" --out "$WORK/compare-$job"
    cp "$WORK/compare-$job/compare.md" "$OUT/$job.md"
    cp "$WORK/compare-$job/compare-loss.png" "$OUT/$job-loss.png"
done

SEEDS=${SEEDS:-1 2 3 4 5}
for seed in $SEEDS; do
    for p in f32 bf16 f16; do
        dir="$WORK/runs/seeds/digits-$p-seed$seed"
        [ -f "$dir/summary.json" ] || "$BIN" train --model resnet-tiny --data "images:$WORK/digits" \
            --image-size 8 --mesh cpu --ranks 2 --epochs 4 --batch 32 --seed "$seed" \
            --eval-samples 0 --precision $p --run-dir "$dir"
    done
done
python3 - "$WORK/runs/seeds" "$SEEDS" >"$OUT/seeds.md" <<'PY'
import json, os, statistics as st, sys
root, seeds = sys.argv[1], sys.argv[2].split()
def last_eval(p, seed):
    lines = open(os.path.join(root, f"digits-{p}-seed{seed}", "metrics.jsonl")).read().split("\n")
    evals = [json.loads(l) for l in lines if l.strip() and '"eval"' in l]
    return evals[-1]["loss"], 100 * evals[-1]["accuracy"]
runs = {p: [last_eval(p, s) for s in seeds] for p in ["f32", "bf16", "f16"]}
print("# Digits (resnet-tiny, 2 CPU ranks, 4 epochs), seeds " + ", ".join(seeds) + "\n")
print("Held-out loss and accuracy after the last epoch: mean over the seeds, and min-max. The")
print("paired column compares each seed's run with f32's run of the same seed.\n")
print("| precision | held-out loss: mean (min-max) | vs f32's mean | paired by seed: median (min-max) | accuracy %: mean (min-max) | vs f32 (points) |")
print("|---|---|---|---|---|---|")
base_loss = st.mean(l for l, _ in runs["f32"])
base_acc = st.mean(a for _, a in runs["f32"])
for p, rs in runs.items():
    loss = [l for l, _ in rs]; acc = [a for _, a in rs]
    paired = [100 * (l / b - 1) for (l, _), (b, _) in zip(rs, runs["f32"])]
    print(f"| {p} | {st.mean(loss):.4f} ({min(loss):.4f}-{max(loss):.4f}) | {100 * (st.mean(loss) / base_loss - 1):+.2f}% "
          f"| {st.median(paired):+.2f}% ({min(paired):+.2f}% to {max(paired):+.2f}%) "
          f"| {st.mean(acc):.2f} ({min(acc):.1f}-{max(acc):.1f}) | {st.mean(acc) - base_acc:+.2f} |")
f32_loss = [l for l, _ in runs["f32"]]
print(f"\nf32 alone, seed to seed: held-out loss {min(f32_loss):.4f} to {max(f32_loss):.4f} "
      f"({100 * (max(f32_loss) / min(f32_loss) - 1):.1f}% apart).")
PY
cat "$OUT/seeds.md"
