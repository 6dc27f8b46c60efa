"""Per-example statistics of a model's outputs that attacks score on, computed stably from logits."""
from __future__ import annotations

import numpy as np
from scipy.special import logsumexp


def per_example_cross_entropy(logits: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """−log softmax(logits)[y] per row, via log-sum-exp so confident models do not overflow."""
    logits = np.asarray(logits, dtype=np.float64)
    return logsumexp(logits, axis=1) - logits[np.arange(len(labels)), labels]
