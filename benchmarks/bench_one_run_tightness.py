"""Tightness of the one-run bounds (README table): Steinke et al. 2023 and the f-DP audit of
Mahloujifar, Melis, Chaudhuri 2024 in the best case a one-run audit can meet.

The best case: m canaries, each inserted by a fair coin, each observed as exactly the claimed
Gaussian shift — the score of canary i is μ·bᵢ + zᵢ with zᵢ ~ N(0, 1), μ = √T/σ. That is what
full-batch (q = 1) DP-SGD gives a Dirac canary on a coordinate of its own, so no audit of such a
mechanism in one run can show more; it is NOT an audit of any code (the white-box table is). For each
target ε, σ is calibrated for q = 1, T steps (Opacus PRV, as `bench_dirac_tightness.py`), and the
table gives the claim (PLD ε), Steinke et al.'s (ε, δ) bound (`epsilon_lower_bound_one_run`, sound
for any mechanism), the f-DP audit's GDP-family ε (`fdp_one_run_audit`; a lower bound only because
the curve is Gaussian here) and whether the f-DP test refuted the true claim (it must not), each the
mean over `--seeds` draws, jax-privacy's `Split` strategy re-implemented (`split_strategy_bound`,
for comparison), and the seconds one draw's audits take.

    python benchmarks/bench_one_run_tightness.py [--canaries 1000 10000 100000] [--seeds 3]
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from opacus.accountants.utils import get_noise_multiplier  # noqa: E402

from audit.statistics.accountants import DPSGDEvent, epsilon_pld  # noqa: E402
from audit.statistics.epsilon_bounds import epsilon_lower_bound_one_run, one_run_epsilon_from_counts  # noqa: E402
from audit.statistics.fdp_one_run import fdp_one_run_audit  # noqa: E402
from audit.statistics.tradeoff_curves import dpsgd_privacy_profile  # noqa: E402

DELTA = 1e-5


def split_strategy_bound(
    scores: np.ndarray, coins: np.ndarray, delta: float, alpha: float = 0.05, seed: int = 0
) -> float:
    """jax-privacy's `Split` strategy for its one-run bound, re-implemented here for comparison (not
    their code): members and non-members are each split in half (seeded); on the first half the
    one-sided rule "guess in for the k highest scores" (k₋ = 0, as jax-privacy allows) is chosen to
    maximise Steinke et al.'s bound at `alpha` with no correction; its score threshold is then
    applied to the second half, and the bound computed there with m = the second half's size.
    The rule search uses top-k counts on a grid of ratio 2^(1/8) rather than every distinct score."""
    rng = np.random.default_rng(seed)
    first, second = [], []
    for idx in (np.flatnonzero(coins), np.flatnonzero(~coins)):
        idx = rng.permutation(idx)
        first.append(idx[: idx.size // 2])
        second.append(idx[idx.size // 2 :])
    first, second = np.concatenate(first), np.concatenate(second)
    s1, c1 = scores[first], coins[first]
    order = np.argsort(-s1)
    right = np.cumsum(c1[order])
    ks = np.unique(np.round(2 ** (np.arange(0, 8 * np.log2(s1.size) + 1) / 8)).astype(int))
    ks = ks[(ks >= 1) & (ks <= s1.size)]
    best, threshold = 0.0, None
    for k in ks:
        eps = one_run_epsilon_from_counts(s1.size, int(k), int(right[k - 1]), delta, alpha)
        if eps > best:
            best, threshold = eps, s1[order][k - 1]
    if threshold is None:
        return 0.0
    guessed = scores[second] >= threshold
    return one_run_epsilon_from_counts(second.size, int(guessed.sum()), int(coins[second][guessed].sum()), delta, alpha)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epsilons", nargs="+", type=float, default=[1.0, 2.0, 4.0, 8.0])
    parser.add_argument("--canaries", nargs="+", type=int, default=[1000, 10000, 100000])
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=20)
    args = parser.parse_args()
    print(
        "| target ε | σ | claimed ε (PLD) | canaries m | Steinke et al. bound | / claim | f-DP GDP-family ε | "
        "/ claim | f-DP refuted the true claim | jax-privacy split strategy (reimplemented) | seconds per draw |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for eps in args.epsilons:
        sigma = get_noise_multiplier(
            target_epsilon=eps, target_delta=DELTA, sample_rate=1.0, steps=args.steps, accountant="prv"
        )
        mu = math.sqrt(args.steps) / sigma
        claim = epsilon_pld(DPSGDEvent(sigma, 1.0, args.steps), DELTA)
        profile = dpsgd_privacy_profile(sigma, 1.0, args.steps)
        for m in args.canaries:
            start = time.time()
            steinke, fdp, refuted, split = [], [], 0, []
            for seed in range(args.seeds):
                rng = np.random.default_rng(np.random.SeedSequence([seed, m, int(eps * 1000)]))
                coins = rng.random(m) < 0.5
                scores = mu * coins + rng.normal(size=m)
                steinke.append(epsilon_lower_bound_one_run(scores, coins, DELTA).epsilon)
                audit = fdp_one_run_audit(scores, coins, profile, delta=DELTA)
                fdp.append(audit["gdp_epsilon"])
                refuted += bool(audit["refuted"])
                split.append(split_strategy_bound(scores, coins, DELTA, seed=seed))
            seconds = (time.time() - start) / args.seeds
            print(
                f"| {eps:g} | {sigma:.3f} | {claim:.2f} | {m} | {np.mean(steinke):.2f} | {np.mean(steinke) / claim:.2f} | "
                f"{np.mean(fdp):.2f} | {np.mean(fdp) / claim:.2f} | {refuted} of {args.seeds} | {np.mean(split):.2f} | "
                f"{seconds:.1f} |",
                flush=True,
            )


if __name__ == "__main__":
    main()
