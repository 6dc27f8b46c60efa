"""The text targets: a seeded corpus with canaries, a tokenizer that splits digits, and a causal LM
whose per-sample gradients under Opacus are exact (so its DP-SGD is DP-SGD)."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from targets.text_corpus import make_text_corpus
from targets.text_models import (
    TextTrainingSpec, TinyCausalLM, document_losses, encode_texts, train_text_target, train_tokenizer,
)


@pytest.fixture(scope="module")
def corpus():
    return make_text_corpus(n_candidates=60, n_pool=60, n_test=20, repetitions=(1, 4), canaries_per_repetition=2,
                            n_controls=3, secret_digits=4, seed=3)


def test_the_corpus_is_a_pure_function_of_its_seed(corpus):
    again = make_text_corpus(n_candidates=60, n_pool=60, n_test=20, repetitions=(1, 4), canaries_per_repetition=2,
                             n_controls=3, secret_digits=4, seed=3)
    assert [r.text for r in again.candidates] == [r.text for r in corpus.candidates]
    assert [c.text for c in again.canaries] == [c.text for c in corpus.canaries]
    other = make_text_corpus(n_candidates=60, n_pool=60, n_test=20, seed=4)
    assert [r.text for r in other.candidates] != [r.text for r in corpus.candidates]


def test_training_set_is_the_coin_flipped_members_plus_each_canary_repeated(corpus):
    texts = corpus.training_texts()
    assert 15 < corpus.candidate_member.sum() < 45  # fair coins on 60 candidates
    assert len(texts) == corpus.candidate_member.sum() + 2 * 1 + 2 * 4
    for canary in corpus.canaries:
        assert texts.count(canary.text) == canary.repetitions
    assert sum(c.repetitions == 0 for c in corpus.canaries) == 3
    assert len({c.name for c in corpus.canaries}) == len(corpus.canaries)
    assert not {c.name for c in corpus.canaries} & {r.name for r in corpus.candidates + corpus.pool + corpus.test}


def test_the_tokenizer_gives_each_digit_its_own_token(corpus):
    tokenizer = train_tokenizer([r.text for r in corpus.pool], vocab_size=300)
    canary = corpus.canaries[0]
    tokens = tokenizer.encode(canary.text).tokens
    assert tokens[-2 - len(canary.secret):-2] == list(canary.secret)  # … d d d d . [EOS]
    ids = encode_texts(tokenizer, [canary.text, corpus.candidates[0].text], 64)
    assert ids.shape == (2, 64) and ids[0, 0] == tokenizer.token_to_id("[BOS]")


def test_the_model_passes_opacus_validation_and_its_per_sample_gradients_are_exact():
    from opacus import GradSampleModule
    from opacus.validators import ModuleValidator

    model = TinyCausalLM(50, d_model=16, n_layers=1, n_heads=2, max_length=12)
    assert ModuleValidator.validate(model, strict=False) == []
    ids = torch.randint(4, 50, (3, 10))
    ids[1, 7:] = 0  # padding
    wrapped = GradSampleModule(model, loss_reduction="sum")
    document_losses(wrapped(ids), ids).sum().backward()
    for i in range(3):
        reference = TinyCausalLM(50, d_model=16, n_layers=1, n_heads=2, max_length=12)
        reference.load_state_dict(model.state_dict())
        document_losses(reference(ids[i:i + 1]), ids[i:i + 1]).sum().backward()
        for (name, p), q in zip(model.named_parameters(), reference.parameters()):
            assert torch.allclose(p.grad_sample[i], q.grad, atol=1e-5), name


def test_dp_training_reaches_the_target_epsilon_and_no_more(corpus):
    tokenizer = train_tokenizer([r.text for r in corpus.pool], vocab_size=300)
    ids = encode_texts(tokenizer, corpus.training_texts(), 48)
    spec = TextTrainingSpec(d_model=16, n_layers=1, n_heads=2, max_length=48, epochs=2, batch_size=8)
    trained = train_text_target(ids, tokenizer.get_vocab_size(), spec, epsilon=4.0, delta=1e-5, accountant="prv",
                                seed=0, device=torch.device("cpu"))
    assert trained.noise_multiplier > 0 and trained.steps > 0
    assert trained.accountant_epsilon <= 4.0 + 1e-2
    plain = train_text_target(ids, tokenizer.get_vocab_size(), spec, epsilon=math.inf, delta=1e-5, accountant="prv",
                              seed=0, device=torch.device("cpu"))
    assert plain.epsilon_target is None and plain.noise_multiplier is None and np.isfinite(plain.final_loss)
