"""The audit report as one self-contained HTML page a compliance reviewer can read, print and sign.

Self-contained: figures are inlined as base64 PNG, the CSS is inline, nothing is fetched (no
scripts, fonts, stylesheets or remote images), so the file can be archived or mailed as is.
Every string that comes from results (config names, attack and generator names, notes, paths)
goes through `html.escape`.

`render_html_report(results, run_dir)` uses the PNGs in `run_dir/figures` when present; without a
run folder (re-rendering from a results.json alone) it redraws what results.json suffices for
(empirical vs accountant ε, privacy-utility) with `reports.figures` and says which figures are
missing.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from attacks.registry import ATTACKS, citation, method_note
from audit.machinery.run_directory import write_text_atomic
from reports.federated_tables import federated_html_section
from reports.html_figures import _figures_section
from reports.html_format import _CSS, _pct, _text
from reports.html_provenance import _reproducibility, _signoff
from reports.html_tables import (
    _attack_details,
    _overview,
    _synthetic_section,
    _targets_table,
    _training_table,
)
from reports.html_verdict import (
    _ledger_section,
    _policy_checks,
    _policy_section,
    _verdict_banner,
    _verdict_checks_section,
)
from reports.results_access import attack_names as _attack_names
from reports.results_access import confidence as _confidence
from reports.results_access import get as _get
from reports.results_access import is_number as _is_number
from reports.synthetic_report import (
    is_synthetic_release,
    synthetic_method_notes,
    synthetic_overview,
)
from reports.text_tables import text_html_section

__all__ = ["render_html_report", "write_html_report"]

REPORT_FILENAME = "report.html"


# ---------------------------------------------------------------------------------------------
# Public API


def render_html_report(
    results: dict[str, Any], run_dir: Path | None = None, *, evaluation: Any = None, results_json: bytes | None = None
) -> str:
    """The report page for `results` (a results.json dict) as one HTML string.

    `run_dir`: the run folder whose `figures/` PNGs are inlined (None: redraw what results.json
    allows). `evaluation`: an `audit.machinery.policy.PolicyEvaluation` whose checks are listed; without it
    `results["policy_evaluation"]` (its `as_dict()`) is used when present. `results_json`: the bytes
    of the results.json written beside the page, whose SHA-256 it quotes (default: run_dir's file
    when it holds exactly these results).
    """
    run_dir = Path(run_dir) if run_dir is not None else None
    checks = _policy_checks(results, evaluation)
    name = _text(_get(results, "config", "name") or "audit")
    head = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>Privacy audit report: {name}</title>",
        f"<style>{_CSS}</style></head><body><main>",
        _header(results, run_dir),
    ]
    if is_synthetic_release(results):  # synth-check: no target, accountant or coin-flip candidates to speak of
        body = [
            _verdict_banner(results, checks),  # the one verdict, as every output shows it
            synthetic_overview(results),
            _policy_section(checks),
            _ledger_section(results),
            _verdict_checks_section(results),
            _synthetic_section(results),
            _figures_section(results, run_dir),
            _notes_section(results),
            synthetic_method_notes(results),
        ]
    else:
        body = [
            _verdict_banner(results, checks),
            _overview(results),
            _targets_table(results),
            federated_html_section(results),
            text_html_section(results),
            _policy_section(checks),
            _ledger_section(results),
            _verdict_checks_section(results),
            _synthetic_section(results),
            _figures_section(results, run_dir),
            _attack_details(results),
            _training_table(results),
            _notes_section(results),
            _method_notes(results),
        ]
    parts = [*head, *body, _reproducibility(results, run_dir, results_json), _signoff(), "</main></body></html>"]
    return "\n".join(part for part in parts if part) + "\n"


def write_html_report(
    results: dict[str, Any], run_dir: Path | None, *, evaluation: Any = None, out_dir: Path | None = None
) -> Path:
    """Render and write `report.html` atomically (temp file in the same folder, then os.replace).

    Figures come from `run_dir/figures`; the page goes to `out_dir` (default: `run_dir`).
    """
    run_dir = Path(run_dir) if run_dir is not None else None
    target_dir = Path(out_dir) if out_dir is not None else run_dir
    if target_dir is None:
        raise ValueError("write_html_report needs run_dir or out_dir to know where report.html goes")
    page = render_html_report(results, run_dir, evaluation=evaluation)
    path = target_dir / REPORT_FILENAME
    write_text_atomic(path, page)
    return path


# ---------------------------------------------------------------------------------------------
# Small helpers


# ---------------------------------------------------------------------------------------------
# Sections


def _header(results: dict[str, Any], run_dir: Path | None) -> str:
    name = _text(_get(results, "config", "name") or "audit")
    bits = [f"audit <strong>{name}</strong>"]
    if _get(results, "data", "description"):
        bits.append(_text(results["data"]["description"]))
    if run_dir is not None:
        # A run renders its report while still in its hidden staging folder: show the final name.
        folder_name = run_dir.name.removeprefix(".").removesuffix(".partial")
        bits.append(f"run folder <code>{_text(folder_name)}</code>")
    bits.append(f"rendered {datetime.now(UTC).strftime('%Y-%m-%d %H:%M UTC')}")
    return f'<header><h1>Privacy audit report</h1><p class="sub">{" · ".join(bits)}</p></header>'


# ---------------------------------------------------------------------------------------------
# Figures


# ---------------------------------------------------------------------------------------------
# Words


def _notes_section(results: dict[str, Any]) -> str:
    notes = [str(n) for n in results.get("notes") or []]
    if not notes:
        return ""
    return (
        '<section id="run-notes"><h2>Warnings and notes from the run</h2><ul>'
        + "".join(f"<li>{_text(n)}</li>" for n in notes)
        + "</ul></section>"
    )


def _method_notes(results: dict[str, Any]) -> str:
    confidence = _confidence(results)
    names = _attack_names(results)
    if results.get("synthetic") and "distance" not in names:
        names.append("distance")
    attack_items = []
    for name in names:
        title, text = method_note(name)  # the attack class's own note (attacks/registry.py)
        attack_items.append(f"<li><strong>{_text(name)}</strong>: {_text(title)}. {_text(text)}</li>")
    deltas = sorted({t.get("delta") for t in results.get("targets") or [] if _is_number(t.get("delta"))})
    delta_text = ", ".join(f"{d:g}" for d in deltas) or "as configured"
    pct = _pct(confidence)
    not_run = [n for n in ATTACKS if n not in names]  # every registered model attack
    not_run_text = ""
    if not_run:
        not_run_text = (
            "<p>Not run in this audit: "
            + ", ".join(f"{_text(n)} ({_text(citation(n))})" if citation(n) else _text(n) for n in not_run)
            + ". The bounds above hold for the attacks that were run; running more attacks can only raise "
            "the best lower bound, never lower it.</p>"
        )
    return f"""<section id="methods"><h2>Method notes</h2>
<h3>Attacks and their threat models</h3>
<ul>{"".join(attack_items) or "<li>No attack was run.</li>"}</ul>{not_run_text}
<h3>What an empirical ε lower bound proves, and what it does not</h3>
<p>A differentially private training procedure limits how well <em>any</em> attacker can tell whether a record
was in the training set. Turning an attack's measured true- and false-positive rates into an ε gives a
<strong>lower bound</strong>: with {pct} confidence, the procedure is <em>not</em> (ε, δ)-DP for any ε below it.
When that lower bound exceeds the accountant's ε (the claim is <strong>refuted</strong>), the privacy claim is
contradicted: the DP implementation, its accounting or its assumptions are broken.</p>
<p>The converse does not hold. <strong>A lower bound of 0 is not a proof of privacy</strong>: it says that
this attack, on these candidates, found no statistically significant evidence against the claim. Stronger
attacks, more candidates, or worst-case records (canaries) can give larger bounds, and the bound can never
exceed what the number of candidates allows (at 95 % with N trials per side, even a perfect attack gives at most
≈ 3.3 for N = 100 and ≈ 5.6 for N = 1000 with Clopper-Pearson). The accountant's ε is the upper bound that the
proof of DP-SGD provides; the gap between the two is not itself a measurement of leakage.</p>
<h3>Assumptions</h3>
<ul>
<li><strong>Membership by coin flip.</strong> Each audit candidate is in the training set by an independent fair
coin flip (Bernoulli ½), recorded with the seed. The one-run bound is valid only under this assumption; the
utility test set is never a candidate, shadow and reference models use a disjoint population pool.</li>
<li><strong>Poisson sampling.</strong> The accountants (PRV, RDP, GDP in Opacus and the PLD accountant of
dp_accounting) assume each step includes every record independently with probability q; the private targets
are trained that way (the table above says so per target).</li>
<li><strong>δ.</strong> All ε, accountant and empirical, are for the same δ = {_text(delta_text)}; a δ near or
above 1/n would permit releasing whole records.</li>
<li><strong>The threat model of each attack</strong> (above): a bound holds for the procedure as attacked, not
for attackers with more access.</li>
</ul>
<h3>Estimators and confidence</h3>
<ul>
<li><strong>Clopper-Pearson</strong> (Jagielski, Ullman, Oprea 2020; Nasr et al. 2021): one-sided
Clopper-Pearson upper bounds on FPR and FNR at one threshold, ε_LB = max{{ln((1 − δ − FNR̄)/FPR̄),
ln((1 − δ − FPR̄)/FNR̄)}}, floored at 0. The threshold and its direction are chosen on a random half of the
candidates and the bound is computed on the other half only, so the choice does not inflate the bound.</li>
<li><strong>One run</strong> (Steinke, Nasr, Jagielski 2023, arXiv 2305.08846): guesses “in” for the top and
“out” for the bottom scores among the coin-flip candidates; the number of correct guesses bounds ε. Several
guess counts are tried, with a Bonferroni correction over them.</li>
<li><strong>AUC</strong> with a DeLong confidence interval; <strong>TPR at FPR</strong> 0.1 %, 1 %, 10 %
(Carlini et al. 2022: judge attacks at low FPR, read ROC curves on log-log axes); membership
<strong>advantage</strong> max(TPR − FPR) with its bound under DP (Yeom et al. 2018).</li>
<li>Confidence level: {pct}, one-sided for every lower bound. A verdict uses only the sound bounds above.</li>
<li><strong>GDP estimate</strong> (Nasr et al. 2023; Dong, Roth, Su 2019): ε computed from a Gaussian-DP μ fitted
to the attack's error rates. It <em>assumes</em> the mechanism's trade-off curve is Gaussian, so it is an
estimate, not a lower bound, and it never decides a verdict.</li>
</ul>
</section>"""
