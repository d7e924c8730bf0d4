#!/usr/bin/env python3
"""GPU calibration of the step model (docs/gpu-step-model.md), for a GPU machine with PyTorch and no Java.

Measures, with torch only (no torchvision, no downloads: both models are built here from torch.nn
with random weights and random inputs):
  - forward+backward and forward-only time of ResNet-50 v1.5 (224x224) and of a BERT-base-sized
    encoder (seq 128, 20 masked positions per sequence, MLM + NSP heads), at the step model's
    per-GPU batch (256), with autocast (--amp-dtype, default bf16) and in FP32 (PyTorch's defaults:
    TF32 for cuDNN convolutions, not for matmuls) -- DJL has no autocast, so FP32 is what a DJL step
    runs today;
  - device<->host copy rates at 1, 25 and 100 MB: pageable and pinned host memory, and the
    allocating D2H that DJL's toByteBuffer() does on a CUDA tensor (tensor.to('cpu'));
  - device Adam on each model's parameter shapes: torch.optim.Adam fused / foreach / for-loop, and
    the 13 element-wise ops the trainer would issue through DJL, per parameter tensor and over flat
    per-bucket state (12 ops per 25 MiB bucket + 1 update per tensor: what bin/step-model assumes);
  - the device's copy bandwidth (HBM).
Prints one JSON object; bin/step-model --gpu FILE reads it and replaces the published and assumed
GPU inputs with it.

  python3 bin/gpu-calibrate.py [--out target/bench/gpu-calibrate.json] [--batch 256] [--iters 20]
                               [--amp-dtype bf16|fp16] [--models resnet50,bert-base] [--device cuda]
  python3 bin/gpu-calibrate.py --device cpu --quick    # a dry run of the script itself, no GPU
                                                       # (seq 32, batch 2, small Adam tensors)
"""
import argparse
import datetime
import json
import os
import statistics
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

MiB = 1 << 20
WARMUP = 3  # 1 with --quick


# --------------------------------------------------------------------------------------------------
# Models, from torch.nn only.

class Bottleneck(nn.Module):
    """ResNet v1.5 bottleneck: the stride is on the 3x3 convolution."""

    def __init__(self, cin, width, stride):
        super().__init__()
        cout = width * 4
        self.conv1 = nn.Conv2d(cin, width, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.conv2 = nn.Conv2d(width, width, 3, stride=stride, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(width)
        self.conv3 = nn.Conv2d(width, cout, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(cout)
        self.down = None
        if stride != 1 or cin != cout:
            self.down = nn.Sequential(nn.Conv2d(cin, cout, 1, stride=stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        y = F.relu(self.bn1(self.conv1(x)))
        y = F.relu(self.bn2(self.conv2(y)))
        y = self.bn3(self.conv3(y))
        return F.relu(y + (x if self.down is None else self.down(x)))


class ResNet50(nn.Module):
    def __init__(self, classes=1000):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 64, 7, stride=2, padding=3, bias=False), nn.BatchNorm2d(64),
                                  nn.ReLU(inplace=True), nn.MaxPool2d(3, stride=2, padding=1))
        blocks = []
        cin = 64
        for width, count, stride in ((64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2)):
            for i in range(count):
                blocks.append(Bottleneck(cin, width, stride if i == 0 else 1))
                cin = width * 4
        self.blocks = nn.Sequential(*blocks)
        self.fc = nn.Linear(2048, classes)

    def forward(self, x, labels):
        x = self.blocks(self.stem(x))
        x = torch.flatten(F.adaptive_avg_pool2d(x, 1), 1)
        return F.cross_entropy(self.fc(x), labels)


class BertBase(nn.Module):
    """BERT-base-sized: 12 post-LN encoder layers of width 768, 12 heads, FFN 3072, GELU; word,
    position and token-type embeddings; MLM head (transform + decoder tied to the word embeddings)
    on the masked positions only, and the NSP head."""

    def __init__(self, vocab=30522, d=768, layers=12, heads=12, ffn=3072, max_pos=512):
        super().__init__()
        self.word = nn.Embedding(vocab, d)
        self.pos = nn.Embedding(max_pos, d)
        self.token_type = nn.Embedding(2, d)
        self.norm = nn.LayerNorm(d, eps=1e-12)
        layer = nn.TransformerEncoderLayer(d, heads, ffn, dropout=0.1, activation="gelu", batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, layers)
        self.pooler = nn.Linear(d, d)
        self.nsp = nn.Linear(d, 2)
        self.transform = nn.Linear(d, d)
        self.transform_norm = nn.LayerNorm(d, eps=1e-12)
        self.decoder_bias = nn.Parameter(torch.zeros(vocab))

    def forward(self, ids, types, mlm_pos, mlm_labels, nsp_labels):
        seq = ids.shape[1]
        pos = torch.arange(seq, device=ids.device).unsqueeze(0)
        x = F.dropout(self.norm(self.word(ids) + self.pos(pos) + self.token_type(types)), 0.1, self.training)
        h = self.encoder(x)
        masked = torch.gather(h, 1, mlm_pos.unsqueeze(-1).expand(-1, -1, h.shape[-1]))
        t = self.transform_norm(F.gelu(self.transform(masked)))
        logits = t @ self.word.weight.t() + self.decoder_bias
        mlm = F.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(), mlm_labels.reshape(-1))
        nsp = F.cross_entropy(self.nsp(torch.tanh(self.pooler(h[:, 0]))).float(), nsp_labels)
        return mlm + nsp


def make(name, batch, device, quick):
    if name == "resnet50":
        model = ResNet50()
        side = 64 if quick else 224
        x = torch.randn(batch, 3, side, side, device=device)
        y = torch.randint(0, 1000, (batch,), device=device)
        return model, (x, y)
    if name == "bert-base":
        model = BertBase()
        seq, masked = (32, 20) if quick else (128, 20)
        ids = torch.randint(0, 30522, (batch, seq), device=device)
        types = torch.zeros(batch, seq, dtype=torch.long, device=device)
        pos = torch.stack([torch.randperm(seq, device=device)[:masked] for _ in range(batch)])
        labels = torch.randint(0, 30522, (batch, masked), device=device)
        nsp = torch.randint(0, 2, (batch,), device=device)
        return model, (ids, types, pos, labels, nsp)
    raise SystemExit("unknown model " + name)


# --------------------------------------------------------------------------------------------------
# Timing.

def sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def timed(fn, device, iters):
    """Median seconds of fn() over iters runs, each synchronized, after WARMUP runs."""
    for _ in range(WARMUP):
        fn()
    sync(device)
    out = []
    for _ in range(iters):
        sync(device)
        t0 = time.perf_counter()
        fn()
        sync(device)
        out.append(time.perf_counter() - t0)
    return statistics.median(out)


def model_times(name, batch, device, iters, autocast_dtype, quick, channels_last):
    """fwd+bwd and fwd-only ms, for autocast and FP32; halves the batch on out-of-memory."""
    while True:
        try:
            model, inputs = make(name, batch, device, quick)
            model = model.to(device).train()
            if channels_last and name == "resnet50":
                model = model.to(memory_format=torch.channels_last)
                inputs = (inputs[0].contiguous(memory_format=torch.channels_last), inputs[1])
            result = {"batch": batch, "params": sum(p.numel() for p in model.parameters()),
                      "tensors": sum(1 for _ in model.parameters())}
            # CPU autocast does not cover every op of these models in older torch: the CPU dry run
            # measures FP32 twice.
            amp = autocast_dtype if device.type == "cuda" else None
            for label, dtype in (("amp", amp), ("fp32", None)):
                def fwd():
                    if dtype is None:
                        return model(*inputs)
                    with torch.autocast(device_type=device.type, dtype=dtype):
                        return model(*inputs)

                def fwd_bwd():
                    loss = fwd()
                    loss.backward()  # gradients accumulate in place: no allocation after the first step

                t_fb = timed(fwd_bwd, device, iters)
                t_f = timed(lambda: fwd().detach(), device, iters)
                key = "" if label == "amp" else "fp32_"
                result[key + "fwd_bwd_ms"] = t_fb * 1e3
                result[key + "fwd_ms"] = t_f * 1e3
                if label == "amp":
                    result["precision"] = ("amp-" + str(dtype).replace("torch.", "") if dtype else "fp32 (cpu dry run)") + (
                        ", channels_last" if channels_last and name == "resnet50" else "")
            shapes = [tuple(p.shape) for p in model.parameters()]
            del model, inputs
            if device.type == "cuda":
                torch.cuda.empty_cache()
            return result, shapes
        except RuntimeError as e:  # torch.cuda.OutOfMemoryError is a RuntimeError
            if "out of memory" not in str(e).lower() or batch == 1:
                raise
            batch //= 2
            if device.type == "cuda":
                torch.cuda.empty_cache()
            print("out of memory: batch %d" % batch, file=sys.stderr)


def copy_rates(device, sizes_mb, iters):
    out = {"d2h_pageable_GBps": {}, "h2d_pageable_GBps": {}, "d2h_pinned_GBps": {}, "h2d_pinned_GBps": {},
           "d2h_alloc_GBps": {}}
    for mb in sizes_mb:
        nbytes = mb * 1_000_000
        n = nbytes // 4
        dev = torch.empty(n, device=device)
        pageable = torch.empty(n)
        key = str(nbytes)
        out["d2h_pageable_GBps"][key] = nbytes / timed(lambda: pageable.copy_(dev), device, iters) / 1e9
        out["h2d_pageable_GBps"][key] = nbytes / timed(lambda: dev.copy_(pageable), device, iters) / 1e9
        out["d2h_alloc_GBps"][key] = nbytes / timed(lambda: dev.to("cpu"), device, iters) / 1e9
        if device.type == "cuda":
            pinned = torch.empty(n, pin_memory=True)
            out["d2h_pinned_GBps"][key] = nbytes / timed(lambda: pinned.copy_(dev), device, iters) / 1e9
            out["h2d_pinned_GBps"][key] = nbytes / timed(lambda: dev.copy_(pinned), device, iters) / 1e9
    return {k: v for k, v in out.items() if v}


def adam_times(shapes, device, iters, bucket_bytes=25 * MiB):
    """ms per Adam step over parameters of these shapes (FP32, on the device)."""
    params = [torch.randn(s, device=device) * 1e-2 for s in shapes]
    grads = [torch.randn(s, device=device) * 1e-3 for s in shapes]
    out = {}
    for label, kw in (("torch_fused_ms", {"fused": True}), ("torch_foreach_ms", {"foreach": True}),
                      ("torch_for_loop_ms", {"foreach": False})):
        try:
            ps = [nn.Parameter(p.clone()) for p in params]
            for p, g in zip(ps, grads):
                p.grad = g
            opt = torch.optim.Adam(ps, lr=1e-3, **kw)
            out[label] = timed(opt.step, device, iters) * 1e3
            del opt, ps
        except (RuntimeError, TypeError, ValueError) as e:  # fused needs CUDA (and a recent torch)
            out[label] = None
            out[label.replace("_ms", "_error")] = str(e).splitlines()[0][:200]
    b1, b2, eps, lr = 0.9, 0.999, 1e-8, 1e-3
    state = {"t": 0}

    def ops(p, g, m, v, t):
        step_size = lr / (1 - b1 ** t)
        bc2 = (1 - b2 ** t) ** 0.5
        a = g.mul(1 - b1)
        m.mul_(b1).add_(a)
        sq = g.square()
        sq.mul_(1 - b2)
        v.mul_(b2).add_(sq)
        den = v.sqrt()
        den.div_(bc2).add_(eps)
        upd = m.mul(step_size)
        upd.div_(den)
        return upd  # the 13th op, p -= upd, is the caller's

    ms = [torch.zeros_like(p) for p in params]
    vs = [torch.zeros_like(p) for p in params]

    def per_tensor():
        state["t"] += 1
        for p, g, m, v in zip(params, grads, ms, vs):
            p.sub_(ops(p, g, m, v, state["t"]))

    out["djl_ops_per_tensor_ms"] = timed(per_tensor, device, iters) * 1e3
    # Flat state: parameters are views of one buffer; 12 ops per 25 MiB bucket, then one update per
    # (tensor, bucket) overlap: about one per tensor.
    total = sum(p.numel() for p in params)
    flat_p = torch.cat([p.reshape(-1) for p in params])
    flat_g = torch.cat([g.reshape(-1) for g in grads])
    flat_m = torch.zeros_like(flat_p)
    flat_v = torch.zeros_like(flat_p)
    per_bucket = bucket_bytes // 4
    cuts = [(c, min(total, c + per_bucket)) for c in range(0, total, per_bucket)]
    pieces = []  # (start, end, bucket index) of each tensor's part in each bucket
    off = 0
    for p in params:
        a, b = off, off + p.numel()
        for k, (c, e) in enumerate(cuts):
            if a < e and c < b:
                pieces.append((max(a, c), min(b, e), k))
        off = b

    def flat():
        state["t"] += 1
        upd = [ops(flat_p[c:e], flat_g[c:e], flat_m[c:e], flat_v[c:e], state["t"]) for c, e in cuts]
        for a, b, k in pieces:
            c = cuts[k][0]
            flat_p[a:b].sub_(upd[k][a - c:b - c])

    out["djl_ops_flat_ms"] = timed(flat, device, iters) * 1e3
    out["tensors"] = len(params)
    out["buckets"] = len(cuts)
    out["flat_update_ops"] = len(pieces)
    return out


def hbm_rate(device, iters, nbytes=1 << 30):
    a = torch.empty(nbytes // 4, device=device)
    b = torch.empty_like(a)
    return 2 * nbytes / timed(lambda: b.copy_(a), device, iters) / 1e9  # read + write


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=None, help="also write the JSON here (e.g. target/bench/gpu-calibrate.json)")
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--amp-dtype", choices=["bf16", "fp16"], default="bf16")
    ap.add_argument("--models", default="resnet50,bert-base")
    ap.add_argument("--channels-last", action="store_true", help="ResNet-50 in NHWC (as NVIDIA's AMP recipe)")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--quick", action="store_true", help="tiny sizes: checks the script, measures nothing useful")
    a = ap.parse_args()

    device = torch.device(a.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise SystemExit("gpu-calibrate: CUDA is not available to this torch (%s); --device cpu --quick "
                         "runs the script without a GPU" % torch.__version__)
    if a.quick:
        global WARMUP
        a.batch, a.iters, WARMUP = min(a.batch, 2), min(a.iters, 2), 1
    if device.type == "cuda":
        torch.backends.cudnn.benchmark = True
    amp_dtype = torch.bfloat16 if a.amp_dtype == "bf16" else torch.float16
    result = {
        "tool": "bin/gpu-calibrate.py",
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "device": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
        "torch": torch.__version__,
        "cuda": getattr(torch.version, "cuda", None),
        "models": {},
        "adam": {},
    }
    torch.manual_seed(0)
    for name in [m.strip() for m in a.models.split(",") if m.strip()]:
        print("measuring %s ..." % name, file=sys.stderr)
        times, shapes = model_times(name, a.batch, device, a.iters, amp_dtype, a.quick, a.channels_last)
        result["models"][name] = times
        if a.quick:  # the same tensor count, small tensors, small buckets: exercises every path cheaply
            shapes = [(min(4096, int(torch.Size(sh).numel())),) for sh in shapes]
            result["adam"][name] = adam_times(shapes, device, a.iters, bucket_bytes=64 * 1024)
        else:
            result["adam"][name] = adam_times(shapes, device, a.iters)
        if device.type == "cuda":
            torch.cuda.empty_cache()
    print("measuring copies ...", file=sys.stderr)
    result["copies"] = copy_rates(device, [1, 25] if a.quick else [1, 25, 100], a.iters)
    result["hbm_copy_GBps"] = hbm_rate(device, a.iters, nbytes=(1 << 24) if a.quick else (1 << 30))
    text = json.dumps(result, indent=1, sort_keys=False)
    print(text)
    if a.out:
        os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
        with open(a.out, "w") as f:
            f.write(text + "\n")


if __name__ == "__main__":
    main()
