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

The two-sample procedure on plain score arrays is `audit.statistics.threshold_audit`; the canary
audits of training code reuse it with "train a model and score the canary" as the mechanism.

Vectorised protocol: a mechanism is `mechanism(data, rng) -> float | np.ndarray` called once per
trial. If it also has an attribute `batched` with `mechanism.batched(data, rng, n)` returning n
outputs stacked on axis 0 (e.g. `value + rng.laplace(0, b, size=n)`), the audit calls that
instead, once per dataset: 20 000 Laplace draws then cost microseconds instead of a Python loop.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

import numpy as np

from audit.dp_validation.claims import PrivacyClaim, resolve_claim, validate_claim
from audit.dp_validation.mode_power import mechanism_power
from audit.dp_validation.scope import apply_power, claim_verdict
from audit.dp_validation.sequential_looks import (
    DEFAULT_LOOKS,
    declared_design,
    look_confidence,
    sequential_threshold_audit,
)
from audit.errors import AuditInputError
from audit.machinery.bound_results import MechanismAuditResult
from audit.machinery.progress import Progress, as_progress
from audit.statistics.audit_ceilings import ceiling_threshold_audit, runs_needed_threshold_audit
from audit.statistics.sequential import GroupSequentialDesign
from audit.statistics.threshold_audit import (  # noqa: F401 - threshold_audit: for importers of this module
    threshold_audit,
    validate_confidence,
)

__all__ = [
    "audit_mechanism",
    "check_neighbouring",
    "mechanism_design",
    "mechanism_result",
    "run_mechanism",
    "run_mechanism_audit",
]

# The smallest look of the sequential mechanism audit, in draws per dataset (half choose the rule, half test it):
# a smaller look refutes only what the next would, and spends α.
FIRST_LOOK_TRIALS = 200

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
    from audit.machinery.workers import user_code

    batched = getattr(mechanism, "batched", None)
    name = f"{where} {_spec_of(mechanism)}"
    # Anything the mechanism raises (ZeroDivisionError, sys.exit, …) is the user's: exit 2 naming it.
    if callable(batched):
        with user_code(name, "mechanism"):
            raw = batched(dataset, rng, n_trials)
        outputs = _numeric(raw, where)
        if outputs.ndim == 0 or outputs.shape[0] != n_trials:
            raise AuditInputError(
                where, f"batched(data, rng, {n_trials}) returned shape {outputs.shape}, expected ({n_trials}, ...)"
            )
    else:
        collected = []
        for _ in range(n_trials):
            with user_code(name, "mechanism"):
                raw = mechanism(dataset, rng)
            collected.append(_numeric(raw, where))
        shapes = {o.shape for o in collected}
        if len(shapes) != 1:
            raise AuditInputError(where, f"the mechanism returned outputs of different shapes {sorted(shapes)[:5]}")
        outputs = np.stack(collected)
    if not np.all(np.isfinite(outputs)):
        raise AuditInputError(
            where, "the mechanism returned a non-finite output (NaN or ±inf); outputs must be finite numbers"
        )
    return outputs


def _spec_of(function) -> str:
    return f"{getattr(function, '__module__', '?')}:{getattr(function, '__qualname__', type(function).__name__)}"


def _numeric(raw, where: str) -> np.ndarray:
    try:
        return np.asarray(raw, dtype=float)
    except (TypeError, ValueError, OverflowError) as exc:
        raise AuditInputError(
            where, f"the mechanism's output is not numeric ({type(raw).__name__}: {' '.join(str(exc).split())[:120]})"
        ) from None


def _statistic_values(outputs: np.ndarray, statistic: Callable | None, where: str) -> np.ndarray:
    if statistic is None:
        if outputs[0].size != 1:
            raise AuditInputError(
                "statistic",
                f"the mechanism returns arrays of shape {outputs.shape[1:]}; pass statistic=f(output) -> float",
            )
        return outputs.reshape(-1)
    from audit.machinery.workers import user_code

    with user_code(f"statistic {_spec_of(statistic)}"):
        values = np.array([float(statistic(o)) for o in outputs])
    if not np.all(np.isfinite(values)):
        raise AuditInputError("statistic", "returned a non-finite value (NaN or ±inf)")
    return values


def audit_mechanism(
    mechanism: Callable[[Any, np.random.Generator], float | np.ndarray],
    dataset_a,
    dataset_b,
    *,
    n_trials: int,
    claimed_epsilon: float | None = None,
    delta: float = 0.0,
    confidence: float = 0.95,
    seed: int = 0,
    statistic: Callable[[np.ndarray], float] | None = None,
    claim: PrivacyClaim | None = None,
    looks: int | None = 1,
    spending: str = "haybittle-peto",
    first_look_trials: int = FIRST_LOOK_TRIALS,
) -> dict[str, Any]:
    """Does `mechanism` leak more than (claimed ε, δ) between two neighbouring datasets?

    Runs `mechanism(data, rng)` `n_trials` times on each dataset (or `mechanism.batched(data, rng,
    n)` once each, see the module docstring), with independent generators spawned from `seed`;
    reduces each output to a number with `statistic` (default: the output itself, which must then
    be a scalar); then `threshold_audit`: threshold and direction chosen on the first half of the
    trials of each side, Clopper-Pearson (ε, δ) lower bound at `confidence` on the other half.
    `violation` is True when that lower bound is strictly above `claimed_epsilon`.

    Sequential (`looks` > 1; `run_mechanism_audit`, the command, uses 6): the draws come in looks at the
    planned `n_trials` halved each time (none below `first_look_trials`), α = 1 − `confidence` split over them
    by `spending` (`audit.dp_validation.sequential_looks`). Each look runs the same held-out threshold audit
    on the draws so far at its own level (the first half of them choose the rule, the second half test it: valid
    on its own, so the union bound over the looks keeps the family-wise level); the first look whose bound
    exceeds the claim stops the draws. A claim is held only after the last look, at the planned size.
    `looks=1` (the default of this function) is the fixed-size audit.

    Datasets that are arrays (1-D of values or 2-D of rows) must differ in at most one record
    (identical datasets are allowed: that is the null run, whose bound must be 0 ≥ 95% of the
    time); other objects are passed to the mechanism unchecked.

    The claim: `claimed_epsilon` and `delta`, validated here, or a `claim` already validated at the
    boundary (`run_mechanism_audit` passes the one `resolve_claim` returned; it is not checked again).
    """
    if not callable(mechanism):
        raise AuditInputError("mechanism", f"expected a callable mechanism(data, rng), got {mechanism!r}")
    if claim is not None:
        eps, d = claim.epsilon, claim.delta
    else:
        if claimed_epsilon is None:
            raise AuditInputError("claimed_epsilon", "give the claimed ε (or a PrivacyClaim as claim)")
        eps, d = validate_claim(claimed_epsilon, delta)
    conf = validate_confidence(confidence)
    from audit.machinery.limits import check_count

    n_trials = check_count("--trials", n_trials, where="n_trials")  # the range table: [4, 10⁸] draws per dataset
    design = mechanism_design(n_trials, conf, looks=looks, spending=spending, first_look_trials=first_look_trials)
    if statistic is not None and not callable(statistic):
        raise AuditInputError("statistic", f"expected a callable or None, got {statistic!r}")
    distance = check_neighbouring(dataset_a, dataset_b)
    rng_a, rng_b = (np.random.default_rng(s) for s in np.random.SeedSequence(int(seed)).spawn(2))
    n = int(n_trials)
    drawn: dict[str, list[np.ndarray]] = {"a": [], "b": []}

    def draw(size: int) -> tuple[np.ndarray, np.ndarray]:
        have = sum(part.size for part in drawn["a"])
        if size > have:  # the next draws of the same two generators: the last look sees the fixed audit's draws
            for side, data, rng in (("a", dataset_a, rng_a), ("b", dataset_b, rng_b)):
                outputs = run_mechanism(mechanism, data, size - have, rng, "mechanism")
                drawn[side].append(_statistic_values(outputs, statistic, "mechanism"))
        return np.concatenate(drawn["b"])[:size], np.concatenate(drawn["a"])[:size]

    outcome, audit = sequential_threshold_audit(design, draw, epsilon=eps, delta=d, confidence=conf)
    scores_b, scores_a = draw(outcome.size_used)
    name = getattr(mechanism, "__qualname__", None) or type(mechanism).__name__
    # What a perfect rule could show with the planned draws at the last look's level: whether the audit could have
    # refuted the claim had it drawn them all (an early refutation needs no ceiling; the last look's is this one).
    final_confidence = look_confidence(design, conf, design.levels[-1])
    planned_eval = n - min(max(int(0.5 * n), 1), n - 1)
    ceiling = ceiling_threshold_audit(planned_eval, planned_eval, d, final_confidence)
    used = outcome.size_used
    return {
        "mechanism": f"{getattr(mechanism, '__module__', '?')}:{name}",
        "claimed_epsilon": eps,
        "delta": d,
        "seed": int(seed),
        "n_trials": n,
        "n_trials_used": int(used),
        "datasets_differ_in": distance,
        "statistic": "output" if statistic is None else getattr(statistic, "__name__", "custom"),
        "statistic_mean": {"dataset_a": float(np.mean(scores_a)), "dataset_b": float(np.mean(scores_b))},
        "positive": "dataset_b",
        **audit,
        "confidence": conf,  # family-wise, over the looks; the deciding look's own is `look_confidence`
        "look_confidence": audit["confidence"],
        "sequential": outcome.summary("trials per dataset", used, n),
        "violation": bool(audit["epsilon_lower_bound"] > eps),
        "verdict": claim_verdict(
            bound=audit["epsilon_lower_bound"],
            ceiling=ceiling,
            claimed_epsilon=eps,
            delta=d,
            needed=runs_needed_threshold_audit(eps, d, final_confidence),
            unit="trials per dataset (--trials)",
            confidence=audit["confidence"],
        ),
    }


def mechanism_design(
    n_trials: int,
    confidence: float = 0.95,
    *,
    looks: int | None = DEFAULT_LOOKS,
    spending: str = "haybittle-peto",
    first_look_trials: int = FIRST_LOOK_TRIALS,
) -> GroupSequentialDesign:
    """The looks of a mechanism audit of `n_trials` draws per dataset, declared before the first draw (the command
    prints it): `audit.dp_validation.sequential_looks.declared_design`."""
    return declared_design(n_trials, confidence, looks=looks, spending=spending, first_look=first_look_trials)


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


def _resolve_datasets(mechanism: Callable, datasets, flag: str = "DATASETS"):
    if datasets is None:
        datasets = _declared(mechanism, "DATASETS")
        if datasets is None:
            raise AuditInputError(
                "mechanism",
                "no datasets: give the mechanism (or its module) a DATASETS attribute: a pair "
                "(dataset_a, dataset_b) or a function returning one",
            )
    if isinstance(datasets, str):
        from audit.machinery.user_code import load_user_function

        datasets = load_user_function(datasets, flag)
    if callable(datasets):
        from audit.machinery.workers import user_code

        with user_code(f"DATASETS of {_spec_of(mechanism)}"):
            datasets = datasets()
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
    progress: Progress | Callable[[dict], None] | None = None,
    looks: int | None = DEFAULT_LOOKS,
    spending: str = "haybittle-peto",
) -> dict[str, Any]:
    """`privacy-audit mechanism-audit`: load the mechanism, its neighbouring datasets and its claim,
    then `audit_mechanism`.

    `mechanism`, `datasets` and `statistic` may be "module:function" strings. `datasets` is a
    pair or a zero-argument callable returning (dataset_a, dataset_b); when None, the
    mechanism's (or its module's) `DATASETS` attribute. The claim is `claimed_epsilon`/`delta`,
    else the mechanism's (or its module's) `CLAIM = {"epsilon": ε, "delta": δ}`
    (`audit.dp_validation.canary_audit.resolve_claim`, same rules as for trainers). Adds "claim" to the result.
    Sequential by default (`looks`, `spending`: `audit_mechanism`, `mechanism_design`).
    """
    from audit.machinery.user_code import load_user_function

    if isinstance(mechanism, str):
        mechanism = load_user_function(mechanism, "mechanism")
    if not callable(mechanism):
        raise AuditInputError("mechanism", f"expected a callable mechanism(data, rng), got {mechanism!r}")
    if isinstance(statistic, str):
        statistic = load_user_function(statistic, "statistic")
    claim = resolve_claim(mechanism, claimed_epsilon=claimed_epsilon, delta=delta)
    dataset_a, dataset_b = _resolve_datasets(mechanism, datasets)
    with as_progress(progress).step(f"mechanism: up to {n_trials} trials on each dataset, threshold audit"):
        result = audit_mechanism(
            mechanism,
            dataset_a,
            dataset_b,
            n_trials=n_trials,
            claim=claim,
            confidence=confidence,
            seed=seed,
            statistic=statistic,
            looks=looks,
            spending=spending,
        )
    return mechanism_result(result, claim=claim, n_trials=n_trials)


def mechanism_result(found: dict[str, Any], *, claim: PrivacyClaim, n_trials: int) -> dict[str, Any]:
    """`audit_mechanism`'s result as the kind's typed result (`MechanismAuditResult`), completed with the claim,
    the power at the planned draws and the verdict that power allows, serialised once (the field order results
    files have always had)."""
    typed = MechanismAuditResult.from_json(found).with_fields(claim=claim.to_dict())
    # Power measured on the bundled mechanism bug at a stated number of draws (mode_power): the planned draws, the
    # size a held claim was tested at (a claim is held only after the last look).
    power = mechanism_power(n_trials)
    return typed.with_fields(power=power, verdict=apply_power(dict(typed.bound.own), power)).to_json()
