#!/usr/bin/env python3
"""Writes this folder's TorchScript fixtures of modules that read a sequence column (`--features
tokens:ids`), and their PyTorch reference results:

    /usr/bin/python3 spark-trainer/src/test/resources/torchscript/make_sequence_fixtures.py

The trainer passes a sequence column as two forward arguments, in this order: the token ids,
int64 [batch, T] padded (with id 0) to the batch's longest sequence, and the mask, float32
[batch, T] (1 real, 0 padding); T changes from batch to batch (and from rank to rank). Modules,
written with python/export_torchscript.py's export(..., variable_length=(0, 1)) (shapes [-1]):
  text_classifier.pt    forward(ids, mask): Embedding(20, 8) -> mean over the real positions
                        (masked sum / count, at least 1) -> Linear(8, 3)
  text_mask_int64.pt    the same, exported with an int64 mask (forward converts it): the trainer
                        must refuse it for an ids column, whose mask is float32
  text_fixed_length.pt  the same as text_classifier.pt exported WITHOUT variable_length (shapes
                        [12]): the trainer must refuse it for a sequence column, whose T varies

Reference, text_classifier.json (the layout of make_fixtures.py's NAME.json, with sequence
steps): 5 steps of batch 8, each padded to its own longest sequence (one empty sequence per batch),
trained with PyTorch in train mode on the module as loaded back from text_classifier.pt, loss
F.cross_entropy (mean), torch.optim.Adam(lr=1e-2, betas=(0.9, 0.999), eps=1e-8):
  workers "1": the whole batch; workers "2": replica r takes rows [4r, 4r+4), gradients averaged,
  one identical update (the rows keep the whole batch's padding here: padding changes nothing).
  {"model": "text_classifier.pt", "loss": "softmax_cross_entropy", "optimizer": {...},
   "batch": 8, "classes": 3, "vocab": 20, "max_length": 12,
   "steps": [{"ids": [[...], ...], "mask": [[...], ...], "labels": [...]}, ...],
   "eval_outputs_before": {"shape": [8, 3], "data": [...]},   (step 0, eval mode, initial module)
   "workers": {"1": {"losses": [...], "parameters": {name: [...]}, "buffers": {}}, "2": {...}}}
The worker-1 run is also replayed on an eager (non-TorchScript) copy: the script stops if the two
disagree by more than 1e-5. Deterministic (fixed seeds; reruns itself here with PYTHONHASHSEED=0).
"""
import json
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch import Tensor

HERE = os.path.dirname(os.path.abspath(__file__))
if os.environ.get("PYTHONHASHSEED") != "0" or os.getcwd() != HERE or os.path.isabs(sys.argv[0]):
    # Byte-identical files on every run (see make_fixtures.py).
    os.chdir(HERE)
    os.execve(sys.executable, [sys.executable, "make_sequence_fixtures.py"] + sys.argv[1:],
              dict(os.environ, PYTHONHASHSEED="0"))
sys.path.insert(0, os.path.join("..", "..", "..", "..", "..", "python"))
import export_torchscript as ets  # noqa: E402

VOCAB, DIM, CLASSES, MAX_LEN, BATCH, STEPS = 20, 8, 3, 12, 8, 5
OPTIMIZER = {"name": "adam", "lr": 1e-2, "beta1": 0.9, "beta2": 0.999, "eps": 1e-8,
             "weight_decay": 0.0}
EAGER_TOLERANCE = 1e-5


class TextClassifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, DIM)
        self.fc = nn.Linear(DIM, CLASSES)

    def forward(self, ids: Tensor, mask: Tensor) -> Tensor:
        x = self.embed(ids) * mask.unsqueeze(-1)
        return self.fc(x.sum(1) / mask.sum(1, keepdim=True).clamp(min=1.0))


class TextMaskInt64(TextClassifier):
    def forward(self, ids: Tensor, mask: Tensor) -> Tensor:
        m = mask.to(torch.float32)
        x = self.embed(ids) * m.unsqueeze(-1)
        return self.fc(x.sum(1) / m.sum(1, keepdim=True).clamp(min=1.0))


def make_steps():
    g = torch.Generator().manual_seed(3232)
    steps = []
    for s in range(STEPS):
        lengths = torch.randint(0, MAX_LEN + 1, (BATCH,), generator=g)
        lengths[s % BATCH] = 0  # an empty sequence in every batch
        t = max(1, int(lengths.max()))
        ids = torch.zeros(BATCH, t, dtype=torch.int64)
        mask = torch.zeros(BATCH, t)
        for i in range(BATCH):
            n = int(lengths[i])
            ids[i, :n] = torch.randint(1, VOCAB, (n,), generator=g)
            mask[i, :n] = 1
        labels = torch.randint(0, CLASSES, (BATCH,), generator=g)
        steps.append((ids, mask, labels))
    half = BATCH // 2
    differing = sum(1 for _, m, _ in steps
                    if int(m[:half].sum(1).max()) != int(m[half:].sum(1).max()))
    assert differing > 0, "the halves of some batch must pad to different lengths"
    return steps


def flat(t):
    return t.detach().reshape(-1).tolist()


def simulate(replicas, steps, workers):
    share = BATCH // workers
    opts = [torch.optim.Adam(r.parameters(), lr=OPTIMIZER["lr"],
                             betas=(OPTIMIZER["beta1"], OPTIMIZER["beta2"]),
                             eps=OPTIMIZER["eps"], weight_decay=OPTIMIZER["weight_decay"])
            for r in replicas]
    losses = []
    for ids, mask, labels in steps:
        step_losses = []
        for r, (module, opt) in enumerate(zip(replicas, opts)):
            module.train()
            opt.zero_grad(set_to_none=True)
            rows = slice(r * share, (r + 1) * share)
            loss = F.cross_entropy(module(ids[rows], mask[rows]), labels[rows])
            loss.backward()
            step_losses.append(loss.item())
        params = [list(m.parameters()) for m in replicas]
        with torch.no_grad():
            for i in range(len(params[0])):
                mean = sum(p[i].grad for p in params) / workers
                for p in params:
                    p[i].grad = mean.clone()
        for opt in opts:
            opt.step()
        losses.append(sum(step_losses) / workers)
    return {"losses": losses,
            "parameters": {n: flat(p) for n, p in replicas[0].named_parameters()},
            "buffers": {}}


def main():
    torch.set_num_threads(1)  # the same reduction order on every machine
    steps = make_steps()
    example = (torch.randint(1, VOCAB, (2, MAX_LEN)), torch.ones(2, MAX_LEN))
    torch.manual_seed(4242)
    module = TextClassifier()
    ets.export(module, example, "text_classifier.pt", variable_length=(0, 1))
    ets.export(module, example, "text_fixed_length.pt")
    torch.manual_seed(4242)
    ets.export(TextMaskInt64(), (example[0], example[1].to(torch.int64)), "text_mask_int64.pt",
               variable_length=(0, 1))

    def load():
        return torch.jit.load("text_classifier.pt")

    first = load()
    first.eval()
    with torch.no_grad():
        eval_before = first(steps[0][0], steps[0][1])
    doc = {
        "model": "text_classifier.pt",
        "generator": "make_sequence_fixtures.py",
        "torch": torch.__version__,
        "loss": "softmax_cross_entropy",
        "optimizer": OPTIMIZER,
        "batch": BATCH,
        "classes": CLASSES,
        "vocab": VOCAB,
        "max_length": MAX_LEN,
        "steps": [{"ids": ids.tolist(), "mask": mask.tolist(), "labels": labels.tolist()}
                  for ids, mask, labels in steps],
        "eval_outputs_before": {"shape": list(eval_before.shape), "data": flat(eval_before)},
        "workers": {str(w): simulate([load() for _ in range(w)], steps, w) for w in (1, 2)},
    }
    eager = TextClassifier()
    eager.load_state_dict({k: v for k, v in load().state_dict().items()
                           if not k.startswith(ets.BUFFERS_ATTRIBUTE)})
    e = simulate([eager], steps, 1)
    ts = doc["workers"]["1"]
    worst = 0.0
    for a, b in [(ts["losses"], e["losses"])] + [
            (ts["parameters"][n], e["parameters"][n]) for n in ts["parameters"]]:
        worst = max([worst] + [abs(x - y) for x, y in zip(a, b)])
    if worst > EAGER_TOLERANCE:
        raise SystemExit(f"TorchScript and eager disagree by {worst:g}")
    with open("text_classifier.json", "w") as f:
        json.dump(doc, f, indent=None, separators=(",", ":"))
        f.write("\n")
    print(f"wrote text_classifier.json: losses {['%.4f' % x for x in ts['losses']]}, "
          f"eager agrees within {worst:.1e}")


if __name__ == "__main__":
    main()
