"""A one-page, self-contained HTML report for the single-claim audits: canary, mechanism, accountant.

What a reviewer signs: the claim, the measured lower bound (or the accountant's labels), the verdict,
the method in plain words, and every number of the JSON result underneath.
"""
from __future__ import annotations

import html
import json
from pathlib import Path
from typing import Any

from audit.machinery.run_directory import write_text_atomic

METHODS = {
    "canary-audit": (
        "Canary audit of training code. The user's training function is run many times with and "
        "without a canary record (or, in one-run mode, once with canaries included by fair coin flips); "
        "the canary's score separates the two worlds. The threshold is chosen on one half of the runs and "
        "a Clopper-Pearson bound on the error rates of the other half gives an ε lower bound at the stated "
        "confidence (Jagielski et al. 2020; Nasr et al. 2021/2023; Steinke et al. 2023 for one run). A "
        "bound above the claimed ε proves the implementation does not meet its claim; a bound below it "
        "proves nothing."
    ),
    "mechanism-audit": (
        "Black-box audit of a randomized function: it is run N times on each of two neighbouring "
        "datasets; a threshold on its output chosen on half of the trials, a Clopper-Pearson bound on "
        "the other half gives an ε lower bound. A bound above the claimed ε is a violation."
    ),
    "accountant-check": (
        "Numeric cross-check of an accountant on a grid of DP-SGD parameters against dp_accounting's "
        "PLD accountant (optimistic and pessimistic estimates bracket the true ε of the Poisson-"
        "subsampled Gaussian mechanism). unsound = below the optimistic value; loose = above the "
        "pessimistic value by more than the margin."
    ),
}
STYLE = """body{font-family:system-ui,sans-serif;max-width:960px;margin:2em auto;color:#222;line-height:1.45}
.banner{padding:1em 1.4em;border-radius:6px;margin:1em 0;font-size:1.1em}
.fail{background:#fde8e8;border:2px solid #b91c1c}.pass{background:#e8f6ec;border:2px solid #15803d}
table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:.3em .7em;text-align:left}
pre{background:#f5f5f5;padding:1em;overflow:auto;font-size:.85em}"""


def _text(value: Any) -> str:
    return html.escape("" if value is None else str(value), quote=True)


def render_audit_report(kind: str, result: dict[str, Any]) -> str:
    failed = bool(result.get("violation")) or result.get("passed") is False
    verdict = "FAIL" if failed else "PASS"
    if kind == "accountant-check":
        detail = f"point counts: {_text(result.get('counts'))}"
    else:
        detail = (f"empirical ε lower bound {_text(result.get('epsilon_lower_bound'))} at "
                  f"{_text(result.get('confidence'))} confidence; claimed ε {_text(result.get('claimed_epsilon'))}, "
                  f"δ {_text(result.get('delta'))}")
    subject = result.get("trainer") or result.get("mechanism") or result.get("accountant") or ""
    rows = "".join(
        f"<tr><th>{_text(key)}</th><td>{_text(value)}</td></tr>"
        for key, value in result.items()
        if not isinstance(value, (dict, list))
    )
    return (
        f"<!doctype html><html><head><meta charset='utf-8'><title>privacy-audit {kind}</title>"
        f"<style>{STYLE}</style></head><body><h1>privacy-audit: {_text(kind)}</h1>"
        f"<p>{_text(subject)}</p>"
        f"<div class='banner {'fail' if failed else 'pass'}'><b>{verdict}</b> — {detail}</div>"
        f"<h2>Method</h2><p>{_text(METHODS.get(kind, ''))}</p>"
        f"<h2>Numbers</h2><table>{rows}</table>"
        f"<h2>Full result (JSON)</h2><pre>{_text(json.dumps(result, indent=2, allow_nan=False))}</pre>"
        "</body></html>\n"
    )


def write_audit_report(kind: str, result: dict[str, Any], folder: Path) -> Path:
    path = Path(folder) / "report.html"
    write_text_atomic(path, render_audit_report(kind, result))
    return path
