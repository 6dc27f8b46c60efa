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

from audit.statistics.attack_metrics import auc_with_ci

__all__ = ["blind_baseline"]

MAX_ROWS = 20_000  # a subsample keeps the check to seconds; the test stays exact on the rows it uses


def blind_baseline(
    features: np.ndarray, labels: np.ndarray, members: np.ndarray, *, alpha: float = 0.05, seed: int = 0
) -> dict[str, Any]:
    """Out-of-fold AUC of a model-free classifier of membership from the records alone.

    A histogram gradient-boosting classifier (scikit-learn) on the flattened features plus the
    label, fitted on one stratified half and scored on the other, both ways. `separates`: the
    one-sided Mann-Whitney test (Mann & Whitney 1947) of "AUC ≤ ½" on each held-out half,
    Bonferroni over the two, rejected at `alpha`. The AUC and its DeLong interval (two-sided
    1 − 2α) are of all held-out scores, shown as the figure. Returns them, the p-value, the rows
    used and the assumption.
    """
    from scipy import stats
    from sklearn.ensemble import HistGradientBoostingClassifier
    from sklearn.model_selection import StratifiedKFold
    from threadpoolctl import threadpool_limits

    x = np.asarray(features, dtype=np.float64).reshape(len(members), -1)
    y = np.asarray(members, dtype=bool)
    x = np.column_stack([x, np.asarray(labels, dtype=np.float64).reshape(-1)])
    rng = np.random.default_rng(seed)
    rows = np.arange(y.size)
    if y.size > MAX_ROWS:
        rows = np.sort(rng.choice(y.size, MAX_ROWS, replace=False))
    x, y = x[rows], y[rows]
    if min(int(y.sum()), int((~y).sum())) < 4:
        return {
            "auc": None,
            "auc_ci": None,
            "p_value": None,
            "separates": False,
            "n_rows": int(y.size),
            "note": "too few members or non-members for a held-out check",
        }
    # Two folds: each half is scored by a classifier fitted on the other half only, so the scores of
    # one half are independent of its fit and its one-sided Mann-Whitney test (= "AUC ≤ ½") is valid
    # there; the two halves' p-values are combined by Bonferroni (2 · min). Out-of-fold scores of many
    # folds pooled under one DeLong test are not independent and alarm too often on one distribution.
    p_values, scores = [], np.empty(y.size)
    # One thread: OpenMP's spinning workers make a small fit many times slower on a shared CPU.
    with threadpool_limits(limits=1):
        for fit, held in StratifiedKFold(2, shuffle=True, random_state=seed).split(x, y):
            classifier = HistGradientBoostingClassifier(max_iter=100, random_state=seed).fit(x[fit], y[fit])
            scores[held] = classifier.predict_proba(x[held])[:, 1]
            p_values.append(
                float(stats.mannwhitneyu(scores[held][y[held]], scores[held][~y[held]], alternative="greater").pvalue)
            )
    p = min(1.0, 2 * min(p_values))
    auc, (low, high) = auc_with_ci(scores, y, confidence=1 - 2 * alpha)
    return {
        "auc": float(auc),
        "auc_ci": [float(low), float(high)],
        "p_value": float(p),
        "alpha": float(alpha),
        "separates": bool(p <= alpha),
        "n_rows": int(y.size),
        "folds": 2,
        "test": "one-sided Mann-Whitney per held-out half, Bonferroni over the two halves",
        "classifier": "HistGradientBoostingClassifier on the features and label, scored on the half it did not see",
        "assumption": "members and non-members drawn from one distribution: then no model-free classifier "
        "beats chance (Das et al. 2024, arXiv 2406.16201)",
    }
