"""Example model factories for export_torchscript.py (its docstring's command lines use them).

    /usr/bin/python3 python/export_torchscript.py --module python/examples.py:resnet50 \\
        --example-shapes 3x64x64 --out resnet50.pt
    /usr/bin/python3 python/export_torchscript.py --module python/examples.py:transformer_classifier \\
        --example-shapes 128:int64 --int-high 1000 --out transformer.pt
    /usr/bin/python3 python/export_torchscript.py --module python/examples.py:masked_mean_classifier \\
        --example-shapes 16:int64 --example-shapes 16 --variable-length 0,1 --int-high 1000 \\
        --out masked_mean.pt
"""
import torch
import torch.nn as nn


def resnet50(num_classes=10):
    """torchvision's ResNet-50 (random weights) with a num_classes head."""
    import torchvision
    return torchvision.models.resnet50(num_classes=num_classes)


class TransformerClassifier(nn.Module):
    """Token ids [batch, seq] (int64) -> class scores [batch, classes]: an embedding, a Transformer
    encoder, mean pooling over the sequence, a linear head."""

    def __init__(self, vocab=1000, dim=64, heads=4, layers=2, classes=5, dropout=0.1):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        layer = nn.TransformerEncoderLayer(dim, heads, 4 * dim, dropout=dropout, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, layers)
        self.head = nn.Linear(dim, classes)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.head(self.encoder(self.embed(tokens)).mean(dim=1))


def transformer_classifier(**kwargs):
    return TransformerClassifier(**kwargs)


class MaskedMeanClassifier(nn.Module):
    """A sequence column (--features tokens:ids) -> class scores: forward(ids [batch, T] int64,
    mask [batch, T] float32), the trainer's two tensors of the column, T varying per batch; an
    embedding averaged over the real (mask 1) positions, a linear head."""

    def __init__(self, vocab=1000, dim=64, classes=5):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.head = nn.Linear(dim, classes)

    def forward(self, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        x = self.embed(ids) * mask.unsqueeze(-1)
        return self.head(x.sum(1) / mask.sum(1, keepdim=True).clamp(min=1.0))


def masked_mean_classifier(**kwargs):
    return MaskedMeanClassifier(**kwargs)
