"""`canary-audit --mode multi`: K runs with one canary, K without; threshold on half, Clopper-Pearson
on the rest (Jagielski, Ullman, Oprea 2020, arXiv 2006.07709)."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from audit.dp_validation.canaries import _STREAM_MODELS, _validate_data, make_canary
from audit.dp_validation.canary_scoring import (
    MULTI_RUN_STATISTICS,
    _finite_for_json,
    scores_from_log_probabilities,
)
from audit.dp_validation.canary_workers import (
    TRAIN_TIMEOUT_S,
    _check_count,
    _check_trainer,
    _distinct_seeds,
    _pilot_labels,
    _pool_for,
    _train_many,
    _trainer_name,
)
from audit.dp_validation.claims import PrivacyClaim, require_claim
from audit.dp_validation.scope import claim_verdict
from audit.dp_validation.sequential_looks import declared_design, look_confidence, sequential_threshold_audit
from audit.errors import AuditInputError
from audit.statistics.audit_ceilings import ceiling_threshold_audit, runs_needed_threshold_audit

# Pilot models that pick the canary's label in a multi-run audit (one in a one-run audit).
PILOT_MODELS = 5
# The smallest look of the sequential multi-run audit, in models per side (half choose the rule, half test it).
FIRST_LOOK_MODELS = 50


def _run_scores(log_probs: list, labs: np.ndarray, statistic: str) -> np.ndarray:
    """One score per run: the canary's statistic, minus its base point's for "scaled_logit_gain"."""
    per_point = np.array(
        [scores_from_log_probabilities(lp, labs, "loss" if statistic == "loss" else "scaled_logit") for lp in log_probs]
    )
    with np.errstate(invalid="ignore"):
        scores = per_point[:, 0] - per_point[:, 1] if statistic == "scaled_logit_gain" else per_point[:, 0]
    return np.where(np.isnan(scores), -np.inf, scores)  # inf − inf: a fixed rule, like NaN logits


def multi_run_canary_audit(
    trainer: str | Callable[[np.ndarray, np.ndarray, int], Any],
    features,
    labels,
    *,
    canary_kind: str = "out_of_distribution",
    n_models: int,
    claim: PrivacyClaim,
    confidence: float = 0.95,
    seed: int = 0,
    statistic: str | None = None,
    insert_canary: bool = True,
    pool=None,
    workers: int | None = None,
    timeout: float | None = TRAIN_TIMEOUT_S,
    looks: int | None = 1,
    spending: str = "haybittle-peto",
    first_look_models: int = FIRST_LOOK_MODELS,
) -> dict[str, Any]:
    """ε lower bound for `trainer` from K = `n_models` runs with one canary and K runs without.

    `claim`: the `PrivacyClaim` under audit (`PrivacyClaim.stated(ε, δ)`, `resolve_claim`), checked where it was
    built and read here as it is.

    Jagielski, Ullman, Oprea 2020 (arXiv 2006.07709); Nasr et al. 2021 (arXiv 2101.04535).
    The canary (`make_canary(canary_kind, ...)`, labelled by the pilot models, see the module
    docstring) is appended to the training set of the K "in" runs. Every run gets its own seed
    from `seed` (2K distinct seeds). Score (`statistic`): "scaled_logit" (`canary_scores` of the
    canary on each model; the default for a mislabeled canary), "loss" = −cross-entropy, or
    "scaled_logit_gain" (the default for an out-of-distribution canary): the scaled logit at the
    canary minus the scaled logit at its *base point*, the same record with the canary column at
    0. Everything the model learnt from the real records moves both terms alike and cancels; what
    remains is what the weights of the canary's own column carry — the canary's clipped gradient
    plus the DP noise, the quantity the ε claim is about (for a linear model exactly: logits are
    linear, so the gain is 100·R times the canary column's weight difference). Without it, the
    run-to-run variation of everything else, multiplied by nothing, still sits in the score and
    hides a tenfold noise error (measured on `audit.demos.planted_bugs`). Threshold and
    direction are chosen on the first ⌊K/2⌋ models of each side; the remaining models give the
    error counts and the Clopper-Pearson (ε, δ) bound at `confidence`
    (`epsilon_lower_bound_from_counts`). With 25 evaluation models per side a perfect attack
    reaches 1.84 at 95 %: claims above that cannot be contradicted with so few models.

    `insert_canary=False` is the null run: both sides train without the canary, the bound must
    be 0 in ≥ 95 % of repeats. Returns a JSON-serialisable dict (`violation`: bound > claim;
    `ceiling`, `verdict`: see `audit.dp_validation.scope.claim_verdict`).

    Sequential (`looks` > 1; `canary-audit --mode multi` uses 6): the runs come in looks at K halved each time
    (none below `first_look_models` per side), α split over them by `spending`
    (`audit.dp_validation.sequential_looks.sequential_threshold_audit`): each look's threshold audit of the runs
    so far is valid on its own, the first whose bound exceeds the claim stops the training. `looks=1` (this
    function's default) is the fixed-size audit.

    `trainer` ("module:function" or a picklable callable) runs only in isolated workers: `pool`
    (anything with WorkerPool's `map(function, tasks)`), else a WorkerPool of `workers` processes
    (default: the cores) with `timeout` seconds per training run.
    """
    trainer = _check_trainer(trainer)
    X, y, n_classes = _validate_data(features, labels)
    k = _check_count("--models", n_models, 2, "n_models")
    design = declared_design(k, confidence, looks=looks, spending=spending, first_look=first_look_models)
    claim = require_claim(claim)  # checked once, where it was built: read here as it is
    eps, d = claim.epsilon, claim.delta
    if statistic is None:
        statistic = "scaled_logit_gain" if canary_kind == "out_of_distribution" else "scaled_logit"
    if statistic not in MULTI_RUN_STATISTICS:
        raise AuditInputError("statistic", f"expected one of {', '.join(MULTI_RUN_STATISTICS)}, got {statistic!r}")
    if statistic == "scaled_logit_gain" and canary_kind != "out_of_distribution":
        raise AuditInputError("statistic", "scaled_logit_gain needs an out-of-distribution canary (its own column)")
    provisional = make_canary(canary_kind, X, y, seed)
    X_base, y_base = provisional.base_dataset(X, y)
    exclude = None if provisional.source_row is None else np.array([y[provisional.source_row]])
    # One pool of distinct seeds: a pilot's is never reused by an audited run.
    seed_pool = _distinct_seeds(seed, _STREAM_MODELS, PILOT_MODELS + 2 * k)
    pilot_seeds, seeds = seed_pool[:PILOT_MODELS], seed_pool[PILOT_MODELS:]
    seeds_in, seeds_out = seeds[:k], seeds[k:]
    with _pool_for(trainer, pool, workers, timeout) as runner:
        pilot_label = _pilot_labels(
            runner, trainer, X_base, y_base, provisional.features[None, :], exclude, pilot_seeds, n_classes
        )
        canary = make_canary(canary_kind, X, y, seed, label=int(pilot_label[0]))
        X_in, y_in = canary.dataset(X, y, include=insert_canary)
        X_out, y_out = canary.dataset(X, y, include=False)
        points = canary.features[None, :]
        if statistic == "scaled_logit_gain":
            base_point = canary.features.copy()
            base_point[-1] = 0.0
            points = np.vstack([points, base_point[None, :]])
        labs = np.full(len(points), canary.label)
        trained: dict[str, list[float]] = {"in": [], "out": []}

        def draw(size: int) -> tuple[np.ndarray, np.ndarray]:
            have = len(trained["in"])
            if size > have:  # runs by index: the last look sees exactly the fixed audit's runs
                new_in, new_out = seeds_in[have:size], seeds_out[have:size]
                log_probs = _train_many(
                    runner,
                    trainer,
                    [(X_in, y_in, s, points) for s in new_in] + [(X_out, y_out, s, points) for s in new_out],
                )
                scores = _run_scores(log_probs, labs, statistic)
                trained["in"] += list(scores[: len(new_in)])
                trained["out"] += list(scores[len(new_in) :])
            return np.asarray(trained["in"][:size]), np.asarray(trained["out"][:size])

        outcome, audit = sequential_threshold_audit(design, draw, epsilon=eps, delta=d, confidence=confidence)
    scores_in, scores_out = draw(outcome.size_used)
    audit = dict(audit)
    bound = audit.pop("epsilon_lower_bound")
    final_confidence = look_confidence(design, confidence, design.levels[-1])
    planned_eval = k - min(max(int(0.5 * k), 1), k - 1)
    return {
        "audit": "canary, multi-run",
        "trainer": _trainer_name(trainer),
        "canary": canary.to_dict(),
        "canary_inserted": bool(insert_canary),
        "statistic": statistic,
        "n_models_per_side": int(outcome.size_used),
        "n_runs_planned": k,  # per side: the size the mode's power is judged at (a claim holds only at the last look)
        "sequential": outcome.summary("models per side", outcome.size_used, k),
        "n_training_records": int(X.shape[0]),
        "seed": int(seed),
        "pilot_seeds": pilot_seeds,
        "seeds": {"with_canary": seeds_in, "without_canary": seeds_out},
        "scores": {"with_canary": _finite_for_json(scores_in), "without_canary": _finite_for_json(scores_out)},
        **{
            key: (value if key != "threshold" else (value if math.isfinite(value) else None))
            for key, value in audit.items()
        },
        "confidence": float(confidence),  # family-wise over the looks; the deciding look's is `look_confidence`
        "look_confidence": audit["confidence"],
        "claimed_epsilon": eps,
        "epsilon_lower_bound": bound,
        "violation": bool(bound > eps),
        "verdict": claim_verdict(
            bound=bound,
            # What a perfect rule could show with the planned runs at the last look's level.
            ceiling=ceiling_threshold_audit(planned_eval, planned_eval, d, final_confidence),
            claimed_epsilon=eps,
            delta=d,
            needed=runs_needed_threshold_audit(eps, d, final_confidence),
            unit="models per side (--models)",
            confidence=audit["confidence"],
        ),
    }
