"""Likelihood-ratio attack, LiRA (Carlini, Chien, Nasr, Song, Terzis, Tramèr 2022, arXiv 2112.03570).

Threat model: black-box query access to the target's logits, the candidate records with labels,
and the ability to train reference models exactly like the target (same architecture, data
distribution and training algorithm — here, same DP-SGD σ, q, T, C) on data that includes and
excludes each candidate. For each candidate the logit-scaled confidence φ of the IN and OUT
reference models is fitted with a Gaussian; the score is the likelihood ratio (online) or how
far φ lies above the OUT distribution (offline, references never trained on the candidate).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

import numpy as np

from attacks.registry import IN_OUT_REFERENCES, POPULATION, TRAINS_MODELS, Knob

if TYPE_CHECKING:
    from attacks.base import AttackContext, QueryableModel

# Carlini et al. recommend one variance shared by all examples when references are few (< 64).
GLOBAL_VARIANCE_BELOW = 64
MIN_STD = 1e-3
# Shared by both variants (and RMIA's reference bank): declared once, the same Knob in each class.
N_REFERENCE_MODELS = Knob(
    "n_reference_models", int, 64, "LiRA / RMIA reference models per target", low=2, high=4_096, counts_models=True
)
GLOBAL_VARIANCE = Knob(
    "lira_global_variance",
    str,
    "auto",
    "one variance for all candidates: auto = when fewer than 64 references",
    choices=("auto", "always", "never"),
)
_CITATION = "Carlini et al. 2022"
_PAPER = (
    "Carlini, Chien, Nasr, Song, Terzis, Tram\u00e8r 2022, \u201cMembership Inference Attacks From First "
    "Principles\u201d (arXiv 2112.03199)"
)


def _use_global_variance(mode: str, n_models: int) -> bool:
    return mode == "always" or (mode == "auto" and n_models < GLOBAL_VARIANCE_BELOW)


def _masked_gaussian(phi: np.ndarray, mask: np.ndarray, global_variance: bool) -> tuple[np.ndarray, np.ndarray]:
    """Per-candidate mean and std of φ over the references selected by `mask` (K, N)."""
    counts = mask.sum(axis=0)
    mean = np.where(mask, phi, 0.0).sum(axis=0) / np.maximum(counts, 1)
    residual = np.where(mask, phi - mean, 0.0)
    if global_variance:
        std = np.full(phi.shape[1], np.sqrt((residual**2).sum() / max(counts.sum() - 1, 1)))
    else:
        std = np.sqrt((residual**2).sum(axis=0) / np.maximum(counts - 1, 1))
    return mean, np.maximum(std, MIN_STD)


def lira_online_scores(
    target_phi: np.ndarray, reference_phi: np.ndarray, in_masks: np.ndarray, global_variance: bool
) -> np.ndarray:
    """log N(φ; μ_in, σ_in) − log N(φ; μ_out, σ_out) per candidate (higher = more likely member)."""
    from scipy.stats import norm

    mu_in, sd_in = _masked_gaussian(reference_phi, in_masks, global_variance)
    mu_out, sd_out = _masked_gaussian(reference_phi, ~in_masks, global_variance)
    return norm.logpdf(target_phi, mu_in, sd_in) - norm.logpdf(target_phi, mu_out, sd_out)


def lira_offline_scores(
    target_phi: np.ndarray, reference_phi: np.ndarray, in_masks: np.ndarray, global_variance: bool
) -> np.ndarray:
    """One-sided test against the OUT Gaussian: log Φ((φ − μ_out)/σ_out) (higher = more likely member)."""
    from scipy.stats import norm

    mu_out, sd_out = _masked_gaussian(reference_phi, ~in_masks, global_variance)
    return norm.logcdf((target_phi - mu_out) / sd_out)


def _phis(target: QueryableModel, context: AttackContext):
    from attacks.model_outputs import logit_scaled_confidence
    from attacks.reference_models import reference_bank

    bank = reference_bank(context)
    target_phi = logit_scaled_confidence(target.logits(context.candidate_features), context.candidate_labels)
    reference_phi = logit_scaled_confidence(bank.candidate_logits, context.candidate_labels)
    global_variance = _use_global_variance(context.options.lira_global_variance, len(bank.in_masks))
    return target_phi, reference_phi, bank.in_masks, global_variance


@dataclass(frozen=True)
class LiraOnlineAttack:
    name: str = "lira"
    threat_model: str = (
        "Black-box logits plus K reference models trained exactly like the target, each candidate in half "
        "of them; per-candidate Gaussian likelihood ratio of IN vs OUT (Carlini et al. 2022, online)."
    )
    needs: ClassVar[frozenset[str]] = frozenset({POPULATION, TRAINS_MODELS, IN_OUT_REFERENCES})
    knobs: ClassVar[tuple[Knob, ...]] = (N_REFERENCE_MODELS, GLOBAL_VARIANCE)
    citation: ClassVar[str] = _CITATION
    method_note: ClassVar[tuple[str, str]] = (
        "Likelihood-ratio attack, LiRA (black box, knows the training recipe)",
        (
            "The attacker trains reference models on population data with and without each candidate, fits "
            "Gaussians to the candidate's scaled confidence under both, and scores the target's confidence by "
            "the likelihood ratio (the offline variant uses only models without the candidate). Strongest at "
            f"low false-positive rates; costly. {_PAPER}."
        ),
    )

    def scores(self, target: QueryableModel, context: AttackContext) -> np.ndarray:
        return lira_online_scores(*_phis(target, context))


@dataclass(frozen=True)
class LiraOfflineAttack:
    name: str = "lira_offline"
    threat_model: str = (
        "Black-box logits plus reference models never trained on the candidate; one-sided test of the "
        "target's confidence against the OUT Gaussian (Carlini et al. 2022, offline)."
    )
    needs: ClassVar[frozenset[str]] = frozenset({POPULATION, TRAINS_MODELS, IN_OUT_REFERENCES})
    knobs: ClassVar[tuple[Knob, ...]] = (N_REFERENCE_MODELS, GLOBAL_VARIANCE)
    citation: ClassVar[str] = _CITATION
    method_note: ClassVar[tuple[str, str]] = (
        "Likelihood-ratio attack, offline LiRA (black box, knows the training recipe)",
        (
            "As LiRA, but the reference models are trained only on population data without the candidates, so they "
            "can be trained once before the target exists; the candidate's confidence is compared with the "
            f"non-member Gaussian alone. {_PAPER}, offline variant."
        ),
    )

    def scores(self, target: QueryableModel, context: AttackContext) -> np.ndarray:
        return lira_offline_scores(*_phis(target, context))
