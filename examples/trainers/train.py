#!/usr/bin/python3
"""A small PyTorch training job that speaks cellsched's runner contract.

It trains a two-layer MLP on synthetic regression data, resumes from
CELLSCHED_CKPT_IN when it is set, writes state_dict checkpoints to
CELLSCHED_CKPT_OUT (torch.save of dict(state_dict()), atomically) and, after each one, appends
`iterations=N` to CELLSCHED_PROGRESS (N = iterations since it started).
It stops cleanly on SIGTERM (and SIGHUP/SIGINT): a last checkpoint, then exit 0.

Run it with Debian's python3 (python3-torch): `/usr/bin/python3 train.py`.
Options: --lr, --batch, --hidden, --save-every SECONDS, --step-sleep SECONDS
(slows each step down, for demos and tests), and the ones `cellsched validate
fork --trainer` passes, as the LibTorch twin (train.cc) takes them:
--data-seed N fixes the training batches (default: from the clock),
--label-noise S is the standard deviation of the noise on the training labels
(default 0.01), and --eval trains nothing: it prints `loss=L`, the mean squared
error of the CELLSCHED_CKPT_IN weights (or the initial ones) on a fixed
held-out set of 4,096 samples whose labels carry noise 0.01. Bad values exit 2.
"""
import argparse
import math
import os
import signal
import sys
import time

import torch

stop = False


def on_signal(signum, frame):
    global stop
    stop = True


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--hidden", type=int, default=64)
    p.add_argument("--inputs", type=int, default=32)
    p.add_argument("--save-every", type=float, default=1.0)
    p.add_argument("--step-sleep", type=float, default=0.0)
    p.add_argument("--data-seed", type=int, default=-1)
    p.add_argument("--label-noise", type=float, default=0.01)
    p.add_argument("--eval", action="store_true")
    a = p.parse_args()  # a malformed value exits 2 (argparse)
    if not 1 <= a.batch <= 1000000:
        p.error(f"--batch: {a.batch} is not a batch size in 1..1000000")
    if not (math.isfinite(a.label_noise) and 0 <= a.label_noise <= 1000):
        p.error(f"--label-noise: {a.label_noise} is not a standard deviation in [0, 1000]")
    # The same ranges as the LibTorch twin (train.cc); nan and inf fail every comparison.
    if not 0 < a.lr <= 1000:
        p.error(f"--lr: {a.lr} is not a learning rate in (0, 1000]")
    if not 0 <= a.step_sleep <= 3600:
        p.error(f"--step-sleep: {a.step_sleep} is not a number of seconds in [0, 3600]")
    if not 0 <= a.save_every <= 1e9:
        p.error(f"--save-every: {a.save_every} is not a number of seconds in [0, 1e9]")
    if a.data_seed < -1:
        p.error(f"--data-seed: {a.data_seed} is not a seed (an integer >= 0, or -1 for the clock)")
    if not (1 <= a.hidden <= 100000 and 1 <= a.inputs <= 100000):
        p.error("--hidden and --inputs must be in 1..100000")
    for s in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
        signal.signal(s, on_signal)

    env = os.environ
    job = int(env.get("CELLSCHED_JOB_ID", "0"))
    copy = int(env.get("CELLSCHED_COPY", "0"))
    rank = int(env.get("RANK", "0"))
    target = int(env.get("CELLSCHED_ITERATIONS", "100"))
    ckpt_in = env.get("CELLSCHED_CKPT_IN", "")
    ckpt_out = env.get("CELLSCHED_CKPT_OUT", "checkpoint.pt")
    progress = env.get("CELLSCHED_PROGRESS", "progress.txt")
    round_end = float(env.get("CELLSCHED_ROUND_END", "0"))
    torch.set_num_threads(1)

    torch.manual_seed(1234 + job)  # the task: the same for every copy of a job
    w_true = torch.randn(a.inputs, 1)
    model = torch.nn.Sequential(torch.nn.Linear(a.inputs, a.hidden), torch.nn.ReLU(),
                                torch.nn.Linear(a.hidden, 1))
    if ckpt_in and os.path.exists(ckpt_in):
        model.load_state_dict(torch.load(ckpt_in))
    if a.eval:
        held = torch.Generator().manual_seed(424242 + job)  # the same set for every gang
        with torch.no_grad():
            x = torch.randn(4096, a.inputs, generator=held)
            y = x @ w_true + 0.01 * torch.randn(4096, 1, generator=held)
            print(f"loss={torch.nn.functional.mse_loss(model(x), y).item()!r}", flush=True)
        return 0
    opt = torch.optim.SGD(model.parameters(), lr=a.lr)
    # Each copy (and each launch) sees its own stream of data, unless --data-seed fixes it.
    seed = a.data_seed if a.data_seed >= 0 else job * 1000003 + copy * 7919 + int(time.time() * 1000) % 100003
    gen = torch.Generator().manual_seed(seed)

    n = 0
    saved = 0

    def save():
        nonlocal saved
        if rank != 0 or n == saved:
            return
        # The contract's commit order: the checkpoint in full under
        # CKPT_OUT.N.tmp, then the progress line (the commit), then the
        # rename. Killed between the last two, the runner finishes the rename.
        tmp = f"{ckpt_out}.{n}.tmp"
        # A plain dict: LibTorch 1.13 (which averages forked copies) cannot
        # read the OrderedDict that state_dict() returns; torch.load and
        # load_state_dict take either.
        torch.save(dict(model.state_dict()), tmp)
        with open(progress, "a") as f:
            f.write(f"iterations={n}\n")
        os.replace(tmp, ckpt_out)
        saved = n

    loss = torch.tensor(float("nan"))
    last = time.time()
    saved_for_round = False
    while not stop and n < target:
        x = torch.randn(a.batch, a.inputs, generator=gen)
        y = x @ w_true + a.label_noise * torch.randn(a.batch, 1, generator=gen)
        loss = torch.nn.functional.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        n += 1
        if a.step_sleep > 0:
            time.sleep(a.step_sleep)
        now = time.time()
        near_end = round_end > 0 and now >= round_end - 1 and not saved_for_round
        if now - last >= a.save_every or near_end:
            save()
            last = now
            saved_for_round = saved_for_round or near_end
    save()
    print(f"job {job} copy {copy}: {n} iterations, loss {loss.item():.4f}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
