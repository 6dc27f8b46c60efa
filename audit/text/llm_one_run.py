"""The llm job's test of each DP fine-tuning's claim: one pre-declared canary design, its one-run row.

Each DP target (a fine-tuning mode at a target ε) is tested by ONE row, declared before any score is
read: the canaries of the deciding design (`deciding_design`: Panda et al.'s new-token canaries when
the run has them), scored black-box on the final model, fed to the one-run tests every canary row
uses (`audit.statistics.one_run_power.one_run_row`): Steinke, Nasr, Jagielski 2023 (arXiv
2305.08846) and the f-DP one-run test of Mahloujifar, Melis, Chaudhuri 2024 (arXiv 2410.22235)
against the claim's own trade-off curve — the Poisson-subsampled Gaussian (σ, q, T) of that
fine-tuning, per person. The f-DP test is what makes ε = 8 testable with ~10³ canaries: Steinke et
al.'s bound cannot pass ε ≈ 5.4 with 1,000 canaries at δ = 1e-5 (its 2mδ term), while a perfect
attack refutes the ε = 8 DP-SGD curve with ~1,000–1,500. The other design's rows (Secret Sharer, the
baseline) and the synthetic-text rows are shown beside it, not tested: one test per claim keeps the
verdict's Holm family at one row per DP target.

The row sits in the target's `whitebox_one_run` slot (the verdict's one-run row of a target,
schema `one_run_row`) with `family` naming what it is: black-box canaries, the final model only.

Power (`claim_power`): a black-box canary score has no proven power against a claim (a perfect
attack's ceiling is not enough for a weak mode). Each row's power is read from the run's positive
control: the same canaries and fine-tuning mode trained without DP. Where the control's scores
refute this claim's curve at the verdict's first Holm level α/K (K = the rows that could refute
their claim alone), the audit is shown to catch a fine-tuning that leaks as much as one without DP
(power "control"); otherwise its power is "none" and a passing row reads "not refuted". Pure
functions of scores, coins and (σ, q, T); no I/O.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from audit.statistics.one_run_audit import one_run_claim_audit
from audit.statistics.one_run_power import one_run_row
from audit.statistics.tradeoff_curves import dpsgd_privacy_profile

__all__ = ["FAMILY", "MODE_LABELS", "canary_claim_row", "claim_power", "control_p_value", "deciding_design"]

FAMILY = "black-box one-run canaries"
MODE_LABELS = {"full": "full", "lora": "LoRA"}  # how each fine-tuning is named in claims and tables
DESIGN_WORDS = {
    "panda": "Panda et al. new-token canaries",
    "secret_sharer": "Secret Sharer digit canaries",
}
PAPERS = (
    "Steinke, Nasr, Jagielski 2023, arXiv 2305.08846; Mahloujifar, Melis, Chaudhuri 2024, arXiv 2410.22235; "
    "canaries: Panda, Tang, Nasr, Choquette-Choo, Mittal 2025, arXiv 2503.06808 (new tokens), "
    "Carlini et al. 2019, arXiv 1802.08232 (Secret Sharer)"
)


def deciding_design(designs: Sequence[str]) -> str:
    """The design whose row tests each claim: Panda et al.'s when the run has it (the design built to
    be found), else the only one. Fixed by the config, never by the scores."""
    return "panda" if "panda" in designs else designs[0]


def canary_claim_row(
    scores: np.ndarray,
    coins: np.ndarray,
    *,
    design: str,
    mode: str,
    unit: str,
    claim: float,
    delta: float,
    noise_multiplier: float,
    sample_rate: float,
    steps: int,
    confidence: float,
) -> dict[str, Any]:
    """The one-run row of one DP fine-tuning from its deciding design's black-box canary scores."""
    row = one_run_row(
        scores,
        scores,  # black-box: the final model is all that is observed
        coins,
        claim=claim,
        delta=delta,
        noise_multiplier=noise_multiplier,
        sample_rate=sample_rate,
        steps=steps,
        confidence=confidence,
    )
    row.pop("final_model")  # the same scores: nothing more to show
    return {
        **row,
        "family": f"{FAMILY} ({DESIGN_WORDS.get(design, design)})",
        "paper": PAPERS,
        "kind": design,
        "design_key": f"canary_{design}_{mode}",
        "mode": mode,
        "level": f"{MODE_LABELS.get(mode, mode)} fine-tuning · {unit}",
        "observe": "the final model only (black-box)",
        "assumption": "one fine-tuning run, canaries inserted by fair coins, scored black-box on the final "
        "model (proven: Steinke et al.; f-DP one-run test against the claim's DP-SGD curve)",
        "canary_rows_inserted": int(np.asarray(coins, dtype=bool).sum()),
        "canaries_setting": "llm.canaries_per_design",
        # the claim's mechanism, per person: what the control's scores are tested against (claim_power)
        "noise_multiplier": float(noise_multiplier),
        "sample_rate": float(sample_rate),
        "steps": int(steps),
    }


def control_p_value(control_scores: np.ndarray, coins: np.ndarray, row: dict[str, Any], confidence: float) -> float:
    """The p-value the row's own tests (`row["tests"]`, Bonferroni as `one_run_row` combines them) give
    the positive control's scores (the same canaries without DP) against the row's claim and curve."""
    profile = dpsgd_privacy_profile(float(row["noise_multiplier"]), float(row["sample_rate"]), int(row["steps"]))
    audit = one_run_claim_audit(
        control_scores,
        coins,
        claimed_epsilon=float(row["claim"]),
        delta=float(row["delta"]),
        profile=profile,
        confidence=confidence,
        with_estimates=False,
    )
    p_of = {"steinke": float(audit["steinke"]["p_value_claim"]), "fdp": float(audit["fdp"]["p_value_claim"])}
    tests = [t for t in row.get("tests") or ["steinke", "fdp"] if t in p_of]
    return float(min(1.0, len(tests) * min(p_of[t] for t in tests)))


def claim_power(rows: list[dict[str, Any]], control_p: list[float | None], alpha: float) -> float:
    """Set each row's `power` from its positive control's p-value (`control_p`, one per row; None: no
    ε = ∞ target of that mode in the run) at the Holm family's first level α/K, K = the rows that could
    refute their claim alone (`refutable_alone`). Returns that level."""
    k = max(1, sum(1 for r in rows if r.get("refutable_alone")))
    level = alpha / k
    for row, p in zip(rows, control_p, strict=True):
        claim = float(row["claim"])
        if p is not None and p <= level:
            row["power"] = {
                "kind": "control",
                "figure": p,
                "decider": None,
                "detail": f"positive control in this run: the same {row['kind']} canaries, {MODE_LABELS.get(row['mode'], row['mode'])} fine-tuning "
                f"without DP, refute ε {claim:.3g}'s curve at p = {p:.2g} ≤ {level:.2g} (the family's first Holm "
                f"level); it detects a fine-tuning that leaks that much, not a subtler excess",
            }
            continue
        shown = (
            f"no ε = ∞ {MODE_LABELS.get(row['mode'], row['mode'])} target in this run"
            if p is None
            else f"p = {p:.2g} against ε {claim:.3g}'s curve, above the family's first Holm level {level:.2g}"
        )
        row["power"] = {
            "kind": "none",
            "figure": p,
            "decider": "a white-box or gradient-canary audit (canary-audit), or more canaries "
            "(llm.canaries_per_design), or a fine-tuning whose control memorises its canaries",
            "detail": f"black-box input-space canaries: power not proven, and the positive control ({MODE_LABELS.get(row['mode'], row['mode'])} "
            f"fine-tuning without DP) gave {shown}: it cannot show that this audit would detect a violation",
        }
    return level
