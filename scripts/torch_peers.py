#!/usr/bin/env python3
"""The PyTorch peer of `firemesh bench` on one GPU, for scripts/gpu-check.sh.

    torch_peers.py time --out torch.json [--seconds 100]
        Times training steps of torchvision's ResNet-50 (batch 256, 224x224, SGD with momentum)
        in FP32, TF32 and AMP (bf16 autocast), and of a GPT-2 small (12 layers, 12 heads, width
        768, 8 sequences of 1,024 tokens, AdamW) in FP32, TF32 and AMP, on synthetic data: the
        sizes `firemesh bench` uses on a GPU. Writes one row per setup.
    torch_peers.py compare --torch torch.json --bench BENCH.json [--bench ...] --out peers.md
        Puts the rows of firemesh bench (Sharded<Cuda> with one rank, and plain Burn CUDA) beside
        PyTorch's, with the ratios of their throughputs, all taken on one machine in one session.

Only PyTorch and torchvision are needed; nothing is downloaded.
"""
import argparse
import json
import math
import sys
import time


def timed(step, warmup, steps, deadline):
    """Median seconds of `steps` calls of `step` after `warmup`, stopping at `deadline`."""
    import torch

    for _ in range(warmup):
        step()
    torch.cuda.synchronize()
    times = []
    for _ in range(steps):
        if time.monotonic() > deadline:
            break
        start = time.perf_counter()
        step()
        torch.cuda.synchronize()
        times.append(time.perf_counter() - start)
    times.sort()
    return times[len(times) // 2] if times else math.nan, times


def set_precision(mode):
    import torch

    tf32 = mode == "tf32"
    torch.backends.cuda.matmul.allow_tf32 = tf32
    torch.backends.cudnn.allow_tf32 = tf32


def resnet50_step(mode, batch=256, size=224):
    import torch
    import torchvision

    model = torchvision.models.resnet50().cuda()
    optim = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-4)
    x = torch.randn(batch, 3, size, size, device="cuda")
    y = torch.randint(0, 1000, (batch,), device="cuda")
    loss_fn = torch.nn.CrossEntropyLoss()

    def step():
        optim.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=mode == "amp"):
            loss = loss_fn(model(x), y)
        loss.backward()
        optim.step()

    return step, batch, "images/s"


def gpt2_small_step(mode, batch=8, seq=1024):
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    class Layer(nn.Module):
        def __init__(self, width, heads):
            super().__init__()
            self.heads = heads
            self.ln1 = nn.LayerNorm(width)
            self.qkv = nn.Linear(width, 3 * width)
            self.proj = nn.Linear(width, width)
            self.ln2 = nn.LayerNorm(width)
            self.up = nn.Linear(width, 4 * width)
            self.down = nn.Linear(4 * width, width)

        def forward(self, x):
            b, t, c = x.shape
            q, k, v = self.qkv(self.ln1(x)).split(c, dim=2)
            q, k, v = (z.view(b, t, self.heads, c // self.heads).transpose(1, 2) for z in (q, k, v))
            a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + self.proj(a.transpose(1, 2).reshape(b, t, c))
            return x + self.down(F.gelu(self.up(self.ln2(x))))

    class Gpt(nn.Module):
        def __init__(self, vocab=50257, context=1024, width=768, layers=12, heads=12):
            super().__init__()
            self.tokens = nn.Embedding(vocab, width)
            self.positions = nn.Embedding(context, width)
            self.layers = nn.ModuleList(Layer(width, heads) for _ in range(layers))
            self.ln = nn.LayerNorm(width)

        def forward(self, ids):
            pos = torch.arange(ids.shape[1], device=ids.device)
            x = self.tokens(ids) + self.positions(pos)
            for layer in self.layers:
                x = layer(x)
            return self.ln(x) @ self.tokens.weight.t()  # tied output head

    model = Gpt().cuda()
    optim = torch.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.1)
    ids = torch.randint(0, 50257, (batch, seq + 1), device="cuda")

    def step():
        optim.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=mode == "amp"):
            logits = model(ids[:, :-1])
            loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(), ids[:, 1:].reshape(-1))
        loss.backward()
        optim.step()

    return step, batch * seq, "tokens/s"


def time_all(args):
    import torch

    if not torch.cuda.is_available():
        print("torch_peers: PyTorch sees no CUDA device", file=sys.stderr)
        return 2
    deadline = time.monotonic() + args.seconds
    rows = []
    print(f"torch {torch.__version__}, CUDA {torch.version.cuda}, {torch.cuda.get_device_name(0)}")
    for model, make in [("resnet50", resnet50_step), ("gpt2-small", gpt2_small_step)]:
        for mode in ["fp32", "tf32", "amp"]:
            if time.monotonic() > deadline:
                print(f"{model} {mode}: skipped, out of time")
                continue
            set_precision(mode)
            torch.cuda.empty_cache()
            torch.cuda.reset_peak_memory_stats()
            step, samples, unit = make(mode)
            median, times = timed(step, args.warmup, args.steps, deadline)
            row = {
                "model": model,
                "mode": mode,
                "step_s": median,
                "steps_s": times,
                "throughput": samples / median if median == median else None,
                "unit": unit,
                "peak_bytes": torch.cuda.max_memory_allocated(),
            }
            print(f"{model} {mode}: {median * 1e3:.1f} ms/step, {row['throughput']:.1f} {unit}")
            rows.append(row)
            del step
    meta = {
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "gpu": torch.cuda.get_device_name(0),
        "rows": rows,
    }
    with open(args.out, "w") as f:
        json.dump(meta, f, indent=1)
    return 0


def compare(args):
    torch_rows = json.load(open(args.torch))
    ours = []
    for path in args.bench:
        try:
            bench = json.load(open(path))
        except (OSError, ValueError) as e:
            print(f"torch_peers: cannot read {path}: {e}", file=sys.stderr)
            continue
        ours += [r for r in bench["rows"] if r["runtime"] == "cuda" and r["ranks"] == 1]
    lines = [
        "# One GPU: firemesh against PyTorch",
        "",
        f"PyTorch {torch_rows['torch']} (CUDA {torch_rows['cuda']}) on {torch_rows['gpu']}; "
        "firemesh bench on the same GPU in the same session. Ratios are throughput ratios "
        "(higher is faster for the first named).",
        "",
        "| model | setup | per-rank batch | throughput | vs PyTorch FP32 | vs TF32 | vs AMP (bf16) |",
        "|---|---|---|---|---|---|---|",
    ]
    peer = {(r["model"], r["mode"]): r["throughput"] for r in torch_rows["rows"]}
    for model in ["resnet50", "gpt2-small"]:
        for mode in ["fp32", "tf32", "amp"]:
            t = peer.get((model, mode))
            if t:
                unit = "images/s" if model == "resnet50" else "tokens/s"
                lines.append(f"| {model} | PyTorch {mode.upper()} | | {t:.1f} {unit} | | | |")
        for r in ours:
            if r["model"] != model:
                continue
            setup = {"firemesh": "Sharded<Cuda>, 1 rank", "inner": "Burn CUDA alone"}.get(
                r["setup"], r["setup"]
            )
            # Rows of firemesh bench before --precision existed are f32's.
            setup += f" ({r.get('precision', 'f32')})"
            cells = []
            for mode in ["fp32", "tf32", "amp"]:
                t = peer.get((model, mode))
                cells.append(f"{r['throughput'] / t:.2f}x" if t and r["throughput"] else "-")
            lines.append(
                f"| {model} | {setup} | {r['per_rank_batch']} | {r['throughput']:.1f} {r['unit']} | "
                + " | ".join(cells)
                + " |"
            )
    lines += [
        "",
        "Like for like: an f32 row against PyTorch FP32 (TF32 lets PyTorch's f32 products run "
        "on tensor cores, which Burn's f32 does not ask for), a bf16 row (firemesh's autocast: "
        "products in bf16, the rest f32) against AMP, what users compare against.",
    ]
    with open(args.out, "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="command", required=True)
    t = sub.add_parser("time")
    t.add_argument("--out", required=True)
    t.add_argument("--seconds", type=float, default=100)
    t.add_argument("--warmup", type=int, default=2)
    t.add_argument("--steps", type=int, default=5)
    c = sub.add_parser("compare")
    c.add_argument("--torch", required=True)
    c.add_argument("--bench", action="append", default=[])
    c.add_argument("--out", required=True)
    args = p.parse_args()
    return time_all(args) if args.command == "time" else compare(args)


if __name__ == "__main__":
    sys.exit(main())
