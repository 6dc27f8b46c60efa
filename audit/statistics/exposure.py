"""Exposure of a canary's secret (Carlini, Liu, Erlingsson, Kos, Song 2019, "The Secret Sharer:
Evaluating and Testing Unintended Memorization in Neural Networks", arXiv 1802.08232).

exposure = log2 |R| − log2 rank(s), where R is the space the secret was drawn from and rank(s) is
the secret's position when every candidate r ∈ R is sorted by the model's likelihood (rank 1 =
most likely). A model that never saw the secret gives rank uniform on {1 … |R|}: exposure has mean
1/ln 2 ≈ 1.44 bits whatever |R|, and P(exposure ≥ x) = 2^−x. The maximum, log2 |R|, means the
secret is the model's first choice.

Ranks count ties against the secret (rank = #candidates at least as likely, itself included): a
model that gives every secret the same likelihood then has exposure 0, not log2 |R|.

Where R is too large to enumerate, §4.3's estimate: sample candidates, fit a skew-normal to
their log-perplexities (−log-likelihood), and read the secret's rank fraction from the fitted CDF:
exposure ≈ −log2 F(log-perplexity of s). An estimate under that distributional assumption.
"""

from __future__ import annotations

import math

import numpy as np

RANDOM_EXPOSURE_MEAN = 1.0 / math.log(2.0)  # E[−log2 U], U uniform: the mean exposure of an unseen secret


def rank_of_secret(log_likelihoods: np.ndarray, secret: int) -> int:
    """1 + the number of other candidates at least as likely as candidate `secret` (ties count against it)."""
    values = np.asarray(log_likelihoods, dtype=np.float64)
    return int(np.sum(values >= values[secret]))


def exposure_from_rank(rank: int, space_size: int) -> float:
    if not 1 <= rank <= space_size:
        raise ValueError(f"rank must be in [1, {space_size}], got {rank}")
    return math.log2(space_size) - math.log2(rank)


def exposure_exact(log_likelihoods: np.ndarray, secret: int) -> float:
    """Exposure by enumeration: `log_likelihoods` of every candidate of the space, `secret` its index."""
    return exposure_from_rank(rank_of_secret(log_likelihoods, secret), len(log_likelihoods))


def exposure_extrapolated(secret_log_likelihood: float, sampled_log_likelihoods: np.ndarray, space_size: int) -> float:
    """Carlini et al. 2019 §4.3: −log2 of the fitted skew-normal CDF of log-perplexity at the secret's,
    capped at log2 |R| (the most a rank can say)."""
    from scipy.stats import skewnorm

    perplexities = -np.asarray(sampled_log_likelihoods, dtype=np.float64)
    if perplexities.size < 20:
        raise ValueError("the extrapolated exposure needs at least 20 sampled candidates")
    shape, loc, scale = skewnorm.fit(perplexities)
    log_cdf = skewnorm.logcdf(-secret_log_likelihood, shape, loc, scale)
    return float(min(max(-log_cdf / math.log(2.0), 0.0), math.log2(space_size)))


def exposure_p_value(exposure: float) -> float:
    """P(exposure ≥ x) for a secret the model never saw (rank uniform): 2^−x, the chance level."""
    return float(min(1.0, 2.0 ** (-exposure)))
