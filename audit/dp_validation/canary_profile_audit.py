"""`canary-audit --mode profile` (the default): independent runs, one canary each, tested against the
claim's whole trade-off curve (`audit.statistics.tradeoff_curves`)."""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from audit.dp_validation.canaries import (
    _STREAM_CANARY,
    _STREAM_COINS,
    _STREAM_MODELS,
    PROFILE_CANARY_SCALES,
    PROFILE_ONE_CLASS_VALUES,
    _validate_data,
    one_class_canary,
    one_class_labels,
    profile_canary,
)
from audit.dp_validation.canary_scoring import (
    _auc,
    _below_every_finite,
    _centred_logit,
    _centred_logit_gain,
    _fdp_one_run,
)
from audit.dp_validation.canary_workers import (
    TRAIN_TIMEOUT_S,
    _check_count,
    _check_trainer,
    _distinct_seeds,
    _pool_for,
    _train_many,
    _trainer_name,
)
from audit.dp_validation.claims import validate_claim
from audit.dp_validation.scope import profile_verdict
from audit.errors import AuditInputError
from audit.statistics.epsilon_bounds import epsilon_lower_bound_one_run

_PROFILE_DESIGN_TEXT = {
    "column": "one column of its own (0 for real records), real columns 0, real records as given; "
              "score = centred logit gain over the all-zero base point",
    "one_class": "one column of its own (0 for real records), real columns 0, real records relabelled to one "
                 "other class; score = centred logit at the canary (its weights and the bias)",
}


# How much stronger (in pilot standard errors) a column design's pilot evidence must be before it
# replaces the one-class design. The one-class canary is the Dirac-like worst case of DP-SGD (its
# clipped gradient stays the full C), and on a correct recipe it sits on the claim's curve; a column
# canary wins only where a bug is large enough that either design would flag it. With a few
# thousand pilot runs per design their margins differ by noise of ~0.02, so "highest pilot number
# wins" let a column canary that cannot see a small bug displace the one design that could.
DESIGN_PREFERENCE_Z = 2.0


def choose_profile_design(margins: dict, sizes: dict, preferred=None):
    """The design to audit, from pilot evidence only (so the choice costs the test nothing).

    `margins[design]`: the anticipated margin of its best pilot rule below the claim's curve
    (`best_profile_rule`; −inf when it has none); `sizes[design]`: its pilot runs on the smaller
    side. Without a `preferred` design the largest margin wins (ties: the first design). With one,
    it is kept unless another design's margin exceeds it by more than `DESIGN_PREFERENCE_Z`
    standard errors of the difference of two pilot rates (√(¼/n₁ + ¼/n₂), the largest a rate's
    variance can be).
    """
    if not margins:
        raise ValueError("no design to choose from")
    order = list(margins)
    best = max(order, key=lambda v: (margins[v], -order.index(v)))
    if preferred is None or preferred not in margins or best == preferred:
        return best
    if not math.isfinite(margins[preferred]):
        return best
    se = math.sqrt(0.25 / max(1, sizes[best]) + 0.25 / max(1, sizes[preferred]))
    return best if margins[best] - margins[preferred] > DESIGN_PREFERENCE_Z * se else preferred


def pilot_design_plan(designs: list, preferred, n_pilot: int) -> list:
    """The design of each pilot run: every other run the `preferred` design (None: plain cycling),
    the runs between cycling through the rest."""
    others = [d for d in designs if d != preferred]
    if preferred is None or not others:
        return [designs[i % len(designs)] for i in range(n_pilot)]
    return [preferred if i % 2 == 0 else others[(i // 2) % len(others)] for i in range(n_pilot)]


def profile_canary_audit(
    trainer,
    features,
    labels,
    *,
    n_runs: int = 48000,
    n_pilot_runs: int | None = None,
    claimed_epsilon: float,
    delta: float,
    dpsgd: tuple[float, float, int] | None = None,
    confidence: float = 0.95,
    seed: int = 0,
    scales: tuple[float, ...] = PROFILE_CANARY_SCALES,
    one_class_values: tuple[float, ...] = PROFILE_ONE_CLASS_VALUES,
    insert_canary: bool = True,
    pool=None,
    workers: int | None = None,
    timeout: float | None = TRAIN_TIMEOUT_S,
) -> dict[str, Any]:
    """Does the trainer's output stay within the WHOLE privacy profile its accountant states?

    `n_runs` independent training runs, each on the audit's dataset plus (by its own fair coin) one
    canary of the design the pilot chose: a column canary (`profile_canary`, the real records as
    given; score = its centred logit gain over the base point, `_centred_logit_gain`) or the
    one-class design (`one_class_canary`: the real records relabelled to one class, the canary
    another, but for one record of each class; score = its centred logit, `_centred_logit`). The claim's trade-off curve f_claim (`audit.statistics.tradeoff_curves`:
    from the PLD profile of (σ, q, T) = `dpsgd` when the accountant's configuration is known, else
    from the bare (ε, δ) pair) is the null hypothesis: `profile_test` refutes it when one
    threshold rule's errors lie below f_claim by more than chance allows (an exact test of the
    weighted error FNR + s·FPR, s the curve's slope there) — Dong, Roth, Su 2019 (arXiv
    1905.02383) for the curve, Jagielski, Ullman, Oprea 2020 (arXiv 2006.07709) for the canaries
    and the counts. At moderate FPR this has power against errors of ε 1.5–3 that no test
    of the single (ε, δ = 1e-5) point can see with thousands of runs.

    Pilot: `n_pilot_runs` further runs (default n_runs / 4) try the designs side by side (column
    canaries at `scales` × the data radius, one-class canaries at `one_class_values`): half the
    pilot runs go to the first one-class design, the design audited unless another is clearly
    better, so that its rule is chosen on as many runs as possible (violations that live in the
    tail need it), and the other half cycle through the other designs (`pilot_design_plan`).
    Each design's best threshold rule on its pilot runs
    (`best_profile_rule`) comes with an anticipated margin below the claim's curve; the one-class
    design is audited unless a column design's margin is clearly larger (`choose_profile_design`),
    with that design's rule. Only the audited runs decide, so the choice costs nothing in
    validity. The runs are independent (each its own seed, coin and training), which is what
    the exact binomial test needs.

    Also reported: the (ε, δ) Clopper-Pearson bound of the same rule and counts at the claim's δ
    (`epsilon_lower_bound`), and the one-run bound of Steinke, Nasr, Jagielski 2023 (arXiv
    2305.08846) over the audited runs' coin-flipped canaries. `insert_canary=False` is the null.
    """
    from audit.statistics.audit_ceilings import ceiling_threshold_audit
    from audit.statistics.epsilon_bounds import epsilon_lower_bound_from_counts
    from audit.statistics.tradeoff_curves import (
        best_profile_rule,
        claim_profile,
        profile_test,
        tangent_test_ceiling,
    )

    trainer = _check_trainer(trainer)
    X, y, n_classes = _validate_data(features, labels)
    R = _check_count("--models", n_runs, 4)
    eps, d = validate_claim(claimed_epsilon, delta, epsilon_flag="--claimed-epsilon", delta_flag="--delta")
    scales = tuple(float(v) for v in scales)
    one_class_values = tuple(float(v) for v in one_class_values)
    for name, values in (("scales", scales), ("one_class_values", one_class_values)):
        if not all(math.isfinite(v) and v > 0 for v in values):
            raise AuditInputError(name, f"expected positive numbers, got {values!r}")
    designs = [("column", v) for v in scales] + [("one_class", v) for v in one_class_values]
    if not designs:
        raise AuditInputError("scales", "no canary design to audit: give a scale or a one-class value")
    n_pilot = (max(4 * len(designs), R // 4) if n_pilot_runs is None
               else _check_count("pilot runs", n_pilot_runs, 2 * len(designs)))
    profile = claim_profile(eps, d, dpsgd)
    seeds = _distinct_seeds(seed, _STREAM_MODELS, n_pilot + R)
    coins = np.random.default_rng(np.random.SeedSequence([int(seed), _STREAM_COINS])).random(n_pilot + R) < 0.5
    label = int(np.random.default_rng(np.random.SeedSequence([int(seed), _STREAM_CANARY])).integers(0, n_classes))
    X_wide = np.hstack([X, np.zeros((X.shape[0], 1), dtype=X.dtype)])
    y_one_class = one_class_labels(y, label, n_classes)

    # (canary point, base point) of each design, made once: every run of a design uses the same.
    canaries = {(kind, v): profile_canary(X, v) if kind == "column" else one_class_canary(X.shape[1], v)
                for kind, v in designs}

    def score(design, log_probs):
        return _centred_logit_gain(log_probs, label) if design[0] == "column" else _centred_logit(log_probs, label)

    def jobs(run_designs, run_coins, run_seeds):
        out = []
        for design, coin, s in zip(run_designs, run_coins, run_seeds):
            point, base = canaries[design]
            y_real = y if design[0] == "column" else y_one_class
            take = bool(coin) and bool(insert_canary)
            X_run = np.vstack([X_wide, point[None, :]]) if take else X_wide
            y_run = np.append(y_real, np.asarray(label, dtype=y.dtype)) if take else y_real
            out.append((X_run, y_run, s, np.vstack([point, base])))
        return out

    preferred = next((v for v in designs if v[0] == "one_class"), None)
    pilot_designs = pilot_design_plan(designs, preferred, n_pilot)
    audited_coins = coins[n_pilot:]
    n_in, n_out = int(audited_coins.sum()), int((~audited_coins).sum())
    if n_in == 0 or n_out == 0:
        raise AuditInputError("--models", "every coin came up the same; use more runs")
    with _pool_for(trainer, pool, workers, timeout) as runner:
        pilot = np.array([score(design, lp) for design, lp in zip(pilot_designs, _train_many(
            runner, trainer, jobs(pilot_designs, coins[:n_pilot], seeds[:n_pilot])))])
        pilot_coins = coins[:n_pilot]
        pilot_auc, pilot_rule, pilot_margin, pilot_size = {}, {}, {}, {}
        for design in designs:
            on = np.array([p == design for p in pilot_designs])
            d_in, d_out = pilot[on][pilot_coins[on]], pilot[on][~pilot_coins[on]]
            pilot_auc[design] = _auc(pilot[on], pilot_coins[on])
            pilot_size[design] = min(d_in.size, d_out.size)
            if pilot_size[design] == 0:
                pilot_rule[design], pilot_margin[design] = None, -math.inf
                continue
            pilot_rule[design], pilot_margin[design] = best_profile_rule(
                _below_every_finite(d_in), _below_every_finite(d_out), profile, n_in, n_out, confidence)
        chosen = choose_profile_design(pilot_margin, pilot_size, preferred=preferred)
        rule = pilot_rule[chosen]
        if rule is None:
            raise AuditInputError("--models", "every pilot coin came up the same; use more runs")
        scores = np.array([score(chosen, lp) for lp in
                           _train_many(runner, trainer, jobs([chosen] * R, audited_coins, seeds[n_pilot:]))])
    test = profile_test(scores[audited_coins], scores[~audited_coins], rule, profile, confidence)
    ceiling_point = tangent_test_ceiling(profile, n_in, n_out, confidence)
    bound = epsilon_lower_bound_from_counts(test["false_positives"], n_out, test["false_negatives"], n_in, d, confidence)
    try:
        one_run = epsilon_lower_bound_one_run(_below_every_finite(scores), audited_coins, d, confidence)
        one_run_bound, one_run_details = float(one_run.epsilon), one_run.details
    except ValueError as exc:
        one_run_bound, one_run_details = None, {"error": str(exc)}
    fdp = _fdp_one_run(scores, audited_coins, profile, d, confidence)
    point, _ = canaries[chosen]
    return {
        "audit": "canary, independent runs tested against the claim's privacy profile (trade-off curve)",
        "trainer": _trainer_name(trainer),
        "canary_kind": "out_of_distribution",
        "canary_design": _PROFILE_DESIGN_TEXT[chosen[0]],
        "canary": {"label": label, "design": chosen[0], "setting": chosen[1],
                   "value": float(point[-1])},
        "canary_inserted": bool(insert_canary),
        "n_runs": R,
        "n_with_canary": n_in,
        "n_without_canary": n_out,
        "n_pilot_runs": n_pilot,
        "pilot_auc_by_design": {f"{kind} {v:g}": a for (kind, v), a in pilot_auc.items()},
        "pilot_margin_by_design": {f"{kind} {v:g}": (m if math.isfinite(m) else None)
                                   for (kind, v), m in pilot_margin.items()},
        "auc": _auc(scores, audited_coins),
        "n_training_records": int(X.shape[0]),
        "seed": int(seed),
        "confidence": float(confidence),
        "delta": d,
        "profile_test": test,
        "profile_ceiling": ceiling_point,
        "claimed_epsilon": eps,
        "epsilon_lower_bound": float(bound),
        "epsilon_lower_bound_label": "(ε, δ) Clopper-Pearson bound at the claim's δ, same rule and counts",
        "one_run_epsilon_lower_bound": one_run_bound,
        "one_run_details": one_run_details,
        "fdp_one_run": fdp,
        "ceiling": float(ceiling_threshold_audit(n_in, n_out, d, confidence)),
        "violation": bool(test["refuted"]),
        "verdict": profile_verdict(test, ceiling_point, claimed_epsilon=eps, delta=d, n_runs=R),
    }
