"""The result of one white-box canary run: the claim held / refuted / untestable, the accountant
checked against the training, the in-script checks decided beside them.

Shared by `whitebox-audit --mode one-run` (`one_run_whitebox`, the tool's loop in a worker) and the
in-script `OpacusAudit` (`in_script`, the user's loop): the same result block, which `gate` and
`ledger record` read. Steinke, Nasr, Jagielski 2023 (arXiv 2305.08846) and the f-DP one-run test
(Mahloujifar, Melis, Chaudhuri 2024, arXiv 2410.22235) decide, each at α/2.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from audit.dp_validation.mode_power import whitebox_power_entry
from audit.dp_validation.whitebox_audit import _accountant_disagreements, _claim
from audit.dp_validation.whitebox_checks import accountant_checks
from audit.errors import AuditInputError
from audit.machinery.bound_results import WhiteboxAuditResult
from audit.machinery.verdict import Check, decide
from audit.statistics.one_run_audit import one_run_claim_audit
from audit.statistics.tradeoff_curves import claim_profile

__all__ = ["CANARY_KINDS", "CLIP_TOLERANCE", "PAPER", "one_run_result"]

CANARY_KINDS = ("auto", "dirac", "random")
PAPER = "Steinke, Nasr, Jagielski 2023, arXiv 2305.08846"
# Float32 sums: a correctly clipped canary adds C·(1 − 1e-6/‖row‖) exactly, real rows add 0.
CLIP_TOLERANCE = 1e-3


def _claim_checks(audit: dict, subject: str, label: str, power: dict | None = None) -> list[Check]:
    status = audit["status"]
    eps, steinke, fdp = audit["claimed_epsilon"], audit["steinke"], audit["fdp"]
    if status == "refuted":
        how = []
        if steinke["refuted"]:
            how.append(
                f"Steinke et al. bound ε ≥ {steinke['epsilon']:.3f} > claimed ε {eps:.3f} "
                f"(p = {steinke['p_value_claim']:.2g} ≤ {steinke['level']:.3g})"
            )
        if fdp and fdp["refuted"]:
            how.append(f"the f-DP one-run test refutes the claim's trade-off curve ({fdp['curve']})")
        message = f"refuted: {'; '.join(how)}"
    elif status == "held":
        message = (
            f"not refuted (Steinke et al. ε ≥ {steinke['epsilon']:.3f}; f-DP test "
            f"{'did not refute' if fdp else 'not run'}); a perfect attack on {audit['m']} canaries reaches "
            f"ε {steinke['ceiling']:.3f}"
            + (" and would refute the claim's curve" if fdp and fdp["refutable_by_perfect_attack"] else "")
        )
    else:
        need = audit.get("canaries_needed")
        message = (
            f"untestable here: with {audit['m']} canaries a perfect attack reaches at most ε "
            f"{steinke['ceiling']:.3f} (Steinke et al.) and could not refute the claim's curve (f-DP), at or "
            f"below the claim ε {eps:.3f}; needs "
            + (f"≥ {need} canaries" if need else "more than 10⁶ canaries (or more iterates per canary)")
        )
    return [
        Check(
            subject,
            f"claim ε {eps:g} ({label})",
            message,
            failed=status == "refuted",
            inconclusive=status == "untestable",
            assumption="one run, canaries by independent fair coins (proven for any mechanism)",
            power=power,
        )
    ]


def one_run_result(
    run: dict[str, Any],
    *,
    subject: str,
    factory: str | None,
    builtin: bool,
    observe: str,
    delta: float,
    claimed_epsilon: float | None,
    confidence: float,
    seed: int,
    device: str | None,
    extra_checks: list[Check] | None = None,
    extra: dict[str, Any] | None = None,
    claim_flag: str = "claimed_epsilon",
) -> dict[str, Any]:
    """The result of one canary run (`run`: what `one_run_task` or the in-script `OpacusAudit`
    observed): the claim held / refuted / untestable, the accountant checked against the training,
    `extra_checks` (the in-script API's parameter accounting) decided beside them."""
    settings = run["settings"]
    disagreements = _accountant_disagreements(settings)
    # The run's PLD ε is the claim only where nobody states one (a built-in setup, or an engine
    # whose accountant gave none): computed only then (seconds of CPU at q < 1, per audit).
    from_pld = claimed_epsilon is None and (builtin or settings.get("accountant_epsilon") is None)
    claim = _claim(settings, delta, with_pld=from_pld)
    history = claim["history"]
    if claimed_epsilon is not None:
        eps_claim, source = float(claimed_epsilon), "--claimed-epsilon"
    elif builtin or settings.get("accountant_epsilon") is None:
        if claim["epsilon_pld"] is None:
            raise AuditInputError(
                claim_flag, f"the accountant's history has several stages and its ε failed; give {claim_flag}"
            )
        eps_claim, source = float(claim["epsilon_pld"]), "PLD accountant of the run's (σ, q, T)"
    else:
        eps_claim, source = (
            float(settings["accountant_epsilon"]),
            f"the privacy engine's {settings['accountant']} accountant",
        )
    dpsgd = tuple(history[0]) if claimed_epsilon is None and len(history) == 1 else None
    profile = claim_profile(
        eps_claim if dpsgd is None else None,
        delta,
        None if dpsgd is None else (float(dpsgd[0]), float(dpsgd[1]), int(dpsgd[2])),
    )
    coins = np.asarray(run["coins"], dtype=bool)
    primary = np.asarray(run[f"scores_{observe}"], dtype=float)
    if not np.all(np.isfinite(primary)):
        raise AuditInputError(
            "factory" if factory else "noise_multiplier",
            "the training produced NaN or infinite parameters; the audit needs finite iterates",
        )
    audit = one_run_claim_audit(
        primary, coins, claimed_epsilon=eps_claim, delta=delta, profile=profile, confidence=confidence
    )
    other = "final" if observe == "all" else "all"
    other_scores = np.asarray(run[f"scores_{other}"], dtype=float)
    other_audit = (
        one_run_claim_audit(
            other_scores,
            coins,
            claimed_epsilon=eps_claim,
            delta=delta,
            profile=profile,
            confidence=confidence,
            with_estimates=True,
        )
        if np.all(np.isfinite(other_scores))
        else None
    )
    label = "every iterate" if observe == "all" else "final model only"
    # Dirac canaries with every iterate observed: proven power; random directions or the final model: none.
    power = whitebox_power_entry(observe, one_run=True, canary_kind=str(run["kind"]))
    if settings.get("clipping") == "per_layer":
        # Opacus's per-layer clipping bounds each tensor's part of a row by its own C_k and adds noise
        # σ·C, C = √Σ C_k² (opacus/optimizers/perlayeroptimizer.py). A Dirac canary lives in one tensor:
        # clipped to C_k, its signal is C_k/(σC) < 1/σ, not the worst case the accountant covers. The
        # worst case (signal 1/σ, Nasr et al. 2023's argument for Dirac canaries) is a row with norm
        # C_k in EVERY tensor on coordinates no real row touches: one coordinate of its own per canary
        # in every clipped tensor, which the small tensors (biases: a few to a few hundred coordinates)
        # cannot give a thousand canaries. So no power is claimed, and the line says what decides.
        power = {
            "kind": "none",
            "figure": None,
            "decider": "flat clipping (one max_grad_norm: proven power here), or `conformance --factory`, whose "
            "per_example_clipping check tests the per-layer clipping itself",
            "detail": "per-layer clipping: each canary lives in one tensor and is clipped to that tensor's C_k, "
            "a signal C_k/(σC) below the worst case the accountant covers (norm C_k in every tensor, total "
            "C = √Σ C_k², signal 1/σ); that worst case needs one coordinate of each canary's own in every "
            "clipped tensor, more than the smallest tensors hold, so no power is proven or measured for it",
        }
    checks = _claim_checks(audit, subject, label, power)
    for key, name in (("gaussian_sum", "Gaussian normalized-sum estimate"), ("andrew", "Andrew et al. estimate")):
        est = audit[key]
        figure = (
            f"ε ≈ {est['epsilon']:.3f}" if est["epsilon"] is not None else f"withheld: {est.get('withheld')}"
        )  # the scores contradict a Gaussian curve (gdp_fit)
        checks.append(
            Check(
                subject,
                name,
                f"{figure} (claim {eps_claim:.3f}); an estimate, decides nothing",
                decides=False,
                assumption=est["assumption"],
            )
        )
    if run["clip_deviation"] is None:
        checks.append(
            Check(
                subject,
                "canary clipping",
                "not checked exactly: random-direction canaries overlap the "
                "real gradients (Dirac canaries are checked)",
                decides=False,
            )
        )
    elif run["clip_checked_steps"]:
        deviation = float(run["clip_deviation"])
        bad = not deviation <= CLIP_TOLERANCE
        checks.append(
            Check(
                subject,
                "canary clipping",
                (
                    f"the optimizer's clipped sum on the canaries' coordinates was off by up to {deviation:.3g}·C (a canary of "
                    f"norm {run['canary_scale']:g}·C must add exactly C): per-sample clipping is wrong"
                )
                if bad
                else (
                    f"exact on {run['clip_checked_steps']} steps: every canary of norm {run['canary_scale']:g}·C added C, "
                    f"{run['as_rows']} of them clipped by the optimizer as rows"
                ),
                failed=bad,
                assumption="a correct per-sample clipping brings a one-coordinate row of norm > C to norm C",
            )
        )
    else:
        checks.append(
            Check(
                subject,
                "canary clipping",
                "not checked: ghost clipping keeps no per-sample gradients, "
                "so the canaries joined its clipped sum at C (its noise, scaling and accounting act on "
                "them; its clipping is Opacus's, not exercised here)"
                if settings.get("grad_sample_mode") == "ghost"
                else "not checked: the optimizer kept no clipped sum (p.summed_grad) for the step hook to read",
                decides=False,
            )
        )
    checks += accountant_checks(subject, disagreements)
    checks += list(extra_checks or [])
    verdict = decide(checks, alpha=1 - confidence)
    verdict["family_wise_error"]["statement"] = (
        f"two sound tests of the claim (Steinke et al., f-DP one-run), each at α/2 = {(1 - confidence) / 2:g} "
        "(Bonferroni), plus deterministic accountant and canary-clipping checks"
    )
    verdict["ceiling"] = float(audit["ceiling"])
    verdict["needed"] = audit.get("canaries_needed")
    verdict["needed_unit"] = "canaries (--canaries)"
    claim_status = "not_refuted" if audit["status"] == "held" and power["kind"] == "none" else audit["status"]
    verdict["claims"] = [
        {
            "claim": f"ε {eps_claim:g} at δ {delta:g}",
            "status": claim_status,
            "power": power,
            "ceiling": float(audit["ceiling"]),
            "epsilon": eps_claim,
            "delta": float(delta),
            "tested_by": "white-box one-run",
        }
    ]
    overhead = (run["seconds"] / run["plain_seconds"]) if run.get("plain_seconds") else None
    # The kind's typed result (whitebox-audit, one-run mode), serialised once; this literal is its field order.
    found: dict[str, Any] = {
        "audit": f"white-box one-run gradient canaries ({PAPER})",
        "mode": "one-run",
        "power": power,
        "device": device,
        "subject": subject,
        "factory": factory,
        "builtin": bool(builtin),
        "observe": observe,
        "observed": (
            "the canary coordinates of the privatised gradient at every step (all iterates)"
            if observe == "all"
            else "θ_0 − θ_T of the final model only, along each canary"
        ),
        "canaries": {
            "m": run["m"],
            "kind": run["kind"],
            "n_parameters": run["n_parameters"],
            "norm_over_C": run["canary_scale"],
            "inserted": run["inserted"],
            "inserted_rows": run["as_rows"],
            "clip_deviation": run["clip_deviation"],
            "insertion": "per step, up to 10 % of the expected batch as rows appended to every parameter's "
            "p.grad_sample after backward() (the optimizer's own per-sample clipping, checked "
            "exactly for Dirac canaries), the others added to the clipped sum at C; the "
            "optimizer's noise and scaling act on all",
            "inclusion": "each canary by its own fair coin, then at every step with probability q",
            "score_all": run["score_all_kind"],
        },
        "seed": int(seed),
        "settings": settings,
        "steps": run["steps"],
        "claim": {
            "epsilon": eps_claim,
            "source": source,
            "history": history,
            "curve": profile.source if profile else None,
        },
        "claimed_epsilon": eps_claim,
        "delta": float(delta),
        "confidence": float(confidence),
        "accountant_disagreements": disagreements,
        "epsilon_lower_bound": float(audit["steinke"]["epsilon"]),
        "epsilon_lower_bound_label": f"Steinke et al. one-run bound at {1 - (1 - confidence) / 2:.1%} (sound, any mechanism)",
        "one_run": audit,
        "other_observation": {
            "observe": other,
            **(
                {}
                if other_audit is None
                else {
                    "status": other_audit["status"],
                    "steinke_epsilon": other_audit["steinke"]["epsilon"],
                    "fdp_refuted": bool(other_audit["fdp"] and other_audit["fdp"]["refuted"]),
                    "fdp_gdp_family_epsilon": other_audit["fdp"]["gdp_family_epsilon"] if other_audit["fdp"] else None,
                    "gaussian_sum_epsilon": other_audit["gaussian_sum"]["epsilon"],
                    "andrew_epsilon": other_audit["andrew"]["epsilon"],
                }
            ),
            "note": "same run, other observation: shown only",
        },
        "ceiling": float(audit["ceiling"]),
        "ceiling_label": "Steinke et al. bound of an attack guessing every canary right (α/2)",
        "cost": {
            "seconds_with_canaries": run["seconds"],
            "seconds_plain": run.get("plain_seconds"),
            "cpu_seconds_with_canaries": run.get("cpu_seconds"),
            "cpu_seconds_plain": run.get("plain_cpu_seconds"),
            "overhead": overhead,
            "cpu_overhead": (run["cpu_seconds"] / run["plain_cpu_seconds"] if run.get("plain_cpu_seconds") else None),
            "goal": 1.3,
        },
        "accuracy": {
            "with_canaries": run["accuracy"],
            "plain": run.get("plain_accuracy"),
            "note": None
            if run["accuracy"] is not None
            else "the factory returned no 'test_loader': accuracy not measured",
        },
        "violation": verdict["status"] == "fail",
        "verdict": verdict,
    }
    return WhiteboxAuditResult.from_json(found).with_fields(**(extra or {})).to_json()
