"""Robust membership inference, RMIA (Zarifzadeh, Liu, Mahloujifar, Shokri 2024, arXiv 2312.03262).

Threat model: black-box query access to the target's probabilities, reference models trained like
the target that never saw the candidate (offline variant), and population samples z from the
data distribution. For a candidate x, Pr(x|θ) = p_θ(y_x|x) is compared with its average over
references, Pr(x); the offline variant approximates the IN+OUT average from OUT models alone with
the linear correction Pr(x) = ½((1 + a)·Pr_OUT(x) + (1 − a)). The score is the fraction of
population samples z that x dominates: LR(x, z) = (Pr(x|θ)/Pr(x)) / (Pr(z|θ)/Pr(z)) > γ.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

import numpy as np

from attacks.lira import N_REFERENCE_MODELS
from attacks.registry import IN_OUT_REFERENCES, POPULATION, TRAINS_MODELS, Knob

if TYPE_CHECKING:
    from attacks.base import AttackContext, QueryableModel

TINY = 1e-30


def offline_marginal(out_probability: np.ndarray, a: float) -> np.ndarray:
    """Pr(x) from OUT references only, with the paper's linear correction coefficient a."""
    return 0.5 * ((1.0 + a) * out_probability + (1.0 - a))


def rmia_scores(
    target_candidate_p: np.ndarray,
    reference_candidate_p: np.ndarray,
    out_masks: np.ndarray,
    target_population_p: np.ndarray,
    reference_population_p: np.ndarray,
    *,
    a: float,
    gamma: float,
) -> np.ndarray:
    """Fraction of population samples z with LR(x, z) > γ, per candidate x (higher = member)."""
    n_out = np.maximum(out_masks.sum(axis=0), 1)
    out_mean_x = np.where(out_masks, reference_candidate_p, 0.0).sum(axis=0) / n_out
    ratio_x = target_candidate_p / np.maximum(offline_marginal(out_mean_x, a), TINY)
    ratio_z = target_population_p / np.maximum(offline_marginal(reference_population_p.mean(axis=0), a), TINY)
    # LR(x, z) > γ  ⇔  ratio_x > γ·ratio_z: count with a sorted search instead of an N×Z matrix.
    thresholds = np.sort(gamma * ratio_z)
    return np.searchsorted(thresholds, ratio_x, side="left") / len(thresholds)


@dataclass(frozen=True)
class RmiaAttack:
    name: str = "rmia"
    threat_model: str = (
        "Black-box probabilities, offline reference models trained like the target that never saw the "
        "candidate, and population samples; pairwise likelihood-ratio test (Zarifzadeh et al. 2024, offline)."
    )
    needs: ClassVar[frozenset[str]] = frozenset({POPULATION, TRAINS_MODELS, IN_OUT_REFERENCES})
    knobs: ClassVar[tuple[Knob, ...]] = (
        N_REFERENCE_MODELS,
        Knob("rmia_a", float, 0.3, "RMIA offline correction coefficient a", low=0.0, high=1.0),
        Knob("rmia_gamma", float, 2.0, "RMIA pairwise likelihood-ratio threshold γ", low=0.0, low_open=True),
        Knob("rmia_population", int, 1000, "RMIA population samples", low=10, high=1_000_000),
    )
    citation: ClassVar[str] = "Zarifzadeh et al. 2024"
    method_note: ClassVar[tuple[str, str]] = (
        "Relative membership inference, RMIA (black box, knows the training recipe)",
        (
            "The attacker compares the likelihood ratio of the candidate under the target and reference models "
            "with the same ratio for many population records: a member stands out against the population. "
            "Strong with few reference models. Zarifzadeh, Liu, Mahloujifar, Shokri 2024, \u201cLow-Cost "
            "High-Power Membership Inference Attacks\u201d (arXiv 2312.03262)."
        ),
    )

    def scores(self, target: QueryableModel, context: AttackContext) -> np.ndarray:
        from attacks.model_outputs import true_class_probability
        from attacks.reference_models import reference_bank

        bank = reference_bank(context)
        labels = context.candidate_labels
        return rmia_scores(
            true_class_probability(target.logits(context.candidate_features), labels),
            true_class_probability(bank.candidate_logits, labels),
            ~bank.in_masks,
            true_class_probability(target.logits(bank.population_features), bank.population_labels),
            true_class_probability(bank.population_logits, bank.population_labels),
            a=context.options.rmia_a,
            gamma=context.options.rmia_gamma,
        )
