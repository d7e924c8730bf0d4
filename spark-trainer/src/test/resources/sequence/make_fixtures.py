#!/usr/bin/python3
"""Writes the sequence models' reference fixtures (embed.json, transformer.json,
transformer_gelu.json) for SequenceStepTest, with PyTorch (Debian's python3-torch 1.13:
run it with /usr/bin/python3).

Each fixture holds initial parameters (in the Java model's parameter order), 5 batches of
variable-length token ids padded to the batch's own longest sequence with a mask, and what
PyTorch eager computes from them with torch.optim.Adam(lr=1e-2, eps=1e-4): the loss of every step and the
final parameters. The forward is the models' exact math (docs/models.md, "Sequence models");
for the Transformer it is also checked here against nn.TransformerEncoderLayer(norm_first=True,
batch_first=True) with src_key_padding_mask, on the rows that have a real token.
"""
import json
import os

import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
VOCAB, MAX_LEN, CLASSES, BATCH, STEPS, LR = 50, 12, 3, 8, 5, 1e-2
# Adam's epsilon: attention's key bias has a gradient of exactly 0 in exact arithmetic (it shifts
# every score of a query alike), so both sides compute rounding noise (~1e-9) for it, which Adam
# with eps=1e-8 would turn into steps of about lr in a random direction. With 1e-4 that noise moves
# it by ~1e-7; the other gradients are 1e-4 and up.
EPS = 1e-4


def batches(gen):
    out = []
    for s in range(STEPS):
        lengths = torch.randint(0, MAX_LEN + 1, (BATCH,), generator=gen)
        lengths[s % BATCH] = 0  # an empty sequence in every batch
        lengths[(s + 3) % BATCH] = MAX_LEN if s == 0 else lengths[(s + 3) % BATCH]
        t = max(1, int(lengths.max()))
        ids = torch.zeros(BATCH, t, dtype=torch.int64)
        mask = torch.zeros(BATCH, t)
        for i in range(BATCH):
            n = int(lengths[i])
            ids[i, :n] = torch.randint(1, VOCAB, (n,), generator=gen)
            mask[i, :n] = 1
        labels = torch.randint(0, CLASSES, (BATCH,), generator=gen)
        out.append((ids, mask, labels))
    return out


def masked_mean(x, mask):
    return (mask.unsqueeze(-1) * x).sum(1) / mask.sum(1, keepdim=True).clamp(min=1)


def embed_params(gen, dim):
    return [
        ("01TokenEmbedding_tokens", torch.randn(VOCAB, dim, generator=gen) * 0.5),
        ("02PoolHead_weight", (torch.rand(CLASSES, dim, generator=gen) - 0.5) * 0.6),
        ("02PoolHead_bias", (torch.rand(CLASSES, generator=gen) - 0.5) * 0.2),
    ]


def embed_forward(p, ids, mask):
    x = F.embedding(ids, p[0])
    return F.linear(masked_mean(x, mask), p[1], p[2])


def transformer_params(gen, layers, dim, ff):
    def u(*shape, scale):
        return (torch.rand(*shape, generator=gen) - 0.5) * 2 * scale

    ps = [
        ("01TokenEmbedding_tokens", torch.randn(VOCAB, dim, generator=gen) * 0.5),
        ("01TokenEmbedding_positions", torch.randn(MAX_LEN, dim, generator=gen) * 0.1),
    ]
    for i in range(layers):
        n = "%02dEncoderLayer_" % (i + 2)
        ps += [
            (n + "norm1_gamma", 1 + u(dim, scale=0.1)),
            (n + "norm1_beta", u(dim, scale=0.1)),
            (n + "in_proj_weight", u(3 * dim, dim, scale=dim**-0.5)),
            (n + "in_proj_bias", u(3 * dim, scale=0.1)),
            (n + "out_proj_weight", u(dim, dim, scale=dim**-0.5)),
            (n + "out_proj_bias", u(dim, scale=0.1)),
            (n + "norm2_gamma", 1 + u(dim, scale=0.1)),
            (n + "norm2_beta", u(dim, scale=0.1)),
            (n + "linear1_weight", u(ff, dim, scale=dim**-0.5)),
            (n + "linear1_bias", u(ff, scale=0.1)),
            (n + "linear2_weight", u(dim, ff, scale=ff**-0.5)),
            (n + "linear2_bias", u(dim, scale=0.1)),
        ]
    n = "%02dPoolHead_" % (layers + 2)
    ps += [
        (n + "norm_gamma", 1 + u(dim, scale=0.1)),
        (n + "norm_beta", u(dim, scale=0.1)),
        (n + "weight", u(CLASSES, dim, scale=dim**-0.5)),
        (n + "bias", u(CLASSES, scale=0.1)),
    ]
    return ps


def encoder_layer(x, bias, w, heads, act):
    b, t, d = x.shape
    dh = d // heads
    h = F.layer_norm(x, (d,), w[0], w[1], 1e-5)
    q, k, v = F.linear(h, w[2], w[3]).chunk(3, -1)
    q = q.reshape(b, t, heads, dh).transpose(1, 2)
    k = k.reshape(b, t, heads, dh).transpose(1, 2)
    v = v.reshape(b, t, heads, dh).transpose(1, 2)
    scores = (q * dh**-0.5) @ k.transpose(-1, -2) + bias
    attn = (scores.softmax(-1) @ v).transpose(1, 2).reshape(b, t, d)
    x = x + F.linear(attn, w[4], w[5])
    h = F.layer_norm(x, (d,), w[6], w[7], 1e-5)
    return x + F.linear(act(F.linear(h, w[8], w[9])), w[10], w[11])


def transformer_forward(p, ids, mask, layers, heads, act, trace=None):
    t = ids.shape[1]
    x = F.embedding(ids, p[0]) + p[1][:t]
    bias = ((mask - 1) * 1e9).reshape(ids.shape[0], 1, 1, t)
    for i in range(layers):
        x = encoder_layer(x, bias, p[2 + 12 * i : 14 + 12 * i], heads, act)
        if trace is not None:
            trace.append(x)
    e = 2 + 12 * layers
    x = F.layer_norm(x, (x.shape[-1],), p[e], p[e + 1], 1e-5)
    return F.linear(masked_mean(x, mask), p[e + 2], p[e + 3])


def check_against_nn(p, ids, mask, layers, dim, heads, ff, activation):
    """The exact math is nn.TransformerEncoderLayer's on every row with a real token."""
    act = F.gelu if activation == "gelu" else F.relu
    trace = []
    transformer_forward(p, ids, mask, layers, heads, act, trace)
    x = F.embedding(ids, p[0]) + p[1][: ids.shape[1]]
    real = mask.sum(1) > 0
    for i in range(layers):
        layer = torch.nn.TransformerEncoderLayer(
            dim, heads, ff, dropout=0.0, activation=activation, batch_first=True, norm_first=True
        )
        w = p[2 + 12 * i : 14 + 12 * i]
        with torch.no_grad():
            layer.norm1.weight.copy_(w[0]); layer.norm1.bias.copy_(w[1])
            layer.self_attn.in_proj_weight.copy_(w[2]); layer.self_attn.in_proj_bias.copy_(w[3])
            layer.self_attn.out_proj.weight.copy_(w[4]); layer.self_attn.out_proj.bias.copy_(w[5])
            layer.norm2.weight.copy_(w[6]); layer.norm2.bias.copy_(w[7])
            layer.linear1.weight.copy_(w[8]); layer.linear1.bias.copy_(w[9])
            layer.linear2.weight.copy_(w[10]); layer.linear2.bias.copy_(w[11])
        layer.train()
        x = layer(x, src_key_padding_mask=mask == 0)
        diff = (x[real] - trace[i][real]).abs().max().item()
        assert diff < 1e-5, "layer %d differs from nn.TransformerEncoderLayer by %g" % (i, diff)
        x = trace[i]  # continue from the exact math (empty rows are NaN in nn's)


def run(name, params, forward, data):
    p = [v.clone().requires_grad_(True) for _, v in params]
    opt = torch.optim.Adam(p, lr=LR, eps=EPS)
    losses = []
    for ids, mask, labels in data:
        opt.zero_grad()
        loss = F.cross_entropy(forward(p, ids, mask), labels)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    fixture = {
        "vocab": VOCAB,
        "max_length": MAX_LEN,
        "classes": CLASSES,
        "batch": BATCH,
        "lr": LR,
        "eps": EPS,
        "parameters": [
            {"name": n, "shape": list(v.shape), "data": v.flatten().tolist()} for n, v in params
        ],
        "steps": [
            {"ids": ids.tolist(), "mask": mask.tolist(), "labels": labels.tolist()}
            for ids, mask, labels in data
        ],
        "losses": losses,
        "final": [v.detach().flatten().tolist() for v in p],
        "torch": torch.__version__,
    }
    with open(os.path.join(HERE, name + ".json"), "w") as f:
        json.dump(fixture, f)
    print(name, "losses", ["%.5f" % l for l in losses])


def main():
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(32)
    data = batches(gen)
    run("embed", embed_params(gen, 16), embed_forward, data)
    for name, layers, dim, heads, ff, activation in [
        ("transformer", 2, 16, 4, 32, "relu"),
        ("transformer_gelu", 1, 16, 2, 64, "gelu"),
    ]:
        params = transformer_params(gen, layers, dim, ff)
        act = F.gelu if activation == "gelu" else F.relu
        for ids, mask, _ in data:
            check_against_nn([v for _, v in params], ids, mask, layers, dim, heads, ff, activation)

        def forward(p, ids, mask, layers=layers, heads=heads, act=act):
            return transformer_forward(p, ids, mask, layers, heads, act)

        run(name, params, forward, data)


if __name__ == "__main__":
    main()
