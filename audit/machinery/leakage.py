"""The leakage statement of a model or release with no DP claim: LEAKS or NO SIGNIFICANT LEAKAGE FOUND.

Without a claimed ε nothing can be refuted, so nothing "passes"; what a reader needs instead is
whether membership leaks at all, by a test valid for the setting, with the figures in plain words.
Per subject (a target without a claim, a synthetic release without one) the tests of "no better
than chance" form one family, corrected with Holm's step-down procedure at α = 1 − confidence:

- each attack's DeLong AUC test (its interval's lower end above ½), recomputed from `auc`, `auc_ci`;
- each attack's held-out threshold (the Clopper-Pearson audit's rule): Fisher's exact test of
  "TPR at that threshold ≤ its FPR" on the evaluation half;
- each attack's one-run test at ε = 0 where membership was a fair coin flip (proven, one model);
- a synthetic release's own leak tests (DCR, exact copies, distance attack), with their p-values.

A blind baseline (`target["blind_baseline"]`, Das et al. 2024, arXiv 2406.16201: a classifier on the
records alone, no model) that separates members from non-members marks the statement confounded:
the sets differ in distribution, so the attack's figures need not come from the model.

Pure functions of a results dict: the run, `report` and `gate` reach the same statement.
"""

from __future__ import annotations

import math
from typing import Any, TypeGuard

from audit.statistics.leakage_tests import (
    delong_p_value_from_interval,
    held_out_threshold_p_value,
    one_run_chance_p_value,
    plain_tpr_sentence,
)
from audit.statistics.multiple_testing import holm_rejections

__all__ = ["finetuning_label", "planted_canaries", "target_leakage", "synthetic_leakage"]

# Attack rows whose members are secrets the audit planted (each inserted by a fair coin), not the training records:
# the llm job's Panda / Secret Sharer canaries. They test the claim (their one-run bounds); what they find is said as
# "inserted canaries", and a policy's AUC / TPR limits on what attacks find about the records do not read them.
PLANTED_CANARY_KINDS = frozenset({"llm_canaries"})


def planted_canaries(attack: dict[str, Any]) -> bool:
    """True for an attack row scored on planted canaries (`PLANTED_CANARY_KINDS`), not on the training records."""
    return attack.get("kind") in PLANTED_CANARY_KINDS


_TESTS = {
    "delong_auc": (
        "DeLong AUC test (interval above ½)",
        "members and non-members are independent draws from one population",
    ),
    "held_out_threshold": (
        "TPR above FPR at the held-out threshold (Fisher's exact test)",
        "evaluation records are independent draws from one population",
    ),
    "one_run_chance": (
        "one-run test at ε = 0 (Steinke et al. 2023)",
        "membership of each candidate was an independent fair coin flip (proven)",
    ),
}


_SYNTHETIC_TESTS = {
    "dcr": "DCR permutation test (synthetic rows closer to train than to holdout)",
    "exact_copies": "exact-copy binomial test",
    "mia": "distance attack's DeLong AUC test",
}


def _number(value: Any) -> TypeGuard[int | float]:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def tpr_at(attack: dict[str, Any], level: float) -> Any:
    """The attack's TPR at FPR `level`, whatever the key's spelling ("0.001", 0.001, "1e-3")."""
    for key, value in (attack.get("tpr_at_fpr") or {}).items():
        try:
            if math.isclose(float(key), level, rel_tol=1e-9):
                return value
        except (TypeError, ValueError):
            continue
    return None


def _attack_tests(attack: dict[str, Any], confidence: float) -> list[dict[str, Any]]:
    name = str(attack.get("name"))
    details = attack.get("epsilon_lb_details") or {}
    found = [
        ("delong_auc", delong_p_value_from_interval(attack.get("auc"), attack.get("auc_ci"), confidence)),
        ("held_out_threshold", held_out_threshold_p_value(details.get("clopper_pearson"))),
        ("one_run_chance", one_run_chance_p_value(details.get("one_run"))),
    ]
    return [
        {"test": key, "attack": name, "name": f"{name}: {_TESTS[key][0]}", "p_value": p, "assumption": _TESTS[key][1]}
        for key, p in found
        if p is not None
    ]


def _resolvable_tpr(attack: dict[str, Any], level: float) -> Any:
    """The TPR at FPR `level`, or None when the attack had too few non-members to resolve that FPR
    (fewer than 1 / level: with 5 non-members "FPR ≤ 0.1 %" only means none of 5 was accused, and a
    TPR read there is not a rate a reader should take from the statement)."""
    n = attack.get("n_nonmembers")
    if _number(n) and n * level < 1:
        return None
    return tpr_at(attack, level)


def _figures(attack: dict[str, Any]) -> dict[str, Any]:
    return {
        "attack": attack.get("name"),
        "auc": attack.get("auc"),
        "auc_ci": attack.get("auc_ci"),
        "tpr_at_fpr_0.001": _resolvable_tpr(attack, 0.001),
        "tpr_at_fpr_0.01": _resolvable_tpr(attack, 0.01),
    }


def _statement(
    label: str,
    subject: str,
    tests: list[dict[str, Any]],
    alpha: float,
    figures: dict[str, Any],
    what: str,
    confounded: dict[str, Any] | None = None,
) -> dict[str, Any]:
    rejected = holm_rejections([t["p_value"] for t in tests], alpha) if tests else []
    for test, reject in zip(tests, rejected):
        test["rejected"] = bool(reject)
    leaks = any(rejected)
    deciding = [t for t in tests if t.get("rejected")]
    plain = [
        s
        for s in (
            plain_tpr_sentence(figures.get("tpr_at_fpr_0.01"), 0.01, what),
            plain_tpr_sentence(figures.get("tpr_at_fpr_0.001"), 0.001, what),
        )
        if s
    ]
    auc, ci = figures.get("auc"), figures.get("auc_ci")
    auc_text = (
        (
            f"AUC {auc:.3f}"
            + (
                f" ({ci[0]:.3f}–{ci[1]:.3f})"
                if isinstance(ci, (list, tuple)) and len(ci) == 2 and all(_number(x) for x in ci)
                else ""
            )
        )
        if _number(auc)
        else ""
    )
    best = f"best attack {figures.get('attack')}: {auc_text}" if auc_text else ""
    if leaks:
        first = min(deciding, key=lambda t: t["p_value"])
        head = (
            f"{label}: LEAKS — {first['name']} rejects chance (p = {first['p_value']:.2g}; assumes "
            f"{first['assumption']})"
        )
    elif tests:
        head = (
            f"{label}: NO SIGNIFICANT LEAKAGE FOUND — none of {len(tests)} test(s) of chance rejected at "
            f"family-wise α {alpha:g}"
        )
    else:
        head = f"{label}: NO SIGNIFICANT LEAKAGE FOUND — no test of chance could be computed from these results"
    statement = "; ".join([head] + ([best] if best else []) + plain)
    if confounded:
        statement += (
            "; CONFOUNDED: a classifier on the records alone (no model) separates members from "
            f"non-members (AUC {confounded.get('auc', float('nan')):.3f}), so the sets differ in "
            "distribution and this figure need not come from the model (Das et al. 2024)"
        )
    return {
        "subject": subject,
        "label": label,
        "status": "leaks" if leaks else "no_significant_leakage",
        "statement": statement,
        "tests": tests,
        "alpha": alpha,
        "family": f"Holm over the {len(tests)} test(s) of chance of this subject at α {alpha:g}",
        "figures": figures,
        "plain": plain,
        "confounded": bool(confounded),
    }


def finetuning_label(target: dict[str, Any]) -> str:
    """ "full" / "LoRA" for the llm job's targets (each ε is fine-tuned both ways, one target each), else ""."""
    found = target.get("llm")
    kind = found.get("finetuning") if isinstance(found, dict) else None
    return ("LoRA" if kind == "lora" else str(kind)) if kind else ""


def target_leakage(index: int, target: dict[str, Any], label: str, alpha: float) -> dict[str, Any]:
    """The leakage statement of a target without a DP claim (ε = ∞, `audit-model --claimed-epsilon inf`)."""
    confidence = 1 - alpha
    attacks = [a for a in target.get("attacks") or [] if isinstance(a, dict)]
    tests = [t for a in attacks for t in _attack_tests(a, confidence)]
    # the figure shown is the attack with the highest TPR at 1 % FPR among those whose non-members can
    # resolve 1 % (a per-client row with 5 non-members cannot), else the highest AUC
    ranked = [a for a in attacks if _number(_resolvable_tpr(a, 0.01))] or attacks
    top = max(ranked, key=lambda a: (_resolvable_tpr(a, 0.01) or 0.0, a.get("auc") or 0.0), default={})
    baseline = target.get("blind_baseline")
    confounded = baseline if isinstance(baseline, dict) and baseline.get("separates") else None
    # Two llm targets share ε = ∞ (full and LoRA fine-tuning): the statement names which one it is about.
    finetuning = finetuning_label(target)
    label = f"{label} · {finetuning} fine-tuning" if finetuning else label
    what = "inserted canaries (secrets the audit planted)" if planted_canaries(top) else "training records"
    return _statement(f"{label} (no DP claim)", f"targets[{index}]", tests, alpha, _figures(top), what, confounded)


def synthetic_leakage(index: int, entry: dict[str, Any], label: str, alpha: float) -> dict[str, Any]:
    """The leakage statement of a synthetic release without a DP claim, from its own leak tests."""
    tests = [
        {
            "test": str(t.get("check")),
            "attack": "synthetic",
            "name": _SYNTHETIC_TESTS.get(str(t.get("check")), str(t.get("check"))),
            "p_value": float(t["p_value"]),
            "assumption": str(t.get("assumption") or ""),
            "message": str(t.get("message") or ""),
        }
        for t in entry.get("leak_tests") or []
        if isinstance(t, dict) and _number(t.get("p_value"))
    ]
    if not tests:  # results written before leak_tests existed: their flags were tested at α/3 each
        tests = [
            {
                "test": str(f.get("check")),
                "attack": "synthetic",
                "name": str(f.get("check")),
                "p_value": 0.0,
                "assumption": "flag raised by the release's own test",
                "message": str(f.get("message") or ""),
            }
            for f in entry.get("flags") or []
            if isinstance(f, dict)
        ]
    mia = entry.get("mia") or {}
    return _statement(
        f"{label} (no DP claim)",
        f"synthetic[{index}]",
        tests,
        alpha,
        _figures({"name": "distance", **mia}),
        "training rows",
    )
