"""The ε estimate that assumes Gaussian DP (Nasr et al. 2023, arXiv 2302.07956): never a sound bound."""

from __future__ import annotations

from numpy.typing import ArrayLike

from audit.statistics.attack_metrics import validate_scores_and_members
from audit.statistics.bound_types import (
    GDP_LABEL,
    EpsilonLowerBound,
    HeldOut,
    ThresholdStrategy,
    _check_confidence,
    _check_delta,
    _check_strategy,
)
from audit.statistics.clopper_pearson_bounds import _gdp_criterion, _threshold_audit
from audit.statistics.gdp_conversions import _gdp_mu_array, epsilon_from_gdp_mu

__all__ = ["epsilon_estimate_gdp"]


def epsilon_estimate_gdp(
    scores: ArrayLike,
    members: ArrayLike,
    delta: float,
    confidence: float = 0.95,
    strategy: ThresholdStrategy = HeldOut(),
) -> EpsilonLowerBound:
    """ε estimate (assumes GDP): the ε of the μ-GDP mechanism matching the attack's error rates.

    Nasr et al. 2023, "Tight Auditing of Differentially Private Machine Learning", arXiv
    2302.07956; Dong, Roth, Su 2019, "Gaussian Differential Privacy", arXiv 1905.02383.
    The rule (threshold, direction) and the one-sided Clopper-Pearson bounds FPR̄, FNR̄ are obtained
    exactly as in `epsilon_lower_bound_clopper_pearson` (same `strategy`, the rule maximising μ);
    then μ_LB = Φ⁻¹(1 − FPR̄) − Φ⁻¹(FNR̄) floored at 0, and
    `epsilon` = `epsilon_from_gdp_mu(μ_LB, δ)`.

    Only a lower bound IF the mechanism's trade-off curve is exactly Gaussian (roughly true for
    DP-SGD with many steps, not in general): `sound=False`, and it must never decide a violation
    verdict on its own.

    Args:
        scores: one score per candidate, higher = more likely a member.
        members: 0/1 (or bool) per candidate.
        delta: the δ at which ε is read from μ.
        confidence: the confidence of the Clopper-Pearson error-rate bounds.
        strategy: how the threshold rule is chosen (`HeldOut` or `Bonferroni`).

    Returns:
        An `EpsilonLowerBound` (`method="gdp"`, `sound=False`); `details` holds μ and the rule.
    """
    s, m = validate_scores_and_members(scores, members)
    d = _check_delta(delta)
    conf = _check_confidence(confidence)
    strat = _check_strategy(strategy)
    details = _threshold_audit(s, m, d, conf, strat, _gdp_criterion)
    mu = max(float(_gdp_mu_array(details["fpr_upper"], details["fnr_upper"])), 0.0)
    eps = epsilon_from_gdp_mu(mu, d)
    details.update({"delta": d, "mu": mu, "quantity": GDP_LABEL})
    return EpsilonLowerBound(epsilon=eps, method="gdp", confidence=conf, sound=False, details=details)
