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
