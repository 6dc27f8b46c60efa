"""Escaping, number formatting and the inline CSS that every section of the HTML report uses.

Every string that comes from results goes through `_text` (`html.escape`).
"""

from __future__ import annotations

import html
import math
from typing import Any

from reports.results_access import get as _get
from reports.results_access import is_number as _is_number

_ESTIMATOR_NAMES = {"clopper_pearson": "Clopper-Pearson", "one_run": "one run"}


_CSS = """
:root { --ink: #1f2328; --muted: #59636e; --rule: #d0d7de; --head: #f3f5f7;
        --pass: #1a7f37; --pass-bg: #dafbe1; --fail: #b3261e; --fail-bg: #ffebe9;
        --none: #6e5a00; --none-bg: #fff8c5; }
* { box-sizing: border-box; }
html { -webkit-print-color-adjust: exact; print-color-adjust: exact; }
body { margin: 0; color: var(--ink); background: #fff; font: 14px/1.5 system-ui, -apple-system, "Segoe UI",
       "DejaVu Sans", "Liberation Sans", Arial, sans-serif; }
main { max-width: 1180px; margin: 0 auto; padding: 24px 28px 48px; }
h1 { font-size: 24px; margin: 0 0 2px; }
h2 { font-size: 18px; margin: 30px 0 8px; padding-bottom: 4px; border-bottom: 2px solid var(--rule); }
h3 { font-size: 15px; margin: 18px 0 6px; }
p, li { max-width: 75em; }
.sub { color: var(--muted); margin: 0 0 16px; }
.verdict { border: 2px solid; border-radius: 6px; padding: 12px 18px; margin: 8px 0 18px;
           display: flex; gap: 22px; align-items: flex-start; }
.verdict .word { font-size: 30px; font-weight: 800; letter-spacing: .04em; line-height: 1.1; white-space: nowrap; }
.verdict p { margin: 2px 0; }
.verdict ul { margin: 6px 0 0; padding-left: 20px; }
.verdict.pass { color: var(--pass); background: var(--pass-bg); border-color: var(--pass); }
.verdict.fail { color: var(--fail); background: var(--fail-bg); border-color: var(--fail); }
.verdict.none { color: var(--none); background: var(--none-bg); border-color: #d4a72c; }
.verdict .detail { color: var(--ink); }
dl.facts { display: grid; grid-template-columns: max-content 1fr; gap: 3px 18px; margin: 0; }
dl.facts dt { color: var(--muted); }
dl.facts dd { margin: 0; }
table { border-collapse: collapse; width: 100%; margin: 6px 0 4px; font-variant-numeric: tabular-nums; }
th, td { border: 1px solid var(--rule); padding: 4px 8px; vertical-align: top; }
th { background: var(--head); text-align: left; font-weight: 600; }
td.num, th.num { text-align: right; white-space: nowrap; }
td small, th small { color: var(--muted); font-weight: normal; }
tbody tr:nth-child(even) td { background: #fafbfc; }
table.inner { width: auto; margin: 0; }
table.inner td { border: 0; padding: 0 10px 0 0; background: transparent !important; }
.badge { display: inline-block; border-radius: 3px; padding: 0 6px; font-weight: 700; font-size: 12px; }
.badge.fail { color: #fff; background: var(--fail); }
.badge.pass { color: #fff; background: var(--pass); }
.badge.na { color: var(--ink); background: #e6e8eb; }
.caption, .note { color: var(--muted); font-size: 12.5px; margin: 2px 0 8px; }
.figures { display: grid; grid-template-columns: repeat(2, minmax(0, 1fr)); gap: 14px; }
.figures.cols3 { grid-template-columns: repeat(3, minmax(0, 1fr)); }
.figures.cols1 { grid-template-columns: minmax(0, 1fr); }
th:first-child { white-space: nowrap; }
/* Eleven numeric columns: headers wrap and intervals go under their value so the table fits the page. */
#attacks table { font-size: 13px; }
#attacks th.num { white-space: normal; }
/* A wide table scrolls inside its own box instead of pushing the page past a 1280 px window. */
.scroll { overflow-x: auto; max-width: 100%; }
td { overflow-wrap: anywhere; }
details > summary { cursor: pointer; color: var(--muted); margin: 6px 0; }
figure { margin: 0; border: 1px solid var(--rule); border-radius: 4px; padding: 8px; break-inside: avoid; }
figure img { display: block; max-width: 100%; height: auto; margin: 0 auto; }
figcaption { font-size: 12.5px; color: var(--muted); margin-top: 4px; }
pre { background: #f6f8fa; border: 1px solid var(--rule); border-radius: 4px; padding: 10px; overflow-x: auto;
      font-size: 12.5px; white-space: pre-wrap; word-break: break-word; }
code { font-family: ui-monospace, "DejaVu Sans Mono", "Liberation Mono", monospace; font-size: 12.5px; }
.signoff { display: grid; grid-template-columns: repeat(2, minmax(0, 1fr)); gap: 26px 40px; margin-top: 14px; }
.signoff div { border-bottom: 1px solid var(--ink); height: 40px; position: relative; }
.signoff span { position: absolute; bottom: -20px; left: 0; font-size: 12px; color: var(--muted); }
footer { margin-top: 46px; color: var(--muted); font-size: 12px; }
@page { size: A4; margin: 12mm; }
@media print {
  body { font-size: 10.5pt; }
  main { max-width: none; padding: 0; }
  h2 { break-after: avoid; }
  table, figure, .verdict, .signoff { break-inside: avoid; }
}
"""


def _text(value: Any) -> str:
    return html.escape("" if value is None else str(value), quote=True)


def _num(value: Any, digits: int = 3) -> str:
    if value is None or not _is_number(value):
        return "—" if value is None else _text(value)
    if math.isnan(value):
        return "n/a"
    if math.isinf(value):
        return "∞"
    if isinstance(value, int):
        return str(value)
    return f"{value:.{digits}f}"


def _eps(value: Any) -> str:
    if value is None or (_is_number(value) and math.isinf(value)) or value == "inf":
        return "∞"
    return f"{value:g}" if _is_number(value) else _text(value)


def _ci(interval: Any, digits: int = 3) -> str:
    if isinstance(interval, (list, tuple)) and len(interval) == 2:
        return f"{_num(interval[0], digits)}–{_num(interval[1], digits)}"
    return "—"


def _pct(value: float | None) -> str:
    return "—" if value is None else f"{100 * value:g} %"


def _method_text(method: Any) -> str:
    """'loss/clopper_pearson' → 'loss, Clopper-Pearson'."""
    if not method:
        return ""
    attack, _, estimator = str(method).partition("/")
    return f"{attack}, {_ESTIMATOR_NAMES.get(estimator, estimator)}" if estimator else str(method)


def _accountant(results: dict[str, Any]) -> str | None:
    value = _get(results, "config", "privacy", "accountant")
    if value:
        return str(value)
    for target in results.get("targets") or []:
        if target.get("accountant"):
            return str(target["accountant"])
    return None
