"""The federated job's canary-client row: one twin federation with canary clients, one client-level bound.

For a client-level DP-FedAvg target (Andrew et al. 2023, "One-shot Empirical Privacy Estimation for
Federated Learning", arXiv 2302.03098): the federation is trained once more — same clients, seed,
σ, q, rounds — with m canary clients (`targets.canary_clients`: random unit directions, each in by a
fair coin, then joining each round with probability q like a real client). From the canaries'
scores summed over every round (the server's privatised sums, white-box): Steinke et al.'s
client-level one-run bound (sound, arXiv 2305.08846) and the f-DP test of the client-level curve
(sound, arXiv 2410.22235) decide; Andrew et al.'s ε estimate (Gaussian fits, no confidence
interval) and the Gaussian-sum estimate are shown, labelled estimates. The row is in the verdict's
Holm family with the client-level membership rows (`audit.machinery.verdict`); the released model
is the target federation, without canaries.

The default m (`default_canary_clients`) is read from the claim's ceiling before any training: the
smallest m of `CANARY_LADDER` with which an attack guessing every canary right would refute the
claim at Holm's first level α/K (Steinke et al.'s ceiling, or the f-DP test against the claim's own
curve, each at its Bonferroni share as `audit.statistics.one_run_power.whitebox_power` judges it),
with K an upper bound on the run's decisive rows (every DP target's membership rows plus its canary
row). It depends on (σ, q, rounds, claim, δ, α, K) only, never on scores, so the family stays
pre-declared; where the ladder (or its memory budget) ends first, the verdict says the row is
untestable and the m it needs.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from audit.statistics.one_run_power import one_run_row
from targets.canary_clients import CanaryClients
from targets.federated import FederatedTarget, train_federation

__all__ = ["ROW_FAMILY", "CANARY_LADDER", "DEFAULT_CANARY_CLIENTS", "canary_client_entry", "default_canary_clients"]

ROW_FAMILY = "canary clients (one-run)"
DEFAULT_CANARY_CLIENTS = 1000
# Canary clients are random directions: per round each costs one d-vector in the sum and one dot
# product, so 16 000 stay cheap next to training the federation (measured in docs/federated.md).
CANARY_LADDER = (1000, 2000, 4000, 8000, 16000)
HOLM_ROOM = 2  # the least family the default m is sized for (the canary row and one membership row)
# The directions are drawn as an (m, d) float64 array: the ladder stops where that passes this budget
# (never below the former fixed default of 1000).
DIRECTIONS_BUDGET_BYTES = 256 * 2**20
_CANARY_STREAM = 79


def default_canary_clients(
    noise_multiplier: float,
    sample_rate: float,
    rounds: int,
    claim: float,
    delta: float,
    alpha: float,
    n_parameters: int = 0,
    decisive_rows: int = HOLM_ROOM,
) -> int:
    """The smallest m of `CANARY_LADDER` with which a perfect attack refutes `claim` at Holm's first level
    α / max(HOLM_ROOM, decisive_rows): Steinke et al.'s ceiling (arXiv 2305.08846) or the f-DP one-run test
    of the claim's curve (arXiv 2410.22235), each at its share of the level among the tests the row will
    use (those a perfect attack passes at α, as `one_run_row` picks them). The largest affordable rung
    when none does (the verdict then says the row is untestable and what it needs). Rungs whose
    (m, n_parameters) float64 directions pass DIRECTIONS_BUDGET_BYTES are left out."""
    from audit.statistics.epsilon_bounds import one_run_ceiling
    from audit.statistics.one_run_power import fdp_perfect_p_value
    from audit.statistics.tradeoff_curves import dpsgd_privacy_profile

    level = float(alpha) / max(HOLM_ROOM, int(decisive_rows))
    ladder = [m for m in CANARY_LADDER if m == CANARY_LADDER[0] or 8 * m * int(n_parameters) <= DIRECTIONS_BUDGET_BYTES]
    profile = dpsgd_privacy_profile(float(noise_multiplier), float(sample_rate), int(rounds))
    for m in ladder:
        steinke_able = one_run_ceiling(m, float(delta), float(alpha)) > claim
        p_perfect = fdp_perfect_p_value(profile, m)
        share = level / max(1, int(steinke_able) + int(p_perfect <= alpha))
        if one_run_ceiling(m, float(delta), share) > claim or p_perfect <= share:
            return m
    return ladder[-1]


def canary_client_entry(
    client_data,
    n_classes: int,
    spec,
    *,
    target: FederatedTarget,
    claim: float,
    delta: float,
    accountant: str,
    seed: int,
    device,
    confidence: float,
    test_features: np.ndarray,
    test_labels: np.ndarray,
    target_accuracy: float,
    m: int | None = None,
    decisive_rows: int = HOLM_ROOM,
) -> dict[str, Any]:
    """Train the twin federation with canary clients and audit the client-level claim `claim`; without `m`,
    as many as make it testable in a Holm family of up to `decisive_rows` rows (`default_canary_clients`)."""
    sigma, target_epsilon = target.client_noise_multiplier, target.epsilon_target
    if sigma is None or target_epsilon is None:  # a non-private federation has no client-level claim to audit
        raise ValueError("canary clients audit a client-level DP federation; this target is not one")
    n_parameters = sum(int(p.numel()) for p in target.model.state_dict().values())
    canary_seed = int(np.random.SeedSequence([int(seed), _CANARY_STREAM]).generate_state(1)[0])
    if m is None:
        m = default_canary_clients(
            sigma,
            spec.client_sample_rate,
            spec.rounds,
            claim,
            delta,
            1.0 - float(confidence),
            n_parameters,
            decisive_rows,
        )
    canaries = CanaryClients(n_parameters, int(m), spec.client_sample_rate, canary_seed)
    twin = train_federation(
        client_data,
        n_classes,
        spec,
        epsilon=float(target_epsilon),
        delta=delta,
        accountant=accountant,
        seed=seed,
        device=device,
        client_noise_multiplier=sigma,
        canary_clients=canaries,
    )
    accuracy = float((twin.logits(test_features).argmax(axis=1) == test_labels).mean())
    row = one_run_row(
        canaries.scores("all"),
        canaries.scores("final"),
        canaries.coins.copy(),
        claim=float(claim),
        delta=float(delta),
        noise_multiplier=float(sigma),
        sample_rate=float(spec.client_sample_rate),
        steps=int(spec.rounds),
        confidence=confidence,
    )
    return {
        "family": ROW_FAMILY,
        "level": "client",
        "paper": "Andrew et al. 2023, arXiv 2302.03098; Steinke, Nasr, Jagielski 2023, arXiv 2305.08846; "
        "Mahloujifar, Melis, Chaudhuri 2024, arXiv 2410.22235",
        **row,
        "kind": "random-direction canary clients",
        "canary_rows_inserted": int(canaries.joined),
        "andrew_note": "Andrew et al.'s estimate: Gaussian fits to in- and out-canary scores; an estimate, not a bound",
        "twin_matches_target": True,
        "test_accuracy_with_canaries": accuracy,
        "test_accuracy_target": float(target_accuracy),
        "train_seconds_with_canaries": float(twin.train_seconds),
        "train_seconds_target": float(target.train_seconds),
    }
