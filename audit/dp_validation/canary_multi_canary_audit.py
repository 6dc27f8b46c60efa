"""`canary-audit --mode multi-canary`: many runs × column canaries, the one-run bound of Steinke,
Nasr, Jagielski 2023 (arXiv 2305.08846) over all slots."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from audit.dp_validation import canary_workers
from audit.dp_validation.canaries import (
    _STREAM_CANARY,
    _STREAM_COINS,
    _STREAM_MODELS,
    COLUMN_CANARY_SCALES,
    _validate_data,
    column_canaries,
)
from audit.dp_validation.canary_scoring import (
    _auc,
    _below_every_finite,
    _fdp_ceiling,
    _fdp_one_run,
    _gains,
    _per_canary_standardised,
)
from audit.dp_validation.claims import PrivacyClaim, require_claim
from audit.dp_validation.scope import claim_verdict
from audit.errors import AuditInputError
from audit.statistics.audit_ceilings import canaries_needed_one_run, ceiling_one_run
from audit.statistics.epsilon_bounds import epsilon_lower_bound_one_run


def _column_jobs(X, y, points, canary_labels, coins, seeds, insert_canary):
    X_wide = np.hstack([X, np.zeros((X.shape[0], points.shape[0]), dtype=X.dtype)])
    scored = np.vstack([points, _base_of(points)[None, :]])
    jobs = []
    for run_coins, run_seed in zip(coins, seeds):
        take = run_coins & bool(insert_canary)
        jobs.append((np.vstack([X_wide, points[take]]), np.concatenate([y, canary_labels[take]]), run_seed, scored))
    return jobs


def _base_of(points: np.ndarray) -> np.ndarray:
    base = points[0].copy()
    base[-points.shape[0] :] = 0.0
    return base


def multi_canary_audit(
    trainer,
    features,
    labels,
    *,
    n_runs: int = 200,
    n_canaries: int = 32,
    claim: PrivacyClaim,
    confidence: float = 0.95,
    seed: int = 0,
    scales: tuple[float, ...] = COLUMN_CANARY_SCALES,
    insert_canary: bool = True,
    pool=None,
    workers: int | None = None,
    timeout: float | None = canary_workers.TRAIN_TIMEOUT_S,
) -> dict[str, Any]:
    """ε lower bound from R = `n_runs` training runs, each with J = `n_canaries` column canaries
    (`column_canaries`), every (run, canary) slot included by an independent fair coin.

    `claim`: the `PrivacyClaim` under audit (`PrivacyClaim.stated(ε, δ)`, `resolve_claim`), checked where it was
    built and read here as it is.

    Bound: the one-run audit of Steinke, Nasr, Jagielski 2023 (arXiv 2305.08846) over all m = R·J
    slots. It is valid here because each slot changes one run's training set by one record and
    the runs are independent: the R runs together are one mechanism on m coin-flipped records,
    exactly the theorem's setting. Score of a slot: the gain of its label's scaled logit from the
    base point to the canary (`_gains`): what the model learnt from the real records cancels, so
    the score is the canary's own weights — its clipped gradient plus the DP noise; then each
    canary's scores are centred and scaled over the runs (`_per_canary_standardised`).

    Screening: the canaries' scale (× data radius) decides what the audit can see — a huge scale
    exposes missing clipping, a small one keeps the canary's loss from saturating so every step's
    gradient adds up. ⌈R/4⌉ (≥ 4) *pilot* runs try `scales` side by side (canary j at scale
    j mod len(scales)); the scale with the highest pilot AUC is used for the R audited runs. The
    bound uses the audited runs only, so choosing on the pilots costs nothing in validity.

    Also reported (`fdp_one_run`): the one-run f-DP test of Mahloujifar, Melis, Chaudhuri 2024
    (arXiv 2410.22235) of the claim's whole curve (the PLD profile of `claim.dpsgd` = (σ, q, T) when
    known, else the (ε, δ) pair) over the same slots, sound for the same reason.

    `insert_canary=False` is the null: coins are drawn but no canary is ever inserted.
    """
    trainer = canary_workers._check_trainer(trainer)
    X, y, n_classes = _validate_data(features, labels)
    R = canary_workers._check_count("--models", n_runs, 4, "n_runs")
    J = canary_workers._check_count("--canaries", n_canaries, 1, "n_canaries")
    claim = require_claim(claim)  # checked once, where it was built: read here as it is
    eps, d = claim.epsilon, claim.delta
    scales = tuple(float(v) for v in scales)
    if not scales or not all(math.isfinite(v) and v > 0 for v in scales):
        raise AuditInputError("scales", f"expected positive numbers, got {scales!r}")
    n_pilot = max(4, math.ceil(R / 4))
    seeds = canary_workers._distinct_seeds(seed, _STREAM_MODELS, n_pilot + R)
    coins = np.random.default_rng(np.random.SeedSequence([int(seed), _STREAM_COINS])).random((n_pilot + R, J)) < 0.5
    canary_labels = np.random.default_rng(np.random.SeedSequence([int(seed), _STREAM_CANARY])).integers(0, n_classes, J)

    pilot_points = np.concatenate([column_canaries(X, J, scales[j % len(scales)])[0][j : j + 1] for j in range(J)])
    with canary_workers._pool_for(trainer, pool, workers, timeout) as runner:
        pilot_lp = canary_workers._train_many(
            runner,
            trainer,
            _column_jobs(X, y, pilot_points, canary_labels, coins[:n_pilot], seeds[:n_pilot], insert_canary),
        )
        pilot_scores = _per_canary_standardised(np.stack([_gains(lp, canary_labels) for lp in pilot_lp]))
        scale_of = np.array([j % len(scales) for j in range(J)])
        pilot_auc = {}
        for i, v in enumerate(scales):
            cols = scale_of == i
            pilot_auc[v] = _auc(pilot_scores[:, cols].ravel(), coins[:n_pilot][:, cols].ravel()) if cols.any() else 0.5
        chosen = max(scales, key=lambda v: (pilot_auc[v], -scales.index(v)))
        points, _ = column_canaries(X, J, chosen)
        audit_lp = canary_workers._train_many(
            runner, trainer, _column_jobs(X, y, points, canary_labels, coins[n_pilot:], seeds[n_pilot:], insert_canary)
        )
    scores = _per_canary_standardised(np.stack([_gains(lp, canary_labels) for lp in audit_lp]))
    members = coins[n_pilot:]
    try:
        result = epsilon_lower_bound_one_run(_below_every_finite(scores.ravel()), members.ravel(), d, confidence)
    except ValueError as exc:
        raise AuditInputError("n_canaries", str(exc)) from None
    from audit.statistics.tradeoff_curves import claim_profile

    profile = claim_profile(eps, d, claim.dpsgd)
    fdp = _fdp_one_run(scores, members, profile, d, result.confidence)
    m = R * J
    ceiling = ceiling_one_run(m, d, result.confidence)
    needed = canaries_needed_one_run(eps, d, result.confidence)
    bound = float(result.epsilon)
    return {
        "audit": "canary, many runs × column canaries (one-run bound over all slots)",
        "trainer": canary_workers._trainer_name(trainer),
        "canary_kind": "out_of_distribution",
        "canary_design": "one column per canary (zero for real records); score = scaled-logit gain over the base point",
        "canary_inserted": bool(insert_canary),
        "n_runs": R,
        "n_canaries_per_run": J,
        "n_slots": m,
        "n_inserted": int(members.sum()),
        "n_pilot_runs": n_pilot,
        "pilot_auc_by_scale": {f"{v:g}": a for v, a in pilot_auc.items()},
        "canary_scale": chosen,
        "auc": _auc(scores.ravel(), members.ravel()),
        "canary_labels": [int(v) for v in canary_labels],
        "n_training_records": int(X.shape[0]),
        "seed": int(seed),
        "confidence": result.confidence,
        "delta": d,
        "details": result.details,
        "fdp_one_run": fdp,
        "profile_ceiling": _fdp_ceiling(profile, fdp, result.confidence),
        "claimed_epsilon": eps,
        "epsilon_lower_bound": bound,
        "ceiling": ceiling,
        "violation": bool(bound > eps),
        "verdict": claim_verdict(
            bound=bound,
            ceiling=ceiling,
            claimed_epsilon=eps,
            delta=d,
            needed=None if needed is None else math.ceil(needed / J),
            unit=f"runs (--models) with {J} canaries each",
            confidence=result.confidence,
        ),
    }
