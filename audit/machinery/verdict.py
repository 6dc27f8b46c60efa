"""One verdict model for every command: checks in, pass / fail / inconclusive out.

The contract (results["verdict"], read by the console, report.html, summary.md, junit.xml and the
MLflow tag `verdict` of the parent run):

    {"status": "pass" | "fail" | "inconclusive", "passed": status != "fail",
     "reasons": [one line each], "decided_by": "built-in checks" | "policy <file>",
     "family_wise_error": {...how the tests that decide were corrected...},
     "checks": [...every check, its outcome...], "notes": [...findings that decide nothing...]}

A `Check` is one of:
- a statistical test of a claim (`p_value`: of "the claim holds"); all tests of one verdict form
  one family, corrected with Holm's step-down procedure at α = 1 − confidence, so the probability
  that a true claim is reported as violated is ≤ α for the verdict as a whole;
- a deterministic check (`failed`): a policy rule, an unsound accountant, a single pre-declared
  audit test (canary, mechanism) whose bound already holds at the stated confidence;
- `inconclusive`: a check that could not have failed — its ceiling (the bound a perfect attack
  would reach) is at or below the claim, or no bound is proven for the setting;
- `decides=False`: shown with its assumption, never decides (e.g. Clopper-Pearson over one
  model's candidates, which assumes independent trials).

Status: "fail" if any test is rejected or any deterministic check failed; otherwise
"inconclusive" if any deciding check was inconclusive (the weaker claim wins: a run in which one
claim could not have been refuted does not "pass" that claim); otherwise "pass". Inconclusive exits
0 unless a policy sets `fail_on_inconclusive`.

`verdict_for_results` builds the built-in checks from a results dict (targets, synthetic entries)
and folds a policy into the same model; `gate` and `report` recompute it from results.json, so the
run, the gate and a re-render cannot disagree.
"""
from __future__ import annotations

import math
from copy import deepcopy
from dataclasses import asdict, dataclass
from typing import Any, Iterable, Literal

from audit.statistics.epsilon_bounds import one_run_ceiling, one_run_claim_p_value
from audit.statistics.multiple_testing import holm_rejections

__all__ = ["Check", "decide", "family_alpha_each", "verdict_for_results", "single_audit_verdict", "single_audit_verdict_with_policy",
           "status_word", "verdict_tags",
           "BUILT_IN"]

Status = Literal["pass", "fail", "inconclusive"]
BUILT_IN = "built-in checks"
DEFAULT_ALPHA = 0.05


@dataclass(frozen=True)
class Check:
    """One thing the verdict looks at (see the module docstring for the four kinds)."""

    subject: str
    name: str
    message: str
    p_value: float | None = None
    failed: bool = False
    inconclusive: bool = False
    decides: bool = True
    assumption: str = ""


def status_word(status: str) -> str:
    return {"pass": "PASS", "fail": "FAIL", "inconclusive": "INCONCLUSIVE"}.get(status, str(status).upper())


def decide(
    checks: Iterable[Check],
    *,
    alpha: float = DEFAULT_ALPHA,
    decided_by: str = BUILT_IN,
    fail_on_inconclusive: bool = False,
    notes: Iterable[str] = (),
) -> dict[str, Any]:
    """The verdict dict for `checks` (pure). Holm over every deciding check that carries a p-value."""
    checks = list(checks)
    tests = [c for c in checks if c.decides and c.p_value is not None]
    rejected = dict(zip(map(id, tests), holm_rejections([c.p_value for c in tests], alpha))) if tests else {}
    rows, failures, open_claims = [], [], []
    for check in checks:
        if not check.decides:
            outcome = "shown"
        elif rejected.get(id(check)) or (check.p_value is None and check.failed):
            outcome = "fail"
        elif check.inconclusive:
            outcome = "inconclusive"
        else:
            outcome = "pass"
        if outcome == "fail":
            failures.append(check.message)
        elif outcome == "inconclusive":
            open_claims.append(check.message)
        rows.append({**asdict(check), "outcome": outcome})
    if failures:
        status: Status = "fail"
    elif open_claims:
        status = "fail" if fail_on_inconclusive else "inconclusive"
    else:
        status = "pass"
    if status == "fail" and not failures:
        reasons = [f"inconclusive and the policy fails on inconclusive: {m}" for m in open_claims]
    else:
        reasons = failures or open_claims
    k = len(tests)
    statement = (
        f"Holm step-down over the {k} test(s) that can decide the verdict, family-wise error ≤ {alpha:g} "
        f"(each claim is violated only if its test is rejected at α/(K − i + 1))"
        if k else "no statistical test decides this verdict (deterministic checks only)"
    )
    return {
        "status": status,
        "passed": status != "fail",
        "reasons": reasons,
        "decided_by": decided_by,
        "policy": None if decided_by == BUILT_IN else decided_by.removeprefix("policy "),
        "family_wise_error": {"method": "holm" if k else "none", "alpha": alpha, "n_tests": k,
                              "statement": statement},
        "inconclusive": open_claims,
        "notes": list(notes),
        "checks": rows,
    }


# ---------------------------------------------------------------------------------------------
# Built-in checks of a results dict (run, audit-model, audit-scores, synth-check)


def _eps_text(value: Any) -> str:
    return "∞" if value is None or (isinstance(value, float) and math.isinf(value)) else f"{value:g}"


def _claim(entry: dict[str, Any], key: str) -> float | None:
    value = entry.get(key)
    if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value > 0:
        return float(value)
    return None


def _one_run_details(attack: dict[str, Any]) -> dict[str, Any] | None:
    details = (attack.get("epsilon_lb_details") or {}).get("one_run")
    if isinstance(details, dict) and details.get("per_fraction"):
        return details
    return None


def _attack_claim(target: dict[str, Any], attack: dict[str, Any]) -> float | None:
    """The ε an attack row tests: its own `claim` (federated rows test the record- or the
    client-level guarantee, or none: the server under client-level DP) or the target's accountant ε."""
    if isinstance(attack.get("claim"), dict):
        return _claim(attack["claim"], "epsilon")
    return _claim(target, "epsilon_accountant")


def _could_refute(target: dict[str, Any], attack: dict[str, Any], alpha: float) -> bool:
    """Could this row's one-run test reject its claim even alone (a perfect attack at level α)? A row
    that could not (few candidates, e.g. a small client's rows) is inconclusive and left out of the
    Holm family; the choice depends on m, δ and the claim only, never on the scores, so the family
    stays pre-declared and its rows keep their power."""
    details = _one_run_details(attack)
    claim = _attack_claim(target, attack)
    if details is None or claim is None:
        return False
    return one_run_ceiling(int(details["m"]), float(target.get("delta") or 0.0), alpha) > claim


def _tests_in_family(results: dict[str, Any], alpha: float) -> int:
    count = 0
    for target in results.get("targets") or []:
        count += sum(1 for a in target.get("attacks") or [] if isinstance(a, dict) and _could_refute(target, a, alpha))
        # The white-box one-run row (audit.sweep.whitebox_one_run), when it could refute its claim alone.
        count += sum(1 for t in [target.get("whitebox_one_run")] if isinstance(t, dict) and t.get("refutable_alone"))
    for entry in results.get("synthetic") or []:
        mia = entry.get("mia") or {}
        if _claim(entry, "epsilon_target") is not None:
            count += int(_one_run_details(mia) is not None)
        elif not entry.get("baseline"):
            count += len([t for t in entry.get("leak_tests") or [] if t.get("p_value") is not None])
    return count


def _target_checks(index: int, target: dict[str, Any], alpha_each: float, confidence: float,
                   alpha: float | None = None) -> tuple[list[Check], list[str]]:
    label = f"ε = {_eps_text(target.get('epsilon_target'))}"
    subject = f"targets[{index}]"
    claim = _claim(target, "epsilon_accountant")
    if claim is None:  # federated targets: the rows' claims (any row with one makes the target private)
        claim = next((c for a in target.get("attacks") or [] if isinstance(a, dict)
                      for c in [_attack_claim(target, a)] if c is not None), None)
    delta = float(target.get("delta") or 0.0)
    attacks = [a for a in target.get("attacks") or [] if isinstance(a, dict)]
    checks: list[Check] = []
    notes: list[str] = []
    if claim is None:
        best, where = target.get("epsilon_lb_best"), target.get("epsilon_lb_best_method")
        tprs = [(a.get("tpr_at_fpr") or {}).get("0.001") for a in attacks]
        tprs = [t for t in tprs if isinstance(t, (int, float))]
        leak = f"one-run bound {best:.2f} ({where})" if isinstance(best, (int, float)) and best > 0 else None
        if leak or tprs:
            top = max(tprs) if tprs else None
            text = f"{label} (no DP claim, so nothing to violate): "
            text += (f"it leaks — {leak}" if leak else "no proven bound above 0")
            if top is not None:
                text += f"; the best attack finds {top:.1%} of members at 0.1 % FPR"
            notes.append(text)
        return checks, notes
    tested = False
    for attack in attacks:
        name = str(attack.get("name"))
        row_claim = attack.get("claim") if isinstance(attack.get("claim"), dict) else None
        if row_claim is not None:  # a federated row: it tests its own level's guarantee, or none
            if _attack_claim(target, attack) is None:
                checks.append(Check(
                    subject, f"{label} · {name} · no claim", f"{label}, {name}: no DP claim covers this threat "
                    f"({row_claim.get('note') or 'non-private'}); shown only", decides=False,
                    assumption="no guarantee to test"))
                continue
            name = f"{name} ({row_claim.get('level', 'record')}-level ε)"
        row_eps = _attack_claim(target, attack)
        cp = (attack.get("epsilon_lb") or {}).get("clopper_pearson")
        if cp is not None:
            checks.append(Check(
                subject, f"{label} · {name} · clopper_pearson", f"{label}, {name}: Clopper-Pearson bound {cp:.3f} "
                f"(shown only: assumes independent trials)", decides=False,
                assumption="assumes independent trials; not proven for one model's candidates",
            ))
        details = _one_run_details(attack)
        if details is None:
            continue
        tested = True
        if alpha is not None and not _could_refute(target, attack, alpha):
            alone = one_run_ceiling(int(details["m"]), delta, alpha)
            checks.append(Check(subject, f"{label} · {name} · one_run",
                                f"{label}, {name}: inconclusive — even alone, a perfect attack could prove only "
                                f"ε ≥ {alone:.2f} with {details['m']} candidates, at or below the claim {row_eps:.3f} "
                                "(left out of the Holm family)", inconclusive=True,
                                assumption="one training run, coin-flip membership (proven)"))
            continue
        p = one_run_claim_p_value(details, row_eps, delta)
        ceiling = one_run_ceiling(int(details["m"]), delta, alpha_each)
        bound = (attack.get("epsilon_lb") or {}).get("one_run")
        if p <= alpha_each:
            message = (f"{label}, {name}: the one-run test rejects the accountant's ε {row_eps:.3f} "
                       f"(p = {p:.2g}; one-run bound {bound:.3f} at {confidence:.0%})")
        else:
            message = (f"{label}, {name}: one-run bound {bound:.3f} vs accountant ε {row_eps:.3f} "
                       f"(p = {p:.2g}); ceiling {ceiling:.2f}")
        inconclusive = ceiling <= row_eps
        if inconclusive:
            message = (f"{label}, {name}: inconclusive — even a perfect attack could prove only ε ≥ {ceiling:.2f} "
                       f"with {details['m']} candidates at the family level, at or below the claim {row_eps:.3f}")
        checks.append(Check(subject, f"{label} · {name} · one_run", message, p_value=p, inconclusive=inconclusive,
                            assumption="one training run, coin-flip membership (proven)"))
    whitebox = target.get("whitebox_one_run")
    if isinstance(whitebox, dict) and whitebox.get("p_value") is not None:
        checks += _whitebox_one_run_checks(subject, label, whitebox)
        tested = True
    if not tested:
        checks.append(Check(
            subject, f"{label} · no proven bound",
            f"{label}: inconclusive — membership was not an independent fair coin flip, so no bound proven "
            f"for one model decides whether ε {claim:.3f} holds (Clopper-Pearson is shown, assuming independent trials)",
            inconclusive=True, assumption="one-run bound needs coin-flip membership",
        ))
    interval = target.get("epsilon_pld_interval")
    reported = _claim(target, "epsilon_accountant")
    if isinstance(interval, dict) and isinstance(interval.get("lower"), (int, float)) and reported is not None:
        lower = float(interval["lower"])
        unsound = reported < lower
        checks.append(Check(
            subject, f"{label} · accountant vs PLD",
            f"{label}: the {target.get('accountant')} accountant reports ε {reported:.4f}, below the tight PLD lower "
            f"end {lower:.4f}: it claims more privacy than the training gives" if unsound else
            f"{label}: accountant ε {reported:.4f} ≥ PLD lower end {lower:.4f}",
            failed=unsound, assumption="PLD interval of the Poisson-subsampled Gaussian mechanism",
        ))
    return checks, notes


def _whitebox_one_run_checks(subject: str, label: str, row: dict[str, Any]) -> list[Check]:
    """The target's white-box one-run row (a twin trained with gradient canaries): one test in the
    Holm family when it could refute its claim alone, else inconclusive; accuracy shown beside."""
    name = f"{label} · white-box one-run"
    claim, m = float(row["claim"]), int(row["m"])
    assumption = "one training run of a twin with gradient canaries by fair coins (proven: Steinke et al., f-DP one-run)"
    accuracy = Check(subject, f"{name} · accuracy",
                     f"{label}: test accuracy {row['test_accuracy_target']:.3f} (released target) vs "
                     f"{row['test_accuracy_with_canaries']:.3f} (twin with {m} canaries); training "
                     f"{row['train_seconds_target']:.1f} s vs {row['train_seconds_with_canaries']:.1f} s", decides=False,
                     assumption="shown only")
    if not row.get("refutable_alone"):
        need = row.get("canaries_needed")
        return [Check(subject, name, f"{label}, white-box one-run: untestable here — with {m} canaries a perfect "
                      f"attack reaches ε {float(row['ceiling']):.2f} (Steinke et al.) and could not refute the claim's "
                      f"curve (f-DP), at or below the claim {claim:.3f}; needs "
                      + (f"≥ {need} canaries (privacy.one_run_canaries)" if need else "more than 10⁶ canaries")
                      + " (left out of the Holm family)", inconclusive=True, assumption=assumption), accuracy]
    p = float(row["p_value"])
    message = (f"{label}, white-box one-run ({m} {row.get('kind')} canaries, every iterate): Steinke et al. ε ≥ "
               f"{float(row['steinke_epsilon']):.3f}, f-DP test {'refutes' if row.get('fdp_refuted') else 'does not refute'} "
               f"the claim's curve, vs accountant ε {claim:.3f} (p = {p:.2g}; estimates: Gaussian sum ε ≈ "
               f"{float(row['gaussian_sum_epsilon']):.2f}, Andrew et al. ε ≈ {float(row['andrew_epsilon']):.2f})")
    return [Check(subject, name, message, p_value=p, assumption=assumption), accuracy]


def _synthetic_checks(index: int, entry: dict[str, Any], alpha_each: float, confidence: float) -> list[Check]:
    generator = entry.get("generator") or f"synthetic[{index}]"
    claim = _claim(entry, "epsilon_target")
    label = f"synthetic '{generator}'" + (f" at ε {claim:g}" if claim is not None else "")
    subject = f"synthetic[{index}]"
    mia = entry.get("mia") or {}
    checks: list[Check] = []
    if claim is not None:
        details = _one_run_details(mia)
        cp = (mia.get("epsilon_lb") or {}).get("clopper_pearson")
        if cp is not None:
            checks.append(Check(subject, f"{label} · distance · clopper_pearson",
                                f"{label}: distance-attack Clopper-Pearson bound {cp:.3f} (shown only: assumes "
                                f"independent trials)", decides=False,
                                assumption="assumes independent trials; not proven for one release"))
        if details is None:
            checks.append(Check(subject, f"{label} · no proven bound",
                                f"{label}: inconclusive — train/holdout membership was not declared a fair coin "
                                f"flip, so no proven bound tests the generator's ε", inconclusive=True,
                                assumption="one-run bound needs coin-flip membership"))
        else:
            delta = float((details.get("delta") if details.get("delta") is not None else 0.0))
            p = one_run_claim_p_value(details, claim, delta)
            ceiling = one_run_ceiling(int(details["m"]), delta, alpha_each)
            bound = (mia.get("epsilon_lb") or {}).get("one_run")
            inconclusive = ceiling <= claim
            message = (f"{label}: the distance attack's one-run test rejects the generator's ε {claim:g} "
                       f"(p = {p:.2g}; one-run bound {bound:.3f})" if p <= alpha_each else
                       f"{label}: one-run bound {bound:.3f} vs claimed ε {claim:g} (p = {p:.2g})")
            if inconclusive:
                message = (f"{label}: inconclusive — a perfect attack could prove only ε ≥ {ceiling:.2f} "
                           f"with {details['m']} records, at or below the claim {claim:g}")
            checks.append(Check(subject, f"{label} · distance · one_run", message, p_value=p,
                                inconclusive=inconclusive, assumption="one release, coin-flip membership (proven)"))
        for flag in entry.get("flags") or []:
            if flag.get("check") != "epsilon_violation":
                checks.append(Check(subject, f"{label} · {flag.get('check')}", f"{label}: {flag.get('message')} "
                                    "(shown: a DP generator is judged by its ε)", decides=False))
        return checks
    # No DP claim: the release must not be a near-copy (DCR, exact copies) nor let the distance
    # attack tell train from holdout rows. Each is a test with a p-value, in the verdict's family.
    leak_tests = [t for t in entry.get("leak_tests") or [] if isinstance(t, dict) and t.get("p_value") is not None]
    if entry.get("baseline"):
        # A reference generator of the run's own sweep (e.g. the deliberately leaky noisy copy): like
        # the ε = ∞ target it shows what leakage looks like; it is not a release under audit.
        return [Check(subject, f"{label} · {t.get('check')}", f"{label} (baseline, not a release under audit): "
                      f"{t.get('message')}", p_value=float(t["p_value"]), decides=False,
                      assumption=str(t.get("assumption") or "")) for t in leak_tests]
    if leak_tests:
        for test in leak_tests:
            checks.append(Check(subject, f"{label} · {test.get('check')}", f"{label}: {test.get('message')}",
                                p_value=float(test["p_value"]),
                                assumption=str(test.get("assumption") or "")))
    else:  # results written before leak_tests existed: the flags, already tested at α/3 each
        for flag in entry.get("flags") or []:
            checks.append(Check(subject, f"{label} · {flag.get('check')}", f"{label}: {flag.get('message')}",
                                failed=True))
    return checks


def built_in_checks(results: dict[str, Any], alpha: float) -> tuple[list[Check], list[str]]:
    """Every built-in check of a results dict, and notes (findings on targets without a claim)."""
    k = max(_tests_in_family(results, alpha), 1)
    alpha_each = alpha / k  # the first Holm step: what a test must reach when nothing else fails
    confidence = 1 - alpha
    checks: list[Check] = []
    notes: list[str] = []
    for index, target in enumerate(results.get("targets") or []):
        if isinstance(target, dict):
            more, found = _target_checks(index, target, alpha_each, confidence, alpha)
            checks += more
            notes += found
    for index, entry in enumerate(results.get("synthetic") or []):
        if isinstance(entry, dict):
            checks += _synthetic_checks(index, entry, alpha_each, confidence)
    return checks, notes


def results_confidence(results: dict[str, Any]) -> float:
    config = results.get("config") or {}
    value = (config.get("attacks") or {}).get("confidence") if isinstance(config.get("attacks"), dict) else None
    if value is None:
        for target in results.get("targets") or []:
            for attack in target.get("attacks") or []:
                if isinstance(attack.get("confidence"), (int, float)):
                    return float(attack["confidence"])
        for entry in results.get("synthetic") or []:
            if isinstance((entry.get("mia") or {}).get("confidence"), (int, float)):
                return float(entry["mia"]["confidence"])
        return 1 - DEFAULT_ALPHA
    return float(value)


def family_alpha_each(results: dict[str, Any]) -> float:
    """α/K: the level of Holm's first step over the K built-in tests of `results` (the level at
    which a row's ceiling decides whether it could have refuted its claim)."""
    alpha = 1 - results_confidence(results)
    return alpha / max(_tests_in_family(results, alpha), 1)


def verdict_for_results(results: dict[str, Any], policy: Any = None) -> tuple[dict[str, Any], Any]:
    """(results with `verdict` and the targets' `violation` set, the PolicyEvaluation or None).

    Without a policy the built-in checks decide. With one, its rules decide (`fail_on_violation`,
    on by default, reads the targets' `violation`, which is the Holm-corrected built-in test), plus
    the built-in test of a DP generator's ε unless the policy turns violations off; a claim the
    audit could not have refuted keeps the status inconclusive (fail with `fail_on_inconclusive`).
    """
    from audit.machinery.policy import evaluate_policy

    out = deepcopy(results)
    alpha = 1 - results_confidence(results)
    checks, notes = built_in_checks(out, alpha)
    built_in = decide(checks, alpha=alpha, notes=notes)
    failed_subjects = {row["subject"] for row in built_in["checks"]
                       if row["outcome"] == "fail" and row["subject"].startswith("targets[")
                       and row["p_value"] is not None}
    failed_names = {(row["subject"], row["name"]) for row in built_in["checks"]
                    if row["outcome"] == "fail" and row["p_value"] is not None}
    for index, target in enumerate(out.get("targets") or []):
        if isinstance(target, dict):
            target["violation"] = f"targets[{index}]" in failed_subjects
            label = f"ε = {_eps_text(target.get('epsilon_target'))}"
            for attack in target.get("attacks") or []:
                if isinstance(attack, dict) and isinstance(attack.get("claim"), dict):  # federated rows
                    level = attack["claim"].get("level", "record")
                    name = f"{label} · {attack.get('name')} ({level}-level ε) · one_run"
                    attack["violation"] = (f"targets[{index}]", name) in failed_names
    if policy is None:
        out["verdict"] = built_in
        out.pop("policy_evaluation", None)
        return out, None

    evaluation = evaluate_policy(policy, out)
    rules = policy.rules
    policy_checks = [
        Check(check.target_label, check.rule + (f" · {check.attack}" if check.attack else ""), check.message,
              failed=check.applicable and not check.passed,
              inconclusive=(not check.applicable and check.rule == "max_epsilon_lb"),
              decides=check.applicable or check.rule == "max_epsilon_lb",
              assumption="policy rule")
        for check in evaluation.checks
    ]
    if rules.fail_on_violation is not False:
        policy_checks += [c for c in checks if c.subject.startswith("synthetic[") and c.p_value is not None
                          and " at ε " in c.name]
    # Claims the built-in checks found untestable stay visible: the policy cannot make them pass.
    policy_checks += [Check(c.subject, c.name, c.message, inconclusive=True, assumption=c.assumption)
                      for c in checks if c.decides and c.inconclusive and c.p_value is None]
    policy_checks += [Check(c["subject"], c["name"], c["message"], inconclusive=True, assumption=c["assumption"])
                      for c in built_in["checks"] if c["outcome"] == "inconclusive" and c["p_value"] is not None]
    source = evaluation.policy_path or evaluation.policy_name
    out["verdict"] = decide(policy_checks, alpha=alpha, decided_by=f"policy {source}",
                            fail_on_inconclusive=bool(getattr(rules, "fail_on_inconclusive", False)), notes=notes)
    out["verdict"]["built_in"] = {"status": built_in["status"], "reasons": built_in["reasons"]}
    out["policy_evaluation"] = evaluation.as_dict()
    return out, evaluation


# ---------------------------------------------------------------------------------------------
# Single-claim audits: canary-audit, mechanism-audit, accountant-check


def single_audit_verdict(kind: str, result: dict[str, Any]) -> dict[str, Any]:
    """The verdict of a canary / mechanism audit (one pre-declared test) or an accountant check."""
    if kind == "accountant-check":
        checks = []
        for point in result.get("points") or []:
            where = f"σ={point.get('noise_multiplier'):g} q={point.get('sample_rate'):g} T={point.get('steps')} δ={point.get('delta'):g}"
            bad = point.get("label") in ("unsound", "invalid")
            checks.append(Check(where, "accountant vs PLD interval", f"{where}: {point.get('label')}: {point.get('message')}",
                                failed=bad, assumption="true ε lies in the PLD interval [lower, upper]"))
        return decide(checks)
    if kind == "whitebox-audit":
        # Its checks (refutation of the claimed curve, accountant agreement) come with the result:
        # re-deciding them here keeps the run, `report` and the MLflow tag on one verdict.
        own = result.get("verdict") or {}
        fields = set(Check.__dataclass_fields__)
        checks = [Check(**{k: v for k, v in row.items() if k in fields}) for row in own.get("checks") or []]
        verdict = decide(checks, alpha=1 - float(result.get("confidence") or 1 - DEFAULT_ALPHA))
        for key in ("ceiling", "needed", "needed_unit"):
            verdict[key] = own.get(key)
        if own.get("claims"):  # --mode one-run: each claim's held / refuted / untestable
            verdict["claims"] = own["claims"]
        verdict["family_wise_error"]["statement"] = (own.get("family_wise_error") or {}).get(
            "statement", verdict["family_wise_error"]["statement"])
        return verdict
    if kind == "conformance":
        checks = [Check(str(c.get("check")), "conformance check", f"{c.get('check')}: {c.get('detail')}",
                        failed=not c.get("passed"), assumption="deterministic or family-wise corrected check")
                  for c in result.get("checks") or [] if isinstance(c, dict)]
        return decide(checks)
    own = result.get("verdict") if isinstance(result.get("verdict"), dict) else {}  # the audit's own (ceiling)
    claim = result.get("claimed_epsilon")
    bound = result.get("epsilon_lower_bound")
    confidence = result.get("confidence") or 1 - DEFAULT_ALPHA
    ceiling = result.get("ceiling", own.get("ceiling"))
    mode = str(result.get("mode") or "")
    one_run = "one" in mode
    assumption = ("one training run, coin-flip canaries (proven)" if one_run else
                  "independent training runs / mechanism draws: Clopper-Pearson over independent trials (proven)")
    inconclusive = (result.get("status") == "inconclusive" or own.get("status") == "inconclusive"
                    or (isinstance(ceiling, (int, float)) and isinstance(claim, (int, float)) and ceiling <= claim))
    failed = bool(result.get("violation")) or result.get("status") == "fail" or own.get("status") == "fail"
    subject = str(result.get("trainer") or result.get("mechanism") or kind)
    if isinstance(result.get("profile_test"), dict):
        # A test against the claim's whole trade-off curve: its own verdict says what it refuted, and
        # its ceiling is "could a perfect attack refute the profile", not an ε at the claim's δ.
        inconclusive = own.get("status") == "inconclusive"
        assumption = ("independent training runs: exact binomial test of one rule's weighted error vs the claim's "
                      "trade-off curve (a pessimistic-PLD lower envelope; proven)")
    if failed and own.get("reasons") and isinstance(result.get("profile_test"), dict):
        message = f"{kind}: " + "; ".join(map(str, own["reasons"]))
    elif failed:
        message = f"{kind}: the lower bound {bound:.3f} exceeds the claimed ε {claim:.3f} at {confidence:.0%} confidence"
    elif inconclusive:
        message = (f"{kind}: inconclusive — the ceiling {ceiling:.3f} of this audit is at or below the claimed ε {claim:.3f}"
                   if isinstance(ceiling, (int, float)) else f"{kind}: inconclusive — {result.get('status_reason', 'the audit could not have refuted the claim')}")
    else:
        message = f"{kind}: lower bound {bound:.3f} ≤ claimed ε {claim if claim is None else f'{claim:.3f}'}"
    if inconclusive and not failed and own.get("reasons"):
        message = f"{kind}: " + "; ".join(map(str, own["reasons"]))  # the audit's own words (what it would need)
    verdict = decide([Check(subject, f"{kind} bound vs claim", message, failed=failed,
                            inconclusive=inconclusive and not failed, assumption=assumption)],
                     alpha=1 - float(confidence))
    verdict["family_wise_error"]["statement"] = "one pre-declared test at the stated confidence"
    return verdict


def single_audit_verdict_with_policy(kind: str, result: dict[str, Any], policy: Any,
                                     source: str = "results") -> tuple[dict[str, Any], Any]:
    """(verdict, PolicyEvaluation) of a canary / mechanism / conformance / accountant-check result
    under `policy` (`gate <kind>.json --policy P`). The policy's rules decide (`fail_on_violation`,
    on by default, reads the built-in verdict); a claim the audit could not have refuted stays
    inconclusive, and fails with `fail_on_inconclusive`."""
    from audit.machinery.policy import evaluate_policy_on_audit

    built_in = single_audit_verdict(kind, result)
    evaluation = evaluate_policy_on_audit(policy, kind, result, built_in, source=source)
    checks = [Check(c.target_label, c.rule, c.message, failed=c.applicable and not c.passed,
                    decides=c.applicable, assumption="policy rule") for c in evaluation.checks]
    checks += [Check(c["subject"], c["name"], c["message"], inconclusive=True, assumption=c["assumption"])
               for c in built_in["checks"] if c["outcome"] == "inconclusive"]
    source_name = evaluation.policy_path or evaluation.policy_name
    rules = policy.rules
    verdict = decide(checks, alpha=built_in["family_wise_error"]["alpha"], decided_by=f"policy {source_name}",
                     fail_on_inconclusive=bool(rules.fail_on_inconclusive))
    verdict["family_wise_error"]["statement"] = built_in["family_wise_error"]["statement"]
    verdict["built_in"] = {"status": built_in["status"], "reasons": built_in["reasons"]}
    return verdict, evaluation


def verdict_tags(verdict: dict[str, Any]) -> dict[str, str]:
    """MLflow tags of the parent run (values ≤ 5000 characters, MLflow's limit)."""
    from audit.statistics.attack_evaluation import BOUND_SCOPES

    bounds = {f"bound.{method}.{key}": str(scope[key])[:4900]
              for method, scope in BOUND_SCOPES.items() for key in ("assumption", "scope")}
    return {
        **bounds,
        "verdict": str(verdict.get("status")),
        "verdict.decided_by": str(verdict.get("decided_by")),
        "verdict.reasons": " | ".join(map(str, verdict.get("reasons") or []))[:4900] or "-",
        "verdict.family_wise_error": str((verdict.get("family_wise_error") or {}).get("statement", ""))[:4900],
    }
