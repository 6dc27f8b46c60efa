"""The verdict's checks from the main job's conformance records (audit.sweep.conformance_rows).

One claim for the whole run: "every DP target's training conforms to what its accountant assumes".
Its deterministic checks (steps and σ, q in the accountant's history; a repeated index in a batch)
are rules; the statistical checks of all targets (noise std, clipping, Poisson sampling rate and
dispersion, independent inclusion, noise independence) are Bonferroni-combined into ONE p-value,
one test of the verdict's Holm family. Pure: returns the fields of `verdict.Check`.
"""

from __future__ import annotations

import math
from typing import Any

__all__ = ["CLAIM", "conformance_check_fields", "conformance_tests_in_family"]

CLAIM = (
    "the run's DP-SGD training conforms to what its accountant assumes (noise std, per-example clipping, "
    "Poisson sampling, steps, σ and q)"
)
ASSUMPTION = "each statistical check's null distribution under correct DP-SGD; Bonferroni over all of them"


def _records(results: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    out = []
    for target in results.get("targets") or []:
        record = target.get("conformance") if isinstance(target, dict) else None
        if isinstance(record, dict) and isinstance(record.get("checks"), list):
            eps = target.get("epsilon_target")
            label = "ε = ∞" if eps is None or (isinstance(eps, float) and math.isinf(eps)) else f"ε = {eps:g}"
            out.append((label, record))
    return out


def conformance_tests_in_family(results: dict[str, Any]) -> int:
    """1 when the run's conformance records carry statistical p-values (their combined test), else 0."""
    return int(any(r.get("statistical_p_values") for _, r in _records(results)))


def conformance_check_fields(results: dict[str, Any]) -> list[dict[str, Any]]:
    """Check fields (subject, name, message, p_value | failed, assumption, claim) for the run's records."""
    records = _records(results)
    if not records:
        return []
    fields: list[dict[str, Any]] = []
    for label, record in records:
        for name in record.get("rules_failed") or []:
            found: dict[str, Any] = next((c for c in record["checks"] if c.get("check") == name), {})
            fields.append(
                {
                    "subject": "conformance",
                    "name": f"{label} · conformance · {name}",
                    "message": f"{label}: conformance check {name} failed — {found.get('detail')} (measured "
                    f"{found.get('value')}, expected {found.get('expected')})",
                    "failed": True,
                    "assumption": "exact check (no false alarms)",
                    "claim": CLAIM,
                }
            )
    p_values = [
        (label, name, float(p)) for label, r in records for name, p in (r.get("statistical_p_values") or {}).items()
    ]
    n_rules = sum(1 for _, r in records for c in r["checks"] if c.get("p_value") is None)
    if p_values:
        label, name, smallest = min(p_values, key=lambda t: t[2])
        p = min(1.0, len(p_values) * smallest)
        fields.append(
            {
                "subject": "conformance",
                "name": "conformance · statistical checks",
                "message": f"conformance of every DP target's own Opacus setup: {len(p_values)} statistical "
                f"checks ({len(records)} targets), smallest p {smallest:.2g} ({label}, {name}); "
                f"combined p = {p:.2g} (Bonferroni); {n_rules} exact checks"
                + ("" if any(f.get("failed") for f in fields) else " all passed"),
                "p_value": p,
                "assumption": ASSUMPTION,
                "claim": CLAIM,
            }
        )
    return fields
