#!/usr/bin/env python3
"""The PyTorch anchor of bin/bench-step: the same training step as StepBenchmark's in plain PyTorch
eager, FP32, on the same model shapes, batch, thread count and device, with random data generated
once (fixed seed). One JSON line per Adam variant:
  - "per-tensor": torch.optim.Adam(foreach=False), a loop over the parameter tensors (what the
    trainer's step is compared with);
  - "multi": the multi-tensor Adam -- fused=True where this torch and device have it (CUDA), else
    foreach=True; the line says which in "adam".

Models, built to match the Java ones (dev.sparktrainer.model) layer for layer where that is reasonable:
  - mlp:      MlpSpec.of(784, 10, 256, 128): Linear 784-256, ReLU, Linear 256-128, ReLU, Linear 128-10;
  - cnn:      CnnSpec.of(1, 28, 28, 10): [Conv 3x3 pad 1, ReLU, MaxPool 2x2] x (32, 64 filters),
              flatten, Linear 3136-128, ReLU, Dropout 0.25, Linear 128-10;
  - resnet50: torchvision.models.resnet50(weights=None, num_classes=1000) (DJL's ResNetV1 with 50
              layers is the same architecture up to where the stride sits in a bottleneck: v1 vs v1.5);
  - embed:    EmbedSpec embed:64 (vocabulary 30000, 4 classes): nn.EmbeddingBag(mode="sum") over the
              padded ids with per_sample_weights mask / count (the masked mean), Linear 64-4;
  - transformer: TransformerSpec layers=2,dim=128,heads=4,ff=512 (vocabulary 30000, 300 positions,
              4 classes): token + learned position embeddings, nn.TransformerEncoder(
              nn.TransformerEncoderLayer(128, 4, 512, dropout=0, batch_first=True, norm_first=True), 2,
              norm=nn.LayerNorm(128)) with src_key_padding_mask, masked mean, Linear 128-4.
  The sequence models' batches: ids [32, T] and mask, T per step from SEQ_T (the same table as
  StepModels.SEQUENCE_T: each batch padded to its own longest of 32 lengths drawn like real text),
  row i max(1, T (i + 1) / 32) long.
Loss: softmax cross-entropy (mean over the batch), as LossSpec.SOFTMAX_CROSS_ENTROPY. Adam lr 1e-3.
On a GPU the batch is copied from pageable host memory every step (as the Java step uploads it).

  bin/torch-step.py --model mlp|cnn|resnet50 [--batch 64] [--image 224] [--steps 20] [--warmup 5]
                    [--threads N] [--device cpu|gpu] [--adam per-tensor,multi] [--precision fp32|bf16]
                    [--phase-steps N] [--watch-stdin]
  bin/torch-step.py --model mlp|cnn|resnet50 [--image 224] --export-torchscript FILE
    writes the same module (same builder, same seed-0 initial weights) as a TorchScript file for
    `--model torchscript:FILE` with python/export_torchscript.py (scripted), and exits: bin/bench-step's
    TorchScript presets (ts-mlp, ts-cnn, ts-resnet50) train that file against this eager module.
"""
import argparse
import inspect
import json
import os
import re
import sys
import threading
import time

import torch
import torch.nn as nn


VOCAB, MAX_LEN, SEQ_CLASSES = 30000, 300, 4
SEQ_T = [300, 300, 91, 147, 300, 300, 96, 219, 180, 150, 241, 99, 300, 195, 203, 123]


class EmbedBag(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.bag = nn.EmbeddingBag(VOCAB, dim, mode="sum")
        self.head = nn.Linear(dim, SEQ_CLASSES)

    def forward(self, ids, mask):
        w = mask / mask.sum(1, keepdim=True).clamp(min=1)
        return self.head(self.bag(ids, per_sample_weights=w))


class Transformer(nn.Module):
    def __init__(self, layers, dim, heads, ff):
        super().__init__()
        self.tokens = nn.Embedding(VOCAB, dim)
        self.positions = nn.Parameter(torch.randn(MAX_LEN, dim) * 0.02)
        layer = nn.TransformerEncoderLayer(dim, heads, ff, dropout=0.0, batch_first=True, norm_first=True)
        self.encoder = nn.TransformerEncoder(layer, layers, norm=nn.LayerNorm(dim))
        self.head = nn.Linear(dim, SEQ_CLASSES)

    def forward(self, ids, mask):
        x = self.tokens(ids) + self.positions[: ids.shape[1]]
        x = self.encoder(x, src_key_padding_mask=mask == 0)
        pooled = (x * mask.unsqueeze(-1)).sum(1) / mask.sum(1, keepdim=True).clamp(min=1)
        return self.head(pooled)


def sequence_batches(batch, gen):
    out = []
    for t in SEQ_T:
        ids = torch.randint(1, VOCAB, (batch, t), generator=gen)
        mask = torch.zeros(batch, t)
        for i in range(batch):
            mask[i, : max(1, t * (i + 1) // batch)] = 1
        out.append((ids * mask.long(), mask))
    return out


def build(model, image):
    if model == "mlp":
        return nn.Sequential(nn.Flatten(), nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 128), nn.ReLU(),
                             nn.Linear(128, 10)), (784,), 10
    if model == "cnn":
        return nn.Sequential(
            nn.Conv2d(1, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2, 2),
            nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2, 2),
            nn.Flatten(), nn.Linear(64 * 7 * 7, 128), nn.ReLU(), nn.Dropout(0.25), nn.Linear(128, 10)), (1, 28, 28), 10
    if model == "resnet50":
        import torchvision
        return torchvision.models.resnet50(weights=None, num_classes=1000), (3, image, image), 1000
    if model == "embed":
        return EmbedBag(64), None, SEQ_CLASSES
    if model == "transformer":
        return Transformer(2, 128, 4, 512), None, SEQ_CLASSES
    raise SystemExit("Invalid --model '%s': expected mlp, cnn, resnet50, embed or transformer" % model)


def adam(params, variant, cuda):
    """(optimizer, name): per-tensor, or fused where available (CUDA, a torch that has it), else foreach."""
    accepted = inspect.signature(torch.optim.Adam).parameters
    if variant == "per-tensor":
        kw = {"foreach": False} if "foreach" in accepted else {}
        return torch.optim.Adam(params, lr=1e-3, **kw), "per-tensor"
    if cuda and "fused" in accepted:
        try:
            return torch.optim.Adam(params, lr=1e-3, fused=True), "fused"
        except (RuntimeError, TypeError, ValueError):
            pass
    return torch.optim.Adam(params, lr=1e-3, foreach=True), "foreach"


def blas():
    """The BLAS library this process loaded (realpath), e.g. Debian's reference libblas: Linear layers
    on CPU run on it, and a reference BLAS makes them many times slower than OpenBLAS or MKL."""
    try:
        with open("/proc/self/maps") as f:
            libs = {line.split()[-1] for line in f if re.search(r"(blas|mkl_rt|mkl_core)[^/]*\.so", line)}
        return ",".join(sorted(os.path.realpath(x) for x in libs)) or "unknown"
    except OSError:
        return "unknown"


def run(args, variant):
    cuda = args.device == "gpu"
    dev = torch.device("cuda" if cuda else "cpu")
    torch.manual_seed(0)
    m, shape, classes = build(args.model, args.image)
    m = m.to(dev).train()
    opt, name = adam(list(m.parameters()), variant, cuda)
    g = torch.Generator().manual_seed(7)
    seqs = sequence_batches(args.batch, g) if shape is None else None
    x_host = None if seqs else torch.randn((args.batch,) + shape, generator=g)
    y_host = torch.randint(0, classes, (args.batch,), generator=g)
    lossf = nn.CrossEntropyLoss()
    t0 = None
    for s in range(args.warmup + args.steps):
        if s == args.warmup:
            if cuda:
                torch.cuda.synchronize()
            t0 = time.perf_counter()
        x = [t.to(dev) for t in seqs[s % len(seqs)]] if seqs else [x_host.to(dev)]
        y = y_host.to(dev)
        if args.precision == "bf16":
            # mixed precision as a PyTorch user writes it: autocast, the loss in FP32
            with torch.autocast(device_type="cuda" if cuda else "cpu", dtype=torch.bfloat16):
                out = m(*x)
            loss = lossf(out.float(), y)
        else:
            loss = lossf(m(*x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        loss.item()  # the Java step reads its loss every step too
    if cuda:
        torch.cuda.synchronize()
    dt = time.perf_counter() - t0
    phases = phase_times(args, m, opt, lossf, x_host, y_host, dev, cuda)
    return {
        "anchor": "torch-eager", "model": args.model, "device": args.device, "batch": args.batch,
        "image": args.image if args.model == "resnet50" else None, "adam": name, "variant": variant,
        "precision": args.precision,
        "threads": torch.get_num_threads(), "steps": args.steps, "warmup": args.warmup,
        "samples_per_s": round(args.steps * args.batch / dt, 2), "step_ms": round(dt / args.steps * 1e3, 3),
        "params": sum(p.numel() for p in m.parameters()), "tensors": sum(1 for _ in m.parameters()),
        "torch": torch.__version__, "blas": blas(),
        **phases,
    }


def phase_times(args, m, opt, lossf, x_host, y_host, dev, cuda):
    """--phase-steps N more steps, each phase closed by a device synchronize (where the time goes,
    not the speed: the synchronizes take away the overlap of the host's launches with the device's
    work): the batch upload, forward + loss + backward, and the optimizer, in ms per step."""
    n = args.phase_steps
    if n <= 0 or x_host is None:
        return {}
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    t = [0.0, 0.0, 0.0]
    sync()
    for _ in range(n):
        a = time.perf_counter()
        x = x_host.to(dev)
        y = y_host.to(dev)
        sync()
        b = time.perf_counter()
        loss = lossf(m(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        loss.item()
        sync()
        c = time.perf_counter()
        opt.step()
        sync()
        d = time.perf_counter()
        t[0] += b - a
        t[1] += c - b
        t[2] += d - c
    return {"phase_steps": n, "phase_upload_ms": round(t[0] / n * 1e3, 3),
            "phase_fwdbwd_ms": round(t[1] / n * 1e3, 3), "phase_optim_ms": round(t[2] / n * 1e3, 3)}


def export_torchscript(args):
    """--export-torchscript FILE: build() as run() builds it (seed 0), scripted by the project's
    python/export_torchscript.py (example inputs of batch 2), in train mode."""
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
    import export_torchscript as ets
    torch.manual_seed(0)
    m, shape, _ = build(args.model, args.image)
    m = m.train()
    ets.export(m, torch.randn((2,) + shape, generator=torch.Generator().manual_seed(7)),
               args.export_torchscript, method="script")


def watch_parent():
    """With --watch-stdin (bin/bench-step's children): exit when stdin closes, i.e. when the benchmark
    that started this process has ended or died, so that no anchor outlives it."""
    def watch():
        while sys.stdin.readline():
            pass
        os._exit(3)
    threading.Thread(target=watch, daemon=True).start()


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", required=True, help="mlp, cnn, resnet50, embed or transformer")
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--image", type=int, default=224, help="ResNet-50's image side")
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--threads", type=int, default=0, help="torch.set_num_threads (0: torch's default)")
    p.add_argument("--device", default="cpu", choices=["cpu", "gpu"])
    p.add_argument("--adam", default="per-tensor,multi")
    p.add_argument("--precision", default="fp32", choices=["fp32", "bf16"],
                   help="bf16: forward under torch.autocast(dtype=torch.bfloat16)")
    p.add_argument("--phase-steps", type=int, default=0,
                   help="N more steps timed phase by phase with device synchronizes (phase_*_ms)")
    p.add_argument("--watch-stdin", action="store_true", help="exit when stdin closes")
    p.add_argument("--export-torchscript", metavar="FILE",
                   help="write the model as a TorchScript file (python/export_torchscript.py) and exit")
    args = p.parse_args()
    if args.export_torchscript:
        return export_torchscript(args)
    if args.watch_stdin:
        watch_parent()
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    if args.device == "gpu" and not torch.cuda.is_available():
        raise SystemExit("--device gpu: torch.cuda.is_available() is False")
    for variant in args.adam.split(","):
        if variant not in ("per-tensor", "multi"):
            raise SystemExit("Invalid --adam '%s': expected per-tensor or multi" % variant)
        print(json.dumps(run(args, variant), separators=(",", ":")), flush=True)


if __name__ == "__main__":
    sys.exit(main())
