"""Which releases a results file describes: a DP target's results.json, a synth-check's generator ε,
a canary or white-box audit's claim. Pure functions of the parsed file (no I/O here).

What counts as spent (the conservative reading, written once):
- `run` results: every private target (ε target not null) is a trained model and one DP-SGD
  release (σ, q, T). The non-private baseline (ε = ∞) is the audit's yardstick, not a release:
  it is skipped and said so.
- synthetic entries with an `epsilon_target`: the generator's (ε, δ) pair, δ from the entry or the
  results' δ (marked "δ assumed" when it had to be taken from the audit).
- canary / white-box audits: the claim's DP-SGD (σ, q, T) stages when the claim came from the
  accountant, else the claimed (ε, δ) pair.
A claim the audit REFUTED is never recorded: its ε would understate what was spent.
"""

from __future__ import annotations

from typing import Any

from audit.errors import AuditInputError
from audit.machinery.audit_kinds import AUDIT_KINDS, load
from audit.machinery.bound_results import CanaryAuditResult, WhiteboxAuditResult

__all__ = ["releases_in_results", "refuted_claims"]


def refuted_claims(results: dict[str, Any]) -> list[str]:
    """The claims the audit behind `results` refuted (or failed): those must not be recorded.

    Read from the verdict's `claims` (status "refuted") when it lists them; else from what each
    result kind says: a target's `violation`, or the failed verdict of a canary / white-box audit
    (whose only subject is the claim).
    """
    verdict = verdict_found if isinstance(verdict_found := results.get("verdict"), dict) else {}
    claims = claims_found if isinstance(claims_found := verdict.get("claims"), list) else []
    refuted = [str(c.get("claim")) for c in claims if isinstance(c, dict) and c.get("status") == "refuted"]
    for i, target in enumerate(results.get("targets") or []):
        if isinstance(target, dict) and target.get("violation") is True:
            refuted.append(f"targets[{i}]: ε = {target.get('epsilon_target')} (a sound lower bound exceeds it)")
    single = _is_whitebox(results) or (isinstance(results.get("claim"), dict) and "trainer" in results)
    if single and not refuted and verdict.get("status") == "fail":
        refuted.append(
            f"claimed ε = {results.get('claimed_epsilon')} ({'; '.join(map(str, verdict.get('reasons') or []))[:200]})"
        )
    return refuted


def _is_whitebox(results: dict[str, Any]) -> bool:
    """A white-box audit result: the runs mode (settings + GDP bound) or `--mode one-run` / the in-script
    OpacusAudit (settings + its claim or one-run block)."""
    settings = isinstance(results.get("settings"), dict)
    return settings and (
        isinstance(results.get("gdp_bound"), dict)
        or (
            results.get("mode") == "one-run"
            and (isinstance(results.get("claim"), dict) or isinstance(results.get("one_run"), dict))
        )
    )


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _results_delta(results: dict[str, Any]) -> float | None:
    config = config_found if isinstance(config_found := results.get("config"), dict) else {}
    privacy = privacy_found if isinstance(privacy_found := config.get("privacy"), dict) else {}
    return _number(config.get("delta")) or _number(privacy.get("delta"))


def _dpsgd(sigma: Any, q: Any, steps: Any) -> dict[str, Any]:
    return {"kind": "dpsgd", "noise_multiplier": sigma, "sample_rate": q, "steps": steps}


def releases_in_results(results: Any, where: str) -> tuple[list[tuple[str, list[dict[str, Any]]]], list[str], str]:
    """([(label, mechanisms)], notes, kind) for a parsed results file; AuditInputError when it holds no DP release.

    `kind` is what the file is: run | synth-check, or a single-audit kind with a ledger source
    (audit/machinery/audit_kinds.py: canary-audit, whitebox-audit).
    """
    if not isinstance(results, dict):
        raise AuditInputError(where, "expected a JSON object written by privacy-audit")
    recordable = [kind for kind in AUDIT_KINDS.values() if kind.ledger_source]
    for kind in recordable:
        found = load(kind.ledger_source)(results, where)  # type: ignore[arg-type]
        if found is not None:
            return (*found, kind.name)
    if "schema_version" in results and ("targets" in results or "synthetic" in results):
        return _run_or_synthetic(results, where)
    raise AuditInputError(
        where, "is neither a results.json nor a " + " / ".join(kind.name for kind in recordable) + " result"
    )


def whitebox_releases(results: dict[str, Any], where: str):
    """The releases of a whitebox-audit result, None when `results` is not one (the kind's ledger source)."""
    return _whitebox(results, where) if _is_whitebox(results) else None


def canary_releases(results: dict[str, Any], where: str):
    """The releases of a canary-audit result, None when `results` is not one (the kind's ledger source)."""
    if _is_whitebox(results) or not (isinstance(results.get("claim"), dict) and "trainer" in results):
        return None
    return _canary(results, where)


def _run_or_synthetic(results: dict[str, Any], where: str):
    name = str((results.get("config") or {}).get("name") or "run")[:80]
    releases, notes = [], []
    for i, target in enumerate(results.get("targets") or []):
        if not isinstance(target, dict):
            raise AuditInputError(f"{where}: field 'targets[{i}]'", "expected an object")
        eps = target.get("epsilon_target")
        if eps is None:
            notes.append(f"targets[{i}]: the non-private baseline (ε = ∞) is the audit's yardstick, not recorded")
            continue
        if target.get("noise_multiplier") is None or target.get("sample_rate") is None or target.get("steps") is None:
            raise AuditInputError(
                f"{where}: field 'targets[{i}]'",
                "a private target without noise_multiplier, sample_rate and steps cannot be composed",
            )
        if target.get("poisson_sampling") is False:
            notes.append(
                f"targets[{i}]: trained without Poisson sampling; composed as the accountant's "
                "Poisson-sampled DP-SGD, as its own ε was"
            )
        releases.append(
            (
                f"{name}: DP-SGD target ε={eps:g}",
                [_dpsgd(target["noise_multiplier"], target["sample_rate"], target["steps"])],
            )
        )
    results_delta = _results_delta(results)
    for i, entry in enumerate(results.get("synthetic") or []):
        if not isinstance(entry, dict):
            raise AuditInputError(f"{where}: field 'synthetic[{i}]'", "expected an object")
        eps = _number(entry.get("epsilon_target"))
        generator = str(entry.get("generator") or f"synthetic[{i}]")[:120]
        if eps is None:
            notes.append(f"synthetic[{i}] ({generator}): no DP claim (no ε), not recorded")
            continue
        delta = _number(entry.get("delta"))
        label = f"{name}: synthetic release {generator} (ε, δ) pair"
        if delta is None:
            if results_delta is None:
                raise AuditInputError(f"{where}: field 'synthetic[{i}].delta'", "the generator's δ is not in the file")
            delta = results_delta
            label += " (δ assumed = the audit's δ)"
            notes.append(
                f"synthetic[{i}] ({generator}): the generator states ε only; recorded as (ε, δ) = "
                f"({eps:g}, {delta:g}) with the audit's δ"
            )
        releases.append((label, [{"kind": "epsilon_delta", "epsilon": eps, "delta": delta}]))
    kind = "run" if results.get("targets") else "synth-check"
    if not releases:
        raise AuditInputError(
            where,
            "holds no DP release to record (no private target, no synthetic release with "
            "an ε; synth-check needs --claimed-epsilon)",
        )
    return releases, notes, kind


def _canary(results: dict[str, Any], where: str):
    typed = CanaryAuditResult.from_json(results)
    claim: Any = typed.claim  # an object: canary_releases checked it
    trainer = str(typed.trainer or "trainer")[:120]
    if claim.get("noise_multiplier") is not None:
        return [
            (
                f"canary-audit of {trainer}: claimed DP-SGD",
                [_dpsgd(claim.get("noise_multiplier"), claim.get("sample_rate"), claim.get("steps"))],
            )
        ], []
    eps, delta = _number(claim.get("epsilon")), _number(claim.get("delta"))
    if eps is None or delta is None:
        raise AuditInputError(f"{where}: field 'claim'", "states neither (σ, q, T) nor an (ε, δ) pair")
    return [
        (f"canary-audit of {trainer}: claimed (ε, δ) pair", [{"kind": "epsilon_delta", "epsilon": eps, "delta": delta}])
    ], []


def _whitebox(results: dict[str, Any], where: str):
    typed = WhiteboxAuditResult.from_json(results)
    settings: Any = typed.settings  # an object: _is_whitebox checked it
    claim = typed.claim or {}
    subject = str(typed.subject or "DP-SGD")[:120]
    if claim.get("source") == "--claimed-epsilon":
        eps, delta = _number(typed.bound.claimed_epsilon), _number(typed.bound.delta)
        if eps is None or delta is None:
            raise AuditInputError(f"{where}: field 'claimed_epsilon'", "expected the claimed ε and δ")
        return [
            (
                f"whitebox-audit of {subject}: claimed (ε, δ) pair",
                [{"kind": "epsilon_delta", "epsilon": eps, "delta": delta}],
            )
        ], []
    history = settings.get("accountant_history") or [
        [settings.get("noise_multiplier"), settings.get("sample_rate") or 1.0, settings.get("steps")]
    ]
    if not isinstance(history, list) or not all(isinstance(h, list) and len(h) == 3 for h in history):
        raise AuditInputError(f"{where}: field 'settings.accountant_history'", "expected [σ, q, T] stages")
    return [(f"whitebox-audit of {subject}: DP-SGD as told to the accountant", [_dpsgd(*h) for h in history])], []
