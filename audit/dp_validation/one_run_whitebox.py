"""`whitebox-audit --mode one-run`: gradient canaries in ONE run of the user's own Opacus training.

Steinke, Nasr, Jagielski 2023 ("Privacy Auditing with One (1) Training Run", arXiv 2305.08846):
m canaries, each put into the run by its own fair coin, then sampled at every step with the
claimed rate q like a real record; the auditor sees every iterate (white-box) or only the final
model, scores each canary without looking at the coins, and bounds ε from how well the scores
sort the coins. The canaries are per-sample *gradients* (`targets.canaries`): Dirac canaries on
coordinates of their own, or random unit directions (Andrew et al. 2023, arXiv 2302.03098),
appended as rows of Opacus's `p.grad_sample` so that the optimizer's own clipping, noise and
scaling act on them.

From the same scores (`audit.statistics.one_run_audit`): Steinke et al.'s bound and the f-DP
one-run test against the claim's trade-off curve (Mahloujifar, Melis, Chaudhuri 2024, arXiv
2410.22235) decide, each at α/2; the Gaussian normalized-sum estimate (Agrawal et al. 2026, arXiv
2606.12733) and Andrew et al.'s estimate are shown. The claim is held, refuted or untestable
(ceiling at or below it). The accountant is checked against what the optimizer and loader did.

One worker process runs the user's factory (isolated, with a timeout): the canary run, then, for
the overhead and accuracy comparison, one plain run of a fresh setup from the same seed.
"""
from __future__ import annotations

import math
import random
import time
from typing import Any

import numpy as np

from audit.dp_validation.claims import validate_claim
from audit.dp_validation.whitebox_audit import (
    _accountant_disagreements,
    _claim,
    _opacus_settings,
    _unpack_setup,
    load_factory_in_worker,
)
from audit.dp_validation.mode_power import whitebox_power_entry
from audit.errors import AuditInputError
from audit.machinery.verdict import Check, decide
from audit.machinery.workers import run_isolated, user_code
from audit.statistics.one_run_audit import one_run_claim_audit
from audit.statistics.tradeoff_curves import claim_profile

__all__ = ["CANARY_KINDS", "one_run_result", "one_run_task", "run_one_run_whitebox_audit", "train_loop"]

CANARY_KINDS = ("auto", "dirac", "random")
TASK_TIMEOUT_S = 3600.0
PAPER = "Steinke, Nasr, Jagielski 2023, arXiv 2305.08846"
# Float32 sums: a correctly clipped canary adds C·(1 − 1e-6/‖row‖) exactly, real rows add 0.
CLIP_TOLERANCE = 1e-3


def _seed_everything(seed: int) -> None:
    import torch

    torch.manual_seed(seed)
    np.random.seed(seed % 2**32)
    random.seed(seed)


def train_loop(model, optimizer, loader, epochs: int, loss=None, *, canaries=None, max_steps: int | None = None
               ) -> tuple[int, float]:
    """The training the audit runs on a factory's objects: cross-entropy (or the factory's `loss`),
    every batch, `epochs` times (stopping at `max_steps`), canaries inserted between backward() and
    step(). Returns (steps, seconds)."""
    import torch.nn.functional as F

    steps, start = 0, time.perf_counter()
    model.train()
    for _ in range(int(epochs)):
        for batch in loader:
            if max_steps is not None and steps >= max_steps:
                break
            features, labels = batch[0], batch[1]
            optimizer.zero_grad()
            output = model(features)
            value = loss(output, labels) if loss is not None else F.cross_entropy(output, labels)
            value.backward()
            if canaries is not None:
                canaries.insert()
            optimizer.step()
            steps += 1
    return steps, time.perf_counter() - start


def _accuracy(model, loader) -> float | None:
    import torch

    if loader is None:
        return None
    right = total = 0
    model.eval()
    with torch.no_grad():
        for batch in loader:
            right += int((model(batch[0]).argmax(1) == batch[1]).sum())
            total += int(batch[1].numel())
    return right / total if total else None


def _make_setup(factory: str | None, builtin: dict | None, name: str):
    if builtin is not None:
        from targets.opacus_setups import tabular_mlp_setup

        return tabular_mlp_setup(**builtin)
    function = load_factory_in_worker(factory)
    with user_code(name):
        return function()


def one_run_task(factory: str | None, builtin: dict | None, n_canaries: int | None, kind: str, scale: float,
                 seed: int, delta: float, compare_plain: bool) -> dict[str, Any]:
    """A worker task: one training run of the setup with canaries (and one plain run); plain data back."""
    import torch

    from audit.dp_validation.in_script import OpacusAudit

    load_factory_in_worker(None)
    name = f"--factory {factory}" if factory else "--builtin"
    _seed_everything(seed)
    made = _make_setup(factory, builtin, name)
    model, optimizer, loader, engine, epochs, loss = _unpack_setup(made, factory or "--builtin")
    extra = made if isinstance(made, dict) else {}
    max_steps = extra.get("steps")
    # The same hooks as the in-script API (audit.dp_validation.in_script): canaries per logical
    # step, noisy steps counted, every parameter accounted for; only the loop is the tool's.
    try:
        with user_code(name, "training setup"):
            audit = OpacusAudit(engine, optimizer, model, data_loader=loader, out=None, canaries=n_canaries,
                                canary_kind=kind, canary_scale=scale, seed=seed, delta=delta,
                                extra_parameters=extra.get("extra_parameters"))
            audit.start()
    except AuditInputError as exc:  # the API's field names, as this command's flags
        raise AuditInputError("--canaries" if exc.where == "canaries" else "--factory",
                              exc.message if exc.where == "canaries" else f"{name}: {exc.message}") from None
    with user_code(name, "training setup"):
        try:
            train_loop(model, optimizer, loader, epochs, loss, max_steps=max_steps)
        finally:
            audit.stop()
        audit.ledger.finish()
        result = audit.observations()
        result["accuracy"] = _accuracy(model, extra.get("test_loader"))
    result["parameters"], result["n_records"] = audit.ledger.summary(), audit._records()
    if compare_plain:
        _seed_everything(seed)
        made = _make_setup(factory, builtin, name)
        model, optimizer, loader, _, epochs, loss = _unpack_setup(made, factory or "--builtin")
        cpu_start = time.process_time()
        with user_code(name, "training setup"):
            plain_steps, plain_seconds = train_loop(model, optimizer, loader, epochs, loss, max_steps=max_steps)
            result["plain_cpu_seconds"] = time.process_time() - cpu_start
            result["plain_accuracy"] = _accuracy(model, (made if isinstance(made, dict) else {}).get("test_loader"))
        result["plain_seconds"], result["plain_steps"] = plain_seconds, plain_steps
    del torch
    return result


def _claim_checks(audit: dict, subject: str, label: str, power: dict | None = None) -> list[Check]:
    status = audit["status"]
    eps, steinke, fdp = audit["claimed_epsilon"], audit["steinke"], audit["fdp"]
    if status == "refuted":
        how = []
        if steinke["refuted"]:
            how.append(f"Steinke et al. bound ε ≥ {steinke['epsilon']:.3f} > claimed ε {eps:.3f} "
                       f"(p = {steinke['p_value_claim']:.2g} ≤ {steinke['level']:.3g})")
        if fdp and fdp["refuted"]:
            how.append(f"the f-DP one-run test refutes the claim's trade-off curve ({fdp['curve']})")
        message = f"refuted: {'; '.join(how)}"
    elif status == "held":
        message = (f"not refuted (Steinke et al. ε ≥ {steinke['epsilon']:.3f}; f-DP test "
                   f"{'did not refute' if fdp else 'not run'}); a perfect attack on {audit['m']} canaries reaches "
                   f"ε {steinke['ceiling']:.3f}" + (" and would refute the claim's curve" if fdp and fdp["refutable_by_perfect_attack"] else ""))
    else:
        need = audit.get("canaries_needed")
        message = (f"untestable here: with {audit['m']} canaries a perfect attack reaches at most ε "
                   f"{steinke['ceiling']:.3f} (Steinke et al.) and could not refute the claim's curve (f-DP), at or "
                   f"below the claim ε {eps:.3f}; needs " + (f"≥ {need} canaries" if need else "more than 10⁶ canaries "
                                                             "(or more iterates per canary)"))
    return [Check(subject, f"claim ε {eps:g} ({label})", message, failed=status == "refuted",
                  inconclusive=status == "untestable",
                  assumption="one run, canaries by independent fair coins (proven for any mechanism)", power=power)]


def run_one_run_whitebox_audit(
    *,
    factory: str | None = None,
    builtin: bool = False,
    noise_multiplier: float | None = None,
    sample_rate: float = 1.0,
    steps: int = 20,
    max_grad_norm: float = 1.0,
    n_canaries: int | None = None,
    canary_kind: str = "auto",
    observe: str = "all",
    delta: float = 1e-5,
    claimed_epsilon: float | None = None,
    confidence: float = 0.95,
    seed: int = 0,
    timeout: float = TASK_TIMEOUT_S,
    canary_scale: float = 1000.0,
    compare_plain: bool = True,
    builtin_rows: int = 2000,
    builtin_hidden: tuple[int, ...] = (256, 256),
    device: str | None = None,
) -> dict[str, Any]:
    """One training run with gradient canaries, its claim held / refuted / untestable (module docstring)."""
    from audit.dp_validation.whitebox_audit import OBSERVATIONS, _check_positive, builtin_device

    if (factory is None) == (not builtin):
        raise AuditInputError("--factory", "give either --factory module:function or --builtin")
    if observe not in OBSERVATIONS:
        raise AuditInputError("--observe", f"expected one of {', '.join(OBSERVATIONS)}, got {observe!r}")
    if canary_kind not in CANARY_KINDS:
        raise AuditInputError("--canary-kind", f"expected one of {', '.join(CANARY_KINDS)}, got {canary_kind!r}")
    if n_canaries is not None:
        n_canaries = _check_positive(n_canaries, "--canaries", integer=True, low=19, high=10**6)
    if not (isinstance(delta, (int, float)) and 0 < delta < 1):
        raise AuditInputError("--delta", f"must be in (0, 1), got {delta!r}")
    if not (isinstance(confidence, (int, float)) and 0.5 <= confidence < 1):
        raise AuditInputError("--confidence", f"must be in [0.5, 1), got {confidence!r}")
    if claimed_epsilon is not None:
        validate_claim(claimed_epsilon, delta, epsilon_flag="--claimed-epsilon", delta_flag="--delta")
    _check_positive(canary_scale, "canary_scale", low=0.999, high=1e9)
    device = builtin_device(device, builtin)
    spec = None
    if builtin:
        if noise_multiplier is None:
            raise AuditInputError("--noise-multiplier", "--builtin needs the noise multiplier σ of the DP-SGD to audit")
        spec = {"noise_multiplier": _check_positive(noise_multiplier, "--noise-multiplier", high=1e6),
                "sample_rate": _check_positive(sample_rate, "--sample-rate", high=1.0),
                "steps": _check_positive(steps, "--steps", integer=True, high=100_000),
                "max_grad_norm": _check_positive(max_grad_norm, "--max-grad-norm", high=1e6),
                "rows": int(builtin_rows), "hidden": tuple(builtin_hidden), "seed": int(seed), "device": device}
        subject = (f"Opacus MLP {list(builtin_hidden)} on the default table (σ {spec['noise_multiplier']:g}, "
                   f"q {spec['sample_rate']:g}, T {spec['steps']}, C {spec['max_grad_norm']:g})")
    else:
        from audit.machinery.user_code import check_spec

        check_spec(factory, "--factory")
        subject = f"--factory {factory}"
    run = run_isolated(one_run_task, factory, spec, n_canaries, canary_kind, float(canary_scale), int(seed),
                       float(delta), bool(compare_plain), name=subject, timeout=timeout,
                       what="one training run with canaries")
    from audit.dp_validation.in_script import parameter_checks, rows_check

    return one_run_result(run, subject=subject, factory=factory, builtin=builtin, observe=observe, delta=delta,
                          claimed_epsilon=claimed_epsilon, confidence=confidence, seed=seed, device=device,
                          extra_checks=parameter_checks(run["parameters"], subject)
                          + rows_check(run["settings"], run.get("n_records"), subject),
                          extra={"parameters": run["parameters"],
                                 "physical_steps": run["settings"].get("physical_steps", run["steps"])})


def one_run_result(run: dict[str, Any], *, subject: str, factory: str | None, builtin: bool, observe: str,
                   delta: float, claimed_epsilon: float | None, confidence: float, seed: int, device: str | None,
                   extra_checks: list[Check] | None = None, extra: dict[str, Any] | None = None,
                   claim_flag: str = "--claimed-epsilon") -> dict[str, Any]:
    """The result of one canary run (`run`: what `one_run_task` or the in-script `OpacusAudit`
    observed): the claim held / refuted / untestable, the accountant checked against the training,
    `extra_checks` (the in-script API's parameter accounting) decided beside them."""
    settings = run["settings"]
    disagreements = _accountant_disagreements(settings)
    claim = _claim(settings, delta)
    history = claim["history"]
    if claimed_epsilon is not None:
        eps_claim, source = float(claimed_epsilon), "--claimed-epsilon"
    elif builtin or settings.get("accountant_epsilon") is None:
        if claim["epsilon_pld"] is None:
            raise AuditInputError(claim_flag, "the accountant's history has several stages and its ε failed; "
                                  f"give {claim_flag}")
        eps_claim, source = float(claim["epsilon_pld"]), "PLD accountant of the run's (σ, q, T)"
    else:
        eps_claim, source = float(settings["accountant_epsilon"]), f"the privacy engine's {settings['accountant']} accountant"
    dpsgd = tuple(history[0]) if claimed_epsilon is None and len(history) == 1 else None
    profile = claim_profile(eps_claim if dpsgd is None else None, delta,
                            None if dpsgd is None else (float(dpsgd[0]), float(dpsgd[1]), int(dpsgd[2])))
    coins = np.asarray(run["coins"], dtype=bool)
    primary = np.asarray(run[f"scores_{observe}"], dtype=float)
    if not np.all(np.isfinite(primary)):
        raise AuditInputError("--factory" if factory else "--noise-multiplier",
                              "the training produced NaN or infinite parameters; the audit needs finite iterates")
    audit = one_run_claim_audit(primary, coins, claimed_epsilon=eps_claim, delta=delta, profile=profile,
                                confidence=confidence)
    other = "final" if observe == "all" else "all"
    other_scores = np.asarray(run[f"scores_{other}"], dtype=float)
    other_audit = (one_run_claim_audit(other_scores, coins, claimed_epsilon=eps_claim, delta=delta, profile=profile,
                                       confidence=confidence, with_estimates=True)
                   if np.all(np.isfinite(other_scores)) else None)
    label = "every iterate" if observe == "all" else "final model only"
    # Dirac canaries with every iterate observed: proven power; random directions or the final model: none.
    power = whitebox_power_entry(observe, one_run=True, canary_kind=str(run["kind"]))
    if settings.get("clipping") == "per_layer":
        # Per-layer clipping bounds each tensor's row by its own C_k (√Σ C_k² = C): a Dirac canary
        # in one tensor moves by C_k < C, not the worst case the accountant covers (C across tensors).
        power = {"kind": "none", "figure": None, "decider": None,
                 "detail": "per-layer clipping: each canary is clipped to its own tensor's C_k < C, weaker than the "
                           "worst case the accountant covers (a row of norm C_k in every tensor); no power is proven "
                           "or measured for it"}
    checks = _claim_checks(audit, subject, label, power)
    for key, name in (("gaussian_sum", "Gaussian normalized-sum estimate"), ("andrew", "Andrew et al. estimate")):
        est = audit[key]
        figure = (f"ε ≈ {est['epsilon']:.3f}" if est["epsilon"] is not None
                  else f"withheld: {est.get('withheld')}")  # the scores contradict a Gaussian curve (gdp_fit)
        checks.append(Check(subject, name, f"{figure} (claim {eps_claim:.3f}); an estimate, "
                            "decides nothing", decides=False, assumption=est["assumption"]))
    if run["clip_deviation"] is None:
        checks.append(Check(subject, "canary clipping", "not checked exactly: random-direction canaries overlap the "
                            "real gradients (Dirac canaries are checked)", decides=False))
    elif run["clip_checked_steps"]:
        deviation = float(run["clip_deviation"])
        bad = not deviation <= CLIP_TOLERANCE
        checks.append(Check(
            subject, "canary clipping",
            (f"the optimizer's clipped sum on the canaries' coordinates was off by up to {deviation:.3g}·C (a canary of "
             f"norm {run['canary_scale']:g}·C must add exactly C): per-sample clipping is wrong") if bad else
            (f"exact on {run['clip_checked_steps']} steps: every canary of norm {run['canary_scale']:g}·C added C, "
             f"{run['as_rows']} of them clipped by the optimizer as rows"),
            failed=bad, assumption="a correct per-sample clipping brings a one-coordinate row of norm > C to norm C"))
    else:
        checks.append(Check(subject, "canary clipping", "not checked: ghost clipping keeps no per-sample gradients, "
                            "so the canaries joined its clipped sum at C (its noise, scaling and accounting act on "
                            "them; its clipping is Opacus's, not exercised here)" if settings.get("grad_sample_mode") == "ghost"
                            else "not checked: the optimizer kept no clipped sum (p.summed_grad) for the step hook to "
                            "read", decides=False))
    for text in disagreements:
        checks.append(Check(subject, "accountant vs training", f"accountant disagrees with the training: {text}",
                            failed=True, assumption="the accountant must be told what the optimizer and loader do"))
    checks += list(extra_checks or [])
    verdict = decide(checks, alpha=1 - confidence)
    verdict["family_wise_error"]["statement"] = (
        f"two sound tests of the claim (Steinke et al., f-DP one-run), each at α/2 = {(1 - confidence) / 2:g} "
        "(Bonferroni), plus deterministic accountant and canary-clipping checks")
    verdict["ceiling"] = float(audit["ceiling"])
    verdict["needed"] = audit.get("canaries_needed")
    verdict["needed_unit"] = "canaries (--canaries)"
    claim_status = "not_refuted" if audit["status"] == "held" and power["kind"] == "none" else audit["status"]
    verdict["claims"] = [{"claim": f"ε {eps_claim:g} at δ {delta:g}", "status": claim_status, "power": power,
                          "ceiling": float(audit["ceiling"]), "epsilon": eps_claim, "delta": float(delta),
                          "tested_by": "white-box one-run"}]
    overhead = (run["seconds"] / run["plain_seconds"]) if run.get("plain_seconds") else None
    return {
        "audit": f"white-box one-run gradient canaries ({PAPER})",
        "mode": "one-run",
        "power": power,
        "device": device,
        "subject": subject,
        "factory": factory,
        "builtin": bool(builtin),
        "observe": observe,
        "observed": ("the canary coordinates of the privatised gradient at every step (all iterates)" if observe == "all"
                     else "θ_0 − θ_T of the final model only, along each canary"),
        "canaries": {"m": run["m"], "kind": run["kind"], "n_parameters": run["n_parameters"],
                     "norm_over_C": run["canary_scale"], "inserted": run["inserted"],
                     "inserted_rows": run["as_rows"], "clip_deviation": run["clip_deviation"],
                     "insertion": "per step, up to 10 % of the expected batch as rows appended to every parameter's "
                                  "p.grad_sample after backward() (the optimizer's own per-sample clipping, checked "
                                  "exactly for Dirac canaries), the others added to the clipped sum at C; the "
                                  "optimizer's noise and scaling act on all",
                     "inclusion": "each canary by its own fair coin, then at every step with probability q",
                     "score_all": run["score_all_kind"]},
        "seed": int(seed),
        "settings": settings,
        "steps": run["steps"],
        "claim": {"epsilon": eps_claim, "source": source, "history": history, "curve": profile.source if profile else None},
        "claimed_epsilon": eps_claim,
        "delta": float(delta),
        "confidence": float(confidence),
        "accountant_disagreements": disagreements,
        "epsilon_lower_bound": float(audit["steinke"]["epsilon"]),
        "epsilon_lower_bound_label": f"Steinke et al. one-run bound at {1 - (1 - confidence) / 2:.1%} (sound, any mechanism)",
        "one_run": audit,
        "other_observation": {"observe": other, **({} if other_audit is None else {
            "status": other_audit["status"], "steinke_epsilon": other_audit["steinke"]["epsilon"],
            "fdp_refuted": bool(other_audit["fdp"] and other_audit["fdp"]["refuted"]),
            "fdp_gdp_family_epsilon": other_audit["fdp"]["gdp_family_epsilon"] if other_audit["fdp"] else None,
            "gaussian_sum_epsilon": other_audit["gaussian_sum"]["epsilon"],
            "andrew_epsilon": other_audit["andrew"]["epsilon"]}), "note": "same run, other observation: shown only"},
        "ceiling": float(audit["ceiling"]),
        "ceiling_label": "Steinke et al. bound of an attack guessing every canary right (α/2)",
        "cost": {"seconds_with_canaries": run["seconds"], "seconds_plain": run.get("plain_seconds"),
                 "cpu_seconds_with_canaries": run.get("cpu_seconds"), "cpu_seconds_plain": run.get("plain_cpu_seconds"),
                 "overhead": overhead, "cpu_overhead": (run["cpu_seconds"] / run["plain_cpu_seconds"]
                                                        if run.get("plain_cpu_seconds") else None), "goal": 1.3},
        "accuracy": {"with_canaries": run["accuracy"], "plain": run.get("plain_accuracy"),
                     "note": None if run["accuracy"] is not None else
                     "the factory returned no 'test_loader': accuracy not measured"},
        "violation": verdict["status"] == "fail",
        "verdict": verdict,
        **(extra or {}),
    }
