#!/usr/bin/env bash
# The same jobs in f32, bf16 and f16 on small real data, compared (issue 31): the UCI optical
# digits (1,797 8×8 images, as scikit-learn ships them: its wheel is fetched from PyPI with pip,
# not installed) and the licence texts under /usr/share/common-licenses (112 KB of English).
# Writes benches/results/precision/{digits,text}.md and their loss charts.
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
