"""The blind baseline: can the records alone, without the model, tell members from non-members?

Das, Zhang, Tramèr 2024, "Blind Baselines Beat Membership Inference Attacks for Foundation Models"
(arXiv 2406.16201): when the member and non-member sets are not drawn from one distribution (a
later crawl, another source, another preprocessing), an "attack" that never queries the model can
separate them, and a membership-inference figure measured on such sets says nothing about the
model. A user-supplied member / non-member split is checked here: a classifier trained on the
records themselves (features and label), scored out of fold, must not separate the two sets. If its
AUC is significantly above ½ (DeLong's one-sided test at α), the sets differ in distribution and
every leakage figure measured on them is confounded.

Pure function of arrays; scikit-learn does the classifying.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from audit.statistics.attack_metrics import auc_p_value_above_chance, auc_with_ci

__all__ = ["blind_baseline"]

MAX_ROWS = 20_000  # a subsample keeps the check to seconds; the test stays exact on the rows it uses


def blind_baseline(features: np.ndarray, labels: np.ndarray, members: np.ndarray, *, alpha: float = 0.05,
                   seed: int = 0, folds: int = 5) -> dict[str, Any]:
    """Out-of-fold AUC of a model-free classifier of membership from the records alone.

    A histogram gradient-boosting classifier (scikit-learn) on the flattened features plus the
    label, `folds`-fold stratified cross-validation, so every record is scored by a classifier that
    never saw it. `separates` is DeLong's one-sided test of "AUC ≤ ½" rejected at `alpha`
    (DeLong, DeLong & Clarke-Pearson 1988; out-of-fold scores of different folds come from
    different fits, a standard approximation). Returns the AUC, its (1 − α) interval, the p-value,
    the rows used and the assumption.
    """
    from sklearn.ensemble import HistGradientBoostingClassifier
    from sklearn.model_selection import StratifiedKFold, cross_val_predict
    from threadpoolctl import threadpool_limits

    x = np.asarray(features, dtype=np.float64).reshape(len(members), -1)
    y = np.asarray(members, dtype=bool)
    x = np.column_stack([x, np.asarray(labels, dtype=np.float64).reshape(-1)])
    rng = np.random.default_rng(seed)
    rows = np.arange(y.size)
    if y.size > MAX_ROWS:
        rows = np.sort(rng.choice(y.size, MAX_ROWS, replace=False))
    x, y = x[rows], y[rows]
    n_splits = int(min(folds, y.sum(), (~y).sum()))
    if n_splits < 2:
        return {"auc": None, "auc_ci": None, "p_value": None, "separates": False, "n_rows": int(y.size),
                "note": "too few members or non-members for a cross-validated check"}
    classifier = HistGradientBoostingClassifier(max_iter=100, random_state=seed)
    # One thread: OpenMP's spinning workers make a small fit many times slower on a shared CPU.
    with threadpool_limits(limits=1):
        scores = cross_val_predict(classifier, x, y, cv=StratifiedKFold(n_splits, shuffle=True, random_state=seed),
                                   method="predict_proba")[:, 1]
    auc, (low, high) = auc_with_ci(scores, y, confidence=1 - 2 * alpha)
    p = auc_p_value_above_chance(scores, y)
    return {
        "auc": float(auc), "auc_ci": [float(low), float(high)], "p_value": float(p), "alpha": float(alpha),
        "separates": bool(p <= alpha), "n_rows": int(y.size), "folds": n_splits,
        "classifier": "HistGradientBoostingClassifier on the features and label, out of fold",
        "assumption": "members and non-members drawn from one distribution: then no model-free classifier "
                      "beats chance (Das et al. 2024, arXiv 2406.16201)",
    }
