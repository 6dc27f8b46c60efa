"""The one registry of estimators: name, paper, pure function, what it assumes, where it is proven,
whether it may decide a verdict.

Every consumer reads this table: the attack rows' `epsilon_lb_scope` (audit.statistics.attack_evaluation
`BOUND_SCOPES`, a view of it), the verdict's MLflow tags `bound.<name>.*` (audit.machinery.verdict_words),
the policy's sound bounds (audit.machinery.policy_rules), the null-data tests of the score-based
estimators (`ESTIMATORS`, a view of it), and the table
"Which bound is proven where" of docs/statistics.md (tests/test_estimator_registry.py checks that the
page lists every estimator registered here, with its paper and its function).

To add an estimator: one pure function in `audit/statistics/` (paper in its docstring, tests against
reference values and on null data) and one `Estimator` row below.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from audit.statistics.bound_types import EpsilonLowerBound
from audit.statistics.clopper_pearson_bounds import epsilon_lower_bound_clopper_pearson
from audit.statistics.fdp_one_run import fdp_one_run_audit
from audit.statistics.gaussian_dp_audit import gaussian_dp_audit
from audit.statistics.gdp_estimate import epsilon_estimate_gdp
from audit.statistics.one_run_bounds import epsilon_lower_bound_one_run
from audit.statistics.tradeoff_curves import profile_test

__all__ = [
    "ESTIMATORS",
    "ESTIMATOR_REGISTRY",
    "Estimator",
    "attack_row_scopes",
    "proven_attack_bounds",
    "score_estimators",
]


@dataclass(frozen=True)
class Estimator:
    """One estimator (a lower bound, a test, or an estimate) and the terms on which it is reported.

    Attributes:
        name: its key in results (`epsilon_lb.<name>`, `epsilon_lb_scope.<name>`, MLflow `bound.<name>.*`).
        title: its name in words (docs/statistics.md's table, in bold).
        paper: the paper(s) it implements, with arXiv numbers.
        function: the pure function that computes it.
        code: where to import it from, "module.function" under `audit.statistics` (the docs' code column).
        assumption: what it rests on, in words a reader of the report can check.
        scope: where it is proven (or "estimate, not a lower bound").
        decides: whether it may decide a verdict where it is reported.
        attack_rows: reported on every attack row (results.json `epsilon_lb_scope`, MLflow tags); False for
            the tests of the canary and white-box audits, reported in their own results.
        score_based: callable as f(scores, members, delta, confidence) → `EpsilonLowerBound` (the null-data
            false-alarm tests run each of these).
    """

    name: str
    title: str
    paper: str
    function: Callable[..., Any]
    code: str
    assumption: str
    scope: str
    decides: bool
    attack_rows: bool = True
    score_based: bool = False

    def scope_entry(self) -> dict[str, Any]:
        """The `epsilon_lb_scope` entry of this bound: {assumption, scope, decides}."""
        return {"assumption": self.assumption, "scope": self.scope, "decides": self.decides}


_STEINKE = "Steinke, Nasr, Jagielski 2023, arXiv 2305.08846"

ESTIMATOR_REGISTRY: dict[str, Estimator] = {
    e.name: e
    for e in (
        Estimator(
            "one_run",
            "one-run",
            _STEINKE,
            epsilon_lower_bound_one_run,
            "epsilon_bounds.epsilon_lower_bound_one_run",
            assumption="one training run (or release); each candidate a member by an independent fair coin flip, "
            "scores computed without the coins",
            scope=f"proven ({_STEINKE})",
            decides=True,
            score_based=True,
        ),
        Estimator(
            "clopper_pearson",
            "Clopper-Pearson",
            "Jagielski, Ullman, Oprea 2020, arXiv 2006.07709; Nasr et al. 2021, arXiv 2101.04535",
            epsilon_lower_bound_clopper_pearson,
            "epsilon_bounds.epsilon_lower_bound_clopper_pearson",
            assumption="assumes independent trials: each candidate's score independent of the others' membership; "
            "proven across independent training runs, NOT for many candidates of one model",
            scope="shown only: never decides a verdict for one model's candidates",
            decides=False,
            score_based=True,
        ),
        Estimator(
            "gdp",
            "GDP estimate",
            "Dong, Roth, Su 2019, arXiv 1905.02383; Nasr et al. 2023, arXiv 2302.07956",
            epsilon_estimate_gdp,
            "epsilon_bounds.epsilon_estimate_gdp",
            assumption="assumes the mechanism's trade-off curve is Gaussian (Dong, Roth, Su 2019)",
            scope="estimate, not a lower bound: never decides a verdict",
            decides=False,
            score_based=True,
        ),
        Estimator(
            "fdp_one_run",
            "one-run f-DP",
            "Mahloujifar, Melis, Chaudhuri 2024, arXiv 2410.22235",
            fdp_one_run_audit,
            "fdp_one_run.fdp_one_run_audit",
            assumption="the same coin-flip canaries; its ε reading (the Gaussian curve it refutes) assumes the "
            "mechanism's trade-off curve is Gaussian; its test of the claimed (ε, δ) curve assumes nothing more",
            scope="shown only (Mahloujifar, Melis, Chaudhuri 2024, arXiv 2410.22235)",
            decides=False,
        ),
        Estimator(
            "profile_test",
            "profile test",
            "Dong, Roth, Su 2019, arXiv 1905.02383; Berger & Boos 1994",
            profile_test,
            "tradeoff_curves.profile_test",
            assumption="independent training runs; the claim's trade-off curve from the pessimistic PLD profile "
            "(a lower envelope: conservative); the rule's slope fixed on pilot runs before the counts",
            scope="proven for independent training runs (canary-audit, default mode profile)",
            decides=True,
            attack_rows=False,
        ),
        Estimator(
            "whitebox_tests",
            "white-box tests",
            "Nasr et al. 2023, arXiv 2302.07956; Dong, Roth, Su 2019, arXiv 1905.02383",
            gaussian_dp_audit,
            "gaussian_dp_audit.gaussian_dp_audit",
            assumption="independent training runs with a Dirac gradient canary; at q = 1 the claim's curve is "
            "Gaussian (exact), at q < 1 the claim's PLD curve",
            scope="proven for independent runs (whitebox-audit): two pre-declared tests at 1 − α/2 each",
            decides=True,
            attack_rows=False,
        ),
    )
}


def attack_row_scopes() -> dict[str, dict[str, Any]]:
    """{name: scope entry} of the bounds every attack row reports, in registry order."""
    return {e.name: e.scope_entry() for e in ESTIMATOR_REGISTRY.values() if e.attack_rows}


def proven_attack_bounds() -> tuple[str, ...]:
    """The attack-row bounds that may decide a verdict for one model's candidates."""
    return tuple(e.name for e in ESTIMATOR_REGISTRY.values() if e.attack_rows and e.decides)


def score_estimators() -> dict[str, Callable[..., EpsilonLowerBound]]:
    """{name: f(scores, members, delta, confidence)} of the score-based estimators."""
    return {e.name: e.function for e in ESTIMATOR_REGISTRY.values() if e.score_based}


#: The score-based estimators by name, each f(scores, members, delta, confidence) (the null-data tests run them).
ESTIMATORS: dict[str, Callable[..., EpsilonLowerBound]] = score_estimators()
