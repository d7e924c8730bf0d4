#!/usr/bin/env python3
"""Writes the TorchScript modules of TorchScriptBf16Test (--precision bf16 for a user's module).

Run with Debian's PyTorch (/usr/bin/python3, torch 1.13) from this directory's module root or
anywhere: the files land beside this script. The modules follow the trainer's export contract (as
python/export_torchscript.py writes it): an attribute `sparktrainer_buffer_list` holding the module's
buffers (named_buffers() order), an exported method `sparktrainer_buffers()` returning it, and the
extra file `sparktrainer.json` (inputs, output, buffer and parameter names).

  mlp.pt  20 -> frozen Linear(20, 32) -> ReLU -> Linear(32, 32) -> ReLU -> Linear(32, 5): a frozen
          layer (fine-tuning) needs a bfloat16 copy of its weights.
  cnn.pt  20 -> [1, 4, 5] -> Conv(8, no bias) -> BatchNorm -> ReLU -> Conv(8, no bias) ->
          BatchNorm -> ReLU -> Linear(160, 5): batch norm's scale and shift stay float32. No bias
          directly before a batch norm (its gradient is zero, and Adam amplifies its noise).

Both are saved in training mode, with fixed initial weights (seed 0).
"""
import json
import os
from typing import List

import torch
import torch.nn as nn
from torch import Tensor


class Mlp(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc0 = nn.Linear(20, 32)
        self.fc1 = nn.Linear(32, 32)
        self.head = nn.Linear(32, 5)
        self.fc0.requires_grad_(False)

    def forward(self, x: Tensor) -> Tensor:
        return self.head(torch.relu(self.fc1(torch.relu(self.fc0(x)))))


class Cnn(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 8, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(8)
        self.conv2 = nn.Conv2d(8, 8, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(8)
        self.head = nn.Linear(160, 5)

    def forward(self, x: Tensor) -> Tensor:
        h = x.view(-1, 1, 4, 5)
        h = torch.relu(self.bn1(self.conv1(h)))
        h = torch.relu(self.bn2(self.conv2(h)))
        return self.head(h.flatten(1))


def sparktrainer_buffers(self) -> List[Tensor]:
    return self.sparktrainer_buffer_list


def export(module, path):
    cls = type(module)
    annotations = dict(getattr(cls, "__annotations__", {}))
    annotations["sparktrainer_buffer_list"] = List[Tensor]
    sub = type(cls.__name__ + "_sparktrainer", (cls,), {
        "__module__": cls.__module__,
        "__annotations__": annotations,
        "sparktrainer_buffers": torch.jit.export(sparktrainer_buffers),
    })
    module.__class__ = sub
    module.sparktrainer_buffer_list = [b for _, b in module.named_buffers()]
    module.train()
    scripted = torch.jit.script(module)
    meta = {
        "format": 1,
        "torch": torch.__version__,
        "method": "script",
        "inputs": [{"name": "x", "shape": [20], "dtype": "float32"}],
        "output": {"shape": [5]},
        "buffers": [n for n, _ in module.named_buffers()],
        "parameters": [n for n, _ in module.named_parameters()],
    }
    torch.jit.save(scripted, path, _extra_files={"sparktrainer.json": json.dumps(meta)})
    print("wrote", path, "with torch", torch.__version__)


here = os.path.dirname(os.path.abspath(__file__))
torch.manual_seed(0)
export(Mlp(), os.path.join(here, "mlp.pt"))
export(Cnn(), os.path.join(here, "cnn.pt"))
