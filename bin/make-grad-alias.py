#!/usr/bin/env python3
"""Writes spark-trainer/src/main/resources/dev/sparktrainer/train/step/grad_alias.pt.

The trainer's step keeps each gradient bucket as one flat tensor. DJL 0.35.1's API cannot point a
parameter's `.grad` at a slice of another tensor, so the step would gather the bucket with a `cat`
every step and zero each `.grad` with its own engine call (193 calls a step for ResNet-50). This
TorchScript function, called once per bucket, copies each gradient's current values into its slice
of `flat` and points the gradient at that slice (`Tensor.set_`): from then on autograd adds into the
flat tensor in place (first-order backward accumulates into an existing `.grad`), the bucket needs
no gathering, and one fill zeroes all of its gradients.
Any PyTorch >= 1.8 writes a file that libtorch 2.x loads (checked: written by 1.13, loaded by 2.7.1
on CPU and by 2.11 on CUDA).
"""
import os
from typing import List

import torch


class GradAlias(torch.nn.Module):
    def forward(self, grads: List[torch.Tensor], flat: torch.Tensor) -> torch.Tensor:
        off = 0
        for g in grads:
            n = g.numel()
            part = flat.narrow(0, off, n)
            part.copy_(g.reshape(-1))
            g.set_(part.view(g.size()))
            off += n
        return flat


here = os.path.dirname(os.path.abspath(__file__))
out = os.path.join(here, "..", "spark-trainer", "src", "main", "resources", "dev", "sparktrainer",
                   "train", "step", "grad_alias.pt")
torch.jit.script(GradAlias()).save(out)
print("wrote", os.path.normpath(out), "with torch", torch.__version__)
