"""The text targets: a seeded corpus with canaries, a tokenizer that splits digits, and a causal LM
whose per-sample gradients under Opacus are exact (so its DP-SGD is DP-SGD)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from targets.text_corpus import make_text_corpus
from targets.text_models import (
    TextTrainingSpec,
    TinyCausalLM,
    document_losses,
    encode_texts,
    train_text_target,
    train_tokenizer,
)


@pytest.fixture(scope="module")
def corpus():
    return make_text_corpus(
        n_candidates=60,
        n_pool=60,
        n_test=20,
        repetitions=(1, 4),
        canaries_per_repetition=2,
        n_controls=3,
        secret_digits=4,
        seed=3,
    )


def test_the_corpus_is_a_pure_function_of_its_seed(corpus):
    again = make_text_corpus(
        n_candidates=60,
        n_pool=60,
        n_test=20,
        repetitions=(1, 4),
        canaries_per_repetition=2,
        n_controls=3,
        secret_digits=4,
        seed=3,
    )
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
    assert tokens[-2 - len(canary.secret) : -2] == list(canary.secret)  # … d d d d . [EOS]
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
        document_losses(reference(ids[i : i + 1]), ids[i : i + 1]).sum().backward()
        for (name, p), q in zip(model.named_parameters(), reference.parameters()):
            assert torch.allclose(p.grad_sample[i], q.grad, atol=1e-5), name


def test_dp_training_reaches_the_target_epsilon_and_no_more(corpus):
    tokenizer = train_tokenizer([r.text for r in corpus.pool], vocab_size=300)
    ids = encode_texts(tokenizer, corpus.training_texts(), 48)
    spec = TextTrainingSpec(d_model=16, n_layers=1, n_heads=2, max_length=48, epochs=2, batch_size=8)
    trained = train_text_target(
        ids,
        tokenizer.get_vocab_size(),
        spec,
        epsilon=4.0,
        delta=1e-5,
        accountant="prv",
        seed=0,
        device=torch.device("cpu"),
    )
    assert trained.noise_multiplier > 0 and trained.steps > 0
    assert trained.accountant_epsilon <= 4.0 + 1e-2
    plain = train_text_target(
        ids,
        tokenizer.get_vocab_size(),
        spec,
        epsilon=math.inf,
        delta=1e-5,
        accountant="prv",
        seed=0,
        device=torch.device("cpu"),
    )
    assert plain.epsilon_target is None and plain.noise_multiplier is None and np.isfinite(plain.final_loss)


def test_training_documents_give_each_canary_one_owner_for_all_its_copies(corpus):
    texts, owners = corpus.training_documents()
    assert texts == corpus.training_texts() and len(owners) == len(texts)
    n_members = int(corpus.candidate_member.sum())
    assert list(owners[:n_members]) == list(range(n_members))  # one person per member record
    inserted = [c for c in corpus.canaries if c.repetitions]
    assert owners.max() + 1 == n_members + len(inserted)
    for canary in inserted:
        persons = {int(owners[i]) for i, t in enumerate(texts) if t == canary.text}
        assert len(persons) == 1  # all k copies belong to one person


def _tiny_private(max_grad_norm, n_persons, noise_multiplier=0.0):
    from opacus import PrivacyEngine
    from torch.utils.data import DataLoader, TensorDataset

    torch.manual_seed(0)
    model = TinyCausalLM(40, d_model=16, n_layers=1, n_heads=2, max_length=12)
    reference = TinyCausalLM(40, d_model=16, n_layers=1, n_heads=2, max_length=12)
    reference.load_state_dict(model.state_dict())
    loader = DataLoader(TensorDataset(torch.arange(n_persons)), batch_size=n_persons)
    private, optimizer, _ = PrivacyEngine().make_private(
        module=model,
        optimizer=torch.optim.SGD(model.parameters(), lr=1.0),
        data_loader=loader,
        noise_multiplier=noise_multiplier,
        max_grad_norm=max_grad_norm,
        poisson_sampling=True,
    )
    return private, optimizer, reference


def _flat_gradient(model, ids):
    model.zero_grad()
    document_losses(model(ids), ids).sum().backward()
    return torch.cat([p.grad.flatten() for p in model.parameters()])


def test_user_level_clipping_clips_each_persons_summed_gradient():
    """Three persons: one document, a document typed 4 times, two different documents. Opacus's
    per-document gradients summed per person must equal the plain per-person gradients (norms
    known: the 4-times person's is exactly 4x its document's), and the noiseless DP step must be
    the mean over the expected batch of each person's sum clipped to C."""
    from targets.text_models import PersonBatches, sum_grad_samples_by_person

    torch.manual_seed(1)
    docs = torch.randint(4, 40, (4, 10))
    token_ids = torch.cat([docs[0:1], docs[1:2].repeat(4, 1), docs[2:4]]).numpy()
    owners = np.array([0, 1, 1, 1, 1, 2, 2])
    batches = PersonBatches(token_ids, owners)
    ids, owner = batches.documents(torch.tensor([0, 1, 2]))
    assert owner.tolist() == [0, 1, 1, 1, 1, 2, 2]
    clip = 0.05
    private, optimizer, reference = _tiny_private(clip, 3)
    per_person = [_flat_gradient(reference, ids[owner == i]) for i in range(3)]
    assert torch.allclose(per_person[1], 4 * _flat_gradient(reference, ids[1:2]), atol=1e-5)
    assert all(g.norm() > clip for g in per_person)  # every person is clipped: the test sees clipping
    optimizer.zero_grad(set_to_none=True)
    document_losses(private(ids), ids).mean().backward()
    sum_grad_samples_by_person(optimizer.params, owner, 3)
    stacked = torch.cat([p.grad_sample.flatten(1) for p in optimizer.params], dim=1)
    for i in range(3):
        assert torch.allclose(stacked[i], per_person[i], atol=1e-5)
    optimizer.pre_step()  # Opacus clips, sums, adds noise (σ = 0 here) and divides by the expected batch
    step = torch.cat([p.grad.flatten() for p in optimizer.params])
    expected = sum(g * min(1.0, clip / float(g.norm())) for g in per_person) / optimizer.expected_batch_size
    assert torch.allclose(step, expected, atol=1e-6)
    assert float(step.norm()) <= 3 * clip / optimizer.expected_batch_size + 1e-6  # 4 copies weigh as 1 person


@pytest.mark.slow
def test_user_level_dp_training_samples_persons(corpus):
    tokenizer = train_tokenizer([r.text for r in corpus.pool], vocab_size=300)
    texts, owners = corpus.training_documents()
    ids = encode_texts(tokenizer, texts, 48)
    spec = TextTrainingSpec(d_model=16, n_layers=1, n_heads=2, max_length=48, epochs=1, batch_size=8)
    trained = train_text_target(
        ids,
        tokenizer.get_vocab_size(),
        spec,
        epsilon=4.0,
        delta=1e-5,
        accountant="prv",
        seed=0,
        device=torch.device("cpu"),
        owners=owners,
    )
    n_persons = int(owners.max()) + 1
    assert trained.privacy_unit == "person" and trained.n_units == n_persons < len(ids)
    assert abs(trained.sample_rate - 1 / math.ceil(n_persons / 8)) < 1e-12  # q over persons, not documents
    assert trained.accountant_epsilon <= 4.0 + 1e-2 and np.isfinite(trained.final_loss)
