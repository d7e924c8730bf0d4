#!/usr/bin/env python3
"""Exports a PyTorch nn.Module as a TorchScript file that the trainer's `--model torchscript:PATH`
trains (DJL 0.35.1, libtorch 2.7; files written with PyTorch 1.13 load there -- checked).

DJL's PyTorch JNI lists a TorchScript module's parameters but not its buffers (BatchNorm running
statistics, num_batches_tracked). The file this script writes therefore carries, besides the model:
  - an exported method `sparktrainer_buffers(self) -> List[Tensor]`: the module's buffers, all of
    `named_buffers()` in that order, as the very tensors the module uses (attribute
    `sparktrainer_buffer_list`), so that Java can read, average and restore them in place;
  - an extra file `sparktrainer.json` (`archive/extra/sparktrainer.json` in the zip):
      {"format": 1, "torch": "<torch.__version__>", "method": "script" | "trace",
       "class": "<the module's Python class>", "train_mode_frozen": <true for "trace">,
       "inputs": [{"name": "x", "shape": [3, 64, 64], "dtype": "float32"}, ...],
       "output": {"shape": [10]},            (per example: [classes], or [] for a regressor)
       "buffers": [...], "buffer_dtypes": [...],   (sparktrainer_buffers() order)
       "parameters": [...], "trainable": [...]}    (named_parameters() order, requires_grad)
    Shapes are per example (no batch dimension); -1 marks a variable length (variable_length=:
    a sequence column's T, which changes from batch to batch).

Sequence columns (`--features tokens:ids`): the trainer passes such a column as TWO forward
arguments, in this order: the token ids, int64 [batch, T], padded to the batch's longest sequence,
then the mask, float32 [batch, T] (1 for a real token, 0 for padding). Export such a module with
example inputs of those dtypes and variable_length=(0, 1) (the inputs' indices; on the command
line --variable-length 0,1): the file then records shape [-1] for both, and export checks that
forward also runs at other lengths. A fixed int64 column (`--features COL:SHAPE:int64`) is one
int64 argument.

How: `torch.jit.script` on a copy of the module whose class is a dynamic subclass of the module's
own class adding the attribute and the method (the user's class and module are left unchanged;
parameter names stay as they are). When scripting fails (method="auto"), or with method="trace",
the copy is traced with `torch.jit.trace` in TRAIN mode and wrapped in a small scripted module
(forward calls the traced one; 1 to 4 tensor inputs) that carries the attribute and the method;
parameter and buffer names then start with "inner.". A traced module has its mode frozen: its
BatchNorm layers use batch statistics (and update the running ones) and its Dropout layers stay
active even after eval() -- evaluation in Java then behaves like training.

Before writing, it checks (and stops with a message when one fails): some parameter requires grad;
forward runs on the example inputs (batch 2) in train and in eval mode, and on batch 3; the output is
a floating tensor, or a tuple whose first element is one, shaped [batch, classes] or [batch]; train
and eval outputs differ when the module has Dropout or BatchNorm layers (else a warning); the file,
reloaded with torch.jit.load, has the extra json, buffers whose `set_` is seen by the module's own
buffers, and the same eval output (within 1e-6). It writes atomically (temporary file + rename)
and prints a one-line summary. The example module's state (weights, buffers) is not changed.

Library use (example inputs WITH a batch dimension; the checks use their first 2 rows):

    import torch, torchvision, export_torchscript as ets
    ets.export(torchvision.models.resnet50(num_classes=10), torch.randn(2, 3, 64, 64), "resnet50.pt")

    class TransformerClassifier(torch.nn.Module):       # token ids -> class scores
        def __init__(self, vocab=1000, dim=64, heads=4, layers=2, classes=5):
            super().__init__()
            self.embed = torch.nn.Embedding(vocab, dim)
            layer = torch.nn.TransformerEncoderLayer(dim, heads, 4 * dim, dropout=0.1, batch_first=True)
            self.encoder = torch.nn.TransformerEncoder(layer, layers)
            self.head = torch.nn.Linear(dim, classes)
        def forward(self, tokens: torch.Tensor) -> torch.Tensor:
            return self.head(self.encoder(self.embed(tokens)).mean(dim=1))
    ets.export(TransformerClassifier(), torch.randint(0, 1000, (2, 128)), "transformer.pt")

    class MaskedMeanClassifier(torch.nn.Module):        # a sequence column: ids, then mask
        def __init__(self, vocab=1000, dim=64, classes=5):
            super().__init__()
            self.embed = torch.nn.Embedding(vocab, dim)
            self.head = torch.nn.Linear(dim, classes)
        def forward(self, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
            x = self.embed(ids) * mask.unsqueeze(-1)
            return self.head(x.sum(1) / mask.sum(1, keepdim=True).clamp(min=1.0))
    ets.export(MaskedMeanClassifier(), (torch.randint(0, 1000, (2, 16)), torch.ones(2, 16)),
               "masked_mean.pt", variable_length=(0, 1))

Both script with torch 1.13 (no tracing needed); python/examples.py holds both as factories.

Command line (the factory: a callable returning the module, `package.module:name` importable from
the current directory, or `path/to/file.py:name`; one --example-shapes per forward input, per
example, dims joined by 'x', optional ':dtype' suffix, default float32; int inputs are drawn from
[0, --int-high)):

    /usr/bin/python3 python/export_torchscript.py --module torchvision.models:resnet50 \\
        --kwargs '{"num_classes": 10}' --example-shapes 3x64x64 --out resnet50.pt
    /usr/bin/python3 python/export_torchscript.py --module python/examples.py:transformer_classifier \\
        --example-shapes 128:int64 --int-high 1000 --out transformer.pt
    /usr/bin/python3 python/export_torchscript.py --module python/examples.py:masked_mean_classifier \\
        --example-shapes 16:int64 --example-shapes 16 --variable-length 0,1 --int-high 1000 \\
        --out masked_mean.pt
    [--method auto|script|trace]
"""
import argparse
import copy
import importlib
import importlib.util
import inspect
import io
import json
import os
import sys
import tempfile
import warnings
from typing import List

import torch
import torch.nn as nn
from torch import Tensor

FORMAT = 1
EXTRA_FILE = "sparktrainer.json"
BUFFERS_METHOD = "sparktrainer_buffers"
BUFFERS_ATTRIBUTE = "sparktrainer_buffer_list"
TOLERANCE = 1e-6
_MODE_LAYERS = (nn.modules.batchnorm._BatchNorm, nn.modules.dropout._DropoutNd)


class ExportError(Exception):
    """A check failed; the message says which and what to do."""


# ---- what the exported file carries ----------------------------------------------------------

def sparktrainer_buffers(self) -> List[Tensor]:
    """The module's buffers (named_buffers() order), the very tensors it uses."""
    return self.sparktrainer_buffer_list


class _TracedWrapper(nn.Module):
    """Carries a traced module (attribute `inner`) plus the buffers method; subclasses fix arity."""
    sparktrainer_buffer_list: List[Tensor]

    def __init__(self, inner):
        super().__init__()
        self.inner = inner
        self.sparktrainer_buffer_list = [b for _, b in self.named_buffers()]

    @torch.jit.export
    def sparktrainer_buffers(self) -> List[Tensor]:
        return self.sparktrainer_buffer_list


class _Traced1(_TracedWrapper):
    def forward(self, input0: Tensor):
        return self.inner(input0)


class _Traced2(_TracedWrapper):
    def forward(self, input0: Tensor, input1: Tensor):
        return self.inner(input0, input1)


class _Traced3(_TracedWrapper):
    def forward(self, input0: Tensor, input1: Tensor, input2: Tensor):
        return self.inner(input0, input1, input2)


class _Traced4(_TracedWrapper):
    def forward(self, input0: Tensor, input1: Tensor, input2: Tensor, input3: Tensor):
        return self.inner(input0, input1, input2, input3)


_TRACED_WRAPPERS = {1: _Traced1, 2: _Traced2, 3: _Traced3, 4: _Traced4}


def _script(work):
    """Scripts `work` (a private copy) as an instance of a dynamic subclass of its own class."""
    cls = type(work)
    annotations = dict(getattr(cls, "__annotations__", {}))
    annotations[BUFFERS_ATTRIBUTE] = List[Tensor]
    sub = type(cls.__name__ + "_sparktrainer", (cls,), {
        "__module__": cls.__module__,
        "__qualname__": cls.__qualname__.replace("<locals>.", "") + "_sparktrainer",
        "__annotations__": annotations,
        BUFFERS_METHOD: torch.jit.export(sparktrainer_buffers),
    })
    work.__class__ = sub
    setattr(work, BUFFERS_ATTRIBUTE, [b for _, b in work.named_buffers()])
    return torch.jit.script(work)


def _trace(work, inputs):
    if len(inputs) not in _TRACED_WRAPPERS:
        raise ExportError(
            f"tracing supports 1 to {max(_TRACED_WRAPPERS)} tensor inputs, the example has "
            f"{len(inputs)}: make the module scriptable, or wrap it in a module taking fewer inputs")
    work.train()
    with torch.random.fork_rng():
        torch.manual_seed(0)
        # check_trace would rerun and compare: it fails on Dropout (random masks); checked below.
        traced = torch.jit.trace(work, inputs, check_trace=False)
    return torch.jit.script(_TRACED_WRAPPERS[len(inputs)](traced))


# ---- helpers -------------------------------------------------------------------------------------

def dtype_name(dtype):
    return str(dtype).replace("torch.", "")


def _as_inputs(example_inputs):
    inputs = (example_inputs,) if isinstance(example_inputs, Tensor) else tuple(example_inputs)
    if not inputs or not all(isinstance(t, Tensor) for t in inputs):
        raise ExportError("example_inputs must be a tensor or a tuple of tensors (with a batch dim)")
    inputs = tuple(t.detach().cpu() for t in inputs)  # exported for, and checked on, the CPU
    for t in inputs:
        if t.dim() == 0 or t.size(0) < 1:
            raise ExportError(f"example input of shape {list(t.shape)} has no batch dimension")
    if len({t.size(0) for t in inputs}) != 1:
        raise ExportError("example inputs differ in batch size: "
                          + ", ".join(str(list(t.shape)) for t in inputs))
    return inputs


def _rows(inputs, n):
    """The examples as a batch of n rows: the first rows, cycled (floats of repeated rows get a
    little noise, so that batch statistics are not degenerate)."""
    out = []
    gen = torch.Generator().manual_seed(1234)
    for t in inputs:
        b = t.size(0)
        idx = torch.arange(n) % b
        rows = t.detach()[idx].clone()
        if b < n and rows.is_floating_point():
            rows[b:] += 0.1 * torch.randn(rows[b:].shape, generator=gen).to(rows.dtype)
        out.append(rows)
    return tuple(out)


def _snapshot(module):
    return [(t, t.detach().clone()) for t in list(module.parameters()) + list(module.buffers())]


def _restore(snapshot):
    with torch.no_grad():
        for t, saved in snapshot:
            t.copy_(saved)


def _run(module, inputs, train, seed=0):
    """Forward in the given mode, with a fixed seed (same dropout masks on every call)."""
    module.train(train)
    with torch.random.fork_rng(), torch.no_grad():
        torch.manual_seed(seed)
        return module(*inputs)


def _first_tensor(out):
    if isinstance(out, Tensor):
        return out
    if isinstance(out, (tuple, list)) and out and isinstance(out[0], Tensor):
        return out[0]
    raise ExportError(f"forward returns {type(out).__name__}"
                      + (f" of {type(out[0]).__name__}" if isinstance(out, (tuple, list)) and out else "")
                      + ": the trainer needs a tensor, or a tuple whose first element is one")


def _check_output(out, batch, mode):
    y = _first_tensor(out)
    if not y.is_floating_point():
        raise ExportError(f"{mode}-mode output has dtype {dtype_name(y.dtype)}: the loss needs floats")
    if y.dim() not in (1, 2) or y.size(0) != batch:
        raise ExportError(
            f"{mode}-mode output has shape {list(y.shape)} for a batch of {batch}: the trainer "
            f"needs [batch, classes] (classification) or [batch] (regression)")
    return y


def _argument_names(exported, work, method, n):
    if method == "script":
        args = exported.forward.schema.arguments[1:]
        required = sum(1 for a in args if not a.has_default_value())
        if not required <= n <= len(args):
            raise ExportError(f"forward takes {required}..{len(args)} inputs "
                              f"({', '.join(a.name for a in args)}), the example has {n}")
        return [a.name for a in args[:n]]
    try:
        params = [p for p in inspect.signature(work.forward).parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        if len(params) >= n:
            return [p.name for p in params[:n]]
    except (TypeError, ValueError):
        pass
    return [f"input{i}" for i in range(n)]


def _tied_parameters(module):
    owners = {}
    for mname, m in module.named_modules(remove_duplicate=False):
        for pname, p in m._parameters.items():
            if p is not None:
                owners.setdefault(id(p), []).append(f"{mname}.{pname}" if mname else pname)
    return [names for names in owners.values() if len(names) > 1]


def _variable_inputs(inputs, variable_length):
    """The indices of the inputs whose first per-example dim is a variable length (a sequence's T:
    token ids and their mask), checked: each has one, and they agree on it in the example."""
    variable = tuple(sorted({int(i) for i in (variable_length or ())}))
    for i in variable:
        if not 0 <= i < len(inputs):
            raise ExportError(f"variable_length names input {i}, the example has {len(inputs)} "
                              f"inputs (0..{len(inputs) - 1})")
        if inputs[i].dim() < 2:
            raise ExportError(f"variable_length names input {i}, shaped {list(inputs[i].shape)}: "
                              f"it has no per-example dim to vary (expected [batch, T, ...])")
    lengths = {inputs[i].size(1) for i in variable}
    if len(lengths) > 1:
        raise ExportError("the variable-length inputs " + ", ".join(str(i) for i in variable)
                          + " differ in their length in the example: "
                          + ", ".join(str(list(inputs[i].shape)) for i in variable))
    return variable


def _with_length(inputs, variable, t):
    """The inputs with the variable-length ones cut or repeated to length t."""
    out = []
    for i, x in enumerate(inputs):
        if i in variable:
            reps = -(-t // x.size(1))
            x = x.repeat(*([1, reps] + [1] * (x.dim() - 2)))[:, :t]
        out.append(x)
    return tuple(out)


def _build(module, example_inputs, method):
    """(exported module, private eager copy, the method used)."""
    if not isinstance(module, nn.Module):
        raise ExportError(f"expected a torch.nn.Module, got {type(module).__name__}")
    if method not in ("auto", "script", "trace"):
        raise ExportError(f"method must be auto, script or trace, not {method!r}")
    inputs2 = _rows(example_inputs, 2)
    work = copy.deepcopy(module).cpu()  # the user's module and class stay as they are
    snap = _snapshot(work)
    if method in ("auto", "script"):
        try:
            exported = _script(work)
            _restore(snap)
            return exported, work, "script"
        except ExportError:
            raise
        except Exception as e:  # noqa: BLE001 -- whatever torch.jit.script raises
            if method == "script":
                raise ExportError(f"torch.jit.script failed: {e}") from e
            first = str(e).strip().splitlines()
            print(f"scripting failed ({first[0] if first else type(e).__name__}); tracing in train mode",
                  file=sys.stderr)
            work = copy.deepcopy(module).cpu()
            snap = _snapshot(work)
    try:
        exported = _trace(work, inputs2)
    except ExportError:
        raise
    except Exception as e:  # noqa: BLE001
        raise ExportError(f"torch.jit.trace failed: {e}") from e
    _restore(snap)  # tracing ran forward in train mode: BatchNorm statistics moved
    return exported, work, "trace"


def _metadata(cls, exported, work, method, inputs, out_shape, variable=()):
    names = _argument_names(exported, work, method, len(inputs))
    buffers = list(exported.named_buffers())
    params = list(exported.named_parameters())
    return {
        "format": FORMAT,
        "torch": torch.__version__,
        "method": method,
        "class": f"{cls.__module__}.{cls.__qualname__}",
        "train_mode_frozen": method == "trace",
        "inputs": [{"name": n,
                    "shape": [-1 if i in variable and d == 0 else s for d, s in enumerate(t.shape[1:])],
                    "dtype": dtype_name(t.dtype)}
                   for i, (n, t) in enumerate(zip(names, inputs))],
        "output": {"shape": out_shape},
        "buffers": [n for n, _ in buffers],
        "buffer_dtypes": [dtype_name(b.dtype) for _, b in buffers],
        "parameters": [n for n, _ in params],
        "trainable": [bool(p.requires_grad) for _, p in params],
    }


def _serialize(exported, meta):
    exported.train()
    buf = io.BytesIO()  # a stream: the zip's folder is "archive", not the temporary file's name
    torch.jit.save(exported, buf, _extra_files={EXTRA_FILE: json.dumps(meta, indent=1)})
    return buf.getvalue()


def _write_atomically(data, path, verify=None):
    path = os.path.abspath(path)
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), prefix="." + os.path.basename(path) + ".",
                               suffix=".tmp")
    try:
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp's 0600 otherwise
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        if verify is not None:
            verify(tmp)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def _verify_file(tmp, exported, meta, inputs2, snap):
    extra = {EXTRA_FILE: ""}
    try:
        loaded = torch.jit.load(tmp, map_location="cpu", _extra_files=extra)
    except Exception as e:  # noqa: BLE001
        raise ExportError(f"torch.jit.load cannot read the file just written: {e}") from e
    if json.loads(extra[EXTRA_FILE] or "null") != meta:
        raise ExportError(f"the reloaded file's {EXTRA_FILE} differs from what was written")
    if [n for n, _ in loaded.named_parameters()] != meta["parameters"]:
        raise ExportError("the reloaded file's parameter names differ from the module's")
    named = [n for n, _ in loaded.named_buffers()]
    returned = getattr(loaded, BUFFERS_METHOD)()
    if named != meta["buffers"] or len(returned) != len(named):
        raise ExportError(f"{BUFFERS_METHOD}() returns {len(returned)} tensors for the "
                          f"{len(named)} buffers {named}")
    for i, name in enumerate(named):
        t = returned[i]
        keep = torch.empty(0, dtype=t.dtype).set_(t)  # the same storage, to put back
        probe = torch.full_like(t, 7) if t.numel() else torch.empty(1, dtype=t.dtype)
        t.set_(probe)
        seen = dict(loaded.named_buffers())[name]
        same = seen.data_ptr() == probe.data_ptr() and seen.shape == probe.shape
        t.set_(keep)
        if not same:
            raise ExportError(f"{BUFFERS_METHOD}()[{i}] is not the module's own buffer {name} "
                              f"after reloading (set_ on it is not seen by the module)")
    _restore(snap)
    want = _first_tensor(_run(exported, inputs2, train=False))
    _restore(snap)
    got = _first_tensor(_run(loaded, inputs2, train=False))
    diff = (got - want).abs().max().item() if want.numel() else 0.0
    if got.shape != want.shape or not diff <= TOLERANCE:
        raise ExportError(f"the reloaded module's eval output differs from the module's by {diff:g} "
                          f"(shapes {list(got.shape)} vs {list(want.shape)})")
    _restore(snap)


# ---- the entry points ----------------------------------------------------------------------------

def export(module, example_inputs, path, method="auto", quiet=False, variable_length=()):
    """Checks and writes `module` as a trainer TorchScript file at `path` (see the module doc).

    example_inputs: a tensor or tuple of tensors, one per forward argument, each with a leading
    batch dimension (the checks use 2 rows: the first ones, repeated if there is only one).
    method: "auto" (script, else trace), "script" or "trace". Returns the json metadata.
    variable_length: indices of the inputs whose first per-example dim is a sequence's length T,
    which varies from batch to batch (a sequence column's ids and mask, `--features COL:ids`):
    recorded as -1, and forward is checked at two more lengths.
    Raises ExportError when a check fails; nothing is written then.
    """
    inputs = _as_inputs(example_inputs)
    variable = _variable_inputs(inputs, variable_length)
    exported, work, used = _build(module, inputs, method)
    snap = _snapshot(exported)
    notes = []

    params = list(exported.named_parameters())
    if not any(p.requires_grad for _, p in params):
        raise ExportError(f"no parameter requires grad ({len(params)} parameters, all frozen): "
                          f"nothing to train")
    for names in _tied_parameters(work):
        notes.append(f"parameter shared by {', '.join(names)} (tied weights): libtorch lists it once "
                     f"per owner, the trainer may update it twice")

    inputs2, inputs3 = _rows(inputs, 2), _rows(inputs, 3)
    outs = {}
    for mode, train, batch in (("train", True, inputs2), ("eval", False, inputs2),
                               ("eval batch-3", False, inputs3)):
        try:
            out = _run(exported, batch, train=train)
        except Exception as e:  # noqa: BLE001
            shapes = ", ".join(f"{list(t.shape)} {dtype_name(t.dtype)}" for t in batch)
            hint = ("; it runs on a batch of 2: does the module (or its trace) have the batch size "
                    "built in?" if batch is inputs3 else "")
            raise ExportError(f"forward fails in {mode} mode on inputs {shapes}{hint}: {e}") from e
        outs[mode] = _check_output(out, batch[0].size(0), mode)
        _restore(snap)
    if variable:
        t = inputs[variable[0]].size(1)
        for other in (1, t + 3):  # a traced module may have the example's length built in
            batch = _with_length(inputs2, variable, other)
            try:
                _check_output(_run(exported, batch, train=False), 2, f"eval length-{other}")
            except Exception as e:  # noqa: BLE001
                raise ExportError(f"forward fails in eval mode when the variable-length inputs "
                                  f"{list(variable)} have length {other} instead of {t}: {e}") from e
            _restore(snap)

    mode_layers = sorted({type(m).__name__ for m in work.modules() if isinstance(m, _MODE_LAYERS)})
    if used == "trace" and mode_layers:
        notes.append(f"traced in train mode, so the mode is frozen: its {', '.join(mode_layers)} "
                     f"layers behave as in training even after eval() (BatchNorm: batch statistics, "
                     f"running statistics updated; Dropout: active); make the module scriptable "
                     f"to get an eval mode")
    elif mode_layers and torch.equal(outs["train"], outs["eval"]):
        notes.append(f"train and eval outputs are equal although the module has "
                     f"{', '.join(mode_layers)}: is the mode used?")

    meta = _metadata(type(module), exported, work, used, inputs, list(outs["eval"].shape[1:]),
                     variable)
    data = _serialize(exported, meta)
    _write_atomically(data, path, verify=lambda tmp: _verify_file(tmp, exported, meta, inputs2, snap))

    for note in notes:
        warnings.warn(note, stacklevel=2)
    if not quiet:
        n_values = sum(p.numel() for _, p in params)
        n_trainable = sum(meta["trainable"])
        ins = ", ".join(f"{i['name']} {i['shape']} {i['dtype']}" for i in meta["inputs"])
        print(f"exported {meta['class']} ({used}) -> {path}: {ins} -> {meta['output']['shape']}; "
              f"{len(params)} parameters ({n_values:,} values, {n_trainable} trainable), "
              f"{len(meta['buffers'])} buffers; torch {torch.__version__}; {len(data):,} bytes"
              + (f"; {len(notes)} warning(s)" if notes else ""))
    return meta


def export_unchecked(module, example_inputs, path, method="auto", variable_length=()):
    """Writes the file like export() -- buffers method, json -- without any check (test fixtures
    of what the trainer must refuse: frozen parameters, wrong output shapes). Returns the json."""
    inputs = _as_inputs(example_inputs)
    variable = _variable_inputs(inputs, variable_length)
    exported, work, used = _build(module, inputs, method)
    snap = _snapshot(exported)
    try:
        out = _first_tensor(_run(exported, _rows(inputs, 2), train=False))
        out_shape = list(out.shape[1:])
    except Exception:  # noqa: BLE001
        out_shape = None
    _restore(snap)
    meta = _metadata(type(module), exported, work, used, inputs, out_shape, variable)
    _write_atomically(_serialize(exported, meta), path)
    return meta


def parse_spec(spec):
    """'3x224x224' -> ([3, 224, 224], torch.float32); '128:int64' -> ([128], torch.int64);
    '' or 'scalar' -> []."""
    shape_part, _, dtype_part = spec.partition(":")
    dtype = getattr(torch, dtype_part or "float32", None)
    if not isinstance(dtype, torch.dtype):
        raise ExportError(f"unknown dtype {dtype_part!r} in {spec!r}")
    shape_part = shape_part.strip()
    if shape_part in ("", "scalar"):
        return [], dtype
    try:
        shape = [int(d) for d in shape_part.lower().split("x")]
    except ValueError:
        raise ExportError(f"bad shape {spec!r}: expected dims joined by 'x', like 3x224x224") from None
    if any(d < 1 for d in shape):
        raise ExportError(f"bad shape {spec!r}: dims must be positive")
    return shape, dtype


def example_inputs_from_specs(specs, batch=2, int_high=2, seed=0):
    gen = torch.Generator().manual_seed(seed)
    inputs = []
    for spec in specs:
        shape, dtype = parse_spec(spec)
        if dtype.is_floating_point:
            inputs.append(torch.randn([batch] + shape, generator=gen).to(dtype))
        elif dtype == torch.bool:
            inputs.append(torch.randint(0, 2, [batch] + shape, generator=gen).bool())
        else:
            inputs.append(torch.randint(0, int_high, [batch] + shape, generator=gen).to(dtype))
    return tuple(inputs)


def load_factory(spec):
    target, sep, name = spec.rpartition(":")
    if not sep or not target or not name:
        raise ExportError(f"--module {spec!r}: expected package.module:factory or file.py:factory")
    try:
        return _load_factory(target, name)
    except (ImportError, AttributeError, OSError) as e:
        raise ExportError(f"--module {spec!r}: {type(e).__name__}: {e}") from e


def _load_factory(target, name):
    if target.endswith(".py"):
        mod_name = os.path.splitext(os.path.basename(target))[0]
        if mod_name in sys.modules or not mod_name.isidentifier():
            mod_name = "_sparktrainer_user_" + "".join(c if c.isalnum() else "_" for c in mod_name)
        loader = importlib.util.spec_from_file_location(mod_name, target)
        if loader is None:
            raise ExportError(f"cannot load {target}")
        mod = importlib.util.module_from_spec(loader)
        sys.modules[mod_name] = mod  # TorchScript looks classes' modules up here
        loader.loader.exec_module(mod)
    else:
        if "" not in sys.path and os.getcwd() not in sys.path:
            sys.path.insert(0, os.getcwd())
        mod = importlib.import_module(target)
    obj = mod
    for part in name.split("."):
        obj = getattr(obj, part)
    return obj


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--module", required=True,
                    help="package.module:factory or path/file.py:factory (returns the nn.Module)")
    ap.add_argument("--kwargs", default="{}", help="JSON object of keyword arguments for the factory")
    ap.add_argument("--example-shapes", action="append", required=True, metavar="SHAPE[:DTYPE]",
                    help="one per forward input, per example: 3x224x224, 20, 128:int64")
    ap.add_argument("--out", required=True, help="the TorchScript file to write")
    ap.add_argument("--method", choices=("auto", "script", "trace"), default="auto")
    ap.add_argument("--int-high", type=int, default=2,
                    help="integer example inputs are drawn from [0, INT_HIGH) (e.g. the vocabulary size)")
    ap.add_argument("--seed", type=int, default=0, help="seed of the factory call and example inputs")
    ap.add_argument("--variable-length", default="", metavar="I,J",
                    help="0-based indices of the inputs whose first per-example dim is a sequence's "
                         "length, which varies per batch (a COL:ids column's ids and mask: 0,1)")
    args = ap.parse_args(argv)
    try:
        factory = load_factory(args.module)
        try:
            kwargs = json.loads(args.kwargs)
        except ValueError as e:
            raise ExportError(f"--kwargs is not JSON: {e}") from e
        torch.manual_seed(args.seed)
        module = factory(**kwargs)
        if not isinstance(module, nn.Module):
            raise ExportError(f"--module {args.module} returned {type(module).__name__}, not an nn.Module")
        inputs = example_inputs_from_specs(args.example_shapes, int_high=args.int_high, seed=args.seed)
        try:
            variable = [int(i) for i in args.variable_length.split(",") if i.strip()]
        except ValueError:
            raise ExportError(f"--variable-length {args.variable_length!r}: expected input "
                              f"indices joined by ',', like 0,1") from None
        export(module, inputs, args.out, method=args.method, variable_length=variable)
    except ExportError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
