"""Per-example statistics of a model's outputs that attacks score on, computed stably from logits."""

from __future__ import annotations

import numpy as np
from scipy.special import logsumexp


def per_example_cross_entropy(logits: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """−log softmax(logits)[y] per row, accurate for confident models.

    Written as softplus(−φ) = log1p(exp(−φ)) with φ the logit-scaled confidence: the textbook
    logsumexp(z) − z_y rounds every loss below ~1e-16 to exactly 0, which turns the most confident
    (most member-like) candidates into one big tie and hides the low-FPR end of the ROC.
    """
    return np.logaddexp(0.0, -logit_scaled_confidence(logits, labels))


def logit_scaled_confidence(logits: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """LiRA's φ = log p_y − log Σ_{y'≠y} p_y' (Carlini et al. 2022, arXiv 2112.03570, eq. 4).

    Computed as z_y − logsumexp_{y'≠y} z_y' on the logits, which is exact and never takes the log
    of 1 − p_y (which rounds to 0 for confident models). Works on (..., N, C) arrays.
    """
    logits = np.asarray(logits, dtype=np.float64)
    index = _label_index(logits, labels)
    true_logit = np.take_along_axis(logits, index, axis=-1)[..., 0]
    others = logits.copy()
    np.put_along_axis(others, index, -np.inf, axis=-1)
    return true_logit - logsumexp(others, axis=-1)


def true_class_probability(logits: np.ndarray, labels: np.ndarray) -> np.ndarray:
    return np.exp(-per_example_cross_entropy(logits, labels))


def _label_index(logits: np.ndarray, labels: np.ndarray) -> np.ndarray:
    labels = np.asarray(labels, dtype=np.int64)
    return np.broadcast_to(labels[:, None], logits.shape[:-1] + (1,))
