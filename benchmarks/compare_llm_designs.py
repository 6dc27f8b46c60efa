"""Panda et al.'s canaries against Secret Sharer's, TPR at 1 % FPR, with confidence intervals, from
the canary scores an llm run saves (`scores/scores_<mode>_eps_<ε>_<design>.csv`).

    python benchmarks/compare_llm_designs.py runs/<timestamp>-llm

For each fine-tuning and ε: each design's TPR at 1 % FPR (`audit.statistics.attack_metrics.tpr_at_fpr`,
an achieved threshold, no interpolation) with a 95 % percentile bootstrap interval (Efron 1979;
`scipy.stats.bootstrap`, members and non-members resampled apart: the threshold's own noise is
inside the interval), the difference Panda − Secret Sharer with its interval (the two designs are
distinct canaries in the same run: resampled independently), and — where the interval includes 0 —
the canaries per design a two-proportion test would need to find the measured difference at 95 %
with 80 % power (normal approximation, n = (z_α/2 + z_β)² (p₁q₁ + p₂q₂) / d² members per design,
twice that in canaries: half are inserted; the threshold's noise is not in it, so it is a floor), and the
smallest difference this many members would find so.
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import stats

from audit.statistics.attack_metrics import tpr_at_fpr

FPR = 0.01


def _tpr(members: np.ndarray, nonmembers: np.ndarray, axis: int = -1) -> np.ndarray:
    members, nonmembers = np.atleast_2d(members), np.atleast_2d(nonmembers)
    out = []
    for m, n in zip(members, nonmembers, strict=True):
        scores = np.r_[m, n]
        labels = np.r_[np.ones(len(m)), np.zeros(len(n))]
        out.append(tpr_at_fpr(scores, labels, (FPR,))[FPR])
    return np.asarray(out)


def design_tpr(frame: pd.DataFrame, seed: int) -> tuple[float, tuple[float, float], np.ndarray, np.ndarray]:
    member = frame["member"].to_numpy() == 1
    scores = frame["score"].to_numpy()
    point = float(_tpr(scores[member], scores[~member])[0])
    return point, _interval((scores[member], scores[~member]), _tpr, seed), scores[member], scores[~member]


def _interval(samples: tuple[np.ndarray, ...], statistic, seed: int) -> tuple[float, float]:
    """95 % percentile bootstrap interval, each sample resampled apart."""
    ci = stats.bootstrap(
        samples,
        statistic,
        vectorized=True,
        paired=False,
        n_resamples=2000,
        confidence_level=0.95,
        method="percentile",
        random_state=seed,
    ).confidence_interval
    return float(ci.low), float(ci.high)


def needed_canaries(p1: float, p2: float) -> float | None:
    d = abs(p1 - p2)
    if d == 0:
        return None
    z = stats.norm.ppf(0.975) + stats.norm.ppf(0.8)
    return 2 * math.ceil(z**2 * (p1 * (1 - p1) + p2 * (1 - p2)) / d**2)


def detectable_difference(p2: float, members: int) -> float:
    """The smallest TPR difference over `p2` (at least the 1 % chance level) that `members` members per
    design find at 95 % with 80 % power, by the same normal approximation (a fixed point: p₁ = p₂ + d)."""
    z = stats.norm.ppf(0.975) + stats.norm.ppf(0.8)
    p2 = max(p2, FPR)
    d = 0.01
    for _ in range(50):
        p1 = min(p2 + d, 1.0)
        d = z * math.sqrt((p1 * (1 - p1) + p2 * (1 - p2)) / members)
    return d


def compare(run_dir: Path, seed: int = 0) -> list[dict]:
    rows = []
    files = sorted((run_dir / "scores").glob("scores_*_panda.csv"))
    for panda_file in files:
        tag = panda_file.name.removeprefix("scores_").removesuffix("_panda.csv")
        sharer_file = panda_file.with_name(f"scores_{tag}_secret_sharer.csv")
        if not sharer_file.exists():
            continue
        p, p_ci, pm, pn = design_tpr(pd.read_csv(panda_file), seed)
        s, s_ci, sm, sn = design_tpr(pd.read_csv(sharer_file), seed)

        def difference(a_m, a_n, b_m, b_n, axis=-1):
            return _tpr(a_m, a_n) - _tpr(b_m, b_n)

        d_ci = _interval((pm, pn, sm, sn), difference, seed)
        rows.append(
            {
                "target": tag,
                "panda_tpr": p,
                "panda_ci": p_ci,
                "secret_sharer_tpr": s,
                "secret_sharer_ci": s_ci,
                "difference": p - s,
                "difference_ci": d_ci,
                "panda_wins": bool(d_ci[0] > 0),
                "members": (len(pm), len(sm)),
                "nonmembers": (len(pn), len(sn)),
                "canaries_needed_per_design": needed_canaries(p, s) if p > s and d_ci[0] <= 0 else None,
                "detectable_difference": detectable_difference(s, min(len(pm), len(sm))),
            }
        )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run_dir", type=Path)
    args = parser.parse_args()
    for row in compare(args.run_dir):
        print(json.dumps(row))


if __name__ == "__main__":
    main()
