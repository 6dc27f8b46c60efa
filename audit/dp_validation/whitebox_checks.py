"""The deciding checks of one look of the Dirac-canary white-box audit (`audit.dp_validation.whitebox_audit`):
the two pre-declared tests of the runs' scores against the claim, each at `per_test`, with their messages, the
audit's ceiling and the runs a perfect attack would need.

At q = 1 the claimed mechanism is exactly μ-GDP (Dong, Roth, Su 2019, arXiv 1905.02383): the test of its Gaussian
trade-off curve at the pilot's equal-error point decides, beside the Clopper-Pearson (ε, δ) bound of a tail rule.
At q < 1 the Clopper-Pearson bound and the same point against the claim's PLD trade-off curve decide; the GDP
number is shown only. A look of a sequential audit calls this at its own level (`per_test` = 1 − level/2).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from audit.machinery.verdict import Check
from audit.statistics.audit_ceilings import ceiling_threshold_audit, runs_needed_threshold_audit
from audit.statistics.gaussian_dp_audit import GAUSSIAN_ASSUMPTION, GaussianDPAudit, runs_needed_gaussian_dp

__all__ = ["LookChecks", "accountant_checks", "deciding_checks"]


@dataclass
class LookChecks:
    """What one look's tests found: the checks (deciding and shown), the ceiling and its kind, the runs per side a
    perfect attack would need, and the refuted pair of the claim's curve (q < 1; None when not refuted)."""

    checks: list[Check]
    ceiling: float
    ceiling_kind: str
    needed: int | None
    profile_pair: dict[str, Any] | None

    @property
    def refuted(self) -> bool:
        return any(c.failed for c in self.checks if c.decides)


def deciding_checks(
    audit: GaussianDPAudit,
    *,
    subject: str,
    claim: dict[str, Any],
    eps_claim: float,
    mu_claim: float,
    delta: float,
    per_test: float,
    claimed_epsilon: float | None,
    pilot_fraction: float,
) -> LookChecks:
    """The checks of one look: see the module docstring. `claim` is `whitebox_audit._claim`'s dict;
    `claimed_epsilon` the --claimed-epsilon override (None: the accountant's)."""
    cp_ceiling = ceiling_threshold_audit(audit.n_eval_positive, audit.n_eval_negative, delta, per_test)
    cp = audit.epsilon_lower_bound_tail
    cp_failed = cp > eps_claim
    cp_message = (
        f"violation: Clopper-Pearson bound ε ≥ {cp:.3f} > claimed ε {eps_claim:.3f} (δ {delta:g}; FPR ≤ "
        f"{audit.tail_fpr_upper:.3g}, FNR ≤ {audit.tail_fnr_upper:.3g} at the tail rule)"
        if cp_failed
        else f"Clopper-Pearson bound ε ≥ {cp:.3f} ≤ claimed ε {eps_claim:.3f} (δ {delta:g}); a perfect attack "
        f"reaches at most ε {cp_ceiling:.3f} with these runs"
    )

    checks: list[Check] = []
    profile_pair = None
    if claim["full_batch"]:
        inconclusive = audit.ceiling_mu <= mu_claim
        needed = runs_needed_gaussian_dp(mu_claim, per_test, pilot_fraction)
        if audit.refutes_claim:
            pair = audit.refuted_pair or {}  # set whenever the claim is refuted
            message = (
                f"refuted: the test's error rates (FPR ≤ {audit.fpr_upper:.4g}, FNR ≤ {audit.fnr_upper:.4g} at "
                f"{per_test:.1%}) lie below the claimed μ = {mu_claim:.3f} Gaussian trade-off curve; they violate "
                f"the claim's (ε {pair['epsilon']:.3f}, δ {pair['delta']:.3g}); μ ≥ {audit.mu_lower_bound:.3f} "
                f"(ε ≥ {audit.epsilon_gdp:.3f} at δ {delta:g} under the GDP-family assumption)"
            )
        elif inconclusive:
            message = (
                f"inconclusive: with {audit.n_eval_positive} evaluation runs per side a perfect attack shows at most "
                f"μ {audit.ceiling_mu:.3f} (ε {audit.ceiling_epsilon_gdp:.3f}), at or below the claim μ {mu_claim:.3f}; "
                f"it needs ≥ {needed} runs per side"
            )
        else:
            message = (
                f"not refuted: μ ≥ {audit.mu_lower_bound:.3f} (ε ≥ {audit.epsilon_gdp:.3f}) vs claimed μ "
                f"{mu_claim:.3f} (ε {audit.claimed_epsilon_gdp:.3f}); the audit could have shown up to μ "
                f"{audit.ceiling_mu:.3f} (not a proof that the claim holds)"
            )
        checks.append(
            Check(
                subject,
                "claimed Gaussian trade-off curve (q = 1)",
                message,
                failed=audit.refutes_claim,
                inconclusive=inconclusive and not audit.refutes_claim,
                assumption="independent runs (refutation is assumption-free given them)",
            )
        )
        # The (ε, δ) bound's test: it can fail the audit; its own ceiling (far below the curve
        # test's at these run counts) does not make the audit inconclusive: the curve test decides that.
        checks.append(
            Check(
                subject,
                "Clopper-Pearson (ε, δ) bound, tail rule",
                cp_message,
                failed=cp_failed,
                assumption="independent runs; any mechanism",
            )
        )
        ceiling, ceiling_kind = audit.ceiling_epsilon_gdp, "ε of the largest μ a perfect attack shows (GDP conversion)"
    else:
        from audit.statistics.tradeoff_curves import (
            claim_profile,
            profile_ceiling,
            refute_point,
        )

        needed = runs_needed_threshold_audit(eps_claim, delta, per_test, pilot_fraction)
        # A stated ε overrides the accountant; a multi-phase history has no single (σ, q, T) profile.
        dpsgd = tuple(claim["history"][0]) if claimed_epsilon is None and len(claim["history"]) == 1 else None
        profile = claim_profile(eps_claim if claimed_epsilon is not None else None, delta, dpsgd)
        # A perfect attack's point (no error at all): could it refute the claimed curve?
        profile_refutable = (
            profile is not None
            and profile_ceiling(profile, audit.n_eval_positive, audit.n_eval_negative, per_test)["refutable"]
        )
        inconclusive = cp_ceiling <= eps_claim and not profile_refutable
        failed = cp_failed
        message = (
            cp_message
            if failed
            else f"inconclusive: neither could a perfect attack's point refute the claimed curve, nor its bound "
            f"exceed the claim: it reaches at most ε {cp_ceiling:.3f} with these runs, at or below the "
            f"claim {eps_claim:.3f}; it needs ≥ {needed} runs per side (q < 1: the Gaussian-curve test is not exact)"
            if inconclusive
            else f"no violation: Clopper-Pearson bound ε ≥ {cp:.3f} ≤ claimed ε {eps_claim:.3f} (tail rule; its ceiling {cp_ceiling:.3f}"
            + ("; a perfect attack's point would refute the claimed trade-off curve)" if profile_refutable else ")")
        )
        checks.append(
            Check(
                subject,
                "Clopper-Pearson (ε, δ) bound, tail rule (q < 1)",
                message,
                failed=failed,
                inconclusive=inconclusive and not failed,
                assumption="independent runs; any mechanism",
            )
        )
        checks.append(
            Check(
                subject,
                "GDP-family estimate (q < 1)",
                f"GDP estimate μ ≥ {audit.mu_lower_bound:.3f}, ε {audit.epsilon_gdp:.3f}: shown only, the "
                "trade-off curve of Poisson-subsampled DP-SGD is not Gaussian",
                decides=False,
                assumption=GAUSSIAN_ASSUMPTION + " — does NOT hold exactly for q < 1",
            )
        )
        if profile is not None:
            # The equal-error point against the claim's whole trade-off curve (sound for any
            # mechanism: the PLD curve is a lower envelope of the claimed one); the second of the
            # two tests, each at 1 − α/2.
            profile_refuted = refute_point(profile, audit.fpr_upper, audit.fnr_upper)
            profile_message = (
                f"refuted: the point (FPR ≤ {audit.fpr_upper:.4g}, FNR ≤ {audit.fnr_upper:.4g}) lies "
                f"below the claimed trade-off curve; it violates the claim's (ε "
                f"{profile_refuted['epsilon']:.3f}, δ {profile_refuted['delta']:.3g})"
                if profile_refuted
                else "the point is on or above the claimed trade-off curve"
            )
            checks.append(
                Check(
                    subject,
                    "claimed trade-off curve (q < 1)",
                    profile_message,
                    failed=profile_refuted is not None,
                    assumption="independent runs; the claim's PLD profile (pessimistic) as its curve",
                )
            )
            profile_pair = profile_refuted
        ceiling, ceiling_kind = cp_ceiling, "Clopper-Pearson (ε, δ) bound of an attack without errors"

    return LookChecks(checks, float(ceiling), ceiling_kind, needed, profile_pair)


def accountant_checks(subject: str, disagreements: list[str]) -> list[Check]:
    """One failed check per way the accountant's history differs from what the optimizer and loader did (both
    white-box modes): a deterministic finding, whatever the runs show."""
    return [
        Check(
            subject,
            "accountant vs training",
            f"accountant disagrees with the training: {text}",
            failed=True,
            assumption="the accountant must be told what the optimizer and loader do",
        )
        for text in disagreements
    ]
