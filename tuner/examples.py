"""Example factory models for ``--model tuner.examples:NAME`` (random weights, nothing
downloaded): ready-made workloads whose inputs vary, for trying shape schedules.

    tuner search --model tuner.examples:text_encoder --batch-sizes 8 \\
        --shape-schedule 8x32,8x128,8x64,8x128 --dynamic false,true
"""

from __future__ import annotations

import torch
from torch import nn

VOCAB = 1000


class TextEncoder(nn.Module):
    """Token ids (batch, seq_len) -> one embedding per sequence (batch, width): a small
    transformer encoder, mean-pooled."""

    def __init__(self, width: int = 64, layers: int = 2, heads: int = 4) -> None:
        super().__init__()
        self.embed = nn.Embedding(VOCAB, width)
        layer = nn.TransformerEncoderLayer(width, heads, dim_feedforward=4 * width,
                                           dropout=0.0, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.encoder(self.embed(tokens)).mean(dim=1)


def text_encoder(batch_size: int, seq_len: int = 64) -> tuple[nn.Module, torch.Tensor]:
    """The factory contract with a sequence length (see tuner.domain.workload)."""
    return TextEncoder(), torch.randint(0, VOCAB, (batch_size, seq_len))
