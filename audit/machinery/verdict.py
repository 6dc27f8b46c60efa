"""One verdict model for every command: checks in, one status per claim, the top line out.

The contract (results["verdict"], read by the console, report.html, summary.md, junit.xml and the
MLflow tags of the parent run; results.json schema_version 3):

    {"status": "pass" | "fail" | "inconclusive" | "no_claim", "passed": status == "pass",
     "claims": [{"claim", "status": "held" | "not_refuted" | "refuted" | "untestable", "reason", "ceiling",
                 "needed", "power", ...}],
     "counts": {"held": n, "not_refuted": n, "refuted": n, "untestable": n},
     "rules": [{"rule", "subject", "attack", "status": "passed" | "failed" | "not_applicable", "figure",
                "threshold", "message"}], "rule_counts": {...}   (with a policy only: never claims),
     "leakage": [{"subject", "status": "leaks" | "no_significant_leakage", "statement", "tests", ...}],
     "reasons": [one line per claim], "decided_by": "built-in checks" | "policy <file>",
     "family_wise_error": {...how the tests that decide were corrected...},
     "checks": [...every check, its outcome...], "notes": [...], "fail_on_leak": bool}

A `Check` is one of:
- a statistical test of a claim (`p_value`: of "the claim holds"); all tests of one verdict form
  one family, corrected with Holm's step-down procedure at α = 1 − confidence, so the probability
  that a true claim is reported as refuted is ≤ α for the verdict as a whole;
- a rule applied to the results (`failed`): a policy rule, an unsound accountant, a single
  pre-declared audit test (canary, mechanism) whose bound already holds at the stated confidence;
- `inconclusive`: a check that could not have failed — its ceiling (the bound a perfect attack
  would reach) is at or below the claim, or no bound is proven for the setting;
- `decides=False`: shown with its assumption, never decides (e.g. Clopper-Pearson over one
  model's candidates, which assumes independent trials).

Each check names the claim it tests (`claim`) and where its power against it comes from (`power`);
a claim is **refuted** if one of its checks failed, **held** if at least one with power could have
failed (ceiling above the claim) and none did, **not refuted** if checks could have failed but none
has power, **untestable** here if none could have failed. A policy's rules are a list of their own
(`rules`), never claims. The top line: "fail" if a claim was refuted or a rule failed,
"inconclusive" if one was untestable or not refuted (fail with a policy's `fail_on_inconclusive`), "pass" only when every claim held, and
"no_claim" when nothing claimed was tested: then the leakage statements (audit.machinery.leakage)
say LEAKS or NO SIGNIFICANT LEAKAGE FOUND, and the verdict fails only with `--fail-on-leak`.

`verdict_for_results` builds the built-in checks from a results dict (targets, synthetic entries)
and adds a policy's rules beside its claims; `gate` and `report` recompute it from results.json, so the
run, the gate and a re-render cannot disagree.
"""
from __future__ import annotations

import functools
import math
from copy import deepcopy
from dataclasses import asdict, dataclass
from typing import Any, Iterable, Literal

from audit.machinery.conformance_verdict import conformance_check_fields, conformance_tests_in_family
from audit.machinery.leakage import synthetic_leakage, target_leakage
from audit.machinery.verdict_words import (  # noqa: F401  (re-exported: the words every output uses)
    claim_line, claim_sentence, claim_tags, extra_reasons, leakage_word, status_word, verdict_tags,
)
from audit.statistics.audit_ceilings import canaries_needed_one_run
from audit.statistics.epsilon_bounds import one_run_ceiling, one_run_claim_p_value
from audit.statistics.multiple_testing import holm_rejections
from audit.statistics.one_run_power import whitebox_power

__all__ = ["Check", "CLAIM_STATUSES", "POWER_KINDS", "RULE_STATUSES", "decide", "family_alpha_each", "verdict_for_results", "recompute_verdict", "claim_statuses",
           "needed_candidates", "status_word", "leakage_word", "claim_line", "claim_sentence", "extra_reasons",
           "claim_tags", "verdict_tags", "BUILT_IN"]

Status = Literal["pass", "fail", "inconclusive", "no_claim"]
# Every claim status, in the order outputs count them. "not_refuted": a check that could have refuted the
# claim ran and did not, but its mode has no proven or measured power against this violation.
CLAIM_STATUSES = ("held", "not_refuted", "refuted", "untestable")
POWER_KINDS = ("proven", "measured", "control", "none")
# A policy's rules are not claims: each is passed, failed or not applicable, and counted apart.
RULE_STATUSES = ("passed", "failed", "not_applicable")
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
    claim: str = ""  # the claim this check tests (checks of one claim decide it together)
    ceiling: float | None = None  # the most a perfect attack could show here (an ε), where computable
    needed: str = ""  # what would make an untestable claim testable ("needs ≥ 3,100 candidates")
    # Where this check's power against its claim comes from (docs/verdict.md "Power"): a dict
    # {"kind": "proven" | "measured" | "control" | "none", "detail": plain words, "figure": number or None,
    #  "decider": for "none", the mode / flag that would decide}. A passing check whose power is "none"
    # makes its claim "not refuted", never "held". None: not declared yet (legacy rows: read as proven).
    power: dict[str, Any] | None = None


def claim_statuses(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One entry per claim from the decided check rows (pure): refuted if any of its checks failed;
    held if at least one of them could have failed (its ceiling above the claim at its Holm level)
    and none did; untestable when none of them could have failed. A claim's tests decide together:
    the membership attacks on the released model and the white-box one-run row of its twin test one
    (ε, δ) claim; its ceiling is the best among them."""
    groups: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        if row.get("outcome") == "shown":
            continue
        key = row.get("claim") or f"{row.get('subject')}: {row.get('name')}"
        groups.setdefault(key, []).append(row)
    claims = []
    for key, members in groups.items():
        outcomes = [r["outcome"] for r in members]
        # Held when at least one of its tests could have refuted it (its ceiling above the claim at
        # its Holm level) and none did: a test without power adds nothing, it takes nothing away.
        powered = [r for r in members if r["outcome"] == "pass" and _has_power(r)]
        status = ("refuted" if "fail" in outcomes else "held" if powered
                  else "not_refuted" if "pass" in outcomes else "untestable")
        wanted = {"refuted": "fail", "held": "pass", "not_refuted": "pass"}.get(status, "inconclusive")
        same = powered if status == "held" else [r for r in members if r["outcome"] == wanted]
        # The strongest check speaks for the claim; the others that agree are named, not repeated.
        deciding = min(same, key=lambda r: r["p_value"] if isinstance(r.get("p_value"), (int, float)) else 2.0)
        reason = str(deciding.get("message"))
        others = [str(r.get("name")) for r in same if r is not deciding and r.get("message") != reason]
        if deciding.get("assumption") == "policy rule" and status != "held":  # short, each its own number
            reason = "; ".join(dict.fromkeys(str(r.get("message")) for r in same))
        elif others and status != "held":
            reason += f" (likewise: {', '.join(others)})"
        powerless = [str(r.get("name")) for r in members if r["outcome"] == "inconclusive"]
        if status in ("held", "not_refuted") and powerless:
            reason += f" (untestable alone: {', '.join(powerless)})"
        ceilings = [r["ceiling"] for r in members if isinstance(r.get("ceiling"), (int, float))]
        p_values = [r["p_value"] for r in members if isinstance(r.get("p_value"), (int, float))]
        claims.append({
            "claim": key,
            "subject": deciding.get("subject"),
            "kind": "policy rule" if deciding.get("assumption") == "policy rule" else "claim",
            "status": status,
            "reason": reason,
            "ceiling": max(ceilings) if ceilings else None,
            # Every route to power its tests name (more candidates, more canaries): the reader picks.
            "needed": "; or ".join(dict.fromkeys(r["needed"] for r in members if r.get("needed"))) or None
            if status == "untestable" else None,
            "p_value": min(p_values) if p_values else None,
            "checks": [r.get("name") for r in members],
            "power": _claim_power(status, deciding, members),
        })
    return claims


def _has_power(row: dict[str, Any]) -> bool:
    """A passing check speaks for "held" only with power against its claim: proven, measured or
    shown by a positive control in the same run (an undeclared legacy row counts as proven)."""
    power = row.get("power")
    return not isinstance(power, dict) or power.get("kind") != "none"


def _claim_power(status: str, deciding: dict[str, Any], members: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The claim's `power` entry: the deciding check's, or for a not-refuted claim the first
    powerless check's (what its mode cannot detect, and what would decide)."""
    if status == "not_refuted":
        return next((r["power"] for r in members if isinstance(r.get("power"), dict)), None)
    power = deciding.get("power")
    return dict(power) if isinstance(power, dict) else None


def decide(
    checks: Iterable[Check],
    *,
    alpha: float = DEFAULT_ALPHA,
    decided_by: str = BUILT_IN,
    fail_on_inconclusive: bool = False,
    notes: Iterable[str] = (),
    leakage: Iterable[dict[str, Any]] = (),
    fail_on_leak: bool = False,
    rules: Iterable[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """The verdict dict for `checks` (pure). Holm over every deciding check that carries a p-value;
    then one status per claim (`claims`) and the top line from them: pass only when every claim
    held, fail when one was refuted (a policy rule is a claim too), inconclusive otherwise, and
    "no_claim" when nothing claimed was tested: then `leakage` (statements on subjects without a
    claim) says LEAKS or NO SIGNIFICANT LEAKAGE FOUND, and fails only with `fail_on_leak`."""
    checks = list(checks)
    leakage = [dict(entry) for entry in leakage]
    tests = [c for c in checks if c.decides and c.p_value is not None]
    rejected = dict(zip(map(id, tests), holm_rejections([c.p_value for c in tests], alpha))) if tests else {}
    rows = []
    for check in checks:
        if not check.decides:
            outcome = "shown"
        elif rejected.get(id(check)) or (check.p_value is None and check.failed):
            outcome = "fail"
        elif check.inconclusive:
            outcome = "inconclusive"
        else:
            outcome = "pass"
        rows.append({**asdict(check), "outcome": outcome})
    claims = claim_statuses(rows)
    refuted = [c for c in claims if c["status"] == "refuted"]
    open_claims = [c for c in claims if c["status"] in ("untestable", "not_refuted")]
    leaks = [e for e in leakage if e.get("status") == "leaks"]
    rule_list = [dict(r) for r in rules or ()]
    failed_rules = [r for r in rule_list if r.get("status") == "failed"]
    if refuted or failed_rules:
        status: Status = "fail"
        reasons = [c["reason"] for c in refuted] + [
            f"policy rule {r.get('rule')} failed: {r.get('message')}" for r in failed_rules]
    elif open_claims:
        status = "fail" if fail_on_inconclusive else "inconclusive"
        reasons = [((f"{'untestable here' if c['status'] == 'untestable' else 'not refuted'} and the policy "
                     "fails on inconclusive: ") if fail_on_inconclusive else "") + c["reason"] for c in open_claims]
    else:
        status = "pass" if claims else "no_claim"
        reasons = []
    if fail_on_leak and leaks:
        reasons = (reasons if status == "fail" else []) + [
            f"leaks, a finding on your own release (--allow-leak makes it report-only): {e.get('statement')}"
            for e in leaks]
        status = "fail"
    k = len(tests)
    statement = (
        f"Holm step-down over the {k} test(s) that can decide the verdict, family-wise error ≤ {alpha:g} "
        f"(each claim is refuted only if its test is rejected at α/(K − i + 1))"
        if k else ("no DP claim was tested here, so no test decides a claim"
                   if not claims else "no p-value decides a claim here: each claim's deciding check is a rule "
                   "applied to the results")
        + ("; each leakage statement below names its own test and p-value, which decide LEAKS or NO SIGNIFICANT "
           "LEAKAGE FOUND" if not k and leakage else "")
    )
    return {
        "status": status,
        "passed": status == "pass",
        "reasons": reasons,
        "decided_by": decided_by,
        "policy": None if decided_by == BUILT_IN else decided_by.removeprefix("policy "),
        "family_wise_error": {"method": "holm" if k else "none", "alpha": alpha, "n_tests": k,
                              "statement": statement},
        "inconclusive": [c["reason"] for c in open_claims],
        "notes": list(notes),
        "claims": claims,
        "counts": {s: sum(1 for c in claims if c["status"] == s) for s in CLAIM_STATUSES},
        "leakage": leakage,
        "fail_on_leak": bool(fail_on_leak),
        "checks": rows,
        **({"rules": rule_list, "rule_counts": {s: sum(1 for r in rule_list if r.get("status") == s)
                                                 for s in RULE_STATUSES}} if rules is not None else {}),
    }


# ---------------------------------------------------------------------------------------------
# Built-in checks of a results dict (run, audit-model, audit-scores, synth-check)


def _estimate_text(value: Any) -> str:
    """A Gaussian-family estimate: None when withheld (its scores contradict a Gaussian curve, gdp_fit)."""
    return "withheld" if value is None else f"{float(value):.2f}"


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
    return count + conformance_tests_in_family(results)  # the run's conformance: one combined test


# Where each built-in check's power against its claim comes from (docs/verdict.md "Power").
PROVEN_PLD = {"kind": "proven", "detail": "exact: the tight PLD interval of the same noise, sampling rate and steps",
              "figure": None, "decider": ""}
PROVEN_CONFORMANCE = {"kind": "proven", "detail": "the checks observe the training's own noise, clipping and "
                      "sampling directly", "figure": None, "decider": ""}


def membership_power(results: dict[str, Any], target: dict[str, Any]) -> dict[str, Any]:
    """The power of a black-box membership row (loss, LiRA, RMIA… on one released model, or the user's
    scores): none. A perfect attack's ceiling above the claim is not power: these attacks see the final
    model only, and their real power against a broken mechanism can be orders of magnitude below it
    (issue #35: bugs with true ε ≈ 1400 pass them). A claim they alone test is "not refuted"."""
    config = results.get("config") if isinstance(results.get("config"), dict) else {}
    if "score_column" in config:  # audit-scores: the user's scores are the attack
        return {"kind": "none", "figure": None,
                "detail": "not refuted by these scores: a test on the scores you supplied is only as strong as the "
                          "attack that produced them, and cannot detect a violation those scores do not expose",
                "decider": "a white-box audit of the training code decides (whitebox-audit with Dirac canaries, or "
                           "canary-audit --models N)"}
    if target.get("accountant") in (None, "claimed"):  # audit-model: the user's released model
        return {"kind": "none", "figure": None,
                "detail": "black-box membership attacks on the released model cannot detect a training bug whose "
                          "violation a loss / LiRA attack on the final model does not expose",
                "decider": "a white-box audit of the training code decides (whitebox-audit with Dirac canaries, or "
                           "canary-audit --models N)"}
    return {"kind": "none", "figure": None,
            "detail": "black-box membership attacks on the final model cannot detect a mechanism whose violation a "
                      "loss / LiRA attack on that model does not expose",
            "decider": "the white-box one-run twin decides (privacy.whitebox_one_run, on by default)"}


def whitebox_twin_power(row: dict[str, Any]) -> dict[str, Any]:
    """The white-box one-run twin's power against its claim. Dirac gradient canaries: proven (each
    canary owns a coordinate, observed at every iterate, so a perfect attack is what a broken mechanism
    gives and the ceiling is reachable). Random-direction gradient canaries overlap the real gradients,
    so the ceiling is not proven reachable; their power is measured on the planted-bug suite
    (docs/one-run-audits.md: every planted bug flagged, no correct setup flagged). The federated twin's
    canary clients have no such measurement: none."""
    if str(row.get("family") or "").startswith("canary clients"):
        return {"kind": "none", "figure": None,
                "detail": "canary clients with random directions have no proven or measured power against a broken "
                          "aggregation",
                "decider": "a white-box audit of the client training decides (whitebox-audit with Dirac canaries)"}
    if str(row.get("kind")) == "dirac":
        return {"kind": "proven", "figure": None, "decider": "",
                "detail": "worst-case Dirac gradient canaries, observed at every iterate: the ceiling is reachable"}
    return {"kind": "measured", "figure": None, "decider": "",
            "detail": "random-direction gradient canaries at every iterate: power measured on the planted-bug suite "
                      "(docs/one-run-audits.md: every planted bug flagged, no correct setup flagged)"}


def synthetic_power() -> dict[str, Any]:
    """A distance attack on a released synthetic table: no power against a generator's ε claim."""
    return {"kind": "none", "figure": None,
            "detail": "a distance attack on the released table cannot detect a generator whose violation does not "
                      "show as synthetic rows close to their training records",
            "decider": "a white-box audit of the generator's training decides (whitebox-audit)"}


def _target_checks(index: int, target: dict[str, Any], alpha_each: float, confidence: float,
                   alpha: float | None = None, results: dict[str, Any] | None = None) -> tuple[list[Check], list[str]]:
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
    if claim is None:  # nothing to refute: the leakage statement (audit.machinery.leakage) speaks for it
        return checks, notes
    claim_text = f"{label}: (ε {claim:.4g}, δ {delta:g})-DP"
    power = membership_power(results or {}, target)
    # audit-scores / audit-model: the ε is the user's claim, no accountant of this tool computed it
    whose = "claimed" if target.get("accountant") in (None, "claimed") else "accountant's"
    tested = False
    for attack in attacks:
        name = str(attack.get("name"))
        row_claim = attack.get("claim") if isinstance(attack.get("claim"), dict) else None
        row_text = claim_text
        if row_claim is not None:  # a federated row: it tests its own level's guarantee, or none
            if _attack_claim(target, attack) is None:
                checks.append(Check(
                    subject, f"{label} · {name} · no claim", f"{label}, {name}: no DP claim covers this threat "
                    f"({row_claim.get('note') or 'non-private'}); shown only", decides=False,
                    assumption="no guarantee to test"))
                continue
            name = f"{name} ({row_claim.get('level', 'record')}-level ε)"
            row_text = (f"{label}: {row_claim.get('level', 'record')}-level "
                        f"(ε {_attack_claim(target, attack):.4g}, δ {delta:g})-DP")
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
                                f"{label}, {name}: untestable here — even alone, a perfect attack could prove only "
                                f"ε ≥ {alone:.2f} with {details['m']} candidates, at or below the claim {row_eps:.3f} "
                                "(left out of the Holm family)", inconclusive=True,
                                assumption="one training run, coin-flip membership (proven)", claim=row_text,
                                ceiling=alone, needed=needed_candidates(row_eps, delta, alpha), power=power))
            continue
        p = one_run_claim_p_value(details, row_eps, delta)
        ceiling = one_run_ceiling(int(details["m"]), delta, alpha_each)
        bound = (attack.get("epsilon_lb") or {}).get("one_run")
        if p <= alpha_each:
            message = (f"{label}, {name}: the one-run test rejects the {whose} ε {row_eps:.3f} "
                       f"(p = {p:.2g}; one-run bound {bound:.3f} at {confidence:.0%})")
        else:
            message = (f"{label}, {name}: one-run bound {bound:.3f} vs the {whose} ε {row_eps:.3f} "
                       f"(p = {p:.2g}); ceiling {ceiling:.2f}")
        inconclusive = ceiling <= row_eps
        if inconclusive:
            message = (f"{label}, {name}: untestable here — even a perfect attack could prove only ε ≥ {ceiling:.2f} "
                       f"with {details['m']} candidates at the family level, at or below the claim {row_eps:.3f}")
        checks.append(Check(subject, f"{label} · {name} · one_run", message, p_value=p, inconclusive=inconclusive,
                            assumption="one training run, coin-flip membership (proven)", claim=row_text,
                            ceiling=ceiling,
                            # a row that measured its own power (the llm job's control run) speaks for itself
                            power=attack["power"] if isinstance(attack.get("power"), dict) else power,
                            needed=needed_candidates(row_eps, delta, alpha_each) if inconclusive else ""))
    whitebox = target.get("whitebox_one_run")
    if isinstance(whitebox, dict) and whitebox.get("p_value") is not None:
        key = claim_text if not whitebox.get("level") else (  # federated canary clients: their level's claim
            f"{label}: {whitebox['level']}-level (ε {float(whitebox['claim']):.4g}, δ {delta:g})-DP")
        checks += _whitebox_one_run_checks(subject, label, whitebox, key, alpha_each)
        tested = True
    if not tested:
        checks.append(Check(
            subject, f"{label} · no proven bound",
            f"{label}: untestable here — membership was not an independent fair coin flip, so no bound proven "
            f"for one model decides whether ε {claim:.3f} holds (Clopper-Pearson is shown, assuming independent trials)"
            + _evidence_against(attacks, claim),
            inconclusive=True, assumption="one-run bound needs coin-flip membership", claim=claim_text,
            needed="needs members drawn by a fair coin flip per record (--membership-randomized), or "
                   "independent training runs (canary-audit)",
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
            failed=unsound, assumption="PLD interval of the Poisson-subsampled Gaussian mechanism", power=PROVEN_PLD,
            claim=f"{label}: the {target.get('accountant')} accountant's ε {reported:.4g} is at least the true ε",
        ))
    return checks, notes


def _evidence_against(attacks: list[dict[str, Any]], claim: float) -> str:
    """For a claim untestable only because membership was not coin-flipped (#35.4): the shown-only
    figures that contradict it under the assumption they rest on, in words, and the one flag that
    decides. "" when none contradicts it."""
    against = sorted(((float(cp), str(a.get("name")), a.get("auc")) for a in attacks
                      for cp in [(a.get("epsilon_lb") or {}).get("clopper_pearson")]
                      if isinstance(cp, (int, float)) and cp > claim), reverse=True)
    if not against:
        return ""
    cp, name, auc = against[0]
    auc_text = f", AUC {auc:.3f}" if isinstance(auc, (int, float)) else ""
    return (f". The figures shown contradict the claim if each record's membership was independent: the {name} "
            f"attack's Clopper-Pearson bound ε ≥ {cp:.3f}{auc_text} is above the claimed ε {claim:.3g}. If membership "
            "was assigned by a fair coin flip per record, --membership-randomized makes this a proven one-run "
            "test that decides the claim")


def _whitebox_one_run_checks(subject: str, label: str, row: dict[str, Any], claim_key: str,
                             level: float) -> list[Check]:
    """The target's white-box one-run row (a twin trained with gradient canaries, row family
    "white-box one-run"): a test of the *same* claim as the membership rows, in the same Holm family
    when it could refute the claim alone (`refutable_alone`), judged for power at the family's first
    Holm level `level` (α/K) like every row; accuracy shown beside."""
    family = str(row.get("family") or "white-box one-run")
    name = f"{label} · {family}"
    claim, m = float(row["claim"]), int(row["m"])
    power = whitebox_power(row, level)
    ceiling = float(power["ceiling"]) if isinstance(power.get("ceiling"), (int, float)) else None
    assumption = "one training run of a twin with gradient canaries by fair coins (proven: Steinke et al., f-DP one-run)"
    accuracy = Check(subject, f"{name} · accuracy",
                     f"{label}: test accuracy {row['test_accuracy_target']:.3f} (released target) vs "
                     f"{row['test_accuracy_with_canaries']:.3f} (twin with {m} canaries); training "
                     f"{row['train_seconds_target']:.1f} s vs {row['train_seconds_with_canaries']:.1f} s", decides=False,
                     assumption="shown only")
    need = power.get("needed")
    needed = (f"needs ≥ {int(need):,} canaries (privacy.one_run_canaries)" if need
              else f"needs more than {max([m] + [int(k) for k in row.get('fdp_perfect_p_by_m') or {}]):,} canaries")
    curve = power.get("curve_ceiling")
    steinke_used = "steinke" in (row.get("tests") or ["steinke"])
    reach = ((f"a perfect attack reaches ε {power['steinke_ceiling']:.2f} (Steinke et al.) and " if steinke_used else
              "a perfect attack ")
             + (f"refutes the DP-SGD curves up to ε {curve:.2f} (f-DP, same q and T)" if curve is not None
                else "could not refute the claim's curve (f-DP)"))
    if not row.get("refutable_alone"):
        return [Check(subject, name, f"{label}, {family}: untestable here — with {m} canaries {reach}, even "
                      f"alone, at or below the claim {claim:.3f}; {needed} (left out of the Holm family)",
                      inconclusive=True, assumption=assumption, claim=claim_key, ceiling=ceiling, needed=needed,
                      power=whitebox_twin_power(row)),
                accuracy]
    p = float(row["p_value"])
    message = (f"{label}, {family} ({m} {row.get('kind')} canaries, every iterate): Steinke et al. ε ≥ "
               f"{float(row['steinke_epsilon']):.3f}, f-DP test {'refutes' if row.get('fdp_refuted') else 'does not refute'} "
               f"the claim's curve, vs accountant ε {claim:.3f} (p = {p:.2g}); at the family's level {reach}"
               f" (estimates: Gaussian sum ε ≈ {_estimate_text(row.get('gaussian_sum_epsilon'))}, Andrew et al. ε ≈ "
               f"{_estimate_text(row.get('andrew_epsilon'))})")
    if not power["powered"]:
        message = (f"{label}, {family}: untestable here — at the family's Holm level with {m} canaries "
                   f"{reach}, at or below the claim {claim:.3f} (p = {p:.2g}); {needed}")
    return [Check(subject, name, message, p_value=p, inconclusive=not power["powered"], assumption=assumption,
                  claim=claim_key, ceiling=ceiling, needed="" if power["powered"] else needed,
                  power=whitebox_twin_power(row)), accuracy]


def _synthetic_checks(index: int, entry: dict[str, Any], alpha_each: float, confidence: float) -> list[Check]:
    generator = entry.get("generator") or f"synthetic[{index}]"
    claim = _claim(entry, "epsilon_target")
    label = f"synthetic '{generator}'" + (f" at ε {claim:g}" if claim is not None else "")
    subject = f"synthetic[{index}]"
    mia = entry.get("mia") or {}
    checks: list[Check] = []
    if claim is not None:
        claim_text = f"{label}: (ε {claim:g})-DP release"
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
                                f"flip, so no proven bound tests the generator's ε"
                                + _evidence_against([{**mia, "name": mia.get("name") or "distance"}], claim),
                                inconclusive=True,
                                assumption="one-run bound needs coin-flip membership", claim=claim_text,
                                needed="needs train/holdout rows assigned by a fair coin flip per record",
                                power=synthetic_power()))
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
                message = (f"{label}: untestable here — a perfect attack could prove only ε ≥ {ceiling:.2f} "
                           f"with {details['m']} records, at or below the claim {claim:g}")
            checks.append(Check(subject, f"{label} · distance · one_run", message, p_value=p,
                                inconclusive=inconclusive, assumption="one release, coin-flip membership (proven)",
                                claim=claim_text, ceiling=ceiling, power=synthetic_power(),
                                needed=needed_candidates(claim, delta, alpha_each, "records") if inconclusive else ""))
        for flag in entry.get("flags") or []:
            if flag.get("check") != "epsilon_violation":
                checks.append(Check(subject, f"{label} · {flag.get('check')}", f"{label}: {flag.get('message')} "
                                    "(shown: a DP generator is judged by its ε)", decides=False))
        return checks
    # No DP claim: nothing to refute. A release under audit gets a leakage statement
    # (audit.machinery.leakage); a reference generator of the run's own sweep (e.g. the deliberately
    # leaky noisy copy) shows what leakage looks like: its tests are shown only.
    if entry.get("baseline"):
        leak_tests = [t for t in entry.get("leak_tests") or [] if isinstance(t, dict) and t.get("p_value") is not None]
        return [Check(subject, f"{label} · {t.get('check')}", f"{label} (baseline, not a release under audit): "
                      f"{t.get('message')}", p_value=float(t["p_value"]), decides=False,
                      assumption=str(t.get("assumption") or "")) for t in leak_tests]
    return checks


def built_in_checks(results: dict[str, Any], alpha: float) -> tuple[list[Check], list[str], list[dict[str, Any]]]:
    """Every built-in check of a results dict, notes, and the leakage statements of the subjects
    without a DP claim (targets, synthetic releases under audit)."""
    k = max(_tests_in_family(results, alpha), 1)
    alpha_each = alpha / k  # the first Holm step: what a test must reach when nothing else fails
    confidence = 1 - alpha
    checks: list[Check] = []
    notes: list[str] = []
    leakage: list[dict[str, Any]] = []
    for index, target in enumerate(results.get("targets") or []):
        if isinstance(target, dict):
            more, found = _target_checks(index, target, alpha_each, confidence, alpha, results)
            checks += more
            notes += found + _score_notes(target)
            if not _target_has_claim(target):
                leakage.append(target_leakage(index, target, f"ε = {_eps_text(target.get('epsilon_target'))}", alpha))
    checks += [Check(**{"power": PROVEN_CONFORMANCE, **fields}) for fields in conformance_check_fields(results)]  # main job: its own training
    for index, entry in enumerate(results.get("synthetic") or []):
        if isinstance(entry, dict):
            checks += _synthetic_checks(index, entry, alpha_each, confidence)
            if _claim(entry, "epsilon_target") is None and not entry.get("baseline"):
                name = entry.get("generator") or f"synthetic[{index}]"
                leakage.append(synthetic_leakage(index, entry, f"synthetic '{name}'", alpha))
    return checks, notes, leakage


# Fields an attack record may carry when its scores tie or saturate (set by the statistics that
# detect them); shown as notes naming the target and attack, whatever their exact shape.
SCORE_NOTE_FIELDS = ("score_ties", "saturated", "saturation", "ties")


def _score_notes(target: dict[str, Any]) -> list[str]:
    label = f"ε = {_eps_text(target.get('epsilon_target'))}"
    notes = []
    for attack in target.get("attacks") or []:
        if not isinstance(attack, dict):
            continue
        for field in SCORE_NOTE_FIELDS:
            value = attack.get(field)
            if not value:
                continue
            if isinstance(value, dict):
                if value.get("flattens") is False or value.get("detected") is False:
                    continue
                text = value.get("note") or value.get("message") or ", ".join(
                    f"{k} {v}" for k, v in value.items() if isinstance(v, (int, float, str)) and not isinstance(v, bool))
            else:
                text = str(value) if not isinstance(value, bool) else field.replace("_", " ")
            notes.append(f"{label}, {attack.get('name')}: {field.replace('_', ' ')}: {text}")
    return notes


def _target_has_claim(target: dict[str, Any]) -> bool:
    return _claim(target, "epsilon_accountant") is not None or any(
        _attack_claim(target, a) is not None for a in target.get("attacks") or [] if isinstance(a, dict))


@functools.lru_cache(maxsize=256)
def needed_candidates(claim: float, delta: float, alpha: float, unit: str = "candidates") -> str:
    """What would make a one-run test of `claim` testable at level `alpha`: "needs ≥ N candidates in
    one run" (audit_ceilings.canaries_needed_one_run, Steinke, Nasr, Jagielski 2023, arXiv 2305.08846)."""
    needed = canaries_needed_one_run(claim, delta, confidence=1 - alpha)
    if needed is None:
        return (f"needs more than 10⁶ {unit} in one run (the 2mδ term grows with m), or independent "
                "training runs (canary-audit)")
    return f"needs ≥ {needed:,} {unit} in one run"


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


def recompute_verdict(results: dict[str, Any], policy: Any = None, *, fail_on_leak: bool | None = None) -> dict[str, Any]:
    """The verdict dict recomputed from the numbers of a results dict (pure; `gate`, `report` and
    the schema checks call it): what the run that wrote `results` must have said."""
    return verdict_for_results(results, policy, fail_on_leak=fail_on_leak)[0]["verdict"]


def verdict_for_results(results: dict[str, Any], policy: Any = None, *,
                        fail_on_leak: bool | None = None) -> tuple[dict[str, Any], Any]:
    """(results with `verdict` and the targets' `violation` set, the PolicyEvaluation or None).

    `fail_on_leak` (None: as the results' own verdict recorded it) makes a LEAKS statement on a
    subject without a DP claim fail the verdict (`--fail-on-leak`).

    The built-in checks decide the claims, with or without a policy. A policy adds its rules
    (`verdict.rules`: passed / failed / not applicable), never removes or re-words a claim; the top
    line fails on a refuted claim or a failed rule, and `fail_on_inconclusive` fails an untestable or
    not-refuted claim.
    """
    from audit.machinery.policy import evaluate_policy

    out = deepcopy(results)
    alpha = 1 - results_confidence(results)
    if fail_on_leak is None:
        fail_on_leak = bool((results.get("verdict") or {}).get("fail_on_leak")) if isinstance(
            results.get("verdict"), dict) else False
    checks, notes, leakage = built_in_checks(out, alpha)
    built_in = decide(checks, alpha=alpha, notes=notes, leakage=leakage, fail_on_leak=fail_on_leak)
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

    # A policy adds rules beside the claims; it never removes, renames or re-words a claim (#36): the
    # claims are the built-in ones, and the top line fails on a refuted claim or a failed rule.
    evaluation = evaluate_policy(policy, out)
    source = evaluation.policy_path or evaluation.policy_name
    out["verdict"] = decide(checks, alpha=alpha, decided_by=f"policy {source}",
                            fail_on_inconclusive=bool(getattr(policy.rules, "fail_on_inconclusive", False)),
                            notes=notes, leakage=leakage, fail_on_leak=fail_on_leak,
                            rules=[check.as_rule() for check in evaluation.checks])
    out["verdict"]["built_in"] = {"status": built_in["status"], "reasons": built_in["reasons"],
                                  "claims": built_in["claims"]}
    out["policy_evaluation"] = evaluation.as_dict()
    return out, evaluation
