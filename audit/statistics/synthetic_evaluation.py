"""The synthetic-data privacy evaluation: train, holdout and synthetic tables in, one JSON-ready dict out.

Used by `privacy-audit synth-check --train F --holdout F --synthetic F` (files read by
`audit.synthetic.synthetic_check`) and by the main run for the synthesizers it trains.
`synthetic_privacy_checks` is a pure function of three DataFrames; no I/O here.

What it reports (docs/synth-check.md):
- "nndr": d(nearest train) / d(2nd-nearest train) per synthetic row (near 0 = near-copies);
- "nndr_real_vs_synthetic": the textbook variant, d(nearest train) / d(nearest other synthetic),
  on at most 10 000 (seeded) synthetic rows;
- "dcr": distance to the closest train vs closest holdout row, share closer to train (ideal 0.5);
- "mia": the distance attack of `attacks.distance` — members = train rows, non-members = holdout
  rows, score = −distance to the nearest synthetic row — with AUC, TPR at low FPR, advantage and
  ε lower bounds (the synthesizer's DP guarantee covers any function of its output, so a bound
  above its claimed ε is a violation);
- "fidelity": marginals (KS / TVD), correlation distance, TSTR when a target column is given;
- "risks": singling-out, linkability and attribute-inference risk of the release against the
  holdout as control set, with CIs, and DCR against a random-data baseline
  (`audit.statistics.synthetic_risks`, Giomi et al. 2022);
- "flags"/"passed": the tests that say "this release leaks" — DCR share, exact copies, distance
  MIA and each re-identification risk — each at level α/k (Bonferroni over all k, α = 1 − confidence).

Three nearest-neighbour passes cover everything: synthetic × train (2 nearest train rows per
synthetic row, and the nearest synthetic row per train row), synthetic × holdout (both directions,
nearest only), and synthetic × synthetic (half the matrix by symmetry, or ≤ 10 000 rows × all).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats

from attacks.distance import DISTANCE_THREAT_MODEL, nearest_distances, nearest_neighbours
from attacks.distance_groups import grouped_mutual_nearest_neighbours, grouped_nearest_neighbours
from audit.statistics.attack_evaluation import (
    BOUND_SCOPES,
    FPR_LEVELS,
    ONE_RUN_DECISION_RULE,
    ONE_RUN_NOT_COMPUTED,
    TPR_CONVENTION,
    fdp_one_run_summary,
)
from audit.statistics.attack_metrics import (
    advantage_bound,
    auc_p_value_above_chance,
    auc_with_ci,
    membership_advantage,
    tpr_at_fpr,
)
from audit.statistics.epsilon_bounds import HeldOut, epsilon_lower_bound_clopper_pearson, epsilon_lower_bound_one_run
from audit.statistics.multiple_testing import holm_rejections
from audit.statistics.score_ties import score_ties, tie_notes, tpr_at_fpr_randomized
from audit.statistics.synthetic_metrics import (
    column_fidelity,
    correlation_distance,
    dcr_from_distances,
    equal_size_reference_rows,
    nndr_from_distances,
    nndr_real_vs_synthetic_from_distances,
    tstr,
)
from audit.statistics.synthetic_risks import risk_test_count, synthetic_risks
from targets.tabular_encoding import MixedTypeEncoder, NanPolicy, SyntheticDataError

__all__ = ["synthetic_privacy_checks", "SyntheticDataError"]

# Rows whose nearest other synthetic row is searched for the textbook NNDR (percentiles of a
# seeded 10 000-row sample are within ~0.01 of the full ones; the full search is half a pass).
TEXTBOOK_NNDR_MAX_ROWS = 10_000
_N_FLAG_TESTS = 3


def category_groups(encoder: MixedTypeEncoder, *encoded: np.ndarray) -> tuple[list[np.ndarray], float]:
    """Per encoded array, each row's combination of categories as one integer label (shared across
    the arrays), and the gap: rows of different labels are at squared distance ≥ 1/p (each
    categorical mismatch adds exactly 1/p under the encoding). No categorical column: one label."""
    columns = [c for c in encoder.columns_ if encoder.kinds_[c] == "categorical"]
    if not columns:
        return [np.zeros(x.shape[0], dtype=np.int64) for x in encoded], 0.0
    codes = np.concatenate(
        [
            np.column_stack(
                [x[:, start : start + width].argmax(axis=1) for start, width in (encoder.slices_[c] for c in columns)]
            )
            for x in encoded
        ]
    )
    widths = [encoder.slices_[c][1] for c in columns]
    if math.fsum(math.log2(w) for w in widths) < 62:  # one mixed-radix integer per combination
        labels = codes @ np.cumprod([1, *widths[:-1]], dtype=np.int64)
    else:
        _, labels = np.unique(codes, axis=0, return_inverse=True)
    split = np.cumsum([0, *(x.shape[0] for x in encoded)])
    labels = labels.reshape(-1)
    return [labels[split[i] : split[i + 1]] for i in range(len(encoded))], 1.0 / encoder.n_columns_


def _nearest_other_row(
    x: np.ndarray, rows: np.ndarray, groups: np.ndarray | None = None, gap: float = 0.0
) -> np.ndarray:
    """Distance from each of x[rows] to its nearest OTHER row of x (an exact duplicate counts, at 0).
    `groups`, `gap`: category combinations for the pruned search (`category_groups`); None = full search."""
    if groups is None:
        distances, indices = nearest_neighbours(x[rows], x, k=2)
    else:
        distances, indices = grouped_nearest_neighbours(x[rows], x, 2, groups[rows], groups, gap)
    # The row itself is at distance 0, so it is first or, tied with a duplicate, second.
    return np.where(indices[:, 0] == rows, distances[:, 1], distances[:, 0])


def _check_probability(name: str, value: float) -> float:
    value = float(value)
    if not 0 < value < 1:
        raise ValueError(f"{name}: expected a number in (0, 1), got {value!r}")
    return value


def _membership_attack(
    member_distances: np.ndarray,
    nonmember_distances: np.ndarray,
    *,
    delta: float,
    confidence: float,
    seed: int,
    membership_randomized: bool,
    accountant_epsilon: float | None,
) -> dict[str, Any]:
    scores = -np.concatenate([member_distances, nonmember_distances])
    members = np.r_[np.ones(member_distances.size, bool), np.zeros(nonmember_distances.size, bool)]
    auc, (auc_lo, auc_hi) = auc_with_ci(scores, members, confidence=confidence)
    cp = epsilon_lower_bound_clopper_pearson(
        scores, members, delta, confidence=confidence, strategy=HeldOut(fraction=0.5, seed=seed)
    )
    epsilon_lb: dict[str, float | None] = {"clopper_pearson": cp.epsilon, "one_run": None}
    scope = {"clopper_pearson": BOUND_SCOPES["clopper_pearson"], "one_run": ONE_RUN_NOT_COMPUTED}
    details: dict[str, Any] = {"clopper_pearson": cp.details}
    fdp = None
    tpr = tpr_at_fpr(scores, members, FPR_LEVELS)
    tpr_randomized = tpr_at_fpr_randomized(scores, members, FPR_LEVELS)
    tie_sentences = tie_notes("", scores, members, tpr, tpr_randomized)
    if membership_randomized:
        one_run = epsilon_lower_bound_one_run(scores, members, delta, confidence=confidence)
        epsilon_lb["one_run"], details["one_run"] = one_run.epsilon, one_run.details
        scope["one_run"] = BOUND_SCOPES["one_run"]
        scope["fdp_one_run"] = BOUND_SCOPES["fdp_one_run"]
        fdp = fdp_one_run_summary(
            scores, members, delta=delta, confidence=confidence, claimed_epsilon=accountant_epsilon
        )
        one_run_note = None
    else:
        one_run_note = (
            "not computed: the one-run bound (Steinke et al. 2023) is valid only if each record's "
            "membership was an independent fair coin flip; a given train/holdout split is not "
            "(pass membership_randomized=True if it was)"
        )
    result: dict[str, Any] = {
        "name": "distance",
        "threat_model": DISTANCE_THREAT_MODEL,
        "auc": float(auc),
        "auc_ci": [float(auc_lo), float(auc_hi)],
        "tpr_at_fpr": {str(level): value for level, value in tpr.items()},
        "tpr_at_fpr_randomized": {str(level): value for level, value in tpr_randomized.items()},
        "tpr_at_fpr_convention": TPR_CONVENTION,
        "score_ties": {**score_ties(scores), "detected": bool(tie_sentences), "note": "; ".join(tie_sentences) or None},
        "notes": [f"distance MIA: {sentence}" for sentence in tie_sentences],
        "advantage": membership_advantage(scores, members),
        "advantage_bound": None,
        "epsilon_lb": epsilon_lb,
        "epsilon_lb_details": details,
        "epsilon_lb_scope": scope,
        "one_run_note": one_run_note,
        "fdp_one_run": fdp,
        "one_run_decision_rule": ONE_RUN_DECISION_RULE if membership_randomized else None,
        "membership_randomized": membership_randomized,
        "confidence": confidence,
        "n_members": int(member_distances.size),
        "n_nonmembers": int(nonmember_distances.size),
    }
    if accountant_epsilon is not None and math.isfinite(accountant_epsilon):
        result["advantage_bound"] = advantage_bound(accountant_epsilon, delta)
    return result


def _leak_tests(
    dcr: dict[str, Any],
    d_train: np.ndarray,
    d_holdout: np.ndarray,
    train_index: np.ndarray,
    holdout_index: np.ndarray,
    member_distances: np.ndarray,
    nonmember_distances: np.ndarray,
    mia: dict[str, Any],
    *,
    confidence: float,
    accountant_epsilon: float | None,
    alpha_each: float,
) -> tuple[list[dict[str, Any]], list[dict[str, str]], float]:
    """The three tests that say "this release leaks" (each with its p-value), and the flags.

    The flags returned here (each test at `alpha_each`) are replaced by the caller's Holm decision
    over these three tests and the re-identification risks together (α = 1 − confidence). The verdict
    (audit.machinery.verdict) puts the p-values of a non-DP release into its own Holm family; for a
    DP generator only the proven one-run bound against its ε decides, and a bound above the claim is
    flagged here as "epsilon_violation".
    """
    tests: list[dict[str, Any]] = []
    p_dcr = dcr["permutation_p_value"] if dcr["permutation_p_value"] is not None else dcr["sign_test_p_value"]
    tests.append(
        {
            "check": "dcr",
            "p_value": float(p_dcr),
            "assumption": "synthetic rows exchangeable between train and an equal-size holdout if nothing is memorised",
            "message": f"synthetic rows are closer to train than to holdout more often than chance "
            f"(dcr_share {dcr['dcr_share']:.3f} vs {dcr['expected_share_if_not_memorising']:.3f} "
            f"expected, permutation p = {p_dcr:.2g})",
        }
    )
    # Distinct real rows copied exactly, so that 100 copies of one record count once: under "no
    # memorisation" a copied record is a training record with probability 1/2 (equal-size sets).
    copied_train = np.unique(train_index[(d_train == 0) & (d_holdout > 0)]).size
    copied_holdout = np.unique(holdout_index[(d_holdout == 0) & (d_train > 0)]).size
    p_copies = 1.0
    if copied_train + copied_holdout:
        p_copies = stats.binomtest(copied_train, copied_train + copied_holdout, 0.5, alternative="greater").pvalue
    tests.append(
        {
            "check": "exact_copies",
            "p_value": float(p_copies),
            "assumption": "an exactly copied real row is a train row with probability ½ if nothing is memorised",
            "message": f"{copied_train} distinct training rows are copied exactly into the synthetic "
            f"data (vs {copied_holdout} holdout rows, p = {p_copies:.2g})",
        }
    )
    p_auc = auc_p_value_above_chance(
        -np.concatenate([member_distances, nonmember_distances]),
        np.r_[np.ones(member_distances.size, bool), np.zeros(nonmember_distances.size, bool)],
    )
    tests.append(
        {
            "check": "mia",
            "p_value": float(p_auc),
            "assumption": "DeLong normal approximation of the AUC",
            "message": f"the distance attack tells train from holdout rows (AUC {mia['auc']:.3f}, "
            f"one-sided p = {p_auc:.2g} against chance)",
        }
    )
    flags = [{"check": t["check"], "message": t["message"]} for t in tests if t["p_value"] < alpha_each]
    if accountant_epsilon is not None and math.isfinite(accountant_epsilon):
        proven = mia["epsilon_lb"].get("one_run")  # Clopper-Pearson over one release is not proven
        if proven is not None and proven > accountant_epsilon:
            flags.append(
                {
                    "check": "epsilon_violation",
                    "message": f"empirical one-run ε lower bound {proven:.3f} exceeds the generator's claimed ε "
                    f"{accountant_epsilon:.3f}",
                }
            )
    return tests, flags, alpha_each


def _risk_tests(risks: dict[str, Any]) -> list[dict[str, Any]]:
    """The re-identification risks as tests with p-values (`synthetic_risks.risk_p_value`)."""
    tests = []
    for risk in [risks["singling_out"], risks["linkability"], *risks["inference"]]:
        if risk is None or risk.get("p_value") is None:
            continue
        what = risk["name"].replace("_", "-") + (f" of '{risk['secret']}'" if "secret" in risk else "")
        tests.append(
            {
                "check": f"risk_{risk['name']}",
                **({"secret": risk["secret"]} if "secret" in risk else {}),
                "p_value": float(risk["p_value"]),
                "assumption": (
                    "training and control targets exchangeable if nothing is memorised "
                    + ("(z over re-split spread)" if "null_sd" in risk else "(Fisher's exact test, one-sided)")
                ),
                "message": (
                    f"{what} risk {risk['value']:.3f}: attacks succeed on {risk['n_success']} of "
                    f"{risk['n_attacks']} training rows vs {risk['n_control_success']} of "
                    f"{risk['n_control_attacks']} control rows (one-sided p = {risk['p_value']:.2g})"
                ),
            }
        )
    return tests


def synthetic_privacy_checks(
    train_df: pd.DataFrame,
    holdout_df: pd.DataFrame,
    synthetic_df: pd.DataFrame,
    *,
    nan_policy: NanPolicy = "error",
    target_column: str | None = None,
    seed: int = 0,
    delta: float = 1e-5,
    confidence: float = 0.95,
    membership_randomized: bool = False,
    subsample_train: bool = False,
    accountant_epsilon: float | None = None,
    risk_attacks: int = 500,
) -> dict[str, Any]:
    """Privacy checks of a synthetic table against its training table and a same-size holdout.

    `holdout_df` must come from the same population as `train_df` and must NOT have been used to
    fit the generator. `membership_randomized`: each record was put in train or holdout by an
    independent fair coin flip (enables the one-run ε bound). `subsample_train`: accept a holdout
    under 90% of the train size by comparing against a random train subset. `accountant_epsilon`:
    the generator's claimed ε (None = unknown/non-private), to compare the ε lower bound with.
    `risk_attacks`: targets per re-identification attack (0 = skip the risks).
    Seeding (size equalisation, threshold split of the ε bound, TSTR models, risk attacks) is all from `seed`.
    Bad input raises `SyntheticDataError` naming the file role and column.
    """
    confidence = _check_probability("confidence", confidence)
    delta = _check_probability("delta", delta)
    encoder = MixedTypeEncoder(nan_policy=nan_policy).fit(train_df, holdout_df)
    if target_column is not None and str(target_column) not in encoder.columns_:
        # Checked before the expensive passes; TSTR itself runs last.
        raise SyntheticDataError(
            f"target column '{target_column}'", f"not in the train data (columns: {encoder.columns_})"
        )
    warnings: list[str] = []
    frames = {}
    for role, df in (("train", train_df), ("holdout", holdout_df), ("synthetic", synthetic_df)):
        kept, n_dropped = encoder.drop_missing(df, role)
        if n_dropped:
            warnings.append(
                f"{role}: dropped {n_dropped} of {df.shape[0]} rows with missing values (nan_policy='drop_rows')"
            )
        frames[role] = kept
    encoded = {role: encoder.transform(df, role) for role, df in frames.items()}
    unseen = encoder.unseen_categories(frames["synthetic"])
    if unseen:
        listing = ", ".join(f"'{c}' ({n} rows)" for c, n in unseen.items())
        warnings.append(f"synthetic: categories never seen in train/holdout in {listing}; they count as mismatches")
    x_train, x_holdout, x_synthetic = encoded["train"], encoded["holdout"], encoded["synthetic"]
    n_train, n_holdout, n_synthetic = (x.shape[0] for x in (x_train, x_holdout, x_synthetic))
    if n_train < 2:
        raise SyntheticDataError("train", f"has {n_train} usable row(s); NNDR needs at least 2")
    if n_synthetic < 2:
        raise SyntheticDataError("synthetic", f"has {n_synthetic} usable row(s); at least 2 are needed")

    train_rows, holdout_rows, size_warnings = equal_size_reference_rows(
        n_train, n_holdout, subsample_train=subsample_train, seed=seed
    )
    warnings += size_warnings
    x_holdout_used = x_holdout[holdout_rows]

    # Exact search, pruned by category combination (attacks/distance_groups.py: rows that differ in
    # a category are ≥ √(1/p) apart, so only same-combination pairs are computed unless a row needs more).
    (g_train, g_holdout, g_synthetic), gap = category_groups(encoder, x_train, x_holdout_used, x_synthetic)
    # Pass 1: synthetic × all train rows. NNDR and the member side of the attack use every train row.
    (syn_to_train, syn_to_train_index), (train_to_syn, _) = grouped_mutual_nearest_neighbours(
        x_synthetic, x_train, 2, g_synthetic, g_train, gap
    )
    # Pass 2: synthetic × (equal-size) holdout rows.
    (syn_to_holdout, syn_to_holdout_index), (holdout_to_syn, _) = grouped_mutual_nearest_neighbours(
        x_synthetic, x_holdout_used, 1, g_synthetic, g_holdout, gap
    )
    # Pass 3: synthetic × synthetic, for the textbook NNDR variant (on a seeded subsample of rows
    # when there are many: it only feeds percentiles, and would otherwise cost half a pass more).
    textbook_rows = np.arange(n_synthetic)
    if n_synthetic > TEXTBOOK_NNDR_MAX_ROWS:
        textbook_rows = np.sort(np.random.default_rng(seed).choice(n_synthetic, TEXTBOOK_NNDR_MAX_ROWS, replace=False))
        syn_to_syn = _nearest_other_row(x_synthetic, textbook_rows, g_synthetic, gap)
    else:
        syn_to_syn = nearest_distances(x_synthetic, x_synthetic, k=1, exclude_self=True)[:, 0]

    if train_rows.size == n_train:
        d_train_for_dcr, i_train_for_dcr = syn_to_train[:, 0], syn_to_train_index[:, 0]
    else:
        d, i = nearest_neighbours(x_synthetic, x_train[train_rows], k=1)
        d_train_for_dcr, i_train_for_dcr = d[:, 0], i[:, 0]
    d_holdout_for_dcr, i_holdout_for_dcr = syn_to_holdout[:, 0], syn_to_holdout_index[:, 0]
    dcr = dcr_from_distances(
        d_train_for_dcr,
        d_holdout_for_dcr,
        confidence,
        size_warnings,
        train_index=i_train_for_dcr,
        holdout_index=i_holdout_for_dcr,
        n_train=train_rows.size,
        n_holdout=holdout_rows.size,
    )
    dcr.update({"n_train": int(train_rows.size), "n_holdout": int(holdout_rows.size)})

    member_distances, nonmember_distances = train_to_syn[:, 0], holdout_to_syn[:, 0]
    mia = _membership_attack(
        member_distances,
        nonmember_distances,
        delta=delta,
        confidence=confidence,
        seed=seed,
        membership_randomized=membership_randomized,
        accountant_epsilon=accountant_epsilon,
    )
    n_tests = _N_FLAG_TESTS + (risk_test_count(len(encoder.columns_)) if risk_attacks > 0 else 0)
    alpha_each = (1 - confidence) / n_tests
    leak_tests, flags, alpha_each = _leak_tests(
        dcr,
        d_train_for_dcr,
        d_holdout_for_dcr,
        i_train_for_dcr,
        i_holdout_for_dcr,
        member_distances,
        nonmember_distances,
        mia,
        confidence=confidence,
        accountant_epsilon=accountant_epsilon,
        alpha_each=alpha_each,
    )
    risks = None
    if risk_attacks > 0:
        # Control set = the (equal-size) holdout rows: real rows of the population the generator never saw.
        risks = synthetic_risks(
            frames["train"].iloc[train_rows],
            frames["holdout"].iloc[holdout_rows],
            frames["synthetic"],
            alpha_each=alpha_each,
            n_attacks=risk_attacks,
            confidence=confidence,
            seed=seed,
        )
        leak_tests += _risk_tests(risks)
        warnings += risks["notes"]
    # One family: every leak test and every risk, Holm at α = 1 − confidence (family-wise error ≤ α
    # under any dependence). The per-risk Bonferroni CI flags alone let 41 / 500 vs 12 / 500 inference
    # successes flag an independent release (issue 27); the family's null rate is measured in
    # benchmarks/bench_null_false_alarms.py.
    rejected = holm_rejections([t["p_value"] for t in leak_tests], 1 - confidence)
    flags = [{"check": t["check"], "message": t["message"]} for t, r in zip(leak_tests, rejected) if r] + [
        f for f in flags if f["check"] == "epsilon_violation"
    ]
    if risks is not None:
        tested = [
            r
            for r in [risks["singling_out"], risks["linkability"], *risks["inference"]]
            if r is not None and r.get("p_value") is not None
        ]
        for risk, decision in zip(tested, rejected[len(leak_tests) - len(tested) :]):
            risk["flagged"] = bool(decision)
        risks["flags"] = [f for f in flags if f["check"].startswith("risk_")]

    fidelity: dict[str, Any] = {
        **column_fidelity(frames["train"], frames["synthetic"]),
        "correlation_distance": correlation_distance(frames["train"], frames["synthetic"]),
        "tstr": None,
    }
    if target_column is not None:
        fidelity["tstr"] = tstr(frames["train"], frames["holdout"], frames["synthetic"], target_column, seed=seed)

    return {
        "nndr": nndr_from_distances(syn_to_train),
        "nndr_real_vs_synthetic": {
            **nndr_real_vs_synthetic_from_distances(syn_to_train[textbook_rows, 0], syn_to_syn),
            "n_synthetic_rows_evaluated": int(textbook_rows.size),
        },
        "dcr": dcr,
        "mia": mia,
        "risks": risks,
        "fidelity": fidelity,
        "leak_tests": leak_tests,
        "flags": flags,
        "flag_alpha_each": alpha_each,  # Holm's first step, α/K
        "flag_family": f"Holm over {len(leak_tests)} tests (DCR, exact copies, distance MIA, risks) "
        f"at α {1 - confidence:.2g}",
        "passed": not flags,
        "warnings": warnings,
        "encoding": encoder.describe(),
        "n_train": n_train,
        "n_holdout": n_holdout,
        "n_synthetic": n_synthetic,
        "seed": seed,
        "delta": delta,
        "confidence": confidence,
    }
