"""Language-model membership attacks: reference values on hand-made statistics, AUC ≈ 1 on a model
that memorised its members, ≈ 0.5 on an untrained one, and the blind baseline's false alarms."""

from __future__ import annotations

import math
import zlib

import numpy as np
import pytest
import torch

from attacks import TEXT_ATTACKS, TextAttackContext, get_text_attack
from attacks.blind_baseline import blind_baseline_test
from attacks.min_k_plus_plus import min_k_plus_plus_scores
from attacks.text_base import lowest_k_mean
from attacks.text_outputs import TokenStatistics, statistics_from_logits, token_statistics
from attacks.zlib_ratio import zlib_entropy_bits
from audit.statistics.attack_metrics import auc_with_ci
from targets.text_corpus import make_text_corpus
from targets.text_models import TextTrainingSpec, TinyCausalLM, encode_texts, train_text_target, train_tokenizer


def test_token_statistics_match_a_hand_computation():
    logits = torch.tensor([[[0.0, 1.0, 2.0], [2.0, 0.0, 0.0], [0.0, 0.0, 0.0]]])
    ids = torch.tensor([[1, 2, 0]])  # the last target is padding
    stats = statistics_from_logits(logits, ids)
    log_p = torch.log_softmax(torch.tensor([0.0, 1.0, 2.0], dtype=torch.float64), 0)
    assert stats.logprob[0, 0] == pytest.approx(float(log_p[2]))
    assert np.isnan(stats.logprob[0, 1])
    p = log_p.exp()
    mean = float((p * log_p).sum())
    assert stats.mean[0, 0] == pytest.approx(mean)
    assert stats.std[0, 0] == pytest.approx(math.sqrt(float((p * (log_p - mean) ** 2).sum())))


def test_min_k_and_min_k_plus_plus_reference_values():
    values = np.array([[-1.0, -5.0, -2.0, -0.5, -3.0, np.nan]])
    assert lowest_k_mean(values, 0.2)[0] == pytest.approx(-5.0)  # ⌈0.2·5⌉ = 1 token
    assert lowest_k_mean(values, 0.4)[0] == pytest.approx(-4.0)  # the 2 lowest
    mean = np.full_like(values, -2.0)
    std = np.full_like(values, 2.0)
    assert min_k_plus_plus_scores(values, mean, std, 0.4)[0] == pytest.approx(((-5 + 2) / 2 + (-3 + 2) / 2) / 2)
    assert zlib_entropy_bits("abc") == 8 * len(zlib.compress(b"abc", 9))


@pytest.fixture(scope="module")
def memorised():
    """A small LM trained to memorise 24 member records; 24 coin-flip non-members it never saw."""
    corpus = make_text_corpus(
        n_candidates=48, n_pool=60, n_test=10, repetitions=(1,), canaries_per_repetition=1, n_controls=1, seed=11
    )
    tokenizer = train_tokenizer([r.text for r in corpus.pool], vocab_size=300)
    members = corpus.candidate_member
    spec = TextTrainingSpec(d_model=48, n_layers=2, n_heads=4, max_length=48, epochs=60, batch_size=8, lr=3e-3)
    ids = encode_texts(tokenizer, [r.text for r in corpus.member_records], 48)
    target = train_text_target(
        ids,
        tokenizer.get_vocab_size(),
        spec,
        epsilon=math.inf,
        delta=1e-5,
        accountant="prv",
        seed=1,
        device=torch.device("cpu"),
    ).model
    pool_ids = encode_texts(tokenizer, [r.text for r in corpus.pool], 48)
    reference = train_text_target(
        pool_ids,
        tokenizer.get_vocab_size(),
        spec,
        epsilon=math.inf,
        delta=1e-5,
        accountant="prv",
        seed=2,
        device=torch.device("cpu"),
    ).model
    candidates = encode_texts(tokenizer, [r.text for r in corpus.candidates], 48)
    untrained = TinyCausalLM(tokenizer.get_vocab_size(), d_model=48, n_layers=2, n_heads=4, max_length=48).eval()
    return corpus, members, candidates, target, reference, untrained


@pytest.mark.parametrize("name", sorted(TEXT_ATTACKS))
def test_a_model_that_memorised_its_members_gives_auc_near_one(memorised, name):
    corpus, members, candidates, target, reference, _ = memorised
    context = TextAttackContext([r.text for r in corpus.candidates], reference=token_statistics(reference, candidates))
    auc, _ = auc_with_ci(get_text_attack(name).scores(token_statistics(target, candidates), context), members)
    assert auc > 0.95


@pytest.fixture(scope="module")
def untrained():
    """Two never-trained models (target and reference) scoring 300 coin-flip candidates."""
    corpus = make_text_corpus(n_candidates=300, n_pool=20, n_test=10, seed=12)
    tokenizer = train_tokenizer([r.text for r in corpus.pool], vocab_size=300)
    candidates = encode_texts(tokenizer, [r.text for r in corpus.candidates], 48)
    torch.manual_seed(0)
    target = TinyCausalLM(tokenizer.get_vocab_size(), d_model=32, n_layers=1, n_heads=2, max_length=48).eval()
    other = TinyCausalLM(tokenizer.get_vocab_size(), d_model=32, n_layers=1, n_heads=2, max_length=48).eval()
    context = TextAttackContext([r.text for r in corpus.candidates], reference=token_statistics(other, candidates))
    return corpus, token_statistics(target, candidates), context


@pytest.mark.parametrize("name", sorted(TEXT_ATTACKS))
def test_an_untrained_model_gives_auc_near_one_half(untrained, name):
    corpus, stats, context = untrained
    scores = get_text_attack(name).scores(stats, context)
    auc, _ = auc_with_ci(scores, corpus.candidate_member)
    assert abs(auc - 0.5) < 0.1  # 150 vs 150 candidates: the SD of a chance AUC is about 0.033


def test_reference_ratio_refuses_to_run_without_a_reference():
    stats = TokenStatistics(np.zeros((2, 3)), np.zeros((2, 3)), np.ones((2, 3)))
    with pytest.raises(ValueError, match="reference"):
        get_text_attack("reference_ratio").scores(stats, TextAttackContext(["a", "b"]))


def test_the_blind_baseline_rarely_flags_coin_flipped_sets():
    """Null data (membership a fair coin on one distribution): the shift flag (permutation p ≤ 0.05)
    should fire in at most 5 % of repeats; 4 or more of 20 has probability 1.6 % at 5 %."""
    corpus = make_text_corpus(n_candidates=2000, n_pool=20, n_test=10, seed=13)
    texts = [r.text for r in corpus.candidates]
    rng = np.random.default_rng(0)
    alarms = 0
    for repeat in range(20):
        rows = rng.choice(len(texts), size=80, replace=False)
        members = rng.random(80) < 0.5
        _, _, p_value = blind_baseline_test([texts[i] for i in rows], members, seed=repeat, permutations=19)
        alarms += p_value <= 0.05
    assert alarms <= 3


def test_the_blind_baseline_flags_members_collected_differently():
    corpus = make_text_corpus(n_candidates=200, n_pool=20, n_test=10, seed=14)
    members = np.arange(200) < 100
    # Members are notes written in a later template: the text alone tells them apart.
    texts = [r.text + (" signed dr smith ." if m else "") for r, m in zip(corpus.candidates, members)]
    scores, auc, p_value = blind_baseline_test(texts, members, permutations=19)
    assert auc > 0.9 and p_value == pytest.approx(1 / 20)  # no permutation comes close
    assert auc_with_ci(scores, members)[0] == pytest.approx(auc)
