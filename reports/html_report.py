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

from datetime import datetime, timezone
from pathlib import Path
from typing import Any

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

__all__ = ["render_html_report", "write_html_report", "ATTACK_METHOD_NOTES"]

REPORT_FILENAME = "report.html"

# Threat model and source of each attack, in plain words (keys are attack registry names).
ATTACK_METHOD_NOTES: dict[str, tuple[str, str]] = {
    "loss": (
        "Loss threshold (black box)",
        "The attacker can query the trained model and knows each candidate record with its label. It scores "
        "a candidate by minus the model's loss on it: training records tend to have lower loss, and a "
        "threshold on the loss separates members from non-members. No reference models, no knowledge of "
        "the training algorithm. Yeom, Giacomelli, Fredrikson, Jha 2018, \u201cPrivacy Risk in Machine "
        "Learning: Analyzing the Connection to Overfitting\u201d (arXiv 1709.01604).",
    ),
    "shadow": (
        "Shadow models (black box, knows the data distribution)",
        "The attacker draws data from the same population (here: the disjoint pool, never the candidates), "
        "trains shadow models that imitate the target, and fits an attack classifier on the shadow models' "
        "outputs for their own members and non-members; that classifier then scores the candidates on the "
        "target's outputs. Shokri, Stronati, Song, Shmatikov 2017, \u201cMembership Inference Attacks "
        "against Machine Learning Models\u201d (arXiv 1610.05820).",
    ),
    "lira": (
        "Likelihood-ratio attack, LiRA (black box, knows the training recipe)",
        "The attacker trains reference models on population data with and without each candidate, fits "
        "Gaussians to the candidate's scaled confidence under both, and scores the target's confidence by "
        "the likelihood ratio (the offline variant uses only models without the candidate). Strongest at "
        "low false-positive rates; costly. Carlini, Chien, Nasr, Song, Terzis, Tram\u00e8r 2022, "
        "\u201cMembership Inference Attacks From First Principles\u201d (arXiv 2112.03199).",
    ),
    "lira_offline": (
        "Likelihood-ratio attack, offline LiRA (black box, knows the training recipe)",
        "As LiRA, but the reference models are trained only on population data without the candidates, so they "
        "can be trained once before the target exists; the candidate's confidence is compared with the "
        "non-member Gaussian alone. Carlini, Chien, Nasr, Song, Terzis, Tram\u00e8r 2022, \u201cMembership "
        "Inference Attacks From First Principles\u201d (arXiv 2112.03199), offline variant.",
    ),
    "rmia": (
        "Relative membership inference, RMIA (black box, knows the training recipe)",
        "The attacker compares the likelihood ratio of the candidate under the target and reference models "
        "with the same ratio for many population records: a member stands out against the population. "
        "Strong with few reference models. Zarifzadeh, Liu, Mahloujifar, Shokri 2024, \u201cLow-Cost "
        "High-Power Membership Inference Attacks\u201d (arXiv 2312.03262).",
    ),
    "distance": (
        "Distance to the synthetic data (sees only the released synthetic table)",
        "The attacker sees only the released synthetic rows (no generator, no parameters) and scores each "
        "candidate record by minus its distance to the nearest synthetic row: a generator that memorises "
        "puts synthetic rows close to its training rows. Chen, Yu, Zhang, Fritz 2020, \u201cGAN-Leaks: A "
        "Taxonomy of Membership Inference Attacks against Generative Models\u201d (arXiv 1909.03935).",
    ),
}


# ---------------------------------------------------------------------------------------------
# Public API


def render_html_report(results: dict[str, Any], run_dir: Path | None = None, *, evaluation: Any = None,
                       results_json: bytes | None = None) -> str:
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
    bits.append(f"rendered {datetime.now(timezone.utc).strftime('%Y-%m-%d %H:%M UTC')}")
    return (
        "<header><h1>Privacy audit report</h1>"
        f'<p class="sub">{" · ".join(bits)}</p></header>'
    )


# ---------------------------------------------------------------------------------------------
# Figures


# ---------------------------------------------------------------------------------------------
# Words


def _notes_section(results: dict[str, Any]) -> str:
    notes = [str(n) for n in results.get("notes") or []]
    if not notes:
        return ""
    return ('<section id="run-notes"><h2>Warnings and notes from the run</h2><ul>'
            + "".join(f"<li>{_text(n)}</li>" for n in notes) + "</ul></section>")


def _method_notes(results: dict[str, Any]) -> str:
    confidence = _confidence(results)
    names = _attack_names(results)
    if results.get("synthetic") and "distance" not in names:
        names.append("distance")
    attack_items = []
    for name in names:
        title, text = ATTACK_METHOD_NOTES.get(name, (name, "No method note is recorded for this attack name."))
        attack_items.append(f"<li><strong>{_text(name)}</strong>: {_text(title)}. {_text(text)}</li>")
    deltas = sorted({t.get("delta") for t in results.get("targets") or [] if _is_number(t.get("delta"))})
    delta_text = ", ".join(f"{d:g}" for d in deltas) or "as configured"
    pct = _pct(confidence)
    not_run = [n for n in ("loss", "shadow", "lira", "rmia") if n not in names]
    not_run_text = ""
    if not_run:
        cited = {"loss": "Yeom et al. 2018", "shadow": "Shokri et al. 2017", "lira": "Carlini et al. 2022",
                 "rmia": "Zarifzadeh et al. 2024"}
        not_run_text = ("<p>Not run in this audit: " + ", ".join(f"{n} ({cited[n]})" for n in not_run)
                        + ". The bounds above hold for the attacks that were run; running more attacks can only raise "
                        "the best lower bound, never lower it.</p>")
    return f"""<section id="methods"><h2>Method notes</h2>
<h3>Attacks and their threat models</h3>
<ul>{''.join(attack_items) or '<li>No attack was run.</li>'}</ul>{not_run_text}
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


