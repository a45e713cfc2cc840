#!/usr/bin/env python3
"""Where a training iteration's GPU time goes, by operator class, for a few
zoo models (the same PyTorch models and steps as tools/gpu-measure.py).

    python3 tools/gpu-breakdown.py [--json FILE]

torch.profiler records every CUDA kernel of 5 iterations (after 5 warm-up
ones); kernels are put in classes by name (GEMM, fused attention, convolution,
optimizer, normalization, loss, copies/casts, other elementwise) and summed.
The wall time per iteration next to the summed kernel time says how much of
the iteration the GPU sat idle (host launch overhead). This is what
docs/estimator.md's H100 calibration would read. Written on 2026-12-05 for
a second device run that was refused (no machine lent): it has not yet run on
a GPU.
"""
import argparse
import importlib.util
import json
import os
import re
import time

import torch
import torch.nn.functional as F

spec = importlib.util.spec_from_file_location("gm", os.path.join(os.path.dirname(__file__), "gpu-measure.py"))
gm = importlib.util.module_from_spec(spec)
spec.loader.exec_module(gm)

CLASSES = [  # first match wins
    ("attention", r"flash|fmha|attention|sdpa"),
    ("optimizer", r"multi_tensor|adam|sgd|foreach"),
    ("conv", r"conv|implicit_gemm|dgrad|wgrad|cudnn|xmma_fprop|fprop|bn_fw|bn_bw|batch_norm|batchnorm"),
    ("gemm", r"gemm|cutlass|nvjet|xmma|sm90_|sm80_|ampere_|cublas|splitk|dot_"),
    ("normalization", r"layer_norm|layernorm|norm"),
    ("loss", r"softmax|cross_entropy|nll|log_softmax"),
    ("copy_cast", r"copy|cast|convert|fill|memcpy|memset"),
]

CONFIGS = [
    ("gpt-125m", 8, "bf16", "adam"), ("gpt-1.3b", 4, "bf16", "adam"),
    ("gpt-125m", 8, "fp32", "adam"), ("gpt-125m", 8, "tf32", "adam"),
    ("resnet-50", 128, "bf16", "sgd-momentum"), ("resnet-18", 128, "bf16", "sgd-momentum"),
]


def classify(name):
    low = name.lower()
    for cls, pat in CLASSES:
        if re.search(pat, low):
            return cls
    return "elementwise"


def breakdown(model, batch, prec, optim, dev, steps=5):
    torch.backends.cuda.matmul.allow_tf32 = prec == "tf32"
    torch.backends.cudnn.allow_tf32 = prec == "tf32"
    torch.backends.cudnn.benchmark = True
    with torch.device(dev):
        m, x, y, cnn = gm.build(model, batch, dev)
    if cnn:
        m = m.to(memory_format=torch.channels_last)
        x = x.contiguous(memory_format=torch.channels_last)
    opt = (torch.optim.Adam(m.parameters(), lr=1e-4) if optim == "adam" else
           torch.optim.SGD(m.parameters(), lr=0.01, momentum=0.9 if optim == "sgd-momentum" else 0))
    half = prec == "bf16"

    def step():
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=half):
            out = m(x)
            loss = F.cross_entropy(out.reshape(-1, out.shape[-1]).float(), y.reshape(-1))
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    for _ in range(5):
        step()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(steps):
        step()
    torch.cuda.synchronize()
    wall_ms = (time.perf_counter() - t0) / steps * 1e3
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        for _ in range(steps):
            step()
        torch.cuda.synchronize()
    by_class, kernels, top = {}, 0, {}
    for e in prof.events():
        if e.device_type != torch.autograd.DeviceType.CUDA:
            continue
        us = e.time_range.elapsed_us()  # a kernel event's own span on the device
        if us <= 0:
            continue
        cls = classify(e.name)
        by_class[cls] = by_class.get(cls, 0) + us / 1e3 / steps
        kernels += 1
        top[e.name] = top.get(e.name, 0) + us / 1e3 / steps
    busy = sum(by_class.values())
    del m, opt, x, y
    torch.cuda.empty_cache()
    return {"model": model, "batch": batch, "precision": prec, "wall_ms": wall_ms, "kernel_ms": busy,
            "kernels_per_iter": kernels / steps, "by_class_ms": dict(sorted(by_class.items(), key=lambda kv: -kv[1])),
            "top_kernels_ms": dict(sorted(top.items(), key=lambda kv: -kv[1])[:12])}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--json", default="", help="write the breakdowns here")
    a = ap.parse_args()
    dev = torch.device("cuda:0")
    out = []
    for cfg in CONFIGS:
        try:
            r = breakdown(*cfg, dev)
        except Exception as e:  # keep going
            print(f"{cfg}: FAILED: {type(e).__name__}: {e}", flush=True)
            continue
        out.append(r)
        cls = ", ".join(f"{k} {v:.2f}" for k, v in r["by_class_ms"].items())
        print(f"{r['model']} b{r['batch']} {r['precision']}: wall {r['wall_ms']:.2f} ms, kernels {r['kernel_ms']:.2f} ms "
              f"({r['kernels_per_iter']:.0f} per iteration): {cls}", flush=True)
        for name, ms in list(r["top_kernels_ms"].items())[:6]:
            print(f"     {ms:8.3f} ms  {name[:110]}", flush=True)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
