"""Empirical ε lower bounds (and one ε estimate) from membership-inference attack outcomes.

Every estimator is a pure function of attack scores and membership labels (plus δ and a
confidence level); no I/O. The docstring of each names its paper and the exact quantity returned.
docs/statistics.md ("Estimators") is the contract; its reference values are tested in
tests/test_epsilon_bounds.py.

Score-based estimators share the conventions of `audit.statistics.attack_metrics`: `scores` higher = more
likely a member, `members` bool/0-1, validated at the boundary with `ValueError` naming the
argument. They return an `EpsilonLowerBound`.

This module is the one place to import them from; they live in modules named for what they hold:
`bound_types` (result and threshold strategies), `clopper_pearson_bounds`, `one_run_bounds`,
`gdp_conversions` (μ ↔ ε) and `gdp_estimate`. The registry of estimators (name, paper, function,
scope) is audit.statistics.estimators.
"""

from __future__ import annotations

from audit.statistics.bound_types import GDP_LABEL, Bonferroni, EpsilonLowerBound, HeldOut, ThresholdStrategy
from audit.statistics.clopper_pearson_bounds import (
    _held_out_split,
    _threshold_audit,
    choose_clopper_pearson_rule,
    clopper_pearson_upper,
    epsilon_from_error_rates,
    epsilon_lower_bound_clopper_pearson,
    epsilon_lower_bound_from_counts,
)
from audit.statistics.gdp_conversions import epsilon_from_gdp_mu, gdp_mu_from_epsilon, gdp_mu_lower_bound
from audit.statistics.gdp_estimate import epsilon_estimate_gdp
from audit.statistics.one_run_bounds import (
    epsilon_lower_bound_one_run,
    one_run_ceiling,
    one_run_claim_p_value,
    one_run_epsilon_from_counts,
    one_run_p_value,
)

__all__ = [
    "EpsilonLowerBound",
    "HeldOut",
    "Bonferroni",
    "ThresholdStrategy",
    "GDP_LABEL",
    "clopper_pearson_upper",
    "epsilon_from_error_rates",
    "epsilon_lower_bound_from_counts",
    "epsilon_lower_bound_clopper_pearson",
    "choose_clopper_pearson_rule",
    "one_run_p_value",
    "one_run_epsilon_from_counts",
    "epsilon_lower_bound_one_run",
    "one_run_claim_p_value",
    "one_run_ceiling",
    "gdp_mu_lower_bound",
    "epsilon_from_gdp_mu",
    "gdp_mu_from_epsilon",
    "epsilon_estimate_gdp",
    "_held_out_split",
    "_threshold_audit",
]
