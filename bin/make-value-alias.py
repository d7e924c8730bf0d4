#!/usr/bin/env python3
"""Writes spark-trainer/src/main/resources/dev/sparktrainer/train/step/value_alias.pt.

The trainer's step keeps each gradient bucket's parameters as one flat tensor that the optimizer
updates in place. For the models it builds itself, each DJL parameter's array is re-pointed at its
slice on the Java side. A TorchScript module computes with its own tensors, which DJL's API cannot
re-point: this TorchScript function, called once per bucket, copies each tensor's current values into
its slice of `flat` and points the tensor itself at that slice (`Tensor.set_`, under no_grad: the
tensors are autograd leaves). The module's parameters (and buffers) then read and write the flat
tensor; their `requires_grad` and identity are unchanged, so autograd and the gradient aliasing
(grad_alias.pt) work on them as before.
Any PyTorch >= 1.9 writes a file that libtorch 2.x loads (written by 1.13, loaded by DJL's 2.7.1).
"""
import os
from typing import List

import torch


class ValueAlias(torch.nn.Module):
    def forward(self, tensors: List[torch.Tensor], flat: torch.Tensor) -> torch.Tensor:
        off = 0
        with torch.no_grad():
            for t in tensors:
                n = t.numel()
                part = flat.narrow(0, off, n)
                part.copy_(t.reshape(-1))
                t.set_(part.view(t.size()))
                off += n
        return flat


here = os.path.dirname(os.path.abspath(__file__))
out = os.path.join(here, "..", "spark-trainer", "src", "main", "resources", "dev", "sparktrainer",
                   "train", "step", "value_alias.pt")
torch.jit.script(ValueAlias()).save(out)
print("wrote", os.path.normpath(out), "with torch", torch.__version__)
