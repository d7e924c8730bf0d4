#!/usr/bin/env python3
"""Writes spark-trainer/src/main/resources/dev/sparktrainer/train/step/set_data.pt.

--precision bf16 runs forward and backward on a bfloat16 copy of the parameters. The models the
trainer builds are handed that copy through DJL's ParameterStore; a TorchScript module computes with
its own tensors and ignores the store. This TorchScript function re-points a list of the module's
tensors at a list of targets in one call: `torch.ops.aten.set_data(t, target)` (Python's
`t.data = target`), for each pair. Unlike `Tensor.set_`, which keeps the tensor's data type,
set_data takes the target's: the module's parameters become bfloat16 views of the step's bfloat16
buckets for training forwards (they stay the same autograd leaves, still requiring grad, and their
.grad is then bfloat16), and float32 views of the master buckets again whenever the module is read
as float32 (validation, checkpoints, the trained model). Nothing is copied: both lists are views
the trainer made once.
Any PyTorch >= 1.9 writes a file that libtorch 2.x loads (written by 1.13, loaded by DJL's 2.7.1).
"""
import os
from typing import List

import torch


class SetData(torch.nn.Module):
    def forward(self, tensors: List[torch.Tensor], targets: List[torch.Tensor]) -> int:
        for i in range(len(tensors)):
            torch.ops.aten.set_data(tensors[i], targets[i])
        return len(tensors)


here = os.path.dirname(os.path.abspath(__file__))
out = os.path.join(here, "..", "spark-trainer", "src", "main", "resources", "dev", "sparktrainer",
                   "train", "step", "set_data.pt")
torch.jit.script(SetData()).save(out)
print("wrote", os.path.normpath(out), "with torch", torch.__version__)
