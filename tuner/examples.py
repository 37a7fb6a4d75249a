"""Example factory models for ``--model tuner.examples:NAME`` (random weights, nothing
downloaded): ready-made workloads whose inputs vary, for trying shape schedules.

    tuner search --model tuner.examples:text_encoder --batch-sizes 8 \\
        --shape-schedule 8x32,8x128,8x64,8x128 --dynamic false,true

``text_encoder`` is tiny (2 layers, width 64: quick on a CPU); ``text_transformer`` is
BERT-base-sized (12 blocks, width 768), the text model of the knob landscapes on the GPU.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

VOCAB = 1000
VOCAB_BASE = 30522  # BERT's


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


class Block(nn.Module):
    """One pre-norm transformer block, written as people write them: attention through
    ``F.scaled_dot_product_attention``, then a GELU MLP, each with a residual."""

    def __init__(self, width: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.norm1, self.norm2 = nn.LayerNorm(width), nn.LayerNorm(width)
        self.qkv, self.proj = nn.Linear(width, 3 * width), nn.Linear(width, width)
        self.mlp = nn.Sequential(nn.Linear(width, 4 * width), nn.GELU(),
                                 nn.Linear(4 * width, width))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, seq_len, width = x.shape
        q, k, v = (self.qkv(self.norm1(x)).view(batch, seq_len, 3, self.heads, -1)
                   .permute(2, 0, 3, 1, 4))
        attended = F.scaled_dot_product_attention(q, k, v)
        x = x + self.proj(attended.transpose(1, 2).reshape(batch, seq_len, width))
        return x + self.mlp(self.norm2(x))


class TextTransformer(nn.Module):
    """Token ids (batch, seq_len) -> one embedding per sequence (batch, width): a BERT-base-sized
    encoder (12 blocks, width 768, 12 heads, 30,522 tokens) in plain torch, mean-pooled."""

    def __init__(self, width: int = 768, layers: int = 12, heads: int = 12,
                 vocab: int = VOCAB_BASE, max_len: int = 512) -> None:
        super().__init__()
        self.embed, self.position = nn.Embedding(vocab, width), nn.Embedding(max_len, width)
        self.blocks = nn.ModuleList(Block(width, heads) for _ in range(layers))
        self.norm = nn.LayerNorm(width)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        positions = torch.arange(tokens.shape[1], device=tokens.device)
        x = self.embed(tokens) + self.position(positions)
        for block in self.blocks:
            x = block(x)
        return self.norm(x).mean(dim=1)


def text_transformer(batch_size: int, seq_len: int = 128) -> tuple[nn.Module, torch.Tensor]:
    """A BERT-base-sized text encoder over ``seq_len`` token ids (the factory contract with a
    sequence length): the text transformer of the knob landscapes (benchmarks/knobs.py)."""
    model = TextTransformer()
    return model, torch.randint(0, VOCAB_BASE, (batch_size, seq_len))
