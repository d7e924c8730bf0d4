#!/usr/bin/env python3
"""The PyTorch anchor of bin/bench-scaling and bin/bench-train: data-parallel training of the same
model on the same Fashion-MNIST examples in plain PyTorch eager, FP32, Adam (lr 1e-3), either in one
process or as one process per rank with DistributedDataParallel over gloo (TCP), the way a user
would run it instead of the trainer. Models come from bin/torch-step.py (built to match the Java
ones layer for layer).

Data: the first batch x steps x world examples of the IDX training set (as the Java benchmarks'
subsets), pixels scaled to 0..1; rank r trains on the r-th contiguous slice of batch x steps
examples (the trainer's FILE sharding gives each worker one shard file the same way), reshuffled each
epoch with a seed per epoch and rank, held in memory as tensors (PyTorch's best case: no input
pipeline at all). Epoch 1 warms up; samples/s is measured over epochs 2..N between barriers, all
ranks' samples together.

One process, or rank 0 of a DDP group, prints one JSON line starting with {"anchor":. DDP uses its
default gradient buckets (25 MiB, as the trainer's) and overlaps the all-reduce with backward, as it
always does.

  bin/torch-train.py --data DIR --model mlp|cnn [--batch 64] [--steps 40] [--epochs 2] [--threads 1]
                     [--world 1] [--rank 0] [--master-port PORT] [--master-addr 127.0.0.1]
A DDP run is --world N processes started by the caller, one per --rank, with the same --master-port.
"""
import argparse
import gzip
import importlib.util
import json
import os
import struct
import sys
import time

import torch
import torch.nn as nn


def load_models():
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "torch-step.py")
    spec = importlib.util.spec_from_file_location("torch_step", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def idx(path, count):
    """The first count items of an IDX file (gzip'ed or not) as a uint8 tensor of its shape."""
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        magic = struct.unpack(">I", f.read(4))[0]
        if magic >> 8 != 0x08:
            raise SystemExit("%s: not an unsigned-byte IDX file (magic 0x%08x)" % (path, magic))
        dims = struct.unpack(">" + "I" * (magic & 0xFF), f.read(4 * (magic & 0xFF)))
        if dims[0] < count:
            raise SystemExit("%s has %d items, %d needed" % (path, dims[0], count))
        per = 1
        for d in dims[1:]:
            per *= d
        raw = f.read(count * per)
        if len(raw) != count * per:
            raise SystemExit("%s ends after %d of %d bytes" % (path, len(raw), count * per))
    return torch.frombuffer(bytearray(raw), dtype=torch.uint8).reshape((count,) + tuple(dims[1:]))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", required=True)
    ap.add_argument("--model", choices=["mlp", "cnn"], required=True)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--world", type=int, default=1)
    ap.add_argument("--rank", type=int, default=0)
    ap.add_argument("--master-addr", default="127.0.0.1")
    ap.add_argument("--master-port", type=int, default=0)
    a = ap.parse_args()
    if a.epochs < 2:
        raise SystemExit("Invalid --epochs %d: expected >= 2 (epoch 1 warms up)" % a.epochs)
    if not 0 <= a.rank < a.world:
        raise SystemExit("Invalid --rank %d: expected 0..%d" % (a.rank, a.world - 1))
    torch.set_num_threads(a.threads)
    ddp = a.world > 1
    if ddp:
        if a.master_port <= 0:
            raise SystemExit("--world %d needs --master-port" % a.world)
        import torch.distributed as dist
        dist.init_process_group("gloo", init_method="tcp://%s:%d" % (a.master_addr, a.master_port),
                                rank=a.rank, world_size=a.world)

    per_rank = a.batch * a.steps
    n = per_rank * a.world
    images = idx(os.path.join(a.data, "train-images-idx3-ubyte.gz"), n)
    labels = idx(os.path.join(a.data, "train-labels-idx1-ubyte.gz"), n).long()
    lo = a.rank * per_rank
    x = images[lo:lo + per_rank].float().div_(255.0)
    y = labels[lo:lo + per_rank].clone()

    models = load_models()
    torch.manual_seed(0)
    model, shape, _ = models.build(a.model, 28)
    x = x.reshape((per_rank,) + shape).contiguous()
    model.train()
    if ddp:
        model = nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    loss_fn = nn.CrossEntropyLoss()

    def epoch(e):
        g = torch.Generator().manual_seed(1000 * e + a.rank)
        order = torch.randperm(per_rank, generator=g)
        for s in range(a.steps):
            i = order[s * a.batch:(s + 1) * a.batch]
            opt.zero_grad(set_to_none=True)
            loss = loss_fn(model(x[i]), y[i])
            loss.backward()
            opt.step()
        return loss.item()

    def barrier():
        if ddp:
            torch.distributed.barrier()

    epoch(1)
    barrier()
    t0 = time.perf_counter()
    for e in range(2, a.epochs + 1):
        last = epoch(e)
    barrier()
    seconds = time.perf_counter() - t0
    measured = a.epochs - 1
    if a.rank == 0:
        samples = measured * a.steps * a.batch * a.world
        print(json.dumps({
            "anchor": "torch-train", "model": a.model, "world": a.world, "threads": a.threads,
            "batch": a.batch, "steps": a.steps, "measured_epochs": measured,
            "samples_per_s": samples / seconds, "step_ms": 1000 * seconds / (measured * a.steps),
            "loss": last, "torch": torch.__version__,
            "backend": "gloo" if ddp else "none"}, separators=(",", ":")), flush=True)
    if ddp:
        torch.distributed.destroy_process_group()


if __name__ == "__main__":
    sys.exit(main())
