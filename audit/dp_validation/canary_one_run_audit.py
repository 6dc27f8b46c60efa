"""`canary-audit --mode one-run`: m canaries by coin flip in ONE training run, the bound of Steinke,
Nasr, Jagielski 2023 (arXiv 2305.08846)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from audit.dp_validation import canary_workers
from audit.dp_validation.canaries import (
    _STREAM_COINS,
    _STREAM_MODELS,
    _validate_data,
    make_canaries,
)
from audit.dp_validation.canary_scoring import (
    _finite_for_json,
    scores_from_log_probabilities,
)
from audit.dp_validation.claims import PrivacyClaim, require_claim
from audit.dp_validation.scope import claim_verdict
from audit.errors import AuditInputError
from audit.statistics.audit_ceilings import canaries_needed_one_run, ceiling_one_run
from audit.statistics.epsilon_bounds import epsilon_lower_bound_one_run


def one_run_canary_audit(
    trainer: str | Callable[[np.ndarray, np.ndarray, int], Any],
    features,
    labels,
    *,
    n_canaries: int,
    canary_kind: str = "mislabeled",
    claim: PrivacyClaim,
    confidence: float = 0.95,
    seed: int = 0,
    statistic: str = "scaled_logit",
    pool=None,
    workers: int | None = None,
    timeout: float | None = canary_workers.TRAIN_TIMEOUT_S,
) -> dict[str, Any]:
    """ε lower bound for `trainer` from ONE training run with m = `n_canaries` canaries.

    `claim`: the `PrivacyClaim` under audit (`PrivacyClaim.stated(ε, δ)`, `resolve_claim`), checked where it was
    built and read here as it is.

    Steinke, Nasr, Jagielski 2023, "Privacy Auditing with One (1) Training Run", arXiv
    2305.08846. The canaries (`make_canaries`, labels from the pilot model) each join the
    training set by an independent fair coin (seeded by `seed`); the model is trained once; each
    canary is scored with `canary_scores`; `epsilon_lower_bound_one_run` guesses "in" for the top and "out"
    for the bottom scores (Bonferroni over the guess counts tried). Non-finite scores are placed
    below every finite one. The bound is far from tight with hundreds of canaries (100 correct
    guesses out of 100 give 3.49 at m = 1000), but costs one training run.
    """
    trainer = canary_workers._check_trainer(trainer)
    X, y, n_classes = _validate_data(features, labels)
    m = canary_workers._check_count("--canaries", n_canaries, 2, "n_canaries")
    claim = require_claim(claim)  # checked once, where it was built: read here as it is
    eps, d = claim.epsilon, claim.delta
    points, _, rows = make_canaries(canary_kind, X, y, m, seed)
    exclude = None if rows is None else y[rows]
    pilot_seed, run_seed = canary_workers._distinct_seeds(seed, _STREAM_MODELS, 2)
    coins = np.random.default_rng(np.random.SeedSequence([int(seed), _STREAM_COINS])).random(m) < 0.5
    with canary_workers._pool_for(trainer, pool, workers, timeout) as runner:
        canary_labels = canary_workers._pilot_labels(runner, trainer, X, y, points, exclude, [pilot_seed], n_classes)
        X_train = np.vstack([X, points[coins]])
        y_train = np.concatenate([y, canary_labels[coins]])
        (log_probs,) = canary_workers._train_many(runner, trainer, [(X_train, y_train, run_seed, points)])
    scores = scores_from_log_probabilities(log_probs, canary_labels, statistic)
    finite = scores[np.isfinite(scores)]
    floor = (finite.min() - 1.0) if finite.size else 0.0
    ranked = np.where(np.isfinite(scores), scores, floor)
    if coins.all() or not coins.any():
        raise AuditInputError("n_canaries", f"all {m} coins came up the same; use more canaries")
    try:
        result = epsilon_lower_bound_one_run(ranked, coins, d, confidence)
    except ValueError as exc:
        raise AuditInputError("n_canaries", str(exc)) from None
    ceiling = ceiling_one_run(m, d, result.confidence)
    return {
        "audit": "canary, one run",
        "trainer": canary_workers._trainer_name(trainer),
        "canary_kind": canary_kind,
        "n_canaries": m,
        "n_inserted": int(coins.sum()),
        "n_training_records": int(X.shape[0]),
        "seed": int(seed),
        "run_seed": run_seed,
        "pilot_seed": pilot_seed,
        "statistic": statistic,
        "scores": _finite_for_json(scores),
        "inserted": [bool(c) for c in coins],
        "confidence": result.confidence,
        "delta": d,
        "details": result.details,
        "claimed_epsilon": eps,
        "epsilon_lower_bound": float(result.epsilon),
        "ceiling": ceiling,
        "violation": bool(result.epsilon > eps),
        "verdict": claim_verdict(
            bound=float(result.epsilon),
            ceiling=ceiling,
            claimed_epsilon=eps,
            delta=d,
            needed=canaries_needed_one_run(eps, d, result.confidence),
            unit="canaries (--canaries)",
            confidence=result.confidence,
        ),
    }
