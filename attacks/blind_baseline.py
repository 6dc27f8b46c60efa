"""Blind baseline: membership guessed from the text alone, no model (Das, Zhang, Tramèr 2024,
"Blind Baselines Beat Membership Inference Attacks for Foundation Models", arXiv 2406.16201).

Why: when members and non-members were collected differently (other dates, sources, formats),
any attack separates them without the model having leaked anything, and its AUC measures the
distribution shift, not memorisation. Das et al. show simple text classifiers beat published
attacks on several LLM membership benchmarks. Here: a bag-of-n-grams classifier (TF-IDF of
word uni/bigrams and character trigrams, logistic regression), cross-fitted over stratified
folds so each document's score comes from a classifier that never saw its label.

Significance: a label-permutation test of the whole cross-fitted procedure (the same folds and
classifier refitted on permuted labels), p = (1 + #{permuted AUC ≥ observed}) / (1 + P). The
out-of-fold scores of different folds come from different classifiers, so they are not the
independent scores DeLong's AUC test assumes; the permutation test needs only exchangeability.
The TF-IDF vocabulary is fitted once on all texts: it never sees a label, so it leaks none.

Threat model (not an attack on the model): it is given the member / non-member labels of the
other folds. It is a check of the evaluation sets; a score well above chance means the sets are
distinguishable without the model, and the attacks' numbers on them do not show leakage.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

FOLDS = 5
PERMUTATIONS = 49  # smallest attainable p = 0.02
MAX_FEATURES = 5000  # per vectorizer: the most frequent n-grams (keeps 100 refits to seconds)


def _features(texts: list[str]):
    from scipy.sparse import hstack
    from sklearn.feature_extraction.text import TfidfVectorizer

    words = TfidfVectorizer(analyzer="word", ngram_range=(1, 2), min_df=2, max_features=MAX_FEATURES, sublinear_tf=True)
    chars = TfidfVectorizer(
        analyzer="char_wb", ngram_range=(3, 3), min_df=2, max_features=MAX_FEATURES, sublinear_tf=True
    )
    return hstack([words.fit_transform(texts), chars.fit_transform(texts)]).tocsr()


def _out_of_fold(features, labels: np.ndarray, seed: int, folds: int) -> np.ndarray:
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import StratifiedKFold, cross_val_predict

    splitter = StratifiedKFold(n_splits=folds, shuffle=True, random_state=seed)
    return cross_val_predict(
        LogisticRegression(C=1.0, solver="liblinear"), features, labels, cv=splitter, method="predict_proba"
    )[:, 1]


def _folds(members: np.ndarray, folds: int) -> int:
    n_splits = int(min(folds, members.sum(), (~members).sum()))
    if n_splits < 2:
        raise ValueError("the blind baseline needs at least 2 members and 2 non-members")
    return n_splits


def blind_baseline_scores(texts: list[str], members: np.ndarray, seed: int = 0, folds: int = FOLDS) -> np.ndarray:
    """Out-of-fold P(member | text) of a TF-IDF + logistic-regression classifier (higher = member)."""
    members = np.asarray(members, dtype=bool)
    if len(texts) != len(members):
        raise ValueError(f"{len(texts)} texts but {len(members)} membership labels")
    return _out_of_fold(_features(list(texts)), members.astype(int), seed, _folds(members, folds))


def blind_baseline_test(
    texts: list[str], members: np.ndarray, seed: int = 0, folds: int = FOLDS, permutations: int = PERMUTATIONS
) -> tuple[np.ndarray, float, float]:
    """(out-of-fold scores, their AUC, permutation p-value of "the text alone does not separate the sets")."""
    from sklearn.metrics import roc_auc_score

    members = np.asarray(members, dtype=bool)
    if len(texts) != len(members):
        raise ValueError(f"{len(texts)} texts but {len(members)} membership labels")
    n_splits = _folds(members, folds)
    features = _features(list(texts))
    scores = _out_of_fold(features, members.astype(int), seed, n_splits)
    observed = float(roc_auc_score(members, scores))
    rng = np.random.default_rng(np.random.SeedSequence([seed, 41]))
    at_least = 0
    for _ in range(permutations):
        shuffled = rng.permutation(members)
        at_least += roc_auc_score(shuffled, _out_of_fold(features, shuffled.astype(int), seed, n_splits)) >= observed
    return scores, observed, (1 + at_least) / (1 + permutations)


@dataclass(frozen=True)
class BlindBaseline:
    name: str = "blind_baseline"
    threat_model: str = (
        "No model: a text classifier cross-fitted on the member / non-member labels of the "
        "other folds (Das et al. 2024); measures distribution shift between the sets."
    )

    def scores(self, texts: list[str], members: np.ndarray, seed: int = 0) -> np.ndarray:
        return blind_baseline_scores(texts, members, seed)

    def test(
        self, texts: list[str], members: np.ndarray, seed: int = 0, permutations: int = PERMUTATIONS
    ) -> tuple[np.ndarray, float, float]:
        return blind_baseline_test(texts, members, seed, permutations=permutations)
