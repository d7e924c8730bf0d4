#!/usr/bin/env python3
"""Writes spark-trainer/src/main/resources/dev/sparktrainer/train/step/bf16_cast.pt.

DJL 0.35.1's PyTorch JNI maps only data types 0-8 (float32 ... complex64) to libtorch's: asking it
for a bfloat16 tensor (DJL's DataType.BFLOAT16, code 11) ends in a bare C++ `throw;` that
terminates the JVM. The trainer's --precision bf16 therefore makes its bfloat16 tensors with this
TorchScript function, one call each (`x.to(torch.bfloat16)`, on x's device); copies into them and
the model's operations work through DJL's own API. The same function casts a bfloat16 tensor back to
float32 (the model's output, before the loss): DJL's own cast (`toType`, JniUtils.to) runs under a
NoGradGuard and would cut the autograd graph there, this one is differentiable.
Any PyTorch >= 1.8 writes a file that libtorch 2.x loads (checked: written by 1.13, loaded by 2.7.1).
"""
import os
import torch


class Bf16Cast(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.dtype == torch.bfloat16:
            return x.float()
        return x.to(torch.bfloat16)


here = os.path.dirname(os.path.abspath(__file__))
out = os.path.join(here, "..", "spark-trainer", "src", "main", "resources", "dev", "sparktrainer",
                   "train", "step", "bf16_cast.pt")
torch.jit.script(Bf16Cast()).save(out)
print("wrote", os.path.normpath(out), "with torch", torch.__version__)
