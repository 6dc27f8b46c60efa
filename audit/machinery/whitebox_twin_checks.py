"""The checks of a target's white-box one-run twin (privacy.whitebox_one_run): Dirac gradient canaries in
one training run of the same DP-SGD, Steinke et al.'s test deciding, the f-DP reading shown beside it, and
where its power comes from. Split from audit/machinery/built_in_checks.py, which calls it per target.
"""

from __future__ import annotations

from typing import Any

from audit.machinery.verdict_rows import Check
from audit.statistics.one_run_power import whitebox_power

__all__ = ["whitebox_one_run_checks", "whitebox_twin_power"]


def _estimate_text(value: Any) -> str:
    """A Gaussian-family estimate: None when withheld (its scores contradict a Gaussian curve, gdp_fit)."""
    return "withheld" if value is None else f"{float(value):.2f}"


def whitebox_twin_power(row: dict[str, Any]) -> dict[str, Any]:
    """The white-box one-run twin's power against its claim. Dirac gradient canaries: proven (each
    canary owns a coordinate, observed at every iterate, so a perfect attack is what a broken mechanism
    gives and the ceiling is reachable). Random-direction gradient canaries overlap the real gradients,
    so the ceiling is not proven reachable; their power is measured on the planted-bug suite
    (docs/one-run-audits.md: every planted bug flagged, no correct setup flagged). The federated twin's
    canary clients have no such measurement: none."""
    if str(row.get("family") or "").startswith("canary clients"):
        return {
            "kind": "none",
            "figure": None,
            "detail": "canary clients with random directions have no proven or measured power against a broken "
            "aggregation",
            "decider": "a white-box audit of the client training decides (whitebox-audit with Dirac canaries)",
        }
    if str(row.get("kind")) == "dirac":
        return {
            "kind": "proven",
            "figure": None,
            "decider": "",
            "detail": "worst-case Dirac gradient canaries, observed at every iterate: the ceiling is reachable",
        }
    return {
        "kind": "measured",
        "figure": None,
        "decider": "",
        "detail": "random-direction gradient canaries at every iterate: power measured on the planted-bug suite "
        "(docs/one-run-audits.md: every planted bug flagged, no correct setup flagged)",
    }


def whitebox_one_run_checks(subject: str, label: str, row: dict[str, Any], claim_key: str, level: float) -> list[Check]:
    """The target's white-box one-run row (a twin trained with gradient canaries, row family
    "white-box one-run"): a test of the *same* claim as the membership rows, in the same Holm family
    when it could refute the claim alone (`refutable_alone`), judged for power at the family's first
    Holm level `level` (α/K) like every row; accuracy shown beside."""
    family = str(row.get("family") or "white-box one-run")
    name = f"{label} · {family}"
    claim, m = float(row["claim"]), int(row["m"])
    power = whitebox_power(row, level)
    ceiling = float(power["ceiling"]) if isinstance(power.get("ceiling"), (int, float)) else None
    assumption = row.get("assumption") or (
        "one training run of a twin with gradient canaries by fair coins (proven: Steinke et al., f-DP one-run)"
    )
    # a row that measured its own power (the llm job's positive control) speaks for itself
    row_power = row["power"] if isinstance(row.get("power"), dict) else whitebox_twin_power(row)
    accuracy = (
        Check(
            subject,
            f"{name} · accuracy",
            f"{label}: test accuracy {row['test_accuracy_target']:.3f} (released target) vs "
            f"{row['test_accuracy_with_canaries']:.3f} (twin with {m} canaries); training "
            f"{row['train_seconds_target']:.1f} s vs {row['train_seconds_with_canaries']:.1f} s",
            decides=False,
            assumption="shown only",
        )
        if "test_accuracy_target" in row
        else None
    )
    shown = [accuracy] if accuracy is not None else []
    need = power.get("needed")
    needed = (
        f"needs ≥ {int(need):,} canaries ({row.get('canaries_setting') or 'privacy.one_run_canaries'})"
        if need
        else f"needs more than {max([m] + [int(k) for k in row.get('fdp_perfect_p_by_m') or {}]):,} canaries"
    )
    curve = power.get("curve_ceiling")
    steinke_used = "steinke" in (row.get("tests") or ["steinke"])
    reach = (
        f"a perfect attack reaches ε {power['steinke_ceiling']:.2f} (Steinke et al.) and "
        if steinke_used
        else "a perfect attack "
    ) + (
        f"refutes the DP-SGD curves up to ε {curve:.2f} (f-DP, same q and T)"
        if curve is not None
        else "could not refute the claim's curve (f-DP)"
    )
    if not row.get("refutable_alone"):
        return [
            Check(
                subject,
                name,
                f"{label}, {family}: untestable here — with {m} canaries {reach}, even "
                f"alone, at or below the claim {claim:.3f}; {needed} (left out of the Holm family)",
                inconclusive=True,
                assumption=assumption,
                claim=claim_key,
                ceiling=ceiling,
                needed=needed,
                power=row_power,
            ),
            *shown,
        ]
    p = float(row["p_value"])
    message = (
        f"{label}, {family} ({m} {row.get('kind')} canaries, {row.get('observe') or 'every iterate'}): "
        "Steinke et al. ε ≥ "
        f"{float(row['steinke_epsilon']):.3f}, f-DP test {'refutes' if row.get('fdp_refuted') else 'does not refute'} "
        f"the claim's curve, vs accountant ε {claim:.3f} (p = {p:.2g}); at the family's level {reach}"
        f" (estimates: Gaussian sum ε ≈ {_estimate_text(row.get('gaussian_sum_epsilon'))}, Andrew et al. ε ≈ "
        f"{_estimate_text(row.get('andrew_epsilon'))})"
    )
    if not power["powered"]:
        message = (
            f"{label}, {family}: untestable here — at the family's Holm level with {m} canaries "
            f"{reach}, at or below the claim {claim:.3f} (p = {p:.2g}); {needed}"
        )
    return [
        Check(
            subject,
            name,
            message,
            p_value=p,
            inconclusive=not power["powered"],
            assumption=assumption,
            claim=claim_key,
            ceiling=ceiling,
            needed="" if power["powered"] else needed,
            power=row_power,
        ),
        *shown,
    ]
