#!/usr/bin/python3
"""Writes tests/data/tiny_sequential.pt, the TorchScript fixture of the
profiler tests: a scripted nn.Sequential of Linear(16,32), ReLU,
Linear(32,32), ReLU, Linear(32,32), ReLU, Linear(32,8) (fixed seed).
Run with a Python that has torch (here: /usr/bin/python3, Debian's
python3-torch 1.13): /usr/bin/python3 tests/data/make_tiny_sequential.py"""
import os
import torch

torch.manual_seed(0)
model = torch.nn.Sequential(
    torch.nn.Linear(16, 32), torch.nn.ReLU(),
    torch.nn.Linear(32, 32), torch.nn.ReLU(),
    torch.nn.Linear(32, 32), torch.nn.ReLU(),
    torch.nn.Linear(32, 8))
out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "tiny_sequential.pt")
torch.jit.script(model).save(out)
print(out)
