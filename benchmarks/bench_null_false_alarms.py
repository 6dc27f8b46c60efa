"""Null stays null: how often do the verdicts cry wolf on data with nothing to find? (issue 27, item 4)

    python benchmarks/bench_null_false_alarms.py [--seeds 200] [--rows 300] [--targets-only | --synthetic-only]

1. Synthetic: train, holdout and synthetic tables are three INDEPENDENT draws from one fixed
   mixed-type population (4 numeric columns — correlated, one skewed, one integer — and 2
   categorical), so the release carries nothing about its training rows. Each seed runs the whole
   check (DCR, exact copies, distance MIA, singling-out, linkability and per-column inference
   risks) and the verdict of audit.machinery.verdict on it. A false alarm is a release flagged by
   the check (`passed` False) or a verdict "fail" / leakage finding.
2. Membership: one target per seed, four attacks whose scores are independent of coin-flip
   membership (2400 candidates, as the default run), the target claiming ε = 1 at δ = 1e-5, and
   a second target with no claim. A false alarm is a verdict "fail" (a claim refuted) or any
   leakage finding.

Both family-wise rates must be ≤ 5 %; the printout gives each with its Clopper-Pearson 95 % upper
bound. Small tables keep a seed under a second or two on 2 cores.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import stats

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from audit.machinery.verdict import verdict_for_results  # noqa: E402
from audit.statistics.attack_evaluation import best_sound_lower_bound, evaluate_attack, leakage_family_test  # noqa: E402
from audit.statistics.synthetic_evaluation import synthetic_privacy_checks  # noqa: E402

_LOADINGS = np.array([[0.9, 0.5, -0.4, 0.2], [0.1, -0.6, 0.7, 0.5]])
_EDGES = (stats.norm.ppf([0.5]) * np.sqrt(2), stats.norm.ppf([0.25, 0.5, 0.75]) * np.sqrt(2))


def population_sample(n: int, rng: np.random.Generator) -> pd.DataFrame:
    """n rows of the fixed population (fixed loadings and category edges: only the rows are random)."""
    latent = rng.standard_normal((n, 2))
    numeric = latent @ _LOADINGS + 0.6 * rng.standard_normal((n, 4))
    return pd.DataFrame(
        {
            "num_0": numeric[:, 0],
            "num_1": np.exp(0.5 * numeric[:, 1]),
            "num_2": np.rint(40 + 12 * numeric[:, 2]).astype(np.int64),
            "num_3": numeric[:, 3],
            "cat_0": np.array(["a", "b"], dtype=object)[
                np.searchsorted(_EDGES[0], latent[:, 0] + rng.standard_normal(n))
            ],
            "cat_1": np.array(["w", "x", "y", "z"], dtype=object)[
                np.searchsorted(_EDGES[1], latent[:, 1] + rng.standard_normal(n))
            ],
        }
    )


def synthetic_null(seed: int, rows: int, risk_attacks: int) -> dict:
    rng = np.random.default_rng([seed, 27])
    train, holdout, synthetic = (population_sample(rows, rng) for _ in range(3))
    entry = synthetic_privacy_checks(train, holdout, synthetic, seed=seed, risk_attacks=risk_attacks)
    results = {
        "schema_version": 2,
        "targets": [],
        "synthetic": [{"generator": "independent", "epsilon_target": None, **entry}],
        "notes": [],
    }
    verdict = verdict_for_results(results)[0]["verdict"]
    flagged_by = sorted({f["check"] for f in entry["flags"]})
    return {"check_flagged": bool(entry["flags"]), "flagged_by": flagged_by, "verdict": verdict}


def membership_null(seed: int, n: int = 2400) -> dict:
    """Two targets on null scores: one claiming ε = 1 (alarm: the claim refuted), one with no claim
    (alarm: a leakage finding)."""
    rng = np.random.default_rng([seed, 24])
    members = rng.random(n) < 0.5
    labels = rng.integers(0, 10, n)
    targets = []
    for index, claim in enumerate((1.0, None)):
        attacks = [
            evaluate_attack(
                name,
                rng.normal(size=n),
                members,
                labels,
                delta=1e-5,
                confidence=0.95,
                threshold_seed=seed,
                accountant_epsilon=claim,
            )
            for name in ("loss", "shadow", "lira", "rmia")
        ]
        best, where = best_sound_lower_bound(attacks)  # as the runner fills it
        targets.append(
            {
                "name": f"null target {index}",
                "epsilon_target": claim,
                "epsilon_accountant": claim,
                "delta": 1e-5,
                "attacks": attacks,
                "epsilon_lb_best": best,
                "epsilon_lb_best_method": where,
            }
        )
    results = {"schema_version": 2, "targets": targets, "synthetic": [], "notes": []}
    decided, _ = verdict_for_results(results)
    verdict = dict(decided["verdict"])
    verdict["all_notes"] = list(decided.get("notes") or []) + list(verdict.get("notes") or [])
    no_claim = targets[1]["attacks"]
    return {
        "verdict": verdict,
        "claim_refuted": str(verdict.get("status")).lower() == "fail",
        "leak_statement": _leaks(verdict),
        "leaks_holm": leakage_family_test(no_claim, 1e-5, 0.05)["leaks"],
    }


def _leaks(verdict: dict) -> bool:
    """A leakage finding on a subject without a claim: the LEAKS statement (issue 24), or the older
    "it leaks" note of results written before it."""
    statements = [s for s in verdict.get("leakage") or [] if isinstance(s, dict)]
    notes = [str(n) for n in verdict.get("all_notes") or verdict.get("notes") or []]
    return any(s.get("status") == "leaks" for s in statements) or any("it leaks" in n for n in notes)


def alarm(verdict: dict) -> bool:
    """A false alarm: a refuted claim (verdict "fail") or a leakage finding."""
    return str(verdict.get("status")).lower() == "fail" or _leaks(verdict)


def _rate(k: int, n: int) -> str:
    upper = 1.0 if k == n else float(stats.beta.ppf(0.95, k + 1, n - k))
    return f"{k}/{n} = {k / n:.1%} (95 % upper bound {upper:.1%})"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", type=int, default=200)
    parser.add_argument("--rows", type=int, default=300)
    parser.add_argument("--risk-attacks", type=int, default=200)
    parser.add_argument("--targets-only", action="store_true")
    parser.add_argument("--synthetic-only", action="store_true")
    args = parser.parse_args(argv)
    if not args.targets_only:
        start = time.process_time()
        flagged = alarms = 0
        by_check: dict[str, int] = {}
        for seed in range(args.seeds):
            row = synthetic_null(seed, args.rows, args.risk_attacks)
            flagged += row["check_flagged"]
            alarms += alarm(row["verdict"])
            for check in row["flagged_by"]:
                by_check[check] = by_check.get(check, 0) + 1
        print(
            f"synthetic, independent releases ({args.rows} rows a table, {args.risk_attacks} risk attacks): "
            f"check flagged {_rate(flagged, args.seeds)}; verdict alarm {_rate(alarms, args.seeds)}; "
            f"by check {by_check or 'none'}; CPU {time.process_time() - start:.0f} s"
        )
    if not args.synthetic_only:
        start = time.process_time()
        rows = [membership_null(seed) for seed in range(args.seeds)]
        print(
            f"membership, null scores (4 attacks × 2400 coin-flip candidates): verdict alarm (either target) "
            f"{_rate(sum(alarm(r['verdict']) for r in rows), args.seeds)}; claim ε 1 refuted "
            f"{_rate(sum(r['claim_refuted'] for r in rows), args.seeds)}; no-claim target: verdict's leakage finding "
            f"{_rate(sum(r['leak_statement'] for r in rows), args.seeds)}, Holm over the 4 attacks' one-run tests "
            f"only {_rate(sum(r['leaks_holm'] for r in rows), args.seeds)}; "
            f"CPU {time.process_time() - start:.0f} s"
        )


if __name__ == "__main__":
    main()
