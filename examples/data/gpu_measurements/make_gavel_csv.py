#!/usr/bin/env python3
"""Writes gavel.csv from Gavel's measured throughput table (examples/data/gavel/
simulation_throughputs.json, stanford-futuredata/gavel @ c4fa400, MIT), and
gavel-physical.csv from the table Gavel measured on its physical cluster
(physical_cluster_throughputs.json, same commit): the isolated ("null") steps/s
of each single-GPU job the zoo covers, as seconds per iteration. A zero (a job
that did not run, e.g. ResNet-50 batch 128 on the K80 of the physical table) is
left out. One batch size per model is the calibration split, the rest validation.
With an argument (gavel.csv or gavel-physical.csv) it prints that file instead.
The optimizers are those of Gavel's workloads (stanford-futuredata/gavel
workloads/pytorch: image models SGD with momentum, Transformer and
Recommendation and CycleGAN Adam, LM plain SGD). CycleGAN has one batch size (1), so
all its rows are validation. A3C (CPU-bound Atari environments) is not in the zoo."""
import json, os, re, sys

here = os.path.dirname(os.path.abspath(__file__))
zoo = {"ResNet-18": "resnet-18", "ResNet-50": "resnet-50", "Transformer": "transformer", "LM": "lm",
       "Recommendation": "recommendation", "CycleGAN": "cyclegan"}
optimizer = {"resnet-18": "sgd-momentum", "resnet-50": "sgd-momentum", "transformer": "adam", "lm": "sgd",
             "recommendation": "adam", "cyclegan": "adam"}
calibration = {("ResNet-18", 64), ("ResNet-50", 64), ("Transformer", 64), ("LM", 20), ("Recommendation", 2048)}


def write(source, name, title):
    if len(sys.argv) > 1 and sys.argv[1] != name:
        return
    table = json.load(open(os.path.join(here, "..", "gavel", source)))
    rows = []
    for gpu in ("k80", "p100", "v100"):
        for key, value in table[gpu].items():
            # "('ResNet-18 (batch size 16)', 1)"; CycleGAN's key has no batch size (it is 1).
            m = re.match(r"\('(.+?)(?: \(batch size (\d+)\))?', 1\)$", key)
            if not m or m.group(1) not in zoo:
                continue
            job, batch = m.group(1), int(m.group(2) or 1)
            steps = value["null"]
            if steps <= 0:
                continue
            split = "calibration" if (job, batch) in calibration else "validation"
            rows.append((zoo[job], batch, gpu, 1.0 / steps, split))
    out = open(os.path.join(here, name), "w") if len(sys.argv) < 2 else sys.stdout
    out.write(f"# {title}; make_gavel_csv.py wrote it.\n")
    out.write("model,batch,precision,gpu_type,hosts,gpus_per_host,iter_time_s,split,optimizer,source\n")
    for model, batch, gpu, t, split in sorted(rows):
        out.write(f"{model},{batch},fp32,{gpu},1,1,{t:.6f},{split},{optimizer[model]},gavel {source}\n")


if len(sys.argv) > 1 and sys.argv[1] not in ("gavel.csv", "gavel-physical.csv"):
    sys.exit("usage: make_gavel_csv.py [gavel.csv | gavel-physical.csv]")
write("simulation_throughputs.json", "gavel.csv", "Gavel's measured table (K80 / P100 / V100, FP32, one GPU)")
write("physical_cluster_throughputs.json", "gavel-physical.csv",
      "Gavel's table measured on its physical cluster (K80 / P100 / V100, FP32, one GPU)")
