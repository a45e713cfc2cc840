#!/usr/bin/env python3
"""Compares `cellsched estimate`'s memory with the peak memory measured by
tools/gpu-measure.py (its --json file: torch.cuda.max_memory_allocated of
each row, one micro-batch of the whole batch on one GPU).

    tools/memory-check.py examples/data/gpu_measurements/h100.json [--cellsched build/cellsched]
"""
import argparse
import json
import statistics
import subprocess
import sys


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("details", help="gpu-measure.py's --json output")
    ap.add_argument("--cellsched", default="build/cellsched")
    ap.add_argument("--gpu-type", default="h100")
    a = ap.parse_args()
    rows = [r for r in json.load(open(a.details))["rows"] if "peak_gib" in r]
    if not rows:
        print(f"memory-check: {a.details}: no row with a measured peak", file=sys.stderr)
        return 2
    ratios = []
    print(f"{'model':10s} {'batch':>5s} {'prec':5s} {'peak GiB':>9s} {'est GiB':>8s} {'ratio':>6s}")
    for r in rows:
        cmd = [a.cellsched, "estimate", "--model", r["model"], "--gpu-type", a.gpu_type, "--batch", str(r["batch"]),
               "--precision", r["precision"], "--optimizer", r["optimizer"], "--plan", "dp=1,tp=1,mb=1", "--json"]
        out = subprocess.run(cmd, capture_output=True, text=True)
        if out.returncode != 0:
            print(f"memory-check: {' '.join(cmd)}: {out.stderr.strip()}", file=sys.stderr)
            return 2
        est = json.loads(out.stdout)["memory_gib"]
        ratios.append(est / r["peak_gib"])
        print(f"{r['model']:10s} {r['batch']:5d} {r['precision']:5s} {r['peak_gib']:9.1f} {est:8.1f} {ratios[-1]:6.2f}")
    errors = [abs(x - 1) for x in ratios]
    print(f"{len(rows)} rows: median |error| {statistics.median(errors) * 100:.1f}%, worst {max(errors) * 100:.1f}%")
    return 0


if __name__ == "__main__":
    sys.exit(main())
