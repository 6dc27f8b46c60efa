"""White-box tight audits of DP-SGD code with a Dirac gradient canary (Nasr et al. 2023).

Threat model (hidden state visible; Nasr, Hayes, Steinke, Balle, Tramèr, Jagielski, Carlini,
Terzis 2023, "Tight Auditing of Differentially Private Machine Learning", arXiv 2302.07956): the
adversary inserts an arbitrary per-sample *gradient* at every step and sees every iterate. That is
the worst case DP-SGD's accountant covers, so an implementation that is as private as it claims can
never be shown to leak more, and one that adds too little noise, clips wrongly or scales wrongly
shows it within minutes of CPU.

How the canary goes in (one code path for both kinds of trainer):

* the canary coordinate j is the first coordinate of the first trainable parameter. No real
  record touches it: the harness zeroes it in every real per-sample gradient (Opacus: in
  `p.grad_sample` after `backward()`; the harness's own trainer: the data get an extra all-zero
  feature column and j is the first-layer weight on it, whose per-sample gradient is 0·g = 0);
* at every step of an "in" run the canary — one extra per-sample gradient row equal to
  `canary_scale`·C·e_j (norm ≫ C) — joins the batch with probability q (the claimed sampling
  rate; always at q = 1), never in an "out" run. The canary then passes through the USER's
  per-sample clipping, noise and scaling (Opacus's `DPOptimizer.step`), which is what is audited;
* observations: the privatised gradient's coordinate j at every step, normalised by the claimed
  C and expected batch size, x_t (all-iterates: for SGD, iterate differences carry the same
  information), and θ_0[j] − θ_T[j] (final model: what only the released model shows). A correct
  implementation gives x_t = b_t + σ·z_t with b_t ~ Bernoulli(q) in "in" runs, 0 in "out" runs.

Scores: "all" at q = 1: Σ_t x_t (the Neyman-Pearson statistic of a Gaussian shift); at q < 1:
Σ_t ln((1 − q) + q·exp((2x_t − 1)/(2σ²))) (the log-likelihood ratio of the claimed mixture);
"final": θ_0[j] − θ_T[j]. Then `audit.statistics.gaussian_dp_audit`: threshold on a pilot split,
Clopper-Pearson on the evaluation split, (a) refutation of the claimed trade-off curve and (b) the
GDP-family bound. At q = 1 the claimed mechanism is exactly μ-GDP, μ = √T/σ (Dong, Roth, Su 2019,
arXiv 1905.02383), so (a) decides the verdict; at q < 1 the mechanism is not Gaussian: the same
Clopper-Pearson point is tested against the claim's PLD trade-off curve
(`audit.statistics.tradeoff_curves`), and the GDP number is shown as an estimate. At every q the
Clopper-Pearson (ε, δ) bound of a second rule, chosen on the same pilot for the tail where that
bound lives, is the second deciding test (sound for any mechanism); the two tests split α.

Runs are independent processes' work: each worker task trains a block of runs (the harness's own
DP-SGD: `targets.vectorized_dpsgd.train_many`, all runs of a block at once; a user's Opacus
factory: one run after another, each from a fresh call of the factory), seeded from the run's
index so the numbers do not depend on `--workers`.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import partial
from typing import Any

import numpy as np

from audit.dp_validation.mode_power import whitebox_power_entry
from audit.dp_validation.sequential_looks import DEFAULT_LOOKS, declared_design
from audit.dp_validation.whitebox_arguments import (  # noqa: F401 - OBSERVATIONS, builtin_device: for importers
    OBSERVATIONS,
    _check_positive,
    builtin_device,
    check_builtin_dpsgd,
    check_whitebox_arguments,
)
from audit.dp_validation.whitebox_checks import accountant_checks, deciding_checks
from audit.dp_validation.whitebox_runs import (  # noqa: F401 - re-exported for importers of audit.dp_validation.whitebox_audit
    _IN,
    _OUT,
    CANARY_SCALE,
    HARNESS_ROWS,
    _observations,
    _opacus_settings,
    _unpack_setup,
    harness_observation_task,
    load_factory_in_worker,
    opacus_observation_task,
)
from audit.errors import AuditInputError
from audit.machinery.bound_results import WhiteboxAuditResult
from audit.machinery.verdict import decide
from audit.machinery.workers import WorkerPool, default_workers
from audit.statistics.accountants import DPSGDEvent, epsilon_pld
from audit.statistics.epsilon_bounds import epsilon_from_gdp_mu, gdp_mu_from_epsilon
from audit.statistics.gaussian_dp_audit import GAUSSIAN_ASSUMPTION, gaussian_dp_audit, mu_full_batch_dpsgd
from audit.statistics.sequential import GroupSequentialDesign, run_group_sequential

__all__ = [
    "OBSERVATIONS",
    "harness_observation_task",
    "opacus_observation_task",
    "run_whitebox_audit",
    "whitebox_scores",
]

# Share of each side's runs that picks the threshold (the rest is evaluated once).
PILOT_FRACTION = 0.2
# The smallest look of the sequential audit, in runs per side (a fifth of them pilot): a smaller look refutes only
# what the next one would, and spends α.
FIRST_LOOK_RUNS = 100
# Seconds one worker task (a block of runs) may take.
TASK_TIMEOUT_S = 900.0


# --------------------------------------------------------------------------------------------------
# The harness's own DP-SGD (vectorised trainer): one block of runs per task
# --------------------------------------------------------------------------------------------------


# --------------------------------------------------------------------------------------------------
# A user's Opacus setup: one run after another per task
# --------------------------------------------------------------------------------------------------


# --------------------------------------------------------------------------------------------------
# Scores, claim, verdict
# --------------------------------------------------------------------------------------------------


def whitebox_scores(
    steps: np.ndarray, final: np.ndarray, observe: str, noise_multiplier: float, sample_rate: float
) -> np.ndarray:
    """One score per run (higher = canary more likely in): see the module docstring."""
    if observe == "final":
        return np.asarray(final, dtype=float)
    x = np.asarray(steps, dtype=float)
    if sample_rate >= 1:
        return x.sum(axis=1)
    a = (2 * x - 1) / (2 * noise_multiplier**2)
    return np.logaddexp(math.log1p(-sample_rate), math.log(sample_rate) + a).sum(axis=1)


def _accountant_disagreements(settings: dict[str, Any]) -> list[str]:
    """Where the accountant's history differs from what the optimizer and loader did."""
    history = settings.get("accountant_history") or []
    found = []
    error = str(settings.get("accountant_error") or "")
    if error.startswith("get_epsilon returned"):  # a broken accountant is a finding, said on the console
        found.append(f"the privacy engine's accountant is broken: {error}")
    if not history:
        return ["the privacy engine's accountant recorded no steps"]
    told_steps = int(sum(h[2] for h in history))
    if told_steps != settings["steps"]:
        found.append(f"the accountant was told {told_steps} steps, the optimizer took {settings['steps']}")
    sigmas = {round(h[0], 12) for h in history}
    if sigmas != {round(settings["noise_multiplier"], 12)}:
        found.append(f"the accountant was told σ {sorted(sigmas)}, the optimizer uses {settings['noise_multiplier']:g}")
    rates = {round(h[1], 12) for h in history}
    q = settings.get("sample_rate")
    if q is None or not settings.get("poisson_sampling"):
        found.append(
            "the data loader is not Opacus's Poisson DPDataLoader, but the accountant assumes Poisson "
            f"sampling at q {sorted(rates)}"
        )
    elif rates != {round(q, 12)}:
        found.append(f"the accountant was told q {sorted(rates)}, the data loader samples at q {q:g}")
    return found


def _claim(settings: dict[str, Any], delta: float, *, with_pld: bool = True) -> dict[str, Any]:
    """The mechanism the accountant was told about: (σ, q) stages, T, its PLD ε and (q = 1) μ.
    `with_pld=False`: its PLD ε is not computed (None; seconds of CPU at q < 1) where the claim is the
    privacy engine's own ε or a stated one."""
    history = settings["accountant_history"] or [
        [settings["noise_multiplier"], settings["sample_rate"] or 1.0, settings["steps"]]
    ]
    full_batch = all(h[1] >= 1 for h in history)
    eps_pld: float | None = 0.0
    if len(history) == 1 and not with_pld:
        eps_pld = None
    elif len(history) == 1:
        sigma, q, t = history[0]
        eps_pld = epsilon_pld(DPSGDEvent(float(sigma), float(q), int(t)), delta)
    elif full_batch:
        eps_pld = epsilon_from_gdp_mu(mu_full_batch_dpsgd([(h[0], h[2]) for h in history]), delta)
    else:
        eps_pld = None  # several (σ, q) stages: not composed here; the accountant's own ε is the claim
    mu = mu_full_batch_dpsgd([(h[0], h[2]) for h in history]) if full_batch else None
    return {"full_batch": full_batch, "mu": mu, "epsilon_pld": eps_pld, "history": history}


@dataclass
class _RunSource:
    """Where the runs come from: the worker task and its arguments (task = task(*before, side, first, count,
    *after, **kwargs)), and how many runs one task trains (the runs of a look over `per_task` tasks per worker, at
    most `largest_block` runs each)."""

    name: str
    task: Callable[..., dict[str, Any]]
    before: tuple
    after: tuple
    kwargs: dict[str, Any]
    per_task: int = 1
    largest_block: int = 5000


def whitebox_design(
    n_runs: int, confidence: float = 0.95, *, looks: int | None = DEFAULT_LOOKS, spending: str = "haybittle-peto"
) -> GroupSequentialDesign:
    """The looks of a white-box audit of `n_runs` runs per side, declared before the first run (the command prints
    it): `audit.dp_validation.sequential_looks.declared_design`, no look below FIRST_LOOK_RUNS runs per side."""
    return declared_design(n_runs, confidence, looks=looks, spending=spending, first_look=FIRST_LOOK_RUNS)


def _claimed(arguments, claim: dict[str, Any], settings: dict[str, Any], builtin: bool, claimed_epsilon, delta: float):
    """(ε claimed, where it came from, μ of the curve tested) once the first runs told the accountant's settings."""
    if arguments.claim is not None:
        eps_claim = arguments.claim.epsilon
        claim_source = arguments.claim.source
    elif builtin:
        eps_claim, claim_source = float(claim["epsilon_pld"]), "PLD accountant of (σ, q, T)"
    elif settings.get("accountant_epsilon") is not None:
        eps_claim, claim_source = (
            float(settings["accountant_epsilon"]),
            f"the privacy engine's {settings['accountant']} accountant",
        )
    else:
        raise AuditInputError(
            "factory",
            f"the privacy engine's get_epsilon failed ({settings.get('accountant_error')}); give --claimed-epsilon",
        )
    sigma_claim, q_claim = claim["history"][0][0], claim["history"][0][1]
    # At q = 1 the claimed curve is G_μ of the steps the accountant was told; otherwise a CLT μ only
    # labels the GDP estimate (Bu, Dong, Long, Su 2020, arXiv 1911.11607), it decides nothing.
    mu_claim = (
        claim["mu"]
        if claim["full_batch"]
        else q_claim * math.sqrt(sum(h[2] for h in claim["history"]) * math.expm1(1 / sigma_claim**2))
    )
    if claimed_epsilon is not None and claim["full_batch"]:
        # An (ε, δ) given by flag is read as the Gaussian mechanism with that ε at δ: the curve tested.
        mu_claim = gdp_mu_from_epsilon(eps_claim, delta)
        claim["mu"] = mu_claim
        claim["mu_label_override"] = "μ of the Gaussian mechanism whose ε at δ is --claimed-epsilon"
    return eps_claim, claim_source, mu_claim


def _evaluate_look(
    sides: dict[int, list[dict]],
    size: int,
    level: float,
    observe: str,
    claim: dict[str, Any],
    mu_claim: float,
    delta: float,
    seed: int,
) -> dict[str, Any]:
    """The two audits of the first `size` runs per side at one look's level: the observation that decides and the
    other one (shown only). Two pre-declared tests decide, each at 1 − level/2 (Bonferroni within the look)."""
    sigma_claim, q_claim = claim["history"][0][0], claim["history"][0][1]
    steps_in = np.concatenate([p["steps"] for p in sides[_IN]])[:size]
    steps_out = np.concatenate([p["steps"] for p in sides[_OUT]])[:size]
    final_in = np.concatenate([p["final"] for p in sides[_IN]])[:size]
    final_out = np.concatenate([p["final"] for p in sides[_OUT]])[:size]
    score_in = whitebox_scores(steps_in, final_in, observe, sigma_claim, q_claim)
    score_out = whitebox_scores(steps_out, final_out, observe, sigma_claim, q_claim)
    if not (np.all(np.isfinite(score_in)) and np.all(np.isfinite(score_out))):
        raise AuditInputError(
            "noise_multiplier" if "settings" not in sides[_IN][0] else "factory",
            "the training produced NaN or infinite parameters; the audit needs finite iterates",
        )
    per_test = 1.0 - level / 2
    audit_at = partial(
        gaussian_dp_audit,
        claimed_mu=mu_claim,
        delta=delta,
        confidence=per_test,
        pilot_fraction=PILOT_FRACTION,
        seed=seed,
    )
    other = "final" if observe == "all" else "all"
    return {
        "per_test": per_test,
        "audit": audit_at(score_in, score_out),
        # The other observation of the same runs, shown beside (it decides nothing: one pre-declared test).
        "other_audit": audit_at(
            whitebox_scores(steps_in, final_in, other, sigma_claim, q_claim),
            whitebox_scores(steps_out, final_out, other, sigma_claim, q_claim),
        ),
    }


def run_whitebox_audit(
    *,
    factory: str | None = None,
    builtin: bool = False,
    noise_multiplier: float | None = None,
    sample_rate: float = 1.0,
    steps: int = 20,
    max_grad_norm: float = 1.0,
    n_runs: int = 1000,
    observe: str = "all",
    delta: float = 1e-5,
    claimed_epsilon: float | None = None,
    confidence: float = 0.95,
    seed: int = 0,
    workers: int | None = None,
    timeout: float = TASK_TIMEOUT_S,
    canary_scale: float = CANARY_SCALE,
    report_runs: Callable[[int, int], None] | None = None,
    device: str | None = None,
    looks: int | None = DEFAULT_LOOKS,
    spending: str = "haybittle-peto",
) -> dict[str, Any]:
    """`privacy-audit whitebox-audit`: Dirac-canary audit of a user's Opacus `factory` ("module:function"
    returning (model, optimizer, data_loader, privacy_engine) made private) or of the harness's own
    DP-SGD (`builtin`, with σ, q, T, C given; on `device`: auto | cpu | cuda, `--builtin` only). `n_runs`
    runs per side. Returns the result dict with its verdict (checks as in `audit.machinery.verdict`),
    ceiling and both bounds."""
    arguments = check_whitebox_arguments(
        factory=factory,
        builtin=builtin,
        observe=observe,
        delta=delta,
        confidence=confidence,
        claimed_epsilon=claimed_epsilon,
        canary_scale=canary_scale,
        min_canary_scale=1.0,
        device=device,
    )
    n = _check_positive(n_runs, "n_runs", integer=True, low=9, high=10**7)
    design = whitebox_design(n, confidence, looks=looks, spending=spending)
    device = arguments.device
    from audit.machinery.limits import check_workers

    n_workers = default_workers() if workers is None else (check_workers(workers) or default_workers())
    if builtin:
        sigma, q, t, c = check_builtin_dpsgd(noise_multiplier, sample_rate, steps, max_grad_norm)
        from audit.machinery.limits import check_memory

        # Both sides keep every run's observation at every step (float64), plus scores and copies.
        check_memory(2 * n * int(t) * 8 * 3, "n_runs", f"whitebox-audit with {n:,} runs per side of {int(t):,} steps")
        settings = {
            "noise_multiplier": sigma,
            "max_grad_norm": c,
            "sample_rate": q,
            "steps": t,
            "poisson_sampling": True,
            "optimizer": "SGD",
            "trainer": "targets.vectorized_dpsgd.train_many",
            "accountant_history": [[sigma, q, t]],
            "expected_batch_size": int(HARNESS_ROWS * q),
        }
        subject = f"harness DP-SGD (σ {sigma:g}, q {q:g}, T {t}, C {c:g})"
        runs = _RunSource(
            "the harness's DP-SGD",
            harness_observation_task,
            (sigma, q, t, c),
            (seed, canary_scale),
            {"device": device},
        )
    else:
        from audit.machinery.user_code import check_spec

        if factory is None:  # check_whitebox_arguments refuses this first; said again for the type checker
            raise AuditInputError("factory", "give a factory ('module:function') or builtin=True")
        factory = check_spec(factory, "factory")
        subject = f"--factory {factory}"
        runs = _RunSource(
            f"--factory {factory}",
            opacus_observation_task,
            (factory,),
            (seed, delta),
            {"canary_scale": canary_scale},
            per_task=4,
            largest_block=50,
        )
    sides: dict[int, list[dict]] = {_IN: [], _OUT: []}
    looked: dict[str, Any] = {}
    with WorkerPool(n_workers, name=runs.name, timeout=timeout) as pool:

        def gather(size: int) -> None:
            have = sum(part["final"].shape[0] for part in sides[_IN])
            if size > have:  # the next runs by index: the last look sees exactly the fixed audit's runs
                block = max(1, min(runs.largest_block, math.ceil((size - have) / max(1, runs.per_task * n_workers))))
                more = _observations(
                    pool,
                    runs.task,
                    runs.before,
                    runs.after,
                    runs.kwargs,
                    size,
                    block,
                    report_runs,
                    first=have,
                    planned=n,
                )
                for side in (_IN, _OUT):
                    sides[side].extend(more[side])
                expected = (sides[_IN][0]["settings"] or {}).get("steps") if not builtin else None
                for part in more[_IN] + more[_OUT]:
                    if expected is not None and part["steps"].shape[1] != expected:
                        raise AuditInputError(
                            "factory", f"{factory}: runs took different numbers of steps; the audit needs a fixed T"
                        )

        gather(design.sizes[0])
        if not builtin:
            settings = sides[_IN][0]["settings"]
        disagreements = [] if builtin else _accountant_disagreements(settings)
        claim = _claim(settings, delta)
        eps_claim, claim_source, mu_claim = _claimed(arguments, claim, settings, builtin, claimed_epsilon, delta)

        def look(index: int, size: int, level: float) -> tuple[float, dict[str, Any]]:
            gather(size)
            looked.update(_evaluate_look(sides, size, level, observe, claim, mu_claim, delta, seed))
            found = deciding_checks(
                looked["audit"],
                subject=subject,
                claim=claim,
                eps_claim=eps_claim,
                mu_claim=mu_claim,
                delta=delta,
                per_test=looked["per_test"],
                claimed_epsilon=claimed_epsilon,
                pilot_fraction=PILOT_FRACTION,
            )
            looked["found"] = found
            failing = [ch.name for ch in found.checks if ch.decides and ch.failed]
            words = [f"{' and '.join(failing)}: refuted at {looked['per_test']:.2%} confidence each"] if failing else []
            # An accountant that disagrees with the training is a finding whatever the runs show: no more runs.
            words += ["the accountant disagrees with the training (a deterministic finding)"] if disagreements else []
            return math.nan, {
                "rejected": found.refuted or bool(disagreements),
                "evidence": "; ".join(words),
                "epsilon_lower_bound": looked["audit"].epsilon_lower_bound_tail,
            }

        outcome = run_group_sequential(design, look)
    audit, other_audit, per_test = looked["audit"], looked["other_audit"], looked["per_test"]
    found = looked["found"]
    checks, ceiling, ceiling_kind, needed, profile_pair = (
        found.checks,
        found.ceiling,
        found.ceiling_kind,
        found.needed,
        found.profile_pair,
    )
    other = "final" if observe == "all" else "all"
    # Dirac canary, every iterate: proven power; the final model alone: none (mode_power).
    power = whitebox_power_entry(observe)
    checks = [replace(c, power=power) if c.decides else c for c in checks]
    checks += accountant_checks(subject, disagreements)
    verdict = decide(checks, alpha=1 - confidence)
    verdict["family_wise_error"]["statement"] = (
        f"two pre-declared tests (the trade-off curve at the pilot's equal-error point, the (ε, δ) bound at its tail "
        f"rule), each at {per_test:.2%} (Bonferroni: family-wise error ≤ {1 - confidence:g}), plus deterministic "
        "accountant checks"
        if len(design.sizes) == 1
        else f"two pre-declared tests (the trade-off curve at the pilot's equal-error point, the (ε, δ) bound at its "
        f"tail rule) at each of {len(design.sizes)} looks, each at half its look's level ({per_test:.2%} at the "
        f"deciding look; Bonferroni over the tests and the looks: family-wise error ≤ {1 - confidence:g}), plus "
        "deterministic accountant checks"
    )
    verdict["ceiling"] = float(ceiling)
    verdict["needed"] = needed
    verdict["needed_unit"] = "runs per side (--runs)"
    sound_bound = audit.epsilon_lower_bound_tail
    # The kind's typed result, serialised once; this literal is its field order (the schema's $defs/whitebox-audit).
    written: dict[str, Any] = {
        "audit": "white-box Dirac gradient canary (hidden state visible, Nasr et al. 2023, arXiv 2302.07956)",
        "subject": subject,
        "factory": factory,
        "builtin": bool(builtin),
        "device": device,
        "observe": observe,
        "observed": (
            "the canary coordinate of the privatised gradient at every step (all iterates)"
            if observe == "all"
            else "θ_0[j] − θ_T[j] of the final model only"
        ),
        "canary": {
            "coordinate": (
                "first-layer weight of unit 0 on an extra all-zero feature column (no record touches it)"
                if builtin
                else "first coordinate of the first trainable parameter, zeroed in every real per-sample gradient"
            ),
            "norm_over_C": float(canary_scale),
            "inclusion": "each step with probability q (the claimed sampling rate) in 'in' runs, never in 'out' runs",
        },
        "n_runs_per_side": int(outcome.size_used),
        "n_runs_per_side_planned": n,
        "sequential": outcome.summary("runs per side", outcome.size_used, n),
        "seed": int(seed),
        "settings": settings,
        "claim": {
            **claim,
            "epsilon": eps_claim,
            "source": claim_source,
            "mu_label": claim.get("mu_label_override")
            or (
                "μ = √(Σ T/σ²), exact for q = 1"
                if claim["full_batch"]
                else "CLT μ (Bu et al. 2020), approximate for q < 1"
            ),
        },
        "accountant_disagreements": disagreements,
        "claimed_epsilon": eps_claim,
        "delta": float(delta),
        "confidence": float(confidence),
        "epsilon_lower_bound": float(sound_bound),
        "epsilon_lower_bound_label": (
            "Clopper-Pearson (ε, δ) bound at its own (tail) rule chosen on the pilot: sound "
            f"for any mechanism given independent runs, at {per_test:.1%} (α split over two tests)"
        ),
        "epsilon_lower_bound_equal_error": audit.epsilon_lower_bound_clopper_pearson,
        "gdp_bound": {
            "mu": audit.mu_lower_bound,
            "epsilon": audit.epsilon_gdp,
            "claimed_mu": mu_claim,
            "claimed_epsilon_gdp": audit.claimed_epsilon_gdp,
            "assumption": GAUSSIAN_ASSUMPTION
            if claim["full_batch"]
            else GAUSSIAN_ASSUMPTION + " — does NOT hold exactly for q < 1: an estimate, not a bound",
            "decides": bool(claim["full_batch"]),
            "ratio_to_claim": audit.epsilon_gdp / eps_claim if eps_claim > 0 else None,
        },
        "other_observation": {
            "observe": other,
            "mu": other_audit.mu_lower_bound,
            "epsilon": other_audit.epsilon_gdp,
            "epsilon_lower_bound_clopper_pearson": other_audit.epsilon_lower_bound_tail,
            "epsilon_lower_bound_equal_error": other_audit.epsilon_lower_bound_clopper_pearson,
            "refutes_claimed_curve": other_audit.refutes_claim,
            "note": "same runs, other observation: shown only, decides nothing",
        },
        "refutation": (
            {
                "refutes_claimed_curve": audit.refutes_claim,
                "refuted_pair": audit.refuted_pair,
                "curve": "Gaussian G_μ (exact at q = 1)",
                "sound": True,
            }
            if claim["full_batch"]
            else {
                "refutes_claimed_curve": profile_pair is not None,
                "refuted_pair": profile_pair,
                "curve": "the claim's privacy profile (PLD of (σ, q, T), or the --claimed-epsilon pair)",
                "sound": True,
            }
        ),
        "test": audit.as_dict(),
        "ceiling": float(ceiling),
        "ceiling_label": ceiling_kind,
        "violation": verdict["status"] == "fail",
        "power": power,
        "verdict": verdict,
    }
    return WhiteboxAuditResult.from_json(written).to_json()
