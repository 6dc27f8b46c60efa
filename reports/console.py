"""The terminal view of an audit: one block per target (a header line, then one row per attack).

Laid out for an 80-column terminal: a single wide table of every target × attack needed ~130
columns, and rich cut every value to `0.9…` in a normal terminal. Per-target facts (ε, accuracy,
the claim's status: held / not refuted / refuted / untestable here, or the leakage statement) go in
the block's header line, so the table keeps only the per-attack numbers.
"""

from __future__ import annotations

import math
from typing import Any

from rich import box
from rich.console import Group
from rich.table import Table
from rich.text import Text

from audit.errors import escape_controls
from reports.results_access import finetuning_label, get, is_number, subject_status, tpr_at
from reports.synthetic_report import claimed_epsilon_text


def _line(text: str = "", **kwargs) -> Text:
    """A console line as rich Text, control characters escaped: it may quote a generator, file or
    column name (Text bypasses the console's own escaping of strings)."""
    return Text(escape_controls(text), **kwargs)


# Every column may fold (wrap inside a word) but never truncate: a cut number is a wrong number.
_ATTACK_COLUMNS = ("attack", "AUC (95% CI)", "TPR@0.1%", "TPR@1%", "ε LB CP", "ε LB 1-run")


def _fmt(value: Any, digits: int = 3) -> str:
    if not is_number(value):
        return "—"
    if math.isinf(value):
        return "∞"
    return f"{value:.{digits}f}"


def _epsilon(value: Any) -> str:
    return "∞" if value is None or (is_number(value) and math.isinf(value)) else f"{value:g}"


def _target_header(target: dict[str, Any], accountant: str, status: str) -> Text:
    claimed = get(target, "epsilon", accountant, default=target.get("epsilon_accountant"))
    parts = [f"ε target {_epsilon(target.get('epsilon_target'))}"]
    finetuning = finetuning_label(target)
    if finetuning:  # the llm job fine-tunes each ε twice: say which block is which
        parts.append(f"{finetuning} fine-tuning")
    if target.get("epsilon_target") is not None or is_number(claimed):
        parts.append(f"{accountant} ε {_fmt(claimed)}")
        parts.append(f"PLD ε {_fmt(get(target, 'epsilon', 'pld'))}")
    if is_number(target.get("test_accuracy")):
        twin = target.get("whitebox_one_run")
        with_canaries = twin.get("test_accuracy_with_canaries") if isinstance(twin, dict) else None
        # The twin trained with canaries (white-box one-run): its accuracy beside the released model's.
        parts.append(
            f"test acc {_fmt(target['test_accuracy'])}"
            + (f" ({_fmt(with_canaries)} with canaries)" if is_number(with_canaries) else "")
        )
    header = _line(" · ".join(parts), style="bold")
    header.append(" · ")
    style = {
        "refuted": "bold red",
        "held": "green",
        "untestable here": "yellow",
        "not refuted": "yellow",
        "no DP claim · LEAKS": "bold red",
    }.get(status, "")
    header.append(status if status != "—" else "no claim tested", style=style)
    return header


def _is_canary_clients(twin: dict[str, Any]) -> bool:
    """The federated job's row family "canary clients (one-run)" (a twin federation), not a gradient-canary twin."""
    return str(twin.get("family") or "").startswith("canary clients")


def _twin_line(twin: dict[str, Any]) -> str:
    p = twin.get("p_value")
    what = (
        f"canary clients 1-run: a twin federation with {twin.get('m')} canary clients (random directions), "
        "scored over every round"
        if _is_canary_clients(twin)
        else f"{twin.get('family')}: {twin.get('m')} canaries, scored on {twin.get('observe')}"
        if str(twin.get("family") or "").startswith("black-box")
        else f"white-box 1-run: a twin with {twin.get('m')} {twin.get('kind')} canaries, scored at every iterate"
    )
    return (
        f"{what}; f-DP "
        f"test {'refutes' if twin.get('fdp_refuted') else 'does not refute'} the claim's curve"
        + (f" (p {p:.2g})" if is_number(p) else "")
        + f"; estimates, not bounds: Gaussian sum ε ≈ {_fmt(twin.get('gaussian_sum_epsilon'), 2)}, "
        f"Andrew et al. ε ≈ {_fmt(twin.get('andrew_epsilon'), 2)}"
    )


def _attack_table() -> Table:
    table = Table(box=box.SIMPLE_HEAD, pad_edge=False, show_edge=False, padding=(0, 1))
    for header in _ATTACK_COLUMNS:
        table.add_column(header, justify="left" if header == "attack" else "right", overflow="fold")
    return table


def results_summary_table(results: dict[str, Any]) -> Group:
    """The audit's numbers for the console: per target a header line and a table of its attacks."""
    accountant = get(results, "config", "privacy", "accountant", default="claimed")
    blocks: list[Any] = [_line(f"privacy-audit: {get(results, 'config', 'name', default='')}", style="bold underline")]
    found_verdict = results.get("verdict")
    verdict: dict[str, Any] = found_verdict if isinstance(found_verdict, dict) else {}
    for index, target in enumerate(results.get("targets") or []):
        table = _attack_table()
        for attack in target.get("attacks") or []:
            lo, hi = (attack.get("auc_ci") or [None, None])[:2]
            table.add_row(
                str(attack.get("name")),
                f"{_fmt(attack.get('auc'))} ({_fmt(lo, 2)}–{_fmt(hi, 2)})",
                _fmt(tpr_at(attack, 0.001), 4),
                _fmt(tpr_at(attack, 0.01), 4),
                _fmt(get(attack, "epsilon_lb", "clopper_pearson"), 2),
                _fmt(get(attack, "epsilon_lb", "one_run"), 2),
            )
        twin = target.get("whitebox_one_run")
        if isinstance(twin, dict):  # row family "white-box one-run": a twin with canaries, every iterate
            table.add_row(
                "canary clients 1-run"
                if _is_canary_clients(twin)
                else f"{twin.get('kind')} 1-run (f-DP)"
                if str(twin.get("family") or "").startswith("black-box")
                else "white-box 1-run",
                "—",
                "—",
                "—",
                "—",
                _fmt(twin.get("steinke_epsilon"), 2),
            )
        blocks += [_line(""), _target_header(target, accountant, subject_status(verdict, f"targets[{index}]")), table]
        if isinstance(twin, dict):
            blocks.append(_line(_twin_line(twin), style="dim"))
    return Group(*blocks)


def synthetic_summary_table(results: dict[str, Any]) -> Group | None:
    """One block per checked synthetic release, or None when the run had no synthetic part."""
    if not results.get("synthetic"):
        return None
    blocks: list[Any] = [_line("synthetic data", style="bold underline")]
    for entry in results["synthetic"]:
        flags = ", ".join(str(flag.get("check")) for flag in entry.get("flags") or []) or "none"
        header = _line(f"{entry.get('generator')} · ε {claimed_epsilon_text(entry)} · flags: ", style="bold")
        header.append(flags, style="bold red" if entry.get("flags") else "green")
        table = Table(box=box.SIMPLE_HEAD, pad_edge=False, show_edge=False, padding=(0, 1))
        for column in ("DCR share (95% CI)", "NNDR p10", "distance-MIA AUC", "ε LB CP"):
            table.add_column(column, justify="right", overflow="fold")
        lo, hi = (get(entry, "dcr", "dcr_share_ci") or [None, None])[:2]
        table.add_row(
            f"{_fmt(get(entry, 'dcr', 'dcr_share'))} ({_fmt(lo, 2)}–{_fmt(hi, 2)})",
            _fmt(get(entry, "nndr", "p10")),
            _fmt(get(entry, "mia", "auc")),
            _fmt(get(entry, "mia", "epsilon_lb", "clopper_pearson"), 2),
        )
        blocks += [_line(""), header, table]
    return Group(*blocks)


def _risk_cell(risk: dict[str, Any] | None) -> str:
    if not isinstance(risk, dict) or not is_number(risk.get("value")):
        return "—"
    low, high = (risk.get("ci") or [None, None])[:2]
    return f"{_fmt(risk['value'], 2)} ({_fmt(low, 2)}–{_fmt(high, 2)}){' !' if risk.get('flagged') else ''}"


def synthetic_risks_table(results: dict[str, Any]) -> Group | None:
    """Re-identification risks per synthetic release (Giomi et al. 2022), or None when none were measured."""
    entries = [e for e in results.get("synthetic") or [] if isinstance(e, dict) and isinstance(e.get("risks"), dict)]
    if not entries:
        return None
    blocks: list[Any] = [
        _line("synthetic data: re-identification risks vs the holdout (! = flagged)", style="bold underline")
    ]
    for entry in entries:
        risks = entry["risks"]
        inference = [r for r in risks.get("inference") or [] if isinstance(r, dict) and is_number(r.get("value"))]
        worst = max(inference, key=lambda r: r["value"], default=None)
        header = _line(
            f"{entry.get('generator')} · ε {claimed_epsilon_text(entry)}"
            + (f" · worst inferred column: {worst.get('secret')}" if worst else ""),
            style="bold",
        )
        table = Table(box=box.SIMPLE_HEAD, pad_edge=False, show_edge=False, padding=(0, 1))
        for column in ("singling out", "linkability", "inference", "DCR vs random"):
            table.add_column(column, justify="right", overflow="fold")
        table.add_row(
            _risk_cell(risks.get("singling_out")),
            _risk_cell(risks.get("linkability")),
            _risk_cell(worst),
            _fmt(get(risks, "dcr_baseline_protection", "score"), 2),
        )
        blocks += [_line(""), header, table]
    return Group(*blocks)
