#!/usr/bin/env python3
"""Times real training iterations of cellsched's zoo models on a CUDA GPU with
PyTorch, and writes them as rows `cellsched estimate --validate` reads.

    python3 tools/gpu-measure.py --out h100.csv [--gpu-type h100] [--only gpt-125m,...]

Each model is built in PyTorch with the zoo's shapes (core/model.cc): GPT
decoders (pre-LN blocks, 4h GELU MLP, untied output head, PyTorch's
scaled_dot_product_attention, causal), CIFAR ResNet-18 and WRN-28-10 (basic
blocks), ResNet-50 and WRN-50-2 (torchvision's bottleneck layout) and the
WikiText-2 LSTM. One iteration = forward, loss, backward, optimizer step, on
one GPU with the whole batch as one micro-batch, synthetic data already on the
GPU (as NVIDIA's synthetic-data tables), eager mode (no torch.compile),
cudnn.benchmark on, channels-last for the CNNs. Precision: bf16 autocast with
fp32 master weights, fp32 with TF32 off, or tf32. The time is the median over
3 repetitions of the mean of 20 timed iterations after 5 warm-up iterations;
a row that does not fit in memory is reported and skipped.
"""
import argparse
import csv
import json
import math
import statistics
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    def __init__(self, h, heads):
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(h)
        self.qkv = nn.Linear(h, 3 * h)
        self.proj = nn.Linear(h, h)
        self.ln2 = nn.LayerNorm(h)
        self.fc1 = nn.Linear(h, 4 * h)
        self.fc2 = nn.Linear(4 * h, h)

    def forward(self, x):
        b, s, h = x.shape
        q, k, v = self.qkv(self.ln1(x)).view(b, s, 3, self.heads, h // self.heads).permute(2, 0, 3, 1, 4)
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(a.transpose(1, 2).reshape(b, s, h))
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


class Gpt(nn.Module):
    def __init__(self, h, layers, heads, seq, vocab):
        super().__init__()
        self.seq, self.vocab = seq, vocab
        self.tok = nn.Embedding(vocab, h)
        self.pos = nn.Embedding(seq, h)
        self.blocks = nn.ModuleList(Block(h, heads) for _ in range(layers))
        self.ln = nn.LayerNorm(h)
        self.head = nn.Linear(h, vocab, bias=False)

    def forward(self, ids):
        x = self.tok(ids) + self.pos.weight[: ids.shape[1]]
        for blk in self.blocks:
            x = blk(x)
        return self.head(self.ln(x))


class Basic(nn.Module):
    """Pre-activation basic block (WRN); `post` switches to ResNet-18's order."""

    def __init__(self, cin, cout, stride):
        super().__init__()
        self.bn1 = nn.BatchNorm2d(cin)
        self.c1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.c2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.short = None if cin == cout and stride == 1 else nn.Conv2d(cin, cout, 1, stride, bias=False)

    def forward(self, x):
        o = F.relu(self.bn1(x))
        y = self.c1(o)
        y = self.c2(F.relu(self.bn2(y)))
        return y + (x if self.short is None else self.short(o))


class CifarNet(nn.Module):
    def __init__(self, depth, width, classes):
        super().__init__()
        r18 = depth == 18
        groups, n, base = (4, 2, 64) if r18 else (3, (depth - 4) // 6, 16)
        self.stem = nn.Conv2d(3, base, 3, 1, 1, bias=False)
        layers, c = [], base
        for g in range(groups):
            out = base * (2**g) * width
            for b in range(n):
                layers.append(Basic(c, out, 2 if (b == 0 and g > 0) else 1))
                c = out
        self.body = nn.Sequential(*layers)
        self.bn = nn.BatchNorm2d(c)
        self.fc = nn.Linear(c, classes)

    def forward(self, x):
        x = F.relu(self.bn(self.body(self.stem(x))))
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


class Lstm(nn.Module):
    def __init__(self, h, layers, vocab):
        super().__init__()
        self.emb = nn.Embedding(vocab, h)
        self.rnn = nn.LSTM(h, h, layers, batch_first=True)
        self.out = nn.Linear(h, vocab)

    def forward(self, ids):
        y, _ = self.rnn(self.emb(ids))
        return self.out(y)


GPT = {  # name: hidden, layers, heads, seq, vocab (core/model.cc's zoo)
    "gpt-125m": (768, 12, 12, 1024, 50257),
    "gpt-350m": (1024, 24, 16, 1024, 50257),
    "gpt-1.3b": (2048, 24, 16, 1024, 50257),
    "gpt-2.7b": (2560, 32, 32, 1024, 50257),
}

# (model, batch, precision, optimizer): the rows measured by default.
DEFAULT_ROWS = [
    ("gpt-125m", 8, "bf16", "adam"), ("gpt-125m", 16, "bf16", "adam"), ("gpt-125m", 32, "bf16", "adam"),
    ("gpt-125m", 8, "tf32", "adam"), ("gpt-125m", 8, "fp32", "adam"),
    ("gpt-350m", 8, "bf16", "adam"), ("gpt-350m", 16, "bf16", "adam"),
    ("gpt-1.3b", 4, "bf16", "adam"), ("gpt-1.3b", 8, "bf16", "adam"),
    ("gpt-2.7b", 4, "bf16", "adam"),
    ("resnet-50", 64, "bf16", "sgd-momentum"), ("resnet-50", 128, "bf16", "sgd-momentum"),
    ("resnet-50", 256, "bf16", "sgd-momentum"), ("resnet-50", 128, "tf32", "sgd-momentum"),
    ("wrn-50-2", 64, "bf16", "sgd-momentum"), ("wrn-50-2", 128, "bf16", "sgd-momentum"),
    ("resnet-18", 128, "bf16", "sgd-momentum"), ("resnet-18", 256, "bf16", "sgd-momentum"),
    ("wrn-28-10", 64, "bf16", "sgd-momentum"), ("wrn-28-10", 128, "bf16", "sgd-momentum"),
    ("lm", 20, "fp32", "sgd"), ("lm", 80, "fp32", "sgd"),
]
# A second set for a later run: other sizes and batches of the same families
# (not measured yet: the call that was to run it on 2026-12-05 was refused).
EXTRA_ROWS = [
    ("gpt-125m", 4, "bf16", "adam"), ("gpt-125m", 64, "bf16", "adam"),
    ("gpt-350m", 4, "bf16", "adam"), ("gpt-760m", 8, "bf16", "adam"), ("gpt-760m", 16, "bf16", "adam"),
    ("gpt-1.3b", 16, "bf16", "adam"), ("gpt-350m", 8, "tf32", "adam"), ("gpt-350m", 8, "fp32", "adam"),
    ("resnet-50", 32, "bf16", "sgd-momentum"), ("resnet-50", 64, "fp32", "sgd-momentum"),
    ("wrn-50-2", 128, "tf32", "sgd-momentum"), ("wrn-28-10", 256, "bf16", "sgd-momentum"),
    ("resnet-18", 512, "bf16", "sgd-momentum"), ("lm", 160, "fp32", "sgd"),
]
SETS = {"default": DEFAULT_ROWS, "extra": EXTRA_ROWS, "all": DEFAULT_ROWS + EXTRA_ROWS}


def build(name, batch, dev):
    """The model, one synthetic batch and its targets, and whether it is a CNN."""
    if name in GPT:
        h, layers, heads, seq, vocab = GPT[name]
        m = Gpt(h, layers, heads, seq, vocab)
        x = torch.randint(0, vocab, (batch, seq), device=dev)
        y = torch.randint(0, vocab, (batch, seq), device=dev)
        return m, x, y, False
    if name in ("resnet-50", "wrn-50-2"):
        import torchvision

        m = torchvision.models.resnet50() if name == "resnet-50" else torchvision.models.wide_resnet50_2()
        x = torch.randn(batch, 3, 224, 224, device=dev)
        y = torch.randint(0, 1000, (batch,), device=dev)
        return m, x, y, True
    if name in ("resnet-18", "wrn-28-10"):
        m = CifarNet(18, 1, 10) if name == "resnet-18" else CifarNet(28, 10, 10)
        x = torch.randn(batch, 3, 32, 32, device=dev)
        y = torch.randint(0, 10, (batch,), device=dev)
        return m, x, y, True
    if name == "lm":
        m = Lstm(200, 2, 33278)
        x = torch.randint(0, 33278, (batch, 35), device=dev)
        y = torch.randint(0, 33278, (batch, 35), device=dev)
        return m, x, y, False
    raise SystemExit(f"gpu-measure: unknown model {name}")


def measure(name, batch, precision, optimizer, dev, warmup=5, iters=20, reps=3):
    torch.backends.cuda.matmul.allow_tf32 = precision == "tf32"
    torch.backends.cudnn.allow_tf32 = precision == "tf32"
    torch.backends.cudnn.benchmark = True
    with torch.device(dev):  # parameters made on the GPU: a 2.7B model builds in seconds
        m, x, y, cnn = build(name, batch, dev)
    if cnn:
        m = m.to(memory_format=torch.channels_last)
        x = x.contiguous(memory_format=torch.channels_last)
    if optimizer == "adam":
        opt = torch.optim.Adam(m.parameters(), lr=1e-4)
    elif optimizer == "sgd-momentum":
        opt = torch.optim.SGD(m.parameters(), lr=0.01, momentum=0.9)
    else:
        opt = torch.optim.SGD(m.parameters(), lr=0.01)
    half = precision in ("bf16", "fp16")
    dtype = torch.bfloat16 if precision == "bf16" else torch.float16

    def step():
        with torch.autocast("cuda", dtype=dtype, enabled=half):
            out = m(x)
            loss = F.cross_entropy(out.reshape(-1, out.shape[-1]).float(), y.reshape(-1))
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    for _ in range(warmup):
        step()
    torch.cuda.synchronize()
    means = []
    for _ in range(reps):
        t0 = time.perf_counter()
        for _ in range(iters):
            step()
        torch.cuda.synchronize()
        means.append((time.perf_counter() - t0) / iters)
    peak = torch.cuda.max_memory_allocated() / 2**30
    del m, opt, x, y
    return statistics.median(means), min(means), max(means), peak


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True, help="CSV to write (estimate --validate's columns)")
    ap.add_argument("--gpu-type", default="h100", help="catalogue type written in the rows")
    ap.add_argument("--only", default="", help="comma-separated model names to keep")
    ap.add_argument("--json", default="", help="also write the details (spread, memory, versions) here")
    ap.add_argument("--set", default="default", choices=sorted(SETS), help="which rows to measure")
    a = ap.parse_args()
    if not torch.cuda.is_available():
        print("gpu-measure: no CUDA device", file=sys.stderr)
        return 2
    dev = torch.device("cuda:0")
    name = torch.cuda.get_device_name(0)
    env = {"device": name, "torch": torch.__version__, "cuda": torch.version.cuda,
           "cudnn": torch.backends.cudnn.version()}
    print("gpu-measure:", json.dumps(env), flush=True)
    only = set(filter(None, a.only.split(",")))
    rows = [r for r in SETS[a.set] if not only or r[0] in only]
    source = (f"cellsched tools/gpu-measure.py on one {name}; torch {torch.__version__}; "
              f"{time.strftime('%Y-%m-%d', time.gmtime())}")
    details = []
    with open(a.out, "w", newline="") as f:
        f.write(f"# Measured by tools/gpu-measure.py on one {name} (torch {env['torch']}, CUDA {env['cuda']}, "
                f"cuDNN {env['cudnn']}); synthetic data on the GPU, eager mode.\n")
        w = csv.writer(f, lineterminator="\n")
        w.writerow(["model", "batch", "precision", "gpu_type", "hosts", "gpus_per_host", "iter_time_s",
                    "split", "optimizer", "peak_memory_gib", "source"])
        for model, batch, prec, optim in rows:
            t0 = time.time()
            try:
                med, lo, hi, peak = measure(model, batch, prec, optim, dev)
            except torch.cuda.OutOfMemoryError:
                print(f"  {model:10s} batch {batch:4d} {prec}: out of memory, skipped", flush=True)
                details.append({"model": model, "batch": batch, "precision": prec, "oom": True})
                torch.cuda.empty_cache()
                continue
            except Exception as e:  # keep measuring the other rows
                print(f"  {model:10s} batch {batch:4d} {prec}: FAILED: {type(e).__name__}: {e}", flush=True)
                details.append({"model": model, "batch": batch, "precision": prec, "error": str(e)})
                torch.cuda.empty_cache()
                continue
            torch.cuda.empty_cache()
            torch.cuda.reset_peak_memory_stats()
            w.writerow([model, batch, prec, a.gpu_type, 1, 1, f"{med:.6f}", "validation", optim, f"{peak:.3f}",
                        source])
            f.flush()
            spread = (hi - lo) / med * 100
            print(f"  {model:10s} batch {batch:4d} {prec:4s}: {med * 1e3:9.2f} ms/iter "
                  f"(spread {spread:.1f} %, peak {peak:.1f} GiB, {time.time() - t0:.0f} s)", flush=True)
            details.append({"model": model, "batch": batch, "precision": prec, "optimizer": optim,
                            "iter_ms_median": med * 1e3, "iter_ms_min": lo * 1e3, "iter_ms_max": hi * 1e3,
                            "peak_gib": peak})
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"env": env, "rows": details}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
