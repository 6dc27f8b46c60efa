"""The built-in checks of a results dict (`run`, `audit-model`, `audit-scores`, `synth-check`): one
`Check` per claim a target, attack, white-box twin or synthetic release makes, with where its power
against that claim comes from (docs/verdict.md "Power").
The white-box one-run twin's checks are in audit/machinery/whitebox_twin_checks.py.
"""

from __future__ import annotations

import functools
import math
from typing import Any, cast

from audit.machinery.conformance_verdict import (
    conformance_check_fields,
    conformance_tests_in_family,
)
from audit.machinery.leakage import synthetic_leakage, target_leakage
from audit.machinery.verdict_rows import Check
from audit.machinery.whitebox_twin_checks import whitebox_one_run_checks
from audit.statistics.audit_ceilings import canaries_needed_one_run
from audit.statistics.epsilon_bounds import one_run_ceiling, one_run_claim_p_value


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
    if details is None or claim is None or attack.get("decides") is False:  # a row shown beside its claim's test
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
PROVEN_PLD = {
    "kind": "proven",
    "detail": "exact: the tight PLD interval of the same noise, sampling rate and steps",
    "figure": None,
    "decider": "",
}


PROVEN_CONFORMANCE = {
    "kind": "proven",
    "detail": "the checks observe the training's own noise, clipping and sampling directly",
    "figure": None,
    "decider": "",
}


def membership_power(results: dict[str, Any], target: dict[str, Any]) -> dict[str, Any]:
    """The power of a black-box membership row (loss, LiRA, RMIA… on one released model, or the user's
    scores): none. A perfect attack's ceiling above the claim is not power: these attacks see the final
    model only, and their real power against a broken mechanism can be orders of magnitude below it
    (issue #35: bugs with true ε ≈ 1400 pass them). A claim they alone test is "not refuted"."""
    found_config = results.get("config")
    config: dict[str, Any] = found_config if isinstance(found_config, dict) else {}
    if "score_column" in config:  # audit-scores: the user's scores are the attack
        return {
            "kind": "none",
            "figure": None,
            "detail": "not refuted by these scores: a test on the scores you supplied is only as strong as the "
            "attack that produced them, and cannot detect a violation those scores do not expose",
            "decider": "a white-box audit of the training code decides (whitebox-audit with Dirac canaries, or "
            "canary-audit --models N)",
        }
    if target.get("accountant") in (None, "claimed"):  # audit-model: the user's released model
        return {
            "kind": "none",
            "figure": None,
            "detail": "black-box membership attacks on the released model cannot detect a training bug whose "
            "violation a loss / LiRA attack on the final model does not expose",
            "decider": "a white-box audit of the training code decides (whitebox-audit with Dirac canaries, or "
            "canary-audit --models N)",
        }
    return {
        "kind": "none",
        "figure": None,
        "detail": "black-box membership attacks on the final model cannot detect a mechanism whose violation a "
        "loss / LiRA attack on that model does not expose",
        "decider": "the white-box one-run twin decides (privacy.whitebox_one_run, on by default)",
    }


def synthetic_power() -> dict[str, Any]:
    """A distance attack on a released synthetic table: no power against a generator's ε claim."""
    return {
        "kind": "none",
        "figure": None,
        "detail": "a distance attack on the released table cannot detect a generator whose violation does not "
        "show as synthetic rows close to their training records",
        "decider": "a white-box audit of the generator's training decides (whitebox-audit)",
    }


def _target_checks(
    index: int,
    target: dict[str, Any],
    alpha_each: float,
    confidence: float,
    alpha: float | None = None,
    results: dict[str, Any] | None = None,
) -> tuple[list[Check], list[str]]:
    label = f"ε = {_eps_text(target.get('epsilon_target'))}"
    subject = f"targets[{index}]"
    claim = _claim(target, "epsilon_accountant")
    if claim is None:  # federated targets: the rows' claims (any row with one makes the target private)
        claim = next(
            (
                c
                for a in target.get("attacks") or []
                if isinstance(a, dict)
                for c in [_attack_claim(target, a)]
                if c is not None
            ),
            None,
        )
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
                checks.append(
                    Check(
                        subject,
                        f"{label} · {name} · no claim",
                        f"{label}, {name}: no DP claim covers this threat "
                        f"({row_claim.get('note') or 'non-private'}); shown only",
                        decides=False,
                        assumption="no guarantee to test",
                    )
                )
                continue
            name = f"{name} ({row_claim.get('level', 'record')}-level ε)"
            row_text = (
                f"{label}: {row_claim.get('level', 'record')}-level "
                f"(ε {_attack_claim(target, attack):.4g}, δ {delta:g})-DP"
            )
        # Not None: a row whose own claim has no ε was skipped above; any other row tests a claim that exists here.
        row_eps = cast(float, _attack_claim(target, attack))
        cp = (attack.get("epsilon_lb") or {}).get("clopper_pearson")
        if cp is not None:
            checks.append(
                Check(
                    subject,
                    f"{label} · {name} · clopper_pearson",
                    f"{label}, {name}: Clopper-Pearson bound {cp:.3f} (shown only: assumes independent trials)",
                    decides=False,
                    assumption="assumes independent trials; not proven for one model's candidates",
                )
            )
        details = _one_run_details(attack)
        if details is None or attack.get("decides") is False:  # shown only (the llm job's comparison rows)
            continue
        tested = True
        if alpha is not None and not _could_refute(target, attack, alpha):
            alone = one_run_ceiling(int(details["m"]), delta, alpha)
            checks.append(
                Check(
                    subject,
                    f"{label} · {name} · one_run",
                    f"{label}, {name}: untestable here — even alone, a perfect attack could prove only "
                    f"ε ≥ {alone:.2f} with {details['m']} candidates, at or below the claim {row_eps:.3f} "
                    "(left out of the Holm family)",
                    inconclusive=True,
                    assumption="one training run, coin-flip membership (proven)",
                    claim=row_text,
                    ceiling=alone,
                    needed=needed_candidates(row_eps, delta, alpha),
                    power=power,
                )
            )
            continue
        p = one_run_claim_p_value(details, row_eps, delta)
        ceiling = one_run_ceiling(int(details["m"]), delta, alpha_each)
        bound = (attack.get("epsilon_lb") or {}).get("one_run")
        if p <= alpha_each:
            message = (
                f"{label}, {name}: the one-run test rejects the {whose} ε {row_eps:.3f} "
                f"(p = {p:.2g}; one-run bound {bound:.3f} at {confidence:.0%})"
            )
        else:
            message = (
                f"{label}, {name}: one-run bound {bound:.3f} vs the {whose} ε {row_eps:.3f} "
                f"(p = {p:.2g}); ceiling {ceiling:.2f}"
            )
        inconclusive = ceiling <= row_eps
        if inconclusive:
            message = (
                f"{label}, {name}: untestable here — even a perfect attack could prove only ε ≥ {ceiling:.2f} "
                f"with {details['m']} candidates at the family level, at or below the claim {row_eps:.3f}"
            )
        checks.append(
            Check(
                subject,
                f"{label} · {name} · one_run",
                message,
                p_value=p,
                inconclusive=inconclusive,
                assumption="one training run, coin-flip membership (proven)",
                claim=row_text,
                ceiling=ceiling,
                # a row that measured its own power (the llm job's control run) speaks for itself
                power=attack["power"] if isinstance(attack.get("power"), dict) else power,
                needed=needed_candidates(row_eps, delta, alpha_each) if inconclusive else "",
            )
        )
    whitebox = target.get("whitebox_one_run")
    if isinstance(whitebox, dict) and whitebox.get("p_value") is not None:
        key = (
            claim_text
            if not whitebox.get("level")
            # federated canary clients: their level's claim
            else (f"{label}: {whitebox['level']}-level (ε {float(whitebox['claim']):.4g}, δ {delta:g})-DP")
        )
        checks += whitebox_one_run_checks(subject, label, whitebox, key, alpha_each)
        tested = True
    if not tested:
        checks.append(
            Check(
                subject,
                f"{label} · no proven bound",
                f"{label}: untestable here — membership was not an independent fair coin flip, so no bound proven "
                f"for one model decides whether ε {claim:.3f} holds "
                "(Clopper-Pearson is shown, assuming independent trials)" + _evidence_against(attacks, claim),
                inconclusive=True,
                assumption="one-run bound needs coin-flip membership",
                claim=claim_text,
                needed="needs members drawn by a fair coin flip per record (--membership-randomized), or "
                "independent training runs (canary-audit)",
            )
        )
    interval = target.get("epsilon_pld_interval")
    reported = _claim(target, "epsilon_accountant")
    if isinstance(interval, dict) and isinstance(interval.get("lower"), (int, float)) and reported is not None:
        lower = float(interval["lower"])
        unsound = reported < lower
        checks.append(
            Check(
                subject,
                f"{label} · accountant vs PLD",
                f"{label}: the {target.get('accountant')} accountant reports ε {reported:.4f}, "
                "below the tight PLD lower "
                f"end {lower:.4f}: it claims more privacy than the training gives"
                if unsound
                else f"{label}: accountant ε {reported:.4f} ≥ PLD lower end {lower:.4f}",
                failed=unsound,
                assumption="PLD interval of the Poisson-subsampled Gaussian mechanism",
                power=PROVEN_PLD,
                claim=f"{label}: the {target.get('accountant')} accountant's ε {reported:.4g} is at least the true ε",
            )
        )
    return checks, notes


def _evidence_against(attacks: list[dict[str, Any]], claim: float) -> str:
    """For a claim untestable only because membership was not coin-flipped (#35.4): the shown-only
    figures that contradict it under the assumption they rest on, in words, and the one flag that
    decides. "" when none contradicts it."""
    against = sorted(
        (
            (float(cp), str(a.get("name")), a.get("auc"))
            for a in attacks
            for cp in [(a.get("epsilon_lb") or {}).get("clopper_pearson")]
            if isinstance(cp, (int, float)) and cp > claim
        ),
        reverse=True,
    )
    if not against:
        return ""
    cp, name, auc = against[0]
    auc_text = f", AUC {auc:.3f}" if isinstance(auc, (int, float)) else ""
    return (
        f". The figures shown contradict the claim if each record's membership was independent: the {name} "
        f"attack's Clopper-Pearson bound ε ≥ {cp:.3f}{auc_text} is above the claimed ε {claim:.3g}. If membership "
        "was assigned by a fair coin flip per record, --membership-randomized makes this a proven one-run "
        "test that decides the claim"
    )


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
            checks.append(
                Check(
                    subject,
                    f"{label} · distance · clopper_pearson",
                    f"{label}: distance-attack Clopper-Pearson bound {cp:.3f} (shown only: assumes independent trials)",
                    decides=False,
                    assumption="assumes independent trials; not proven for one release",
                )
            )
        if details is None:
            checks.append(
                Check(
                    subject,
                    f"{label} · no proven bound",
                    f"{label}: inconclusive — train/holdout membership was not declared a fair coin "
                    f"flip, so no proven bound tests the generator's ε"
                    + _evidence_against([{**mia, "name": mia.get("name") or "distance"}], claim),
                    inconclusive=True,
                    assumption="one-run bound needs coin-flip membership",
                    claim=claim_text,
                    needed="needs train/holdout rows assigned by a fair coin flip per record",
                    power=synthetic_power(),
                )
            )
        else:
            stated_delta = details.get("delta")
            delta = float(stated_delta if stated_delta is not None else 0.0)
            p = one_run_claim_p_value(details, claim, delta)
            ceiling = one_run_ceiling(int(details["m"]), delta, alpha_each)
            bound = (mia.get("epsilon_lb") or {}).get("one_run")
            inconclusive = ceiling <= claim
            message = (
                f"{label}: the distance attack's one-run test rejects the generator's ε {claim:g} "
                f"(p = {p:.2g}; one-run bound {bound:.3f})"
                if p <= alpha_each
                else f"{label}: one-run bound {bound:.3f} vs claimed ε {claim:g} (p = {p:.2g})"
            )
            if inconclusive:
                message = (
                    f"{label}: untestable here — a perfect attack could prove only ε ≥ {ceiling:.2f} "
                    f"with {details['m']} records, at or below the claim {claim:g}"
                )
            checks.append(
                Check(
                    subject,
                    f"{label} · distance · one_run",
                    message,
                    p_value=p,
                    inconclusive=inconclusive,
                    assumption="one release, coin-flip membership (proven)",
                    claim=claim_text,
                    ceiling=ceiling,
                    power=synthetic_power(),
                    needed=needed_candidates(claim, delta, alpha_each, "records") if inconclusive else "",
                )
            )
        for flag in entry.get("flags") or []:
            if flag.get("check") != "epsilon_violation":
                checks.append(
                    Check(
                        subject,
                        f"{label} · {flag.get('check')}",
                        f"{label}: {flag.get('message')} (shown: a DP generator is judged by its ε)",
                        decides=False,
                    )
                )
        return checks
    # No DP claim: nothing to refute. A release under audit gets a leakage statement
    # (audit.machinery.leakage); a reference generator of the run's own sweep (e.g. the deliberately
    # leaky noisy copy) shows what leakage looks like: its tests are shown only.
    if entry.get("baseline"):
        leak_tests = [t for t in entry.get("leak_tests") or [] if isinstance(t, dict) and t.get("p_value") is not None]
        return [
            Check(
                subject,
                f"{label} · {t.get('check')}",
                f"{label} (baseline, not a release under audit): {t.get('message')}",
                p_value=float(t["p_value"]),
                decides=False,
                assumption=str(t.get("assumption") or ""),
            )
            for t in leak_tests
        ]
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
    checks += [
        Check(**{"power": PROVEN_CONFORMANCE, **fields}) for fields in conformance_check_fields(results)
    ]  # main job: its own training
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
                text = (
                    value.get("note")
                    or value.get("message")
                    or ", ".join(
                        f"{k} {v}"
                        for k, v in value.items()
                        if isinstance(v, (int, float, str)) and not isinstance(v, bool)
                    )
                )
            else:
                text = str(value) if not isinstance(value, bool) else field.replace("_", " ")
            notes.append(f"{label}, {attack.get('name')}: {field.replace('_', ' ')}: {text}")
    return notes


def _target_has_claim(target: dict[str, Any]) -> bool:
    return _claim(target, "epsilon_accountant") is not None or any(
        _attack_claim(target, a) is not None for a in target.get("attacks") or [] if isinstance(a, dict)
    )


@functools.lru_cache(maxsize=256)
def needed_candidates(claim: float, delta: float, alpha: float, unit: str = "candidates") -> str:
    """What would make a one-run test of `claim` testable at level `alpha`: "needs ≥ N candidates in
    one run" (audit_ceilings.canaries_needed_one_run, Steinke, Nasr, Jagielski 2023, arXiv 2305.08846)."""
    needed = canaries_needed_one_run(claim, delta, confidence=1 - alpha)
    if needed is None:
        return (
            f"needs more than 10⁶ {unit} in one run (the 2mδ term grows with m), or independent "
            "training runs (canary-audit)"
        )
    return f"needs ≥ {needed:,} {unit} in one run"
