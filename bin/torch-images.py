#!/usr/bin/python3
"""PyTorch's side of bin/bench-images: torchvision's ImageFolder over DIR through a DataLoader with
PIL and torchvision's transforms (RandomResizedCrop(224), RandomHorizontalFlip, then PILToTensor for
uint8 or ToTensor for float32), one worker per core, batch 64; prints one JSON line per transfer
kind: images/s and images/s per core, the best of ROUNDS passes of SECONDS each.

  /usr/bin/python3 bin/torch-images.py DIR CORES SECONDS ROUNDS
"""
import json
import resource
import sys
import time

import torch
from torch.utils.data import DataLoader
from torchvision import datasets, transforms

root, cores, seconds, rounds = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4])
torch.set_num_threads(1)
for kind, last in (("uint8", transforms.PILToTensor()), ("float32", transforms.ToTensor())):
    t = transforms.Compose([transforms.RandomResizedCrop(224), transforms.RandomHorizontalFlip(), last])
    ds = datasets.ImageFolder(root, transform=t)
    best = 0.0
    for _ in range(rounds):
        loader = DataLoader(ds, batch_size=64, shuffle=True, num_workers=cores, persistent_workers=False)
        n, start = 0, None
        for i, (x, y) in enumerate(loader):
            if i == cores:  # the workers have started and filled their first batches
                n, start = 0, time.perf_counter()
            elif start is not None:
                n += x.shape[0]
                if time.perf_counter() - start >= seconds:
                    break
        if start is not None and n:
            best = max(best, n / (time.perf_counter() - start))
    print(json.dumps({"contender": f"pytorch-dataloader-{kind}", "images_per_s": round(best, 1),
                      "images_per_s_per_core": round(best / cores, 1), "cores": cores,
                      "torch": torch.__version__, "images": len(ds),
                      "rss_kb_main": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
                      "rss_kb_workers_max": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss}),
          flush=True)
