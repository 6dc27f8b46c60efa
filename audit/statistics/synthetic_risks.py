"""Re-identification risks of a synthetic release measured against a control set (Giomi et al. 2022).

The three risks named by the Article 29 Working Party (Opinion 05/2014) and measured as attacks by
M. Giomi, F. Boenisch, C. Wehmeyer, B. Tasnádi, "A Unified Framework for Quantifying Privacy Risk
in Synthetic Data", PoPETs 2023 (arXiv 2211.10459) — the method of the `anonymeter` library:

- **singling out**: from the synthetic rows the attacker builds predicates ("age ≥ 71 and city =
  B and income ≤ 9 300") that match exactly one synthetic row, and wins when the predicate matches
  exactly one row of the original data;
- **linkability**: the attacker holds two disjoint column sets A and B of a target record and
  links them when the nearest synthetic neighbour on A and the nearest on B are the same row;
- **attribute inference**: the attacker knows every column but a secret one and guesses the
  secret from the nearest synthetic row on the known columns.

Each attack is run on targets drawn from the training rows and, identically, from a *control* set
the generator never saw. The risk is the excess success on training rows over control rows,
normalised by the room left above the control:

    risk = (r_train − r_control) / (1 − r_control),

with each rate a Wilson score estimate and the error propagated to first order (Giomi et al.,
Sec. 4; anonymeter's `residual_success`). A release independent of its training rows gives risk
≈ 0; a copy gives risk near 1. Because targets from train and control are exchangeable when the
release carries nothing about the training rows, this is a test with a null: a risk is *flagged*
when the lower end of its CI is above 0 at the per-test level the caller gives (Bonferroni).

Choices where anonymeter leaves freedom (written down so a reader can reproduce the numbers):
- distances are anonymeter's mixed-type Gower L1: Σ |Δx|/range over numeric columns (range from
  train ∪ control, never from the release) + Σ 1[categories differ]; a missing value matches a
  missing value (distance 0) and mismatches anything else (1);
- ties between equally near synthetic rows are broken at random (seeded), independently for each
  search, so tied rows cannot create links by their position in the file;
- singling out: the multivariate attack of anonymeter (n_cols columns of a random synthetic row,
  numeric predicates towards the tail: ≥ above the median, ≤ below); the training and control
  sets are cut to the same size (seeded) so that their chance success is equal without
  anonymeter's fitted size correction, and the rate is over the queries actually generated.
  All queries are evaluated on the same two tables, so their successes are correlated and the
  Wilson error understates the spread (an independent sample was flagged in our tests): the CI
  is widened to the spread of the success difference over random re-splits of train ∪ control;
- linkability: columns split alternately into A = columns[0::2], B = columns[1::2] unless given;
- inference: every column is a secret in turn (aux = all others); a numeric secret is guessed
  right within anonymeter's relative tolerance |guess − secret| ≤ 0.05 · |guess|.

`dcr_baseline_protection` is SDMetrics' DCRBaselineProtection idea: the median distance from a
synthetic row to its closest training row, over the same median for uniformly random rows.

Pure functions of DataFrames and a seed; no I/O.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd
from scipy.stats import fisher_exact, norm

from audit.statistics.singling_out import _widened, singling_out_risk
from audit.statistics.synthetic_risk_base import (
    SuccessRate,
    _gower_l1,
    _nearest_rows,
    _prepare,
    _risk_record,
    _Table,
    _targets,
    attack_success_rate,
    residual_risk,
)
from targets.tabular_encoding import column_kind

__all__ = [
    "SuccessRate",
    "attack_success_rate",
    "residual_risk",
    "singling_out_risk",
    "linkability_risk",
    "inference_risk",
    "dcr_baseline_protection",
    "synthetic_risks",
    "NUMERIC_TOLERANCE",
    "risk_p_value",
]

NUMERIC_TOLERANCE = 0.05  # anonymeter's relative tolerance for a numeric secret guessed right
_BASELINE_CHUNK = 64  # against every training row: 64 × 100k float32 distances = 25 MiB a part


# ------------------------------------------------------------------------------------- linkability


def linkability_risk(
    train: pd.DataFrame,
    control: pd.DataFrame,
    synthetic: pd.DataFrame,
    *,
    aux_cols: tuple[list[str], list[str]] | None = None,
    n_attacks: int = 500,
    n_neighbors: int = 1,
    confidence: float = 0.95,
    seed: int = 0,
    prepared: tuple[dict[str, pd.DataFrame], _Table] | None = None,
) -> dict[str, Any]:
    """Linkability risk (Giomi et al. 2022, Sec. 5.2): can the release join two halves of a record?

    A target is linked when its nearest `n_neighbors` synthetic rows on columns A and on columns B
    share a row. Targets are `n_attacks` random training rows, and as many random control rows.
    """
    rng = np.random.default_rng([seed, 12])
    frames, table = prepared or _prepare(train, control, synthetic)
    if aux_cols is None:
        aux_cols = (table.columns[0::2], table.columns[1::2])
    first, second = [str(c) for c in aux_cols[0]], [str(c) for c in aux_cols[1]]
    if not first or not second or set(first) & set(second):
        raise ValueError(f"aux_cols: expected two disjoint, non-empty column lists, got {aux_cols}")
    k = min(n_neighbors, len(frames["synthetic"]))

    def links(role: str) -> tuple[int, int]:
        rows = _targets(len(frames[role]), n_attacks, rng)
        a = _nearest_rows(table, role, rows, first, k, rng)
        b = _nearest_rows(table, role, rows, second, k, rng)
        return sum(bool(set(x) & set(y)) for x, y in zip(a, b)), rows.size

    n_train, m_train = links("train")
    n_control, m_control = links("control")
    n_syn = len(frames["synthetic"])
    return _risk_record(
        "linkability",
        n_train,
        n_control,
        m_train,
        m_control,
        confidence,
        aux_cols=[first, second],
        n_neighbors=k,
        baseline_rate=float(1 - math.comb(n_syn - k, k) / math.comb(n_syn, k)),
    )


# --------------------------------------------------------------------------------------- inference


def inference_risk(
    train: pd.DataFrame,
    control: pd.DataFrame,
    synthetic: pd.DataFrame,
    *,
    secret: str,
    aux_cols: list[str] | None = None,
    n_attacks: int = 500,
    confidence: float = 0.95,
    seed: int = 0,
    prepared: tuple[dict[str, pd.DataFrame], _Table] | None = None,
) -> dict[str, Any]:
    """Attribute-inference risk for one secret column (Giomi et al. 2022, Sec. 5.3).

    The attacker knows `aux_cols` (default: every other column) of a target and guesses `secret` as
    the value of the nearest synthetic row. Categorical secrets must match exactly; numeric ones
    within NUMERIC_TOLERANCE relative to the guess (anonymeter's rule). The baseline is a guess
    copied from a random synthetic row.
    """
    rng = np.random.default_rng([seed, 13])
    secret = str(secret)
    if secret not in [str(c) for c in train.columns]:
        raise ValueError(f"secret: expected one of the columns {list(train.columns)}, got {secret!r}")
    frames, table = prepared or _prepare(train, control, synthetic)
    aux = [c for c in (aux_cols or table.columns) if str(c) != secret]
    if not aux:
        raise ValueError("aux_cols: expected at least one column besides the secret")
    numeric = secret in table.numeric
    values = table.numeric[secret] if numeric else table.codes[secret]

    def correct(guesses: np.ndarray, truth: np.ndarray) -> np.ndarray:
        if not numeric:
            return guesses == truth
        both_missing = np.isnan(guesses) & np.isnan(truth)
        with np.errstate(invalid="ignore"):
            return both_missing | (np.abs(guesses - truth) <= NUMERIC_TOLERANCE * np.abs(guesses))

    def successes(role: str) -> tuple[int, int]:
        rows = _targets(len(frames[role]), n_attacks, rng)
        nearest = _nearest_rows(table, role, rows, aux, 1, rng)[:, 0]
        return int(correct(values["synthetic"][nearest], values[role][rows]).sum()), rows.size

    n_train, m_train = successes("train")
    n_control, m_control = successes("control")
    baseline_rows = _targets(len(frames["train"]), n_attacks, rng)
    random_guess = values["synthetic"][rng.integers(0, len(frames["synthetic"]), baseline_rows.size)]
    baseline = int(correct(random_guess, values["train"][baseline_rows]).sum()) / baseline_rows.size
    return _risk_record(
        "inference",
        n_train,
        n_control,
        m_train,
        m_control,
        confidence,
        secret=secret,
        secret_kind="numeric" if numeric else "categorical",
        baseline_rate=float(baseline),
    )


# ------------------------------------------------------------------------------------ DCR baseline


def dcr_baseline_protection(
    train: pd.DataFrame, synthetic: pd.DataFrame, *, seed: int = 0, max_rows: int = 2000
) -> dict[str, Any]:
    """SDMetrics' DCRBaselineProtection idea: median DCR of the release over that of random rows.

    DCR = mean-Gower distance (L1 above ÷ number of columns, in [0, 1]) from a row to its closest
    training row. Random rows are drawn uniformly per column (numeric: within the training range;
    categorical: among the training categories), as many as synthetic rows evaluated (at most
    `max_rows`, seeded). score = min(1, median DCR synthetic / median DCR random): 1 = as far from
    the training rows as noise, 0 = copies. A descriptive ratio, not a test: an honest sample of
    the population is closer to the training rows than noise is, so it scores below 1 as well.
    """
    rng = np.random.default_rng([seed, 14])
    train = train.reset_index(drop=True)
    synthetic = synthetic[list(train.columns)].reset_index(drop=True)
    rows = np.sort(rng.choice(len(synthetic), min(max_rows, len(synthetic)), replace=False))
    synthetic = synthetic.iloc[rows].reset_index(drop=True)
    random = {}
    for column in train.columns:
        if (column_kind(train[column]) or "categorical") == "numeric":
            x = pd.to_numeric(train[column], errors="coerce").to_numpy(dtype="float64")
            random[column] = rng.uniform(np.nanmin(x), np.nanmax(x), len(synthetic))
        else:
            categories = train[column].dropna().unique()
            random[column] = categories[rng.integers(0, len(categories), len(synthetic))]
    random_df = pd.DataFrame(random)[list(train.columns)]
    table = _Table({"train": train, "synthetic": synthetic, "random": random_df}, ruler=("train",))
    n_columns = len(table.columns)

    def median_dcr(role: str) -> float:
        q_num, q_cat = table.block(role, table.columns)
        t_num, t_cat = table.block("train", table.columns)
        nearest = np.concatenate(
            [
                _gower_l1(q_num[s : s + _BASELINE_CHUNK], q_cat[s : s + _BASELINE_CHUNK], t_num, t_cat).min(axis=1)
                for s in range(0, q_num.shape[0], _BASELINE_CHUNK)
            ]
        )
        return float(np.median(nearest) / n_columns)

    synthetic_median, random_median = median_dcr("synthetic"), median_dcr("random")
    score = 1.0 if random_median == 0 else min(1.0, synthetic_median / random_median)
    return {
        "score": float(score),
        "median_dcr_synthetic": synthetic_median,
        "median_dcr_random": random_median,
        "n_rows": int(len(synthetic)),
        "definition": "min(1, median DCR of synthetic rows / median DCR of uniformly random rows); "
        "1 = as far from training rows as noise, 0 = copies (SDMetrics DCRBaselineProtection); not a test",
    }


# ------------------------------------------------------------------------------------- all of them


def synthetic_risks(
    train: pd.DataFrame,
    control: pd.DataFrame,
    synthetic: pd.DataFrame,
    *,
    alpha_each: float,
    n_attacks: int = 500,
    confidence: float = 0.95,
    seed: int = 0,
    secrets: list[str] | None = None,
    max_synthetic_rows: int = 20_000,
) -> dict[str, Any]:
    """Singling-out, linkability and per-column inference risks vs `control`, DCR baseline, and flags.

    `control` = real rows the generator never saw, from the same population (the holdout).
    Reported CIs are at `confidence`. A risk is flagged when its lower bound at the one-sided level
    `alpha_each` (the caller's Bonferroni share) is above 0; `n_tests` says how many risks can flag,
    so the caller can split its α before calling (`risk_test_count`).
    """
    columns = [str(c) for c in train.columns]
    secrets = columns if secrets is None else [str(s) for s in secrets]
    risks = [singling_out_risk(train, control, synthetic, n_attacks=n_attacks, confidence=confidence, seed=seed)]
    notes = []
    searched = synthetic
    if len(synthetic) > max_synthetic_rows:
        # Each nearest-neighbour attack is n_attacks × |release| × columns: on a huge release the
        # attacker is simulated with a seeded sample of it. Fewer rows to match can only weaken
        # the attack, so these risks are then lower estimates — said in the notes.
        rows = np.sort(np.random.default_rng([seed, 15]).choice(len(synthetic), max_synthetic_rows, replace=False))
        searched = synthetic.iloc[rows]
        notes.append(
            f"linkability and inference attacks searched a seeded sample of {max_synthetic_rows} of the "
            f"{len(synthetic)} synthetic rows: an attacker using all rows may do better (lower estimates)"
        )
    if len(columns) >= 2:
        prepared = _prepare(train, control, searched)
        risks.append(
            linkability_risk(
                train, control, searched, n_attacks=n_attacks, confidence=confidence, seed=seed, prepared=prepared
            )
        )
        risks += [
            inference_risk(
                train,
                control,
                searched,
                secret=s,
                n_attacks=n_attacks,
                confidence=confidence,
                seed=seed,
                prepared=prepared,
            )
            for s in secrets
        ]
    flags = []
    test_confidence = 1 - 2 * alpha_each  # two-sided interval whose lower end is a one-sided α_each test
    for risk in risks:
        if risk.get("value") is None:
            continue
        attack = attack_success_rate(risk["n_success"], risk["n_attacks"], test_confidence)
        control_rate = attack_success_rate(risk["n_control_success"], risk["n_control_attacks"], test_confidence)
        tested = {**risk, **residual_risk(attack, control_rate), "control_rate": control_rate.value}
        if "null_sd" in risk:
            tested = _widened(tested, test_confidence)
        low = tested["ci"][0]
        risk["p_value"] = risk_p_value(risk)
        risk["test_lower_bound"] = low
        risk["flagged"] = low > 0
        if low > 0:
            what = risk["name"].replace("_", "-") + (f" of '{risk['secret']}'" if "secret" in risk else "")
            flags.append(
                {
                    "check": f"risk_{risk['name']}",
                    "message": f"{what} risk {risk['value']:.3f} (CI {risk['ci'][0]:.3f}–{risk['ci'][1]:.3f}): "
                    f"attacks succeed on {risk['attack_rate']:.1%} of training rows vs {risk['control_rate']:.1%} "
                    f"of control rows (lower bound {low:.3f} > 0 at one-sided α {alpha_each:.2g})",
                }
            )
    inference = [r for r in risks if r["name"] == "inference"]
    return {
        "singling_out": risks[0],
        "linkability": next((r for r in risks if r["name"] == "linkability"), None),
        "inference": inference,
        "inference_max": max((r["value"] for r in inference), default=None),
        "dcr_baseline_protection": dcr_baseline_protection(train, synthetic, seed=seed),
        "flags": flags,
        "notes": notes,
        "alpha_each": alpha_each,
        "confidence": confidence,
        "method": "Giomi et al. 2022 (anonymeter): attacks on training rows vs control rows the generator never saw",
    }


def risk_p_value(risk: dict[str, Any]) -> float:
    """One-sided p-value of "attacks succeed no more often on training rows than on control rows".

    Without memorisation, training and control targets are exchangeable draws from one population
    and the release is fixed, so each success is a Bernoulli of the same rate on both sides: Fisher's
    exact test (one-sided, conditional on the total successes) is valid. Singling-out queries are
    all evaluated on the same two tables (correlated successes): there the z statistic of the rate
    difference over its spread across random re-splits of train ∪ control (`null_sd`) is used.
    """
    n_t, s_t = int(risk["n_attacks"]), int(risk["n_success"])
    n_c, s_c = int(risk["n_control_attacks"]), int(risk["n_control_success"])
    if "null_sd" in risk and risk["null_sd"]:
        difference = s_t / n_t - s_c / n_c
        return float(norm.sf(difference / float(risk["null_sd"])))
    return float(fisher_exact([[s_t, n_t - s_t], [s_c, n_c - s_c]], alternative="greater").pvalue)


def risk_test_count(n_columns: int, n_secrets: int | None = None) -> int:
    """How many risks `synthetic_risks` can flag: singling out, linkability, one inference per secret."""
    if n_columns < 2:
        return 1
    return 2 + (n_columns if n_secrets is None else n_secrets)
