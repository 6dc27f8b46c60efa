"""The parts of report.html that differ for a synthetic-data release checked on its own (`synth-check`).

The model template spoke of an accountant, "0 of 0 targets", coin-flip candidates and Poisson
sampling, none of which a user's synthetic table has. These sections say what was checked instead:
the three tables, the claim (if any), the distance checks and what a flag means.
"""

from __future__ import annotations

import html
import math
from typing import Any

from reports.results_access import get, is_number


def is_synthetic_release(results: dict[str, Any]) -> bool:
    """A results dict of synthetic releases only (no trained target): `synth-check`'s."""
    return not results.get("targets") and bool(results.get("synthetic"))


def _text(value: Any) -> str:
    return html.escape("" if value is None else str(value), quote=True)


def _number(value: Any, digits: int = 3) -> str:
    if not is_number(value):
        return "—"
    if math.isinf(value):
        return "∞"
    return f"{value:.{digits}f}" if isinstance(value, float) else str(value)


def claimed_epsilon_text(entry: dict[str, Any]) -> str:
    """A user's release has no ε unless one is claimed: 'none claimed', never 'ε = ∞'."""
    epsilon = entry.get("epsilon_target")
    if is_number(epsilon):
        return f"{epsilon:g}"
    return "none claimed" if str(entry.get("generator", "")).startswith("user-supplied") else "∞ (no DP)"


def synthetic_overview(results: dict[str, Any]) -> str:
    config = results.get("config") or {}
    entries = [e for e in results.get("synthetic") or [] if isinstance(e, dict)]
    first = entries[0] if entries else {}
    rows = [
        ("Check", "synthetic-data release (synth-check)"),
        ("Training table", f"<code>{_text(config.get('train'))}</code>, {_number(get(first, 'dcr', 'n_train'))} rows"),
        (
            "Holdout table",
            f"<code>{_text(config.get('holdout'))}</code>, "
            f"{_number(get(first, 'dcr', 'n_holdout'))} rows (same population, never seen by the generator)",
        ),
        (
            "Synthetic release",
            f"<code>{_text(config.get('synthetic'))}</code>, {_number(get(first, 'dcr', 'n_synthetic'))} rows",
        ),
        (
            "Claimed ε",
            _text(claimed_epsilon_text(first))
            + (
                f", δ {config['delta']:g}"
                if is_number(config.get("delta")) and is_number(first.get("epsilon_target"))
                else ""
            ),
        ),
        (
            "Train / holdout split",
            "by fair coin per row (declared: enables the one-run bound)"
            if config.get("membership_randomized")
            else "not declared random: only the Clopper-Pearson bound is computed",
        ),
        (
            "Confidence",
            f"{get(first, 'dcr', 'confidence', default=0.95):.0%}"
            if is_number(get(first, "dcr", "confidence", default=0.95))
            else "—",
        ),
    ]
    if config.get("target_column"):
        rows.append(("Utility (TSTR) column", f"<code>{_text(config['target_column'])}</code>"))
    body = "".join(f"<dt>{key}</dt><dd>{value}</dd>" for key, value in rows)
    return f'<section id="overview"><h2>Overview</h2><dl class="facts">{body}</dl></section>'


def synthetic_method_notes(results: dict[str, Any]) -> str:
    return """<section id="methods"><h2>Method notes</h2>
<ul>
<li><strong>DCR share</strong>: for each synthetic row, its distance to the closest training row and to the closest
holdout row (holdout as large as train); the share strictly closer to train is about 0.5 for a generator that does
not memorise, well above 0.5 when synthetic rows sit on training rows. The interval is a binomial confidence
interval; an exact match is distance 0 after encoding.</li>
<li><strong>NNDR</strong>: distance to the nearest training row over the distance to the second nearest; values near
0 are near-copies of one training record.</li>
<li><strong>Distance membership inference</strong>: an attacker who sees only the release scores each train and holdout
record by minus its distance to the nearest synthetic row. AUC 0.5 = chance. Its Clopper-Pearson ε lower bound
chooses the threshold on one half of the records and bounds the error rates on the other half; treating records as
independent trials of one release is an assumption, not a theorem (the one-run bound, which is proven here,
needs a train/holdout split by fair coin).</li>
<li>A release passes when no check flags it. A claimed ε is contradicted when a sound lower bound exceeds it.</li>
</ul></section>"""
