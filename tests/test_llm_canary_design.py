"""Panda et al.'s canary design as the llm preset uses it: each canary its own new token(s) where there
are enough, the training loss on the secret only (SFT-style), the score against the pretrained model."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from targets.hf_causal_lm import HFLMSpec, build_hf_lm
from targets.llm_canaries import make_canaries, secret_scores
from targets.text_corpus import make_text_corpus
from targets.text_models import PersonBatches, document_losses, train_tokenizer

SPEC = HFLMSpec(d_model=16, n_layers=1, n_heads=2, max_length=24)


@pytest.fixture(scope="module")
def tokenizer():
    corpus = make_text_corpus(
        n_candidates=20, n_pool=40, n_test=10, repetitions=(1,), canaries_per_repetition=1, n_controls=1, seed=3
    )
    return train_tokenizer([r.text for r in corpus.pool], 200)


def _canaries(tokenizer, design: str, new_ids: int, length: int, m: int = 50):
    vocab = tokenizer.get_vocab_size()
    names = [f"person {i}" for i in range(m)]
    return make_canaries(
        design,
        tokenizer,
        names,
        secret_length=length,
        repetitions=4,
        max_length=24,
        new_token_ids=range(vocab, vocab + new_ids),
        seed=11,
    )


def _secrets(c) -> np.ndarray:
    return np.stack([c.token_ids[i, s : s + c.secret_length] for i, s in enumerate(c.secret_start)])


def test_each_panda_canary_gets_its_own_new_tokens_where_there_are_enough(tokenizer):
    own = _secrets(_canaries(tokenizer, "panda", new_ids=50, length=1))
    assert len(np.unique(own)) == own.size  # 50 canaries, 50 ids: one each
    own2 = _secrets(_canaries(tokenizer, "panda", new_ids=100, length=2))
    assert len(np.unique(own2)) == own2.size
    shared = _secrets(_canaries(tokenizer, "panda", new_ids=20, length=1))
    assert len(np.unique(shared)) < shared.size  # too few ids: drawn with replacement, as before
    vocab = tokenizer.get_vocab_size()
    assert set(own.ravel()) <= set(range(vocab, vocab + 50))


def test_the_secret_sharer_baseline_does_not_depend_on_the_new_tokens(tokenizer):
    a = _canaries(tokenizer, "secret_sharer", new_ids=20, length=4)
    b = _canaries(tokenizer, "secret_sharer", new_ids=5000, length=4)
    np.testing.assert_array_equal(a.token_ids, b.token_ids)
    np.testing.assert_array_equal(a.inserted, b.inserted)


def test_the_secret_only_loss_is_what_the_score_reads(tokenizer):
    c = _canaries(tokenizer, "panda", new_ids=200, length=3)
    mask = c.secret_targets()
    assert mask.shape == (c.m, c.token_ids.shape[1] - 1)
    assert (mask.sum(axis=1) == 3).all()
    assert mask[np.arange(c.m), c.secret_start - 1].all()  # target t is token t + 1: the first secret token
    model = build_hf_lm(tokenizer.get_vocab_size() + 200, SPEC, seed=0).eval()
    ids = torch.as_tensor(c.token_ids)
    with torch.no_grad():
        logits = model(ids)
        masked = document_losses(logits, ids, torch.as_tensor(mask)).numpy()
        everything = document_losses(logits, ids, torch.ones_like(torch.as_tensor(mask))).numpy()
        whole = document_losses(logits, ids).numpy()
    np.testing.assert_allclose(masked, -secret_scores(model, c), rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(everything, whole)  # an all-true mask is the whole document's loss
    assert not np.allclose(masked, whole)


def test_person_batches_carry_each_rows_mask():
    rng = np.random.default_rng(0)
    tokens = rng.integers(4, 50, size=(7, 6))
    owners = np.array([2, 0, 1, 2, 0, 3, 1])
    masks = rng.random((7, 5)) < 0.5
    persons = PersonBatches(tokens, owners, loss_mask=masks)
    people = torch.tensor([3, 0, 2])
    rows, _ = persons.documents(people)
    drawn = persons.masks(people)
    assert drawn is not None
    for row, mask in zip(rows.numpy(), drawn.numpy(), strict=True):
        (i,) = [i for i in range(7) if (tokens[i] == row).all()]
        np.testing.assert_array_equal(mask, masks[i])
    assert PersonBatches(tokens, owners).masks(people) is None
