#!/usr/bin/env python3
"""Writes this folder's TorchScript test fixtures and their PyTorch reference results.

    /usr/bin/python3 spark-trainer/src/test/resources/torchscript/make_fixtures.py

Deterministic (fixed seeds; the script reruns itself in this folder with PYTHONHASHSEED=0 so that
the .pt files come out byte-identical for a given torch). Models, written with python/export_torchscript.py's export():
  mlp.pt             x [20] -> Linear(20,32) -> ReLU -> Linear(32,5)
  cnn_bn.pt          x [1,8,8] -> Conv2d(1,4,3) -> BatchNorm2d(4) -> ReLU -> Dropout(0.0) -> flatten
                     -> Linear(144,4)
  cnn_bn_dropout.pt  the same with Dropout(0.5) (train/eval-mode test: no training reference)
  residual.pt        x [16] -> x + ReLU(BatchNorm1d(Linear(16,16)(x))) -> Linear(16,3)
  two_input.pt       forward(a [12], b [3]): cat -> Linear(15,8) -> Tanh -> Linear(8,3)
  traced_mlp.pt      an MLP like mlp.pt (other weights) exported with method="trace" (wrapper,
                     parameter names "inner.*")
  regressor.pt       x [6] -> Linear(6,1) -> squeezed to [batch]
  digits_bn.pt       x [64] -> Linear(64,64) -> BatchNorm1d -> ReLU -> Dropout(0.1) -> Linear(64,10): the
                     bundled digits' shape, for the end-to-end tests (no reference)
A Linear or Conv2d directly before a batch norm has no bias (as torchvision's models): batch norm
removes it, so its gradient is zero up to rounding, and Adam's normalized step would turn that
rounding noise into updates no two implementations agree on. cnn_bn_dropout.pt and digits_bn.pt
are saved in eval mode: the trainer must put a module in train mode for its training steps.
Files the trainer must refuse or handle specially (not through export()'s checks):
  state_dict.pt      torch.save of an MLP's state_dict (not TorchScript)
  plain_mlp.pt       plain torch.jit.script + save of an MLP: no buffers method, no json (no buffers,
                     so usable when the input shapes are given)
  plain_bn.pt        plain torch.jit.script + save of residual's architecture: buffers but no method
  frozen.pt          an MLP with every parameter requires_grad=False (buffers method and json)
  wrong_output.pt    output [batch, 2, 3] (buffers method and json)

References, NAME.json for each model but the bad ones: 5 steps of batch 8 (fixed inputs and
labels), trained with PyTorch in train mode on the module as loaded back from NAME.pt, loss
F.cross_entropy (mean) -- regressor: 0.5 * mean((pred - y)^2), DJL's L2Loss -- and
torch.optim.Adam(lr=1e-2, betas=(0.9, 0.999), eps=1e-8, weight_decay=0):
  workers "1": the whole batch on one module;
  workers "2": two replicas starting equal, replica r takes rows [4r, 4r+4) of each batch, its own
    mean loss and backward; gradients averaged over the replicas, one identical Adam update on
    both; then every float buffer (BatchNorm running mean/var, via sparktrainer_buffers()) set on
    both to the replicas' average (integer buffers: each replica counts by itself). The step's
    loss: the mean of the replicas' losses.
Each records the per-step losses and, after the last step, every parameter (named_parameters()
order) and every float buffer (named_buffers() order), flattened. Layout:
  {"model": "mlp.pt", "torch": "...", "loss": "softmax_cross_entropy" | "l2",
   "optimizer": {"name": "adam", "lr": 0.01, "beta1": 0.9, "beta2": 0.999, "eps": 1e-08,
                 "weight_decay": 0.0},
   "batch": 8, "classes": 5 (null for the regressor),
   "steps": [{"inputs": [{"name": "x", "shape": [8, 20], "data": [...]}, ...],
              "labels": [3, 0, ...]}, ...],                  (class ids; float targets: regressor)
   "eval_outputs_before": {"shape": [8, 5], "data": [...]},  (initial module, eval mode, step 0)
   "workers": {"1": {"losses": [...], "parameters": {name: [...]}, "buffers": {name: [...]}},
               "2": {...}}}
cnn_bn_dropout.json has no "workers"; it adds "train_outputs_before" (train mode, seed 0: one
dropout draw, for information -- a train output is random).
The worker-1 run is also replayed on eager (non-TorchScript) copies of the modules: the script stops
if the two disagree by more than 1e-5.
"""
import io
import json
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
if os.environ.get("PYTHONHASHSEED") != "0" or os.getcwd() != HERE or os.path.isabs(sys.argv[0]):
    # Byte-identical files on every run: TorchScript writes a module's constants in set order
    # (string hashes: PYTHONHASHSEED) and records source file names as imported (relative here).
    os.chdir(HERE)
    os.execve(sys.executable, [sys.executable, "make_fixtures.py"] + sys.argv[1:],
              dict(os.environ, PYTHONHASHSEED="0"))
HERE = "."
sys.path.insert(0, os.path.join("..", "..", "..", "..", "..", "python"))
import export_torchscript as ets  # noqa: E402

STEPS = 5
BATCH = 8
OPTIMIZER = {"name": "adam", "lr": 1e-2, "beta1": 0.9, "beta2": 0.999, "eps": 1e-8,
             "weight_decay": 0.0}
EAGER_TOLERANCE = 1e-5


class Mlp(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(20, 32)
        self.fc2 = nn.Linear(32, 5)

    def forward(self, x):
        return self.fc2(F.relu(self.fc1(x)))


class CnnBn(nn.Module):
    def __init__(self, p):
        super().__init__()
        self.conv = nn.Conv2d(1, 4, 3, bias=False)  # no bias before batch norm (see below)
        self.bn = nn.BatchNorm2d(4)
        self.drop = nn.Dropout(p)
        self.fc = nn.Linear(4 * 6 * 6, 4)

    def forward(self, x):
        return self.fc(torch.flatten(self.drop(F.relu(self.bn(self.conv(x)))), 1))


class Residual(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(16, 16, bias=False)
        self.bn = nn.BatchNorm1d(16)
        self.out = nn.Linear(16, 3)

    def forward(self, x):
        return self.out(x + F.relu(self.bn(self.fc1(x))))


class DigitsBn(nn.Module):
    """The bundled digits' shape: 64 features, 10 classes (the command line's end-to-end test)."""

    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(64, 64, bias=False)
        self.bn = nn.BatchNorm1d(64)
        self.drop = nn.Dropout(0.1)
        self.fc2 = nn.Linear(64, 10)

    def forward(self, x):
        return self.fc2(self.drop(F.relu(self.bn(self.fc1(x)))))


class TwoInput(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(15, 8)
        self.fc2 = nn.Linear(8, 3)

    def forward(self, a, b):
        return self.fc2(torch.tanh(self.fc1(torch.cat([a, b], 1))))


class Regressor(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(6, 1)

    def forward(self, x):
        return self.fc(x).squeeze(-1)


class WrongOutput(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(20, 6)

    def forward(self, x):
        return self.fc(x).view(-1, 2, 3)


# name -> (factory, per-example input shapes, classes (None: regression), export method)
MODELS = {
    "mlp": (Mlp, [[20]], 5, "auto"),
    "cnn_bn": (lambda: CnnBn(0.0), [[1, 8, 8]], 4, "auto"),
    "cnn_bn_dropout": (lambda: CnnBn(0.5), [[1, 8, 8]], 4, "auto"),
    "residual": (Residual, [[16]], 3, "auto"),
    "two_input": (TwoInput, [[12], [3]], 3, "auto"),
    "traced_mlp": (Mlp, [[20]], 5, "trace"),
    "regressor": (Regressor, [[6]], None, "auto"),
    "digits_bn": (DigitsBn, [[64]], 10, "auto"),
}
NO_TRAINING_REFERENCE = {"cnn_bn_dropout", "digits_bn"}
NO_JSON = {"digits_bn"}
# Saved in eval mode: the trainer must put it in train mode for training steps itself.
SAVED_IN_EVAL_MODE = {"cnn_bn_dropout", "digits_bn"}


def seed_of(name):
    return 1000 + sum(ord(c) for c in name)  # a fixed seed per fixture


def path(name):
    return os.path.join(HERE, name)


def flat(t):
    return t.detach().reshape(-1).tolist()


def tensor_json(t, name=None):
    d = {"name": name} if name is not None else {}
    d.update({"shape": list(t.shape), "data": flat(t)})
    return d


def make_steps(name, shapes, classes):
    g = torch.Generator().manual_seed(seed_of(name) + 1)
    steps = []
    for _ in range(STEPS):
        inputs = [torch.randn([BATCH] + s, generator=g) for s in shapes]
        if classes is None:
            labels = torch.randn(BATCH, generator=g)
        else:
            labels = torch.randint(0, classes, (BATCH,), generator=g)
        steps.append((inputs, labels))
    return steps


def loss_of(out, labels, classes):
    if classes is None:
        return 0.5 * torch.mean((out - labels) ** 2)
    return F.cross_entropy(out, labels)


def make_optimizer(params):
    return torch.optim.Adam(params, lr=OPTIMIZER["lr"], betas=(OPTIMIZER["beta1"], OPTIMIZER["beta2"]),
                            eps=OPTIMIZER["eps"], weight_decay=OPTIMIZER["weight_decay"])


def buffers_of(module):
    """The module's buffers in named_buffers() order (through the file's method when it has it)."""
    names = [n for n, _ in module.named_buffers()]
    if hasattr(module, ets.BUFFERS_METHOD):
        return list(zip(names, getattr(module, ets.BUFFERS_METHOD)()))
    return list(module.named_buffers())


def simulate(replicas, steps, classes, workers):
    """Data-parallel training as the Java trainer does it; replicas: `workers` equal modules."""
    assert len(replicas) == workers and BATCH % workers == 0
    share = BATCH // workers
    opts = [make_optimizer(list(r.parameters())) for r in replicas]
    losses = []
    for inputs, labels in steps:
        step_losses = []
        for r, (module, opt) in enumerate(zip(replicas, opts)):
            module.train()
            opt.zero_grad(set_to_none=True)
            rows = slice(r * share, (r + 1) * share)
            loss = loss_of(module(*[x[rows] for x in inputs]), labels[rows], classes)
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
        bufs = [buffers_of(m) for m in replicas]
        with torch.no_grad():
            for i, (_, b0) in enumerate(bufs[0]):
                if b0.is_floating_point():
                    mean = sum(b[i][1] for b in bufs) / workers
                    for b in bufs:
                        b[i][1].copy_(mean)
        for p in params[1:]:
            assert all(torch.equal(a, b) for a, b in zip(params[0], p)), "replicas diverged"
        losses.append(sum(step_losses) / workers)
    m = replicas[0]
    return {
        "losses": losses,
        "parameters": {n: flat(p) for n, p in m.named_parameters()},
        "buffers": {n: flat(b) for n, b in buffers_of(m) if b.is_floating_point()},
    }


def eager_copy(name, loaded):
    """A plain nn.Module with the loaded file's weights and buffers."""
    factory = MODELS[name][0]
    module = factory()
    state = {k.removeprefix("inner."): v for k, v in loaded.state_dict().items()
             if not k.startswith(ets.BUFFERS_ATTRIBUTE)}
    module.load_state_dict(state)
    return module


def compare(a, b, what):
    worst = max(abs(x - y) for x, y in zip(a, b)) if a else 0.0
    if len(a) != len(b) or worst > EAGER_TOLERANCE:
        raise SystemExit(f"{what}: TorchScript and eager disagree by {worst:g}")
    return worst


def reference(name):
    factory, shapes, classes, _ = MODELS[name]
    steps = make_steps(name, shapes, classes)
    meta_names = [i["name"] for i in json.loads(
        _extra(path(name + ".pt")))["inputs"]]

    def load():
        return torch.jit.load(path(name + ".pt"))

    first = load()
    first.eval()
    with torch.no_grad():
        eval_before = first(*steps[0][0])
    doc = {
        "model": name + ".pt",
        "generator": "make_fixtures.py",
        "torch": torch.__version__,
        "loss": "l2" if classes is None else "softmax_cross_entropy",
        "optimizer": OPTIMIZER,
        "batch": BATCH,
        "classes": classes,
        "steps": [{"inputs": [tensor_json(x, n) for n, x in zip(meta_names, inputs)],
                   "labels": labels.tolist()} for inputs, labels in steps],
        "eval_outputs_before": tensor_json(eval_before),
    }
    if name in NO_TRAINING_REFERENCE:
        m = load()
        m.train()
        with torch.random.fork_rng(), torch.no_grad():
            torch.manual_seed(0)
            doc["train_outputs_before"] = tensor_json(m(*steps[0][0]))
        return doc, None
    doc["workers"] = {str(w): simulate([load() for _ in range(w)], steps, classes, w) for w in (1, 2)}
    # the same run on eager modules: the reference must not depend on TorchScript's executor
    eager = simulate([eager_copy(name, load())], steps, classes, 1)
    ts = doc["workers"]["1"]
    worst = compare(ts["losses"], eager["losses"], f"{name} losses")
    for (n, v), (_, e) in zip(ts["parameters"].items(), eager["parameters"].items()):
        worst = max(worst, compare(v, e, f"{name} {n}"))
    for (n, v), (_, e) in zip(ts["buffers"].items(), eager["buffers"].items()):
        worst = max(worst, compare(v, e, f"{name} {n}"))
    return doc, worst


def _extra(file):
    extra = {ets.EXTRA_FILE: ""}
    torch.jit.load(file, _extra_files=extra)
    return extra[ets.EXTRA_FILE]


def write_json(name, doc):
    with open(path(name + ".json"), "w") as f:
        json.dump(doc, f, indent=None, separators=(",", ":"))
        f.write("\n")


def main():
    torch.set_num_threads(1)  # the same reduction order on every machine
    for name, (factory, shapes, classes, method) in MODELS.items():
        torch.manual_seed(seed_of(name))
        module = factory()
        example = tuple(torch.randn([2] + s) for s in shapes)
        ets.export(module, example, path(name + ".pt"), method=method)
        if name in SAVED_IN_EVAL_MODE:
            extra = {"sparktrainer.json": ""}
            loaded = torch.jit.load(path(name + ".pt"), _extra_files=extra)
            loaded.eval()
            buf = io.BytesIO()
            torch.jit.save(loaded, buf, _extra_files=extra)
            with open(path(name + ".pt"), "wb") as f:
                f.write(buf.getvalue())

    torch.manual_seed(seed_of("state_dict"))
    torch.save(Mlp().state_dict(), path("state_dict.pt"))
    torch.manual_seed(seed_of("plain_mlp"))
    torch.jit.save(torch.jit.script(Mlp()), path("plain_mlp.pt"))
    torch.manual_seed(seed_of("plain_bn"))
    torch.jit.save(torch.jit.script(Residual()), path("plain_bn.pt"))
    torch.manual_seed(seed_of("frozen"))
    ets.export_unchecked(Mlp().requires_grad_(False), torch.randn(2, 20), path("frozen.pt"))
    torch.manual_seed(seed_of("wrong_output"))
    ets.export_unchecked(WrongOutput(), torch.randn(2, 20), path("wrong_output.pt"))

    for name in MODELS:
        if name in NO_JSON:
            continue
        doc, worst = reference(name)
        write_json(name, doc)
        agree = "" if worst is None else f", eager agrees within {worst:.1e}"
        losses = doc.get("workers", {}).get("1", {}).get("losses")
        print(f"wrote {name}.json" + (f": losses {['%.4f' % x for x in losses]}" if losses else "")
              + agree)


if __name__ == "__main__":
    main()
