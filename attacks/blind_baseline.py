"""Blind baseline: membership guessed from the text alone, no model (Das, Zhang, Tramèr 2024,
"Blind Baselines Beat Membership Inference Attacks for Foundation Models", arXiv 2406.16201).

Why: when members and non-members were collected differently (other dates, sources, formats),
any attack separates them without the model having leaked anything, and its AUC measures the
distribution shift, not memorisation. Das et al. show simple text classifiers beat published
attacks on several LLM membership benchmarks. Here: a bag-of-n-grams classifier (TF-IDF of
word uni/bigrams and character 2–4-grams, logistic regression), cross-fitted over stratified
folds so each document's score comes from a classifier that never saw its label.

Threat model (not an attack on the model): it is given the member / non-member labels of the
other folds. It is a check of the evaluation sets; a score well above chance means the sets are
distinguishable without the model, and the attacks' numbers on them do not show leakage.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

FOLDS = 5


def blind_baseline_scores(texts: list[str], members: np.ndarray, seed: int = 0, folds: int = FOLDS) -> np.ndarray:
    """Out-of-fold P(member | text) of a TF-IDF + logistic-regression classifier (higher = member)."""
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import StratifiedKFold, cross_val_predict
    from sklearn.pipeline import make_pipeline, make_union

    members = np.asarray(members, dtype=bool)
    if len(texts) != len(members):
        raise ValueError(f"{len(texts)} texts but {len(members)} membership labels")
    n_splits = int(min(folds, members.sum(), (~members).sum()))
    if n_splits < 2:
        raise ValueError("the blind baseline needs at least 2 members and 2 non-members")
    features = make_union(TfidfVectorizer(analyzer="word", ngram_range=(1, 2), min_df=1, sublinear_tf=True),
                          TfidfVectorizer(analyzer="char_wb", ngram_range=(2, 4), min_df=2, sublinear_tf=True))
    classifier = make_pipeline(features, LogisticRegression(C=1.0, max_iter=1000))
    splitter = StratifiedKFold(n_splits=n_splits, shuffle=True, random_state=seed)
    return cross_val_predict(classifier, np.asarray(texts, dtype=object), members.astype(int), cv=splitter,
                             method="predict_proba")[:, 1]


@dataclass(frozen=True)
class BlindBaseline:
    name: str = "blind_baseline"
    threat_model: str = ("No model: a text classifier cross-fitted on the member / non-member labels of the "
                         "other folds (Das et al. 2024); measures distribution shift between the sets.")

    def scores(self, texts: list[str], members: np.ndarray, seed: int = 0) -> np.ndarray:
        return blind_baseline_scores(texts, members, seed)
