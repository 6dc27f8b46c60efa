"""The terminal view of an audit: one rich table row per target."""
from __future__ import annotations

import math
from typing import Any

from rich.table import Table


def _fmt(value: float | None, digits: int = 3) -> str:
    if value is None:
        return "—"
    if isinstance(value, float) and math.isinf(value):
        return "∞"
    return f"{value:.{digits}f}"


def results_summary_table(results: dict[str, Any]) -> Table:
    accountant = results["config"].get("privacy", {}).get("accountant", "claimed")
    table = Table(title=f"privacy-audit: {results['config']['name']}", show_lines=False)
    for header in ("ε target", f"{accountant} ε", "PLD ε", "test acc", "attack", "AUC (95% CI)",
                   "TPR@0.1%", "TPR@1%", "ε LB (CP)", "ε LB (1-run)", "violation"):
        table.add_column(header, justify="right")
    for target in results["targets"]:
        eps_target = target["epsilon_target"]
        for i, attack in enumerate(target["attacks"]):
            first = i == 0
            lo, hi = attack["auc_ci"]
            table.add_row(
                ("∞" if eps_target is None else f"{eps_target:g}") if first else "",
                _fmt(target["epsilon"].get(accountant, target.get("epsilon_accountant"))) if first else "",
                _fmt(target["epsilon"].get("pld")) if first else "",
                _fmt(target["test_accuracy"]) if first else "",
                attack["name"],
                f"{attack['auc']:.3f} ({lo:.2f}–{hi:.2f})",
                _fmt(attack["tpr_at_fpr"]["0.001"], 4),
                _fmt(attack["tpr_at_fpr"]["0.01"], 4),
                _fmt(attack["epsilon_lb"]["clopper_pearson"], 2),
                _fmt(attack["epsilon_lb"]["one_run"], 2),
                ("[red]YES[/red]" if target["violation"] else "no") if first else "",
            )
    return table


def synthetic_summary_table(results: dict[str, Any]) -> Table | None:
    """One row per checked synthetic release, or None when the run had no synthetic part."""
    if not results.get("synthetic"):
        return None
    table = Table(title="synthetic data")
    for header in ("generator", "ε", "DCR share (CI)", "NNDR p10", "distance-MIA AUC", "ε LB (CP)", "flags"):
        table.add_column(header, justify="right")
    for entry in results["synthetic"]:
        lo, hi = entry["dcr"].get("dcr_share_ci", [None, None])
        eps = entry.get("epsilon_target")
        table.add_row(
            entry["generator"], "∞" if eps is None else f"{eps:g}",
            f"{entry['dcr']['dcr_share']:.3f} ({_fmt(lo, 2)}–{_fmt(hi, 2)})", _fmt(entry["nndr"]["p10"]),
            _fmt(entry["mia"]["auc"]), _fmt(entry["mia"]["epsilon_lb"]["clopper_pearson"], 2),
            ", ".join(flag["check"] for flag in entry["flags"]) or "none",
        )
    return table
