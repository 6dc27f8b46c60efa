"""Black-box audits of randomized mechanisms: run it many times on two neighbouring datasets,
threshold one statistic of its output, and turn the test's error rates into an ε lower bound.

A mechanism is (ε, δ)-DP only if every test telling M(D) from M(D') has FPR + e^ε·FNR ≥ 1 − δ
(and the mirror image). Running M independently N times on each side gives binomial counts of
both errors for one fixed threshold, and Clopper-Pearson upper bounds on the rates give an ε
lower bound that holds with the stated confidence (Jagielski, Ullman, Oprea 2020, arXiv
2006.07709; Ding et al. 2018, "Detecting Violations of Differential Privacy", arXiv 1805.10277,
for the black-box testing of mechanisms). The threshold and the direction of the test are chosen
on a held-out part of the runs and the bound is computed on the rest only: choosing the
threshold on the runs it is evaluated on would inflate the bound.

`threshold_audit` is that two-sample procedure on plain score arrays; the canary audits of
training code (`audit.canary_audit`) reuse it with "train a model and score the canary" as the
mechanism.

Vectorised protocol: a mechanism is `mechanism(data, rng) -> float | np.ndarray` called once per
trial. If it also has an attribute `batched` with `mechanism.batched(data, rng, n)` returning n
outputs stacked on axis 0 (e.g. `value + rng.laplace(0, b, size=n)`), the audit calls that
instead, once per dataset: 20 000 Laplace draws then cost microseconds instead of a Python loop.
"""
from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable
from typing import Any

import numpy as np
from scipy import stats

from audit.epsilon_bounds import epsilon_lower_bound_from_counts
from audit.errors import AuditInputError

__all__ = [
    "HIGHER_MEANS_POSITIVE",
    "LOWER_MEANS_POSITIVE",
    "audit_mechanism",
    "check_neighbouring",
    "run_mechanism",
    "run_mechanism_audit",
    "threshold_audit",
    "validate_claim",
]

HIGHER_MEANS_POSITIVE = "positive if score >= threshold"
LOWER_MEANS_POSITIVE = "positive if score < threshold"


# --------------------------------------------------------------------------------------------------
# The two-sample threshold audit (shared with the canary audits)
# --------------------------------------------------------------------------------------------------


def validate_claim(claimed_epsilon, delta, *, epsilon_flag: str = "claimed_epsilon",
                   delta_flag: str = "delta") -> tuple[float, float]:
    """(ε, δ) as floats; ε must be finite and > 0, δ in [0, 1). AuditInputError otherwise."""
    try:
        eps = float(claimed_epsilon)
    except (TypeError, ValueError):
        raise AuditInputError(epsilon_flag, f"expected a number, got {claimed_epsilon!r}") from None
    if not (math.isfinite(eps) and eps > 0):
        raise AuditInputError(epsilon_flag, f"must be a finite number > 0, got {claimed_epsilon!r}")
    try:
        d = float(delta)
    except (TypeError, ValueError):
        raise AuditInputError(delta_flag, f"expected a number, got {delta!r}") from None
    if not (0 <= d < 1):
        raise AuditInputError(delta_flag, f"must be in [0, 1), got {delta!r}")
    return eps, d


def _validate_confidence(confidence) -> float:
    try:
        c = float(confidence)
    except (TypeError, ValueError):
        raise AuditInputError("confidence", f"expected a number in (0, 1), got {confidence!r}") from None
    if not (0 < c < 1):
        raise AuditInputError("confidence", f"must be in (0, 1), got {confidence!r}")
    return c


def _cp_upper(k: np.ndarray, n: int, alpha: float) -> np.ndarray:
    # One-sided Clopper-Pearson upper bound, vectorised (same formula as
    # audit.epsilon_bounds.clopper_pearson_upper): Beta(k + 1, n − k) quantile, 1 when k = n.
    k = np.asarray(k)
    return np.where(k < n, stats.beta.ppf(1.0 - alpha, k + 1, np.maximum(n - k, 1)), 1.0)


def _unfloored_epsilon(fpr_u: np.ndarray, fnr_u: np.ndarray, delta: float) -> np.ndarray:
    # max{ln((1−δ−FNR̄)/FPR̄), ln((1−δ−FPR̄)/FNR̄)}, without the floor at 0 so that argmax still
    # ranks rules when none is significant; a non-positive numerator counts as −inf.
    with np.errstate(divide="ignore", invalid="ignore"):
        a = np.where(1 - delta - fnr_u > 0, np.log(np.maximum(1 - delta - fnr_u, 1e-300)) - np.log(fpr_u), -np.inf)
        b = np.where(1 - delta - fpr_u > 0, np.log(np.maximum(1 - delta - fpr_u, 1e-300)) - np.log(fnr_u), -np.inf)
    return np.maximum(a, b)


def _between(lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """A point strictly between consecutive sorted distinct values, ±inf handled."""
    with np.errstate(invalid="ignore"):
        mid = lo / 2 + hi / 2
    lo_inf, hi_inf = np.isneginf(lo), np.isposinf(hi)
    mid = np.where(lo_inf & ~hi_inf, hi - np.maximum(1.0, np.abs(hi)), mid)
    mid = np.where(hi_inf & ~lo_inf, lo + np.maximum(1.0, np.abs(lo)), mid)
    return np.where(lo_inf & hi_inf, 0.0, mid)


def _error_counts(threshold, direction: str, positive: np.ndarray, negative: np.ndarray):
    """(false positives among negatives, false negatives among positives) of one rule."""
    if direction == HIGHER_MEANS_POSITIVE:
        return int(np.sum(negative >= threshold)), int(np.sum(positive < threshold))
    return int(np.sum(negative < threshold)), int(np.sum(positive >= threshold))


def _choose_rule(positive: np.ndarray, negative: np.ndarray, delta: float, alpha_per_rate: float):
    """The (threshold, direction) maximising the Clopper-Pearson ε on these (selection) scores.

    Thresholds are midpoints between consecutive distinct pooled scores, so a rule never sits on
    a score and does not depend on how ties are broken.
    """
    values = np.unique(np.concatenate([positive, negative]))
    if values.size < 2:
        return (float(values[0]) if values.size else 0.0), HIGHER_MEANS_POSITIVE
    thresholds = _between(values[:-1], values[1:])
    pos_sorted, neg_sorted = np.sort(positive), np.sort(negative)
    n_pos, n_neg = pos_sorted.size, neg_sorted.size
    fn_high = np.searchsorted(pos_sorted, thresholds, side="left")  # positives below t
    fp_high = n_neg - np.searchsorted(neg_sorted, thresholds, side="left")  # negatives ≥ t
    best = None
    for direction, fp, fn in (
        (HIGHER_MEANS_POSITIVE, fp_high, fn_high),
        (LOWER_MEANS_POSITIVE, n_neg - fp_high, n_pos - fn_high),
    ):
        value = _unfloored_epsilon(_cp_upper(fp, n_neg, alpha_per_rate), _cp_upper(fn, n_pos, alpha_per_rate), delta)
        i = int(np.argmax(value))
        if best is None or value[i] > best[0]:
            best = (value[i], float(thresholds[i]), direction)
    return best[1], best[2]


def _as_scores(name: str, values) -> np.ndarray:
    try:
        arr = np.asarray(values, dtype=float).reshape(-1)
    except (TypeError, ValueError):
        raise AuditInputError(name, "expected numbers") from None
    if np.isnan(arr).any():
        raise AuditInputError(name, f"{int(np.isnan(arr).sum())} score(s) are NaN")
    return arr


def threshold_audit(
    scores_positive,
    scores_negative,
    *,
    delta: float,
    confidence: float = 0.95,
    selection_fraction: float = 0.5,
) -> dict[str, Any]:
    """Held-out threshold test between two samples of a statistic → (ε, δ) lower bound.

    `scores_positive` are i.i.d. draws of the statistic under D' (canary inserted / dataset_b),
    `scores_negative` under D. The first ⌊`selection_fraction`·n⌋ of each side (they are i.i.d.,
    so a fixed split is a random one) choose the threshold t and the direction (positive iff
    score ≥ t, or iff score < t) maximising the Clopper-Pearson ε on them; the remaining draws
    give the error counts of that fixed rule and `epsilon_lower_bound_from_counts` turns them into
    ε_LB = max{ln((1 − δ − FNR̄)/FPR̄), ln((1 − δ − FPR̄)/FNR̄)}, floored at 0, each one-sided
    Clopper-Pearson bound at level (1 − confidence)/2 (Jagielski, Ullman, Oprea 2020, arXiv
    2006.07709; Nasr et al. 2021, arXiv 2101.04535). ±inf scores are allowed; NaN is refused.
    """
    pos = _as_scores("scores_positive", scores_positive)
    neg = _as_scores("scores_negative", scores_negative)
    conf = _validate_confidence(confidence)
    if not (0 < selection_fraction < 1):
        raise AuditInputError("selection_fraction", f"must be in (0, 1), got {selection_fraction!r}")
    for name, arr in (("scores_positive", pos), ("scores_negative", neg)):
        if arr.size < 2:
            raise AuditInputError(name, f"need at least 2 draws (one to choose the threshold, one to test it), got {arr.size}")
    n_sel_pos = min(max(int(selection_fraction * pos.size), 1), pos.size - 1)
    n_sel_neg = min(max(int(selection_fraction * neg.size), 1), neg.size - 1)
    alpha_per_rate = (1.0 - conf) / 2
    threshold, direction = _choose_rule(pos[:n_sel_pos], neg[:n_sel_neg], delta, alpha_per_rate)
    sel_fp, sel_fn = _error_counts(threshold, direction, pos[:n_sel_pos], neg[:n_sel_neg])
    ev_pos, ev_neg = pos[n_sel_pos:], neg[n_sel_neg:]
    fp, fn = _error_counts(threshold, direction, ev_pos, ev_neg)
    bound = epsilon_lower_bound_from_counts(fp, ev_neg.size, fn, ev_pos.size, delta, conf)
    return {
        "threshold": threshold,
        "direction": direction,
        "selection": {"false_positives": sel_fp, "n_negative": n_sel_neg,
                      "false_negatives": sel_fn, "n_positive": n_sel_pos},
        "evaluation": {"false_positives": fp, "n_negative": int(ev_neg.size),
                       "false_negatives": fn, "n_positive": int(ev_pos.size)},
        "fpr_upper": float(_cp_upper(fp, ev_neg.size, alpha_per_rate)),
        "fnr_upper": float(_cp_upper(fn, ev_pos.size, alpha_per_rate)),
        "epsilon_lower_bound": float(bound),
        "confidence": conf,
        "delta": float(delta),
        "method": "clopper_pearson, threshold chosen on a held-out part",
    }


# --------------------------------------------------------------------------------------------------
# Mechanisms
# --------------------------------------------------------------------------------------------------


def _records(dataset) -> list | None:
    """The dataset as a list of hashable records, or None when it is not an array we can read."""
    if isinstance(dataset, (str, bytes)) or not hasattr(dataset, "__len__"):
        return None
    try:
        arr = np.asarray(dataset)
    except Exception:
        return None
    if arr.dtype == object or arr.ndim not in (1, 2):
        return None
    return [row.tobytes() if arr.ndim == 2 else arr[i : i + 1].tobytes() for i, row in enumerate(arr)]


def check_neighbouring(dataset_a, dataset_b) -> int | None:
    """Records by which two array datasets differ (add/remove = 1, replace = 1); None if unreadable.

    Raises AuditInputError when they differ in more than one record: the DP guarantee (and so
    the claim being audited) is about neighbours only, and a bound on far-apart datasets would
    be reported against the wrong ε.
    """
    a, b = _records(dataset_a), _records(dataset_b)
    if a is None or b is None:
        return None
    only_a = Counter(a) - Counter(b)
    only_b = Counter(b) - Counter(a)
    n_a, n_b = sum(only_a.values()), sum(only_b.values())
    distance = max(n_a, n_b)  # add/remove: (1, 0); replace one record: (1, 1)
    if distance > 1:
        raise AuditInputError(
            "dataset_b",
            f"is not a neighbour of dataset_a: {n_a} record(s) only in dataset_a and {n_b} only in "
            "dataset_b (neighbouring datasets differ by adding, removing or replacing one record)",
        )
    return distance


def run_mechanism(mechanism: Callable, dataset, n_trials: int, rng: np.random.Generator, where: str) -> np.ndarray:
    """n_trials outputs stacked on axis 0: `mechanism.batched(data, rng, n)` when offered."""
    batched = getattr(mechanism, "batched", None)
    try:
        if callable(batched):
            outputs = np.asarray(batched(dataset, rng, n_trials), dtype=float)
            if outputs.ndim == 0 or outputs.shape[0] != n_trials:
                raise AuditInputError(
                    where, f"batched(data, rng, {n_trials}) returned shape {outputs.shape}, expected ({n_trials}, ...)"
                )
            return outputs
        outputs = [np.asarray(mechanism(dataset, rng), dtype=float) for _ in range(n_trials)]
    except AuditInputError:
        raise
    except (TypeError, ValueError) as exc:
        raise AuditInputError(where, f"the mechanism's output is not numeric or it failed: {type(exc).__name__}: {exc}") from None
    shapes = {o.shape for o in outputs}
    if len(shapes) != 1:
        raise AuditInputError(where, f"the mechanism returned outputs of different shapes {sorted(shapes)}")
    return np.stack(outputs)


def _statistic_values(outputs: np.ndarray, statistic: Callable | None, where: str) -> np.ndarray:
    if statistic is None:
        if outputs[0].size != 1:
            raise AuditInputError(
                "statistic",
                f"the mechanism returns arrays of shape {outputs.shape[1:]}; pass statistic=f(output) -> float",
            )
        return outputs.reshape(-1)
    try:
        values = np.array([float(statistic(o)) for o in outputs])
    except (TypeError, ValueError) as exc:
        raise AuditInputError("statistic", f"must map one output to a float: {type(exc).__name__}: {exc}") from None
    return values


def audit_mechanism(
    mechanism: Callable[[Any, np.random.Generator], float | np.ndarray],
    dataset_a,
    dataset_b,
    *,
    n_trials: int,
    claimed_epsilon: float,
    delta: float = 0.0,
    confidence: float = 0.95,
    seed: int = 0,
    statistic: Callable[[np.ndarray], float] | None = None,
) -> dict[str, Any]:
    """Does `mechanism` leak more than (claimed ε, δ) between two neighbouring datasets?

    Runs `mechanism(data, rng)` `n_trials` times on each dataset (or `mechanism.batched(data, rng,
    n)` once each, see the module docstring), with independent generators spawned from `seed`;
    reduces each output to a number with `statistic` (default: the output itself, which must then
    be a scalar); then `threshold_audit`: threshold and direction chosen on the first half of the
    trials of each side, Clopper-Pearson (ε, δ) lower bound at `confidence` on the other half.
    `violation` is True when that lower bound is strictly above `claimed_epsilon`.

    Datasets that are arrays (1-D of values or 2-D of rows) must differ in at most one record
    (identical datasets are allowed: that is the null run, whose bound must be 0 ≥ 95% of the
    time); other objects are passed to the mechanism unchecked.
    """
    if not callable(mechanism):
        raise AuditInputError("mechanism", f"expected a callable mechanism(data, rng), got {mechanism!r}")
    eps, d = validate_claim(claimed_epsilon, delta)
    conf = _validate_confidence(confidence)
    if isinstance(n_trials, bool) or not isinstance(n_trials, (int, np.integer)) or n_trials < 4:
        raise AuditInputError("n_trials", f"need an integer ≥ 4 trials per dataset, got {n_trials!r}")
    if statistic is not None and not callable(statistic):
        raise AuditInputError("statistic", f"expected a callable or None, got {statistic!r}")
    distance = check_neighbouring(dataset_a, dataset_b)
    rng_a, rng_b = (np.random.default_rng(s) for s in np.random.SeedSequence(int(seed)).spawn(2))
    n = int(n_trials)
    scores_a = _statistic_values(run_mechanism(mechanism, dataset_a, n, rng_a, "mechanism"), statistic, "mechanism")
    scores_b = _statistic_values(run_mechanism(mechanism, dataset_b, n, rng_b, "mechanism"), statistic, "mechanism")
    audit = threshold_audit(scores_b, scores_a, delta=d, confidence=conf)
    name = getattr(mechanism, "__qualname__", None) or type(mechanism).__name__
    return {
        "mechanism": f"{getattr(mechanism, '__module__', '?')}:{name}",
        "claimed_epsilon": eps,
        "delta": d,
        "confidence": conf,
        "seed": int(seed),
        "n_trials": n,
        "datasets_differ_in": distance,
        "statistic": "output" if statistic is None else getattr(statistic, "__name__", "custom"),
        "statistic_mean": {"dataset_a": float(np.mean(scores_a)), "dataset_b": float(np.mean(scores_b))},
        "positive": "dataset_b",
        **audit,
        "violation": bool(audit["epsilon_lower_bound"] > eps),
    }


# --------------------------------------------------------------------------------------------------
# One entry point for the CLI
# --------------------------------------------------------------------------------------------------


def _declared(function: Callable, name: str):
    """`function.NAME`, else the NAME of the function's module, else None."""
    import sys

    value = getattr(function, name, None)
    if value is None:
        value = getattr(sys.modules.get(getattr(function, "__module__", "") or ""), name, None)
    return value


def _resolve_datasets(mechanism: Callable, datasets, flag: str = "--datasets"):
    if datasets is None:
        datasets = _declared(mechanism, "DATASETS")
        if datasets is None:
            raise AuditInputError(
                flag, "no datasets: pass --datasets module:function (returning (dataset_a, dataset_b)) or give "
                "the mechanism (or its module) a DATASETS attribute",
            )
    if isinstance(datasets, str):
        from audit.user_code import load_user_function

        datasets = load_user_function(datasets, flag)
    if callable(datasets):
        try:
            datasets = datasets()
        except Exception as exc:
            raise AuditInputError(flag, f"raised {type(exc).__name__}: {exc}") from None
    if not (isinstance(datasets, (tuple, list)) and len(datasets) == 2):
        raise AuditInputError(flag, f"expected a pair (dataset_a, dataset_b), got {type(datasets).__name__}")
    return datasets


def run_mechanism_audit(
    mechanism: str | Callable,
    *,
    datasets=None,
    n_trials: int = 20_000,
    claimed_epsilon: float | None = None,
    delta: float | None = None,
    confidence: float = 0.95,
    seed: int = 0,
    statistic: str | Callable | None = None,
) -> dict[str, Any]:
    """`privacy-audit mechanism-audit`: load the mechanism, its neighbouring datasets and its claim,
    then `audit_mechanism`.

    `mechanism`, `datasets` and `statistic` may be "module:function" strings. `datasets` is a
    pair or a zero-argument callable returning (dataset_a, dataset_b); when None, the
    mechanism's (or its module's) `DATASETS` attribute. The claim is `claimed_epsilon`/`delta`,
    else the mechanism's (or its module's) `CLAIM = {"epsilon": ε, "delta": δ}`
    (`audit.canary_audit.resolve_claim`, same rules as for trainers). Adds "claim" to the result.
    """
    from audit.canary_audit import resolve_claim  # the canary audit imports this module
    from audit.user_code import load_user_function

    if isinstance(mechanism, str):
        mechanism = load_user_function(mechanism, "--mechanism")
    if not callable(mechanism):
        raise AuditInputError("--mechanism", f"expected a callable mechanism(data, rng), got {mechanism!r}")
    if isinstance(statistic, str):
        statistic = load_user_function(statistic, "--statistic")
    claim = resolve_claim(mechanism, claimed_epsilon=claimed_epsilon, delta=delta)
    dataset_a, dataset_b = _resolve_datasets(mechanism, datasets)
    result = audit_mechanism(
        mechanism, dataset_a, dataset_b, n_trials=n_trials, claimed_epsilon=claim.epsilon, delta=claim.delta,
        confidence=confidence, seed=seed, statistic=statistic,
    )
    result["claim"] = claim.to_dict()
    return result
