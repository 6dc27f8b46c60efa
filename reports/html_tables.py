"""The HTML report's tables: the overview, one row per target, each attack's details, the training setup and
the synthetic-data checks.
"""

from __future__ import annotations

from typing import Any

from audit.machinery.verdict_words import counts_line
from reports.html_format import (
    _ESTIMATOR_NAMES,
    _accountant,
    _ci,
    _eps,
    _method_text,
    _num,
    _pct,
    _text,
)
from reports.results_access import attack_names as _attack_names
from reports.results_access import confidence as _confidence
from reports.results_access import finetuning_label, subject_status
from reports.results_access import get as _get
from reports.results_access import is_number as _is_number
from reports.results_access import tpr_at as _tpr
from reports.synthetic_report import claimed_epsilon_text


def _overview(results: dict[str, Any]) -> str:
    data = results.get("data") or {}
    targets = results.get("targets") or []
    confidence = _confidence(results)
    deltas = sorted({t.get("delta") for t in targets if _is_number(t.get("delta"))})
    delta = deltas or (
        [_get(results, "config", "privacy", "delta")] if _get(results, "config", "privacy", "delta") else []
    )
    rows = [
        ("Audit name", _text(_get(results, "config", "name"))),
        ("Data", _text(data.get("description")) or "—"),
    ]
    if data.get("n_rows") is not None:
        rows.append(("Rows", _split_counts(data)))
    elif data.get("n_candidates") is not None:
        rows.append(("Candidates", _num(data["n_candidates"])))
    if data.get("membership"):
        rows.append(("Candidate membership", _text(data["membership"])))
    rows += [
        ("Targets", ", ".join(_eps(t.get("epsilon_target")) for t in targets) or "none"),
        ("Attacks", _text(", ".join(_attack_names(results))) or "none"),
        (
            "Accountant",
            _text(_accountant(results) or "—") + " (the ε each claim is tested against); "
            "PLD (dp_accounting) as the tight reference",
        ),
        ("δ", ", ".join(f"{d:g}" for d in delta if _is_number(d)) or "—"),
        ("Confidence", f"{_pct(confidence)} (one-sided lower bounds, two-sided AUC intervals)"),
        ("Claims", _text(counts_line(results.get("verdict") or {}))),
    ]
    if results.get("synthetic"):
        rows.append(("Synthetic-data checks", f"{len(results['synthetic'])} generator/ε entries"))
    body = "".join(f"<dt>{k}</dt><dd>{v}</dd>" for k, v in rows)
    return f'<section id="overview"><h2>Overview</h2><dl class="facts">{body}</dl></section>'


def _split_counts(data: dict[str, Any]) -> str:
    """Rows per split, written so the numbers add up: the training set is not a fourth split but the
    candidates whose coin came up heads (the rest of the candidates are the non-members)."""
    parts = [
        (data.get("n_test"), "utility test"),
        (data.get("n_candidates"), "audit candidates"),
        (data.get("n_pool"), "population pool"),
    ]
    total = data.get("n_rows")
    listed = " + ".join(f"{_num(n)} {name}" for n, name in parts if n is not None)
    counts = [n for n, _ in parts if _is_number(n)]
    adds_up = len(counts) == len(parts) and _is_number(total) and sum(counts) == total
    text = f"{_num(total)} total {'=' if adds_up else ':'} {listed}"
    n_train, n_candidates = data.get("n_train"), data.get("n_candidates")
    if _is_number(n_train) and _is_number(n_candidates):
        text += (
            f"; the target trained on the {_num(n_train)} candidates whose coin came up heads (members), "
            f"the other {_num(n_candidates - n_train)} are its non-members"
        )
    elif _is_number(n_train):
        text += f"; {_num(n_train)} training rows"
    return text


def _targets_table(results: dict[str, Any]) -> str:
    targets = results.get("targets") or []
    if not targets:
        return (
            '<section id="targets"><h2>Results per target ε</h2><p>No trained targets in these results.</p></section>'
        )
    accountant = _accountant(results) or "accountant"
    confidence = _confidence(results)
    head = [
        "<th>target ε</th>",
        f'<th class="num">{_text(accountant)} ε<br><small>accountant</small></th>',
        '<th class="num">PLD ε<br><small>tight reference</small></th>',
        f'<th class="num">best ε lower bound<br><small>sound, {_pct(confidence)}</small></th>',
        '<th class="num">LB / accountant ε</th>',
        "<th>claim</th>",
        '<th class="num">test accuracy</th>',
    ]
    head.append("<th>attacks<br><small>AUC (CI) · TPR at 0.1 % FPR</small></th>")
    rows = []
    verdict = results.get("verdict") or {}
    for index, target in enumerate(targets):
        eps_acc = target.get("epsilon_accountant")
        if eps_acc is None:
            eps_acc = (target.get("epsilon") or {}).get(accountant)
        ratio = target.get("epsilon_lb_ratio")
        if ratio is None and _is_number(eps_acc) and eps_acc > 0 and _is_number(target.get("epsilon_lb_best")):
            ratio = target["epsilon_lb_best"] / eps_acc
        method = _method_text(target.get("epsilon_lb_best_method"))
        best = _num(target.get("epsilon_lb_best"), 2)
        if method:
            best += f"<br><small>{_text(method)}</small>"
        word_here = subject_status(verdict, f"targets[{index}]")
        badge = {"refuted": "fail", "held": "pass", "no DP claim · LEAKS": "fail"}.get(word_here)
        violation = (
            f'<span class="badge {badge}">{_text(word_here)}</span>' if badge else f"<small>{_text(word_here)}</small>"
        )
        cells = [
            f"<td><strong>{_target_eps(target)}</strong></td>",
            f'<td class="num">{_num(eps_acc)}</td>',
            f'<td class="num">{_num((target.get("epsilon") or {}).get("pld"))}</td>',
            f'<td class="num">{best}</td>',
            f'<td class="num">{_num(ratio, 2)}</td>',
            f"<td>{violation}</td>",
            f'<td class="num">{_num(target.get("test_accuracy"))}{_twin_accuracy(target)}</td>',
        ]
        cells.append(f"<td>{_attack_cell(target.get('attacks') or [])}{_whitebox_cell(target)}</td>")
        rows.append("<tr>" + "".join(cells) + "</tr>")
    return (
        '<section id="targets"><h2>Results per target ε</h2>'
        f'<table class="targets"><thead><tr>{"".join(head)}</tr></thead><tbody>{"".join(rows)}</tbody></table>'
        '<p class="caption">Best ε lower bound: the largest Clopper-Pearson or one-run bound over all attacks '
        "(the GDP estimate is never used). Claim: <em>held</em> = tested by a check with power against it (proven, "
        "measured or a positive control) and not refuted; <em>not refuted</em> = tested only by checks that cannot "
        "detect every violation (black-box attacks on the final model); <em>refuted</em> = a proven bound's test "
        "rejects the accountant's ε for the same δ (Holm over the "
        "run's tests); <em>untestable here</em> = even a perfect attack could not have refuted it with these "
        "candidates; without a DP claim, the leakage statement. AUC: area under the ROC curve (0.5 = chance) with "
        "its DeLong confidence interval; "
        "TPR at 0.1 % FPR: share of members detected while wrongly flagging 0.1 % of non-members. The largest AUC "
        "of a target is in bold. ε = ∞ is the non-private baseline (no accountant ε).</p></section>"
    )


def _twin_accuracy(target: dict[str, Any]) -> str:
    """The main job's twin trained with canaries: its test accuracy beside the released target's."""
    twin = target.get("whitebox_one_run")
    if not isinstance(twin, dict):
        return ""
    return f"<br><small>{_num(twin.get('test_accuracy_with_canaries'))} with {_text(twin.get('m'))} canaries</small>"


def _whitebox_cell(target: dict[str, Any]) -> str:
    """The row family "white-box one-run" under the attacks: what the twin's canaries showed."""
    twin = target.get("whitebox_one_run")
    if not isinstance(twin, dict):
        return ""
    p_value = f"{float(twin['p_value']):.2g}" if _is_number(twin.get("p_value")) else "—"
    if str(twin.get("family") or "").startswith("canary clients"):  # the federated job's twin federation
        what = f"canary clients (one-run) ({_text(twin.get('m'))} canary clients in a twin federation, every round)"
    elif str(twin.get("family") or "").startswith("black-box"):  # the llm job: canaries in the target itself
        what = f"{_text(twin.get('family'))} ({_text(twin.get('m'))} canaries, {_text(twin.get('observe'))})"
    else:
        what = f"white-box one-run ({_text(twin.get('m'))} {_text(twin.get('kind'))} canaries in a twin, every iterate)"
    return (
        f"<p><small>{what}: Steinke et al. ε ≥ {_num(twin.get('steinke_epsilon'), 2)}; f-DP test "
        f"{'refutes' if twin.get('fdp_refuted') else 'does not refute'} the claim's curve; p = "
        f"{_text(p_value)}; "
        f"estimates (not bounds): Gaussian sum ε ≈ {_num(twin.get('gaussian_sum_epsilon'), 2)}, Andrew et al. "
        f"ε ≈ {_num(twin.get('andrew_epsilon'), 2)}</small></p>"
    )


def _attack_cell(attacks: list[dict[str, Any]]) -> str:
    """Every attack on one target as a small borderless table inside the target's row."""
    if not attacks:
        return "—"
    aucs = [auc for auc in (a.get("auc") for a in attacks) if _is_number(auc)]
    top = max(aucs) if len(aucs) > 1 else None
    rows = []
    for attack in attacks:
        auc = _num(attack.get("auc"))
        if top is not None and attack.get("auc") == top:
            auc = f"<strong>{auc}</strong>"
        rows.append(
            f'<tr><td>{_text(attack.get("name"))}</td><td class="num">{auc}</td>'
            f'<td class="num"><small>({_ci(attack.get("auc_ci"), 2)})</small></td>'
            f'<td class="num">{_num(_tpr(attack, 0.001), 4)}</td></tr>'
        )
    return f'<table class="inner">{"".join(rows)}</table>'


def _attack_details(results: dict[str, Any]) -> str:
    targets = results.get("targets") or []
    if not any(t.get("attacks") for t in targets):
        return ""
    head = (
        '<tr><th>target ε</th><th>attack</th><th class="num">AUC (CI)</th><th class="num">TPR@0.1%</th>'
        '<th class="num">TPR@1%</th><th class="num">TPR@10%</th><th class="num">advantage<br>'
        '<small>bound under DP</small></th><th class="num">ε LB<br><small>Clopper-Pearson</small></th>'
        '<th class="num">ε LB<br><small>one run</small></th><th class="num">GDP ε<br><small>estimate†'
        '</small></th><th class="num">members / non-members</th></tr>'
    )
    rows = []
    for target in targets:
        for attack in target.get("attacks") or []:
            bounds = attack.get("epsilon_lb") or {}
            gdp = _get(attack, "epsilon_estimate_gdp", "epsilon")
            adv = _num(attack.get("advantage"))
            if attack.get("advantage_bound") is not None:
                adv += f"<br><small>≤ {_num(attack['advantage_bound'])}</small>"
            extra = {k: v for k, v in bounds.items() if k not in _ESTIMATOR_NAMES}
            one_run = _num(bounds.get("one_run"), 2)
            if extra:
                one_run += "".join(f"<br><small>{_text(k)}: {_num(v, 2)}</small>" for k, v in extra.items())
            fdp = attack.get("fdp_one_run")
            if isinstance(fdp, dict):  # shown beside Steinke et al.'s bound, which decides (stats helper)
                one_run += (
                    f"<br><small>f-DP one run: {_num(fdp.get('epsilon_gdp'), 2)} "
                    "(assumes a Gaussian trade-off curve; shown only)</small>"
                )
            rows.append(
                f"<tr><td>{_target_eps(target)}</td><td>{_text(attack.get('name'))}</td>"
                f'<td class="num">{_num(attack.get("auc"))}<br><small>({_ci(attack.get("auc_ci"), 3)})</small></td>'
                f'<td class="num">{_num(_tpr(attack, 0.001), 4)}</td>'
                f'<td class="num">{_num(_tpr(attack, 0.01), 4)}</td>'
                f'<td class="num">{_num(_tpr(attack, 0.1), 4)}</td>'
                f'<td class="num">{adv}</td>'
                f'<td class="num">{_num(bounds.get("clopper_pearson"), 2)}</td>'
                f'<td class="num">{one_run}</td>'
                f'<td class="num">{_num(gdp, 2)}</td>'
                f'<td class="num">{_num(attack.get("n_members"))} / {_num(attack.get("n_nonmembers"))}</td></tr>'
            )
    return (
        '<section id="attacks"><h2>Attack details</h2>'
        f'<div class="scroll"><table><thead>{head}</thead><tbody>{"".join(rows)}</tbody></table></div>'
        '<p class="caption">Advantage: max over thresholds of TPR − FPR; under (ε, δ)-DP it cannot exceed '
        "(e^ε − 1 + 2δ)/(e^ε + 1). † The GDP number assumes the mechanism's trade-off curve is Gaussian: it is an "
        "estimate, not a lower bound, and never decides a verdict.</p></section>"
    )


def _training_table(results: dict[str, Any]) -> str:
    targets = results.get("targets") or []
    if not targets:
        return ""
    accountants: list[str] = []
    for target in targets:
        for key in target.get("epsilon") or {}:
            if key not in accountants:
                accountants.append(str(key))
    head = (
        '<tr><th>target ε</th><th class="num">σ<br><small>noise multiplier</small></th>'
        '<th class="num">q<br><small>sample rate</small></th><th class="num">T<br><small>steps</small></th>'
        '<th class="num">C<br><small>clip norm</small></th><th>Poisson sampling</th><th class="num">δ</th>'
        + "".join(f'<th class="num">{_text(a)} ε</th>' for a in accountants)
        + '<th class="num">seed</th><th class="num">train time</th></tr>'
    )
    rows = []
    for target in targets:
        poisson = target.get("poisson_sampling")
        rows.append(
            f"<tr><td>{_target_eps(target)}</td>"
            f'<td class="num">{_num(target.get("noise_multiplier"), 4)}</td>'
            f'<td class="num">{_num(target.get("sample_rate"), 4)}</td>'
            f'<td class="num">{_num(target.get("steps"))}</td>'
            f'<td class="num">{_num(target.get("max_grad_norm"), 2)}</td>'
            f"<td>{'yes' if poisson else ('no' if poisson is False else '—')}</td>"
            f'<td class="num">{_text(format(target["delta"], "g")) if _is_number(target.get("delta")) else "—"}</td>'
            + "".join(f'<td class="num">{_num((target.get("epsilon") or {}).get(a))}</td>' for a in accountants)
            + f'<td class="num">{_num(target.get("seed"))}</td>'
            f'<td class="num">{_num(target.get("train_seconds"), 1)} s</td></tr>'
        )
    return (
        '<section id="training"><h2>Training and accounting</h2>'
        f"<table><thead>{head}</thead><tbody>{''.join(rows)}</tbody></table>"
        '<p class="caption">Every accountant is evaluated on the same (σ, q, T, δ). The ε = ∞ target is trained '
        "with the same optimizer but without clipping, noise or Poisson sampling.</p></section>"
    )


def _dict_at(entry: dict[str, Any], key: str) -> dict[str, Any]:
    """`entry[key]` when it is a dict, else an empty one (a hand-edited results file may hold anything)."""
    value = entry.get(key)
    return value if isinstance(value, dict) else {}


def _synthetic_section(results: dict[str, Any]) -> str:
    entries = [e for e in results.get("synthetic") or [] if isinstance(e, dict)]
    if not entries:
        return ""
    rows, flag_items = [], []
    for index, entry in enumerate(entries):
        nndr, dcr, mia = (_dict_at(entry, k) for k in ("nndr", "dcr", "mia"))
        bounds = _dict_at(mia, "epsilon_lb")
        sound = [v for k, v in bounds.items() if k in _ESTIMATOR_NAMES and _is_number(v)]
        generator = entry.get("generator") or f"entry {index + 1}"
        share = _num(dcr.get("dcr_share"))
        if dcr.get("dcr_share_ci") is not None:
            share += f" <small>({_ci(dcr.get('dcr_share_ci'), 3)})</small>"
        if _is_number(dcr.get("expected_share_if_not_memorising")):
            share += f"<br><small>expected {_num(dcr['expected_share_if_not_memorising'])}</small>"
        median_train = dcr.get("median_train", dcr.get("median_dcr_train"))
        median_holdout = dcr.get("median_holdout", dcr.get("median_dcr_holdout"))
        auc = _num(mia.get("auc"))
        if mia.get("auc_ci") is not None:
            auc += f" <small>({_ci(mia.get('auc_ci'), 2)})</small>"
        flags = [f for f in entry.get("flags") or [] if isinstance(f, dict)]
        if "passed" in entry or flags:
            status = (
                '<span class="badge fail">flagged</span>'
                if flags or entry.get("passed") is False
                else '<span class="badge pass">no flag</span>'
            )
        else:
            status = "—"
        for flag in flags:
            flag_items.append(
                f"<li><strong>{_text(generator)}</strong> ({_text(flag.get('check') or 'check')}): "
                f"{_text(flag.get('message'))}</li>"
            )
        rows.append(
            f"<tr><td>{_text(generator)}</td><td>{_text(claimed_epsilon_text(entry))}</td>"
            f'<td class="num">{_num(nndr.get("p10"))} / {_num(nndr.get("median"))}</td>'
            f'<td class="num">{share}</td><td class="num">{_num(dcr.get("exact_match_rate"), 4)}</td>'
            f'<td class="num">{_num(median_train)} / {_num(median_holdout)}</td>'
            f'<td class="num">{auc}</td><td class="num">{_num(_tpr(mia, 0.001), 4) if mia else "—"}</td>'
            f'<td class="num">{_num(max(sound), 2) if sound else "—"}</td><td>{status}</td></tr>'
        )
    flags_html = f"<h3>Flags</h3><ul>{''.join(flag_items)}</ul>" if flag_items else ""
    return (
        '<section id="synthetic"><h2>Synthetic data</h2>'
        '<table><thead><tr><th>generator</th><th>ε</th><th class="num">NNDR<br><small>p10 / median</small></th>'
        '<th class="num">DCR share (CI)</th><th class="num">exact matches</th>'
        '<th class="num">median DCR<br><small>train / holdout</small></th><th class="num">distance-MIA AUC (CI)'
        '</th><th class="num">TPR@0.1%</th><th class="num">ε LB<br><small>sound</small></th><th>flags</th>'
        f"</tr></thead><tbody>{''.join(rows)}</tbody></table>"
        '<p class="caption">DCR share: fraction of synthetic rows strictly closer to a training row than to any '
        "holdout row (holdout as large as train); a generator that does not copy gives about 0.5 (less half the "
        "share of ties, the “expected” value), well above it means synthetic rows sit near training rows. NNDR: "
        "distance to the nearest training row over the distance to the second nearest; values near 0 are "
        "near-copies. Distance MIA: train and holdout records scored by minus their distance to the synthetic set; "
        "ε: the generator's DP ε; ∞ / none claimed = no DP claim.</p>"
        f"{_synthetic_risks_table(entries)}{flags_html}</section>"
    )


def _risk_html(risk: Any) -> str:
    if not isinstance(risk, dict) or not _is_number(risk.get("value")):
        return "—"
    cell = f"{_num(risk['value'], 2)} <small>({_ci(risk.get('ci'), 2)})</small>"
    return cell + (' <span class="badge fail">flagged</span>' if risk.get("flagged") else "")


def _synthetic_risks_table(entries: list[dict[str, Any]]) -> str:
    """Singling-out, linkability and inference risk against the holdout as control (Giomi et al. 2022)."""
    rows = []
    for index, entry in enumerate(entries):
        risks = entry.get("risks")
        if not isinstance(risks, dict):
            continue
        inference = [r for r in risks.get("inference") or [] if isinstance(r, dict) and _is_number(r.get("value"))]
        worst = max(inference, key=lambda r: r["value"], default=None)
        baseline = risks.get("dcr_baseline_protection") or {}
        rows.append(
            f"<tr><td>{_text(entry.get('generator') or f'entry {index + 1}')}</td>"
            f"<td>{_text(claimed_epsilon_text(entry))}</td>"
            f'<td class="num">{_risk_html(risks.get("singling_out"))}</td>'
            f'<td class="num">{_risk_html(risks.get("linkability"))}</td>'
            f'<td class="num">{_risk_html(worst)}'
            f"{'<br><small>secret ' + _text(worst.get('secret')) + '</small>' if worst else ''}</td>"
            f'<td class="num">{_num(baseline.get("score"), 2)}</td></tr>'
        )
    if not rows:
        return ""
    return (
        "<h3>Re-identification risks</h3><table><thead><tr><th>generator</th><th>ε</th>"
        '<th class="num">singling out (CI)</th><th class="num">linkability (CI)</th>'
        '<th class="num">inference, worst column (CI)</th><th class="num">DCR vs random</th></tr></thead>'
        f"<tbody>{''.join(rows)}</tbody></table>"
        '<p class="caption">Giomi et al. 2022 (the method of anonymeter): each attack is run on training rows and '
        "on holdout rows the generator never saw; risk = (success on train − success on control) / (1 − success "
        "on control), 0 = the release tells nothing about its training rows beyond the population, 1 = total. "
        "Singling out: predicates built from synthetic rows that match exactly one real row. Linkability: two "
        "halves of a record joined through the same nearest synthetic row. Inference: a column guessed from the "
        "nearest synthetic row on all other columns. DCR vs random: median distance of synthetic rows to the "
        "closest training row over that of uniformly random rows (SDMetrics DCRBaselineProtection; 1 = like "
        "noise, 0 = copies; descriptive, not a test).</p>"
    )


def _target_eps(target: dict[str, Any]) -> str:
    """The target's ε, and for the llm job's targets which fine-tuning (each ε is fine-tuned both ways)."""
    label = finetuning_label(target)
    return _eps(target.get("epsilon_target")) + (f" · {_text(label)}" if label else "")
