#!/usr/bin/env python3
"""The PyTorch peer of `firemesh bench` on one GPU, for scripts/gpu-check.sh.

    torch_peers.py time --out torch.json [--seconds 100]
        Times training steps of torchvision's ResNet-50 (batch 256, 224x224, 1,000 classes, SGD
        with momentum) in FP32, TF32 and AMP (bf16 autocast), and of a GPT-2 small (12 layers,
        12 heads, width 768, a vocabulary of 50,257, 8 sequences of 1,024 tokens, AdamW) in
        FP32, TF32 and AMP, on synthetic data: the sizes `firemesh bench` trains (its models as
        published) with `--batch-per-rank 256` and its GPU defaults. Writes one row per setup,
        with its sizes.
    torch_peers.py compare --torch torch.json --bench BENCH.json [--bench ...] --out peers.md
        Puts the rows of firemesh bench (Sharded<Cuda> with one rank, and plain Burn CUDA) of
        the same sizes beside PyTorch's, with the ratios of their throughputs, all taken on one
        machine in one session. Each row's like-for-like peer: TF32 for f32 (Burn's f32 products
        run in TF32 on tensor cores), AMP for bf16.

Only PyTorch and torchvision are needed; nothing is downloaded.
"""
import argparse
import json
import math
import os
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


RESNET50 = {"batch": 256, "image_size": 224, "classes": 1000}
GPT2_SMALL = {"batch": 8, "seq_len": 1024, "vocab": 50257}


def resnet50_step(mode, batch=RESNET50["batch"], size=RESNET50["image_size"]):
    import torch
    import torchvision

    model = torchvision.models.resnet50().cuda()
    optim = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-4)
    x = torch.randn(batch, 3, size, size, device="cuda")
    y = torch.randint(0, RESNET50["classes"], (batch,), device="cuda")
    loss_fn = torch.nn.CrossEntropyLoss()

    def step():
        optim.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=mode == "amp"):
            loss = loss_fn(model(x), y)
        loss.backward()
        optim.step()

    return step, batch, "images/s"


def gpt2_small_step(mode, batch=GPT2_SMALL["batch"], seq=GPT2_SMALL["seq_len"]):
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
        def __init__(self, vocab=GPT2_SMALL["vocab"], context=1024, width=768, layers=12, heads=12):
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
    ids = torch.randint(0, GPT2_SMALL["vocab"], (batch, seq + 1), device="cuda")

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
    meta = {
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "gpu": torch.cuda.get_device_name(0),
        "rows": rows,
    }
    print(f"torch {torch.__version__}, CUDA {torch.version.cuda}, {torch.cuda.get_device_name(0)}")
    models = [("resnet50", resnet50_step, RESNET50), ("gpt2-small", gpt2_small_step, GPT2_SMALL)]
    longest = 0.0  # the longest setup so far, in seconds: one that would not end is not started
    for model, make, sizes in models:
        for mode in ["fp32", "tf32", "amp"]:
            if time.monotonic() + longest > deadline:
                print(f"{model} {mode}: skipped, out of time")
                continue
            began = time.monotonic()
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
                **sizes,
            }
            if row["throughput"] is None:
                print(f"{model} {mode}: no timed step before the deadline")
            else:
                print(f"{model} {mode}: {median * 1e3:.1f} ms/step, {row['throughput']:.1f} {unit}")
            rows.append(row)
            del step
            longest = max(longest, time.monotonic() - began)
            # Written after each setup: a run stopped part way keeps the setups it finished.
            with open(args.out + ".partial", "w") as f:
                json.dump(meta, f, indent=1)
            os.replace(args.out + ".partial", args.out)
    return 0


def same_sizes(ours, peer):
    """Whether a firemesh bench row trains what a PyTorch row trains: batch, image size and
    classes, or sequence length and vocabulary."""
    if ours["per_rank_batch"] != peer.get("batch"):
        return False
    if ours.get("image_size") is not None:
        return ours["image_size"] == peer.get("image_size") and ours.get("classes") == peer.get("classes")
    return ours.get("seq_len") == peer.get("seq_len") and ours.get("vocab") == peer.get("vocab")


def compare(args):
    torch_rows = json.load(open(args.torch))
    ours = []
    for path in args.bench:
        try:
            bench = json.load(open(path))
        except (OSError, ValueError) as e:
            print(f"torch_peers: cannot read {path}: {e}", file=sys.stderr)
            continue
        kernels = bench.get("kernels", "fixed")
        ours += [
            dict(r, kernels=kernels)
            for r in bench["rows"]
            if r["runtime"] == "cuda" and r["ranks"] == 1
        ]
    lines = [
        "# One GPU: firemesh against PyTorch",
        "",
        f"PyTorch {torch_rows['torch']} (CUDA {torch_rows['cuda']}) on {torch_rows['gpu']}; "
        "firemesh bench on the same GPU in the same session, rows of the same sizes only. "
        "Ratios are throughput ratios (higher is faster for the first named); the like-for-like "
        "peer of an f32 row is TF32 (Burn's f32 products run in TF32 on tensor cores: CubeCL's "
        "matmul takes f32 operands as TF32 where the device has it), of a bf16 row AMP.",
        "",
        "| model | setup | CubeCL kernels | per-rank batch | throughput | like for like | vs it | vs PyTorch FP32 | vs TF32 | vs AMP (bf16) |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    peer_rows = {(r["model"], r["mode"]): r for r in torch_rows["rows"]}
    left_out = []
    for model in ["resnet50", "gpt2-small"]:
        for mode in ["fp32", "tf32", "amp"]:
            t = peer_rows.get((model, mode))
            if t and t["throughput"]:
                lines.append(
                    f"| {model} | PyTorch {mode.upper()} | | {t['batch']} | {t['throughput']:.1f} {t['unit']} | | | | | |"
                )
        for r in ours:
            if r["model"] != model:
                continue
            setup = {"firemesh": "Sharded<Cuda>, 1 rank", "inner": "Burn CUDA alone"}.get(
                r["setup"], r["setup"]
            )
            precision = r.get("precision", "f32")
            setup += f" ({precision})"
            reference = next((t for (m, _), t in peer_rows.items() if m == model), None)
            if reference is None or not same_sizes(r, reference):
                left_out.append(f"{model} {setup}, batch {r['per_rank_batch']}")
                continue
            like = {"f32": "tf32", "bf16": "amp"}.get(precision)
            cells = []
            for mode in [like, "fp32", "tf32", "amp"]:
                t = peer_rows.get((model, mode)) if mode else None
                ok = t and t["throughput"] and r["throughput"]
                cells.append(f"{r['throughput'] / t['throughput']:.2f}x" if ok else "-")
            lines.append(
                f"| {model} | {setup} | {r['kernels']} | {r['per_rank_batch']} | {r['throughput']:.1f} {r['unit']} | "
                + f"{like.upper() if like else '-'} | "
                + " | ".join(cells)
                + " |"
            )
    if left_out:
        lines += ["", "Not compared (other sizes than PyTorch's rows): " + "; ".join(left_out) + "."]
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
