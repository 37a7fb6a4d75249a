"""tuner/examples.py: the example factories keep the factory contract (a model and its inputs
for a batch size and a sequence length)."""

from __future__ import annotations

import torch

from tuner.examples import TextTransformer, text_transformer


def test_the_text_transformer_is_bert_base_sized_over_token_ids():
    with torch.device("meta"):  # no memory, no init: the shapes only
        model, tokens = text_transformer(4, seq_len=16)
    assert tokens.shape == (4, 16) and tokens.dtype == torch.int64
    assert len(model.blocks) == 12
    assert 105e6 < sum(p.numel() for p in model.parameters()) < 115e6  # BERT-base: 110M


def test_the_text_transformer_gives_one_embedding_per_sequence():
    torch.manual_seed(0)
    model = TextTransformer(width=32, layers=2, heads=4, vocab=50, max_len=16).eval()
    tokens = torch.randint(0, 50, (3, 8))
    with torch.no_grad():
        out = model(tokens)
        assert out.shape == (3, 32) and torch.isfinite(out).all()
        assert torch.equal(model(tokens), out)  # checkable against eager: no randomness left on
        assert not torch.allclose(model(tokens.flip(1)), out)  # positions count
