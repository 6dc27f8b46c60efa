"""Text targets in tables: one row per target ε (utility, best attack, exposure by repetitions,
extraction) and one row per (target ε, attack). Used by the console and the docs' tables
(`python -m reports.text_tables RESULTS.json` prints them as Markdown)."""

from __future__ import annotations

import json
import math
import sys
from typing import Any

from reports.federated_tables import markdown_table  # noqa: F401  (one Markdown table writer)


def _fmt(value: Any, digits: int = 2) -> str:
    if value is None:
        return "—"
    if isinstance(value, float) and math.isinf(value):
        return "∞"
    return f"{value:.{digits}f}" if isinstance(value, float) else str(value)


def text_targets(results: dict[str, Any]) -> list[dict[str, Any]]:
    return [t for t in results.get("targets", []) if t.get("kind") == "text"]


def per_epsilon_rows(results: dict[str, Any]) -> tuple[tuple[str, ...], list[tuple[str, ...]]]:
    targets = [t for t in text_targets(results) if "text" in t]  # the text job's targets (not a user's model)
    if not targets:
        return (), []
    reps = [e["repetitions"] for e in targets[0]["text"]["exposure"]]
    headers = (
        "target ε",
        "accountant ε",
        "test perplexity",
        "best AUC",
        "ε lower bound (one-run)",
        *[("exposure, controls" if r == 0 else f"exposure ×{r}") for r in reps],
        "canaries extracted (greedy / beam)",
        "phones / addresses extracted (members)",
    )
    rows = []
    for t in targets:
        text = t["text"]
        by_rep = {e["repetitions"]: e for e in text["exposure"]}
        inserted = [e for e in text["exposure"] if e["repetitions"]]
        n_inserted = sum(e["n_canaries"] for e in inserted)
        extraction = text["record_extraction"]
        rows.append(
            (
                "∞" if t["epsilon_target"] is None else f"{t['epsilon_target']:g}",
                _fmt(t["epsilon_accountant"]),
                _fmt(text["test_perplexity"], 1),
                _fmt(max(a["auc"] for a in t["attacks"]), 3),
                _fmt(t["epsilon_lb_best"]),
                *[_fmt(by_rep[r]["exposure_mean"], 1) for r in reps],
                f"{sum(e['greedy_extracted'] for e in inserted)} / "
                f"{sum(e['beam_extracted'] for e in inserted)} of {n_inserted}",
                f"{extraction['phone']['members_recovered']} / {extraction['address']['members_recovered']} "
                f"of {extraction['n_members']}",
            )
        )
    return headers, rows


def attack_rows(results: dict[str, Any]) -> tuple[tuple[str, ...], list[tuple[str, ...]]]:
    headers = ("target ε", "attack", "AUC (95 % CI)", "TPR @ 1 % FPR", "ε lower bound (one-run)")
    rows: list[tuple[str, ...]] = []
    for t in text_targets(results):
        for a in t["attacks"]:
            lo, hi = a["auc_ci"]
            rows.append(
                (
                    "∞" if t["epsilon_target"] is None else f"{t['epsilon_target']:g}",
                    a["name"],
                    f"{a['auc']:.3f} ({lo:.2f}–{hi:.2f})",
                    _fmt(a["tpr_at_fpr"]["0.01"], 3),
                    _fmt(a["epsilon_lb"]["one_run"]),
                )
            )
    return headers, rows


def _unit_words(results: dict[str, Any]) -> str:
    unit = (results.get("data") or {}).get("epsilon_unit")
    return unit or "ε per document (record level)"  # results written before the privacy unit was recorded


def text_html_section(results: dict[str, Any]) -> str:
    """report.html's per-ε table of the text job (empty for every other job)."""
    import html

    headers, rows = per_epsilon_rows(results)
    if not rows:
        return ""
    head = "".join(f"<th>{html.escape(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f'<td class="num">{html.escape(c)}</td>' for c in row) + "</tr>" for row in rows)
    ceiling = max((e["exposure_ceiling"] for t in text_targets(results) for e in t["text"]["exposure"]), default=None)
    return (
        '<section id="text-targets"><h2>Language-model targets per ε</h2>'
        f"<p>The DP targets' claim: <strong>{html.escape(_unit_words(results))}</strong>. Exposure in bits (Carlini "
        "et al. 2019): the mean over the canaries inserted that many times; the controls were never inserted (what "
        f"chance gives, about 1.44 bits); the ceiling is {_fmt(ceiling, 1)} bits (the secret is the model's first "
        "choice). Extraction: canaries completed exactly by greedy / beam search from their prefix, and members' "
        "phone numbers / addresses completed exactly from their record's prefix. Exposure and extraction are "
        "shown, not tested against the claim.</p>"
        f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></section>"
    )


def text_console_tables(results: dict[str, Any]) -> list:
    from rich.table import Table

    tables = []
    for title, (headers, rows) in (
        ("Text targets: utility, exposure (bits) and extraction per ε", per_epsilon_rows(results)),
        ("Text targets: membership attacks", attack_rows(results)),
    ):
        if not rows:
            continue
        table = Table(title=title)
        for header in headers:
            table.add_column(header)
        for row in rows:
            table.add_row(*row)
        tables.append(table)
    return tables


if __name__ == "__main__":
    with open(sys.argv[1], encoding="utf-8") as handle:
        loaded = json.loads(handle.read())
    print(markdown_table(*per_epsilon_rows(loaded)))
    print()
    print(markdown_table(*attack_rows(loaded)))
    blind = (loaded.get("text") or {}).get("blind_baseline")
    if blind:
        print(f"\nblind baseline AUC {blind['auc']:.3f} (p = {blind['p_value_above_chance']:.3f}): {blind['reading']}")
