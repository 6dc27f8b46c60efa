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
from audit.dp_validation.claims import PrivacyClaim, require_claim
from audit.dp_validation.scope import profile_verdict
from audit.dp_validation.sequential_looks import DEFAULT_LOOKS, declared_design
from audit.errors import AuditInputError
from audit.statistics.epsilon_bounds import epsilon_lower_bound_one_run
from audit.statistics.sequential import GroupSequentialDesign, run_group_sequential

# Looks of the sequential profile audit: at most DEFAULT_LOOKS (the planned size halved each time), and none with
# fewer audited runs than this (a smaller look refutes only what the next one would, and spends α).
FIRST_LOOK_RUNS = 200

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
    claim: PrivacyClaim,
    confidence: float = 0.95,
    seed: int = 0,
    scales: tuple[float, ...] = PROFILE_CANARY_SCALES,
    one_class_values: tuple[float, ...] = PROFILE_ONE_CLASS_VALUES,
    insert_canary: bool = True,
    looks: int = DEFAULT_LOOKS,
    spending: str = "haybittle-peto",
    first_look_runs: int | None = None,
    pool=None,
    workers: int | None = None,
    timeout: float | None = TRAIN_TIMEOUT_S,
) -> dict[str, Any]:
    """Does the trainer's output stay within the WHOLE privacy profile its accountant states?

    `claim`: the `PrivacyClaim` under audit (`PrivacyClaim.stated(ε, δ)`, `resolve_claim`), checked where it was
    built and read here as it is.

    `n_runs` independent training runs, each on the audit's dataset plus (by its own fair coin) one
    canary of the design the pilot chose: a column canary (`profile_canary`, the real records as
    given; score = its centred logit gain over the base point, `_centred_logit_gain`) or the
    one-class design (`one_class_canary`: the real records relabelled to one class, the canary
    another, but for one record of each class; score = its centred logit, `_centred_logit`). The claim's
    trade-off curve f_claim (`audit.statistics.tradeoff_curves`:
    from the PLD profile of (σ, q, T) = `claim.dpsgd` when the accountant's configuration is known, else
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

    Sequential (`profile_sequential_design`, `audit.statistics.sequential`): the audit looks after
    R/32, R/16, …, R audited runs (up to `looks` looks, none below FIRST_LOOK_RUNS), each look with a
    quarter as many pilot runs as audited ones so far (the full pilot at the last). At each look the
    design and rule are chosen again on the pilot runs so far, the new audited runs carry that design,
    and the audited runs of that design are tested at the look's level; the first look whose p-value
    is at or below its level stops the audit (refuted). The levels add up to α = 1 − `confidence`
    (`spending`: Haybittle-Peto-type by default, Bonferroni over the looks), so the whole audit has
    level α whatever the looks' dependence: each look's test is exact given the pilot runs, which no
    tested run shares. A claim is held only after the last look, at the full planned size.
    `looks=1` is the fixed-size audit at level α.
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
    R = _check_count("--models", n_runs, 4, "n_runs")
    sequential = profile_sequential_design(
        R, confidence, looks=looks, spending=spending, first_look_runs=first_look_runs
    )
    claim = require_claim(claim)  # checked once, where it was built: read here as it is
    eps, d = claim.epsilon, claim.delta
    scales = tuple(float(v) for v in scales)
    one_class_values = tuple(float(v) for v in one_class_values)
    for name, values in (("scales", scales), ("one_class_values", one_class_values)):
        if not all(math.isfinite(v) and v > 0 for v in values):
            raise AuditInputError(name, f"expected positive numbers, got {values!r}")
    designs = [("column", v) for v in scales] + [("one_class", v) for v in one_class_values]
    if not designs:
        raise AuditInputError("scales", "no canary design to audit: give a scale or a one-class value")
    n_pilot = (
        max(4 * len(designs), R // 4)
        if n_pilot_runs is None
        else _check_count("pilot runs", n_pilot_runs, 2 * len(designs), "n_pilot_runs")
    )
    profile = claim_profile(eps, d, claim.dpsgd)
    if profile is None:  # never: ε is validated above, so at least the bare (ε, δ) pair's profile exists
        raise AuditInputError("claimed_epsilon", "no privacy profile for this claim")
    seeds = _distinct_seeds(seed, _STREAM_MODELS, n_pilot + R)
    coins = np.random.default_rng(np.random.SeedSequence([int(seed), _STREAM_COINS])).random(n_pilot + R) < 0.5
    label = int(np.random.default_rng(np.random.SeedSequence([int(seed), _STREAM_CANARY])).integers(0, n_classes))
    X_wide = np.hstack([X, np.zeros((X.shape[0], 1), dtype=X.dtype)])
    y_one_class = one_class_labels(y, label, n_classes)

    # (canary point, base point) of each design, made once: every run of a design uses the same.
    canaries = {
        (kind, v): profile_canary(X, v) if kind == "column" else one_class_canary(X.shape[1], v) for kind, v in designs
    }

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
    if audited_coins.all() or not audited_coins.any():
        raise AuditInputError("n_runs", "every coin came up the same; use more runs")
    pilot_scores: list[float] = []
    audited_scores = np.full(R, np.nan)
    audited_design: list = [None] * R
    last: dict[str, Any] = {}

    def pilot_rules(n_piloted: int, size: int, level: float):
        """Each design's best rule and margin on the first `n_piloted` pilot runs (pilot data only)."""
        pilot, plan, pilot_coins = np.array(pilot_scores[:n_piloted]), pilot_designs[:n_piloted], coins[:n_piloted]
        n_in, n_out = int(audited_coins[:size].sum()), int((~audited_coins[:size]).sum())
        auc: dict[tuple[str, float], float] = {}
        rules: dict[tuple[str, float], Any] = {}  # a design's best pilot rule, None without one
        margins: dict[tuple[str, float], float] = {}
        sizes: dict[tuple[str, float], int] = {}
        for design in designs:
            on = np.array([p == design for p in plan])
            d_in, d_out = pilot[on][pilot_coins[on]], pilot[on][~pilot_coins[on]]
            auc[design] = _auc(pilot[on], pilot_coins[on])
            sizes[design] = min(d_in.size, d_out.size)
            if sizes[design] == 0 or n_in == 0 or n_out == 0:
                rules[design], margins[design] = None, -math.inf
                continue
            rules[design], margins[design] = best_profile_rule(
                _below_every_finite(d_in), _below_every_finite(d_out), profile, n_in, n_out, 1.0 - level
            )
        return auc, rules, margins, sizes

    def look(index: int, size: int, level: float):
        # Pilot runs grow with the look (a quarter of its size), so the rule of a late look is chosen on as many
        # pilot runs as the fixed design's; the audited runs tested here never served as pilots.
        final = size == R
        n_piloted = (
            n_pilot if final else min(n_pilot, max(min(n_pilot, 4 * len(designs)), math.ceil(n_pilot * size / R)))
        )
        if n_piloted > len(pilot_scores):
            new = range(len(pilot_scores), n_piloted)
            plan = [pilot_designs[i] for i in new]
            pilot_scores.extend(
                score(design, lp)
                for design, lp in zip(
                    plan, _train_many(runner, trainer, jobs(plan, coins[list(new)], [seeds[i] for i in new]))
                )
            )
        auc, rules, margins, sizes = pilot_rules(n_piloted, size, level)
        chosen = choose_profile_design(margins, sizes, preferred=preferred)
        rule = rules[chosen]
        if rule is None and final:
            raise AuditInputError("n_runs", "every pilot coin came up the same; use more runs")
        done = int(sum(design is not None for design in audited_design))
        if size > done:  # the new audited runs carry the canary design chosen now
            new = range(done, size)
            for i, lp in zip(
                new,
                _train_many(
                    runner,
                    trainer,
                    jobs([chosen] * len(new), audited_coins[done:size], [seeds[n_pilot + i] for i in new]),
                ),
            ):
                audited_scores[i], audited_design[i] = score(chosen, lp), chosen
        # Only the runs of the chosen design are tested with its rule (a design never changes within a run).
        tested = np.array([design == chosen for design in audited_design[:size]])
        coins_tested = audited_coins[:size][tested]
        s_in, s_out = audited_scores[:size][tested][coins_tested], audited_scores[:size][tested][~coins_tested]
        details = {
            "pilot_runs": int(n_piloted),
            "design": f"{chosen[0]} {chosen[1]:g}",
            "runs_tested": int(tested.sum()),
        }
        if rule is None or s_in.size == 0 or s_out.size == 0:
            if final:  # the last look must decide: a verdict never rests on an interim look's test
                raise AuditInputError("n_runs", "too few runs of the chosen canary design on one side; use more runs")
            return 1.0, {**details, "note": "no rule or no run on one side yet: this look tests nothing"}
        test = profile_test(s_in, s_out, rule, profile, 1.0 - level)
        # Refuted at this look's level; the audit's confidence is the family-wise one (the levels add up to α).
        test.update(look=index + 1, look_level=float(level), confidence=float(confidence))
        last.update(
            test=test,
            chosen=chosen,
            auc=auc,
            margins=margins,
            n_piloted=n_piloted,
            size=size,
            scores=audited_scores[:size][tested],
            coins=coins_tested,
            level=level,
        )
        return test["p_value"], details

    with _pool_for(trainer, pool, workers, timeout) as runner:
        outcome = run_group_sequential(sequential, look)
    test, chosen, level = last["test"], last["chosen"], last["level"]
    scores, used_coins = last["scores"], last["coins"]
    n_in, n_out = int(used_coins.sum()), int((~used_coins).sum())
    look_confidence = 1.0 - level
    # What a perfect attack could show with the planned runs at the last look's level: whether the audit could
    # have refuted the claim had it run to the end (an early refutation needs no ceiling).
    plan_in, plan_out = int(audited_coins.sum()), int((~audited_coins).sum())
    ceiling_point = tangent_test_ceiling(profile, plan_in, plan_out, 1.0 - sequential.levels[-1])
    bound = epsilon_lower_bound_from_counts(
        test["false_positives"], n_out, test["false_negatives"], n_in, d, look_confidence
    )
    try:
        one_run = epsilon_lower_bound_one_run(_below_every_finite(scores), used_coins, d, confidence)
        one_run_bound, one_run_details = float(one_run.epsilon), one_run.details
    except ValueError as exc:
        one_run_bound, one_run_details = None, {"error": str(exc)}
    fdp = _fdp_one_run(scores, used_coins, profile, d, confidence)
    point, _ = canaries[chosen]
    runs_used = outcome.size_used + last["n_piloted"]
    verdict = profile_verdict(test, ceiling_point, claimed_epsilon=eps, delta=d, n_runs=R)
    verdict["reasons"].append(
        f"{outcome.reason('audited runs')}; {runs_used:,} of {R + n_pilot:,} planned training "
        f"runs used (pilot included); family-wise confidence {confidence:.0%} over the looks"
    )
    return {
        "audit": "canary, independent runs tested against the claim's privacy profile (trade-off curve)",
        "trainer": _trainer_name(trainer),
        "canary_kind": "out_of_distribution",
        "canary_design": _PROFILE_DESIGN_TEXT[chosen[0]],
        "canary": {"label": label, "design": chosen[0], "setting": chosen[1], "value": float(point[-1])},
        "canary_inserted": bool(insert_canary),
        "n_runs": int(outcome.size_used),
        "n_runs_planned": R,
        "n_with_canary": n_in,
        "n_without_canary": n_out,
        "n_pilot_runs": int(last["n_piloted"]),
        "sequential": {**outcome.summary("audited runs", runs_used, R + n_pilot), "pilot_runs_planned": n_pilot},
        "pilot_auc_by_design": {f"{kind} {v:g}": a for (kind, v), a in last["auc"].items()},
        "pilot_margin_by_design": {
            f"{kind} {v:g}": (m if math.isfinite(m) else None) for (kind, v), m in last["margins"].items()
        },
        "auc": _auc(scores, used_coins),
        "n_training_records": int(X.shape[0]),
        "seed": int(seed),
        "confidence": float(confidence),
        "delta": d,
        "profile_test": test,
        "profile_ceiling": ceiling_point,
        "claimed_epsilon": eps,
        "epsilon_lower_bound": float(bound),
        "epsilon_lower_bound_label": (
            "(ε, δ) Clopper-Pearson bound at the claim's δ, same rule and counts, at the "
            f"deciding look's confidence ({look_confidence:.4g})"
        ),
        "one_run_epsilon_lower_bound": one_run_bound,
        "one_run_details": one_run_details,
        "fdp_one_run": fdp,
        "ceiling": float(ceiling_threshold_audit(plan_in, plan_out, d, 1.0 - sequential.levels[-1])),
        "violation": bool(test["refuted"]),
        "verdict": verdict,
    }


def profile_sequential_design(
    n_runs: int,
    confidence: float = 0.95,
    *,
    looks: int = DEFAULT_LOOKS,
    spending: str = "haybittle-peto",
    first_look_runs: int | None = None,
) -> GroupSequentialDesign:
    """The looks of a profile audit of `n_runs` audited runs, declared before the first run (the CLI prints it):
    the planned size halved up to `looks` − 1 times, no look below FIRST_LOOK_RUNS audited runs, α = 1 − confidence
    split by `spending` (`audit.statistics.sequential`). `looks=1` is the fixed-size audit at the full level."""
    return declared_design(
        int(n_runs),
        confidence,
        looks=looks,
        spending=spending,
        first_look=FIRST_LOOK_RUNS if first_look_runs is None else int(first_look_runs),
    )
