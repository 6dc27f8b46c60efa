"""Canary audits of DP training code: does the trainer leak more about one record than it claims?

The user's training function is treated as a black-box mechanism `M(dataset) -> model`. We
insert a *canary* record that is easy to recognise if memorised, train many models with it and
many without, score the canary on each model (by its scaled logit ln(p_y/(1 − p_y)), which
orders models exactly as −loss does without saturating, see `canary_scores`), and bound ε from
how well a threshold on that score tells the two groups apart (Jagielski, Ullman, Oprea 2020,
"Auditing Differentially Private Machine Learning: How Private is Private SGD?", arXiv
2006.07709; Nasr et al. 2021, "Adversary Instantiation", arXiv 2101.04535). A lower bound
strictly above the claimed ε is a *violation*: with the stated confidence, the code is not as
private as it says. A bound of 0 proves nothing: this canary and this many models found no
evidence against the claim.

The audits:

* `profile_canary_audit` (the default): independent runs with one column canary each; one
  threshold rule's Clopper-Pearson error rates tested against the claim's whole trade-off curve
  (`audit.statistics.tradeoff_curves`), which has power at moderate FPR where a test of the single
  (ε, δ) point has none.
* `multi_canary_audit`: many runs × column canaries, Steinke et al.'s one-run bound over all slots.
* `multi_run_canary_audit`: K models with one canary, K without; threshold and direction chosen
  on half of the models, Clopper-Pearson bound on the other half (`threshold_audit`).
* `one_run_canary_audit`: m canaries, each inserted by an independent fair coin, ONE training
  run; the one-run bound of Steinke, Nasr, Jagielski 2023 (arXiv 2305.08846). Cheap but loose.
* The white-box (Dirac gradient canary) audit lives in `audit.dp_validation.whitebox_audit`:
  a black-box `train(features, labels, seed)` cannot be given a gradient canary.

User trainer protocol (what `--trainer module:function` names):
`train(features: np.ndarray (n, d) float32, labels: np.ndarray (n,) int64, seed: int) -> model`,
where model is a torch `nn.Module` returning logits, or has `.logits(features) -> (n, C)`, or
`.predict_proba(features) -> (n, C)`. The trainer's module (or the function itself) may define
`CLAIM = {"epsilon": ε, "delta": δ}` or `CLAIM = {"noise_multiplier": σ, "sample_rate": q,
"steps": T, "delta": δ}` (ε then from the PLD accountant); `--claimed-epsilon/--delta` override.
The trainer must handle any number of feature columns: the out-of-distribution canary adds one.

Canary labels come from *pilot* models trained without any canary, on seeds none of the audited
runs uses (5 for a multi-run audit, 1 for a one-run audit): the canary gets the class the pilots
find least likely there, so that models which did not see it mispredict it consistently. The
label is fixed before any audited model is trained, so the threshold test stays valid.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

# The pieces live in one module each (canaries, worker plumbing, scoring, one module per audit); the names
# are re-exported here, where callers have always found them.
from audit.dp_validation.canaries import (
    AUDIT_KINDS,  # noqa: F401
    CANARY_KINDS,
    COLUMN_CANARY_SCALES,  # noqa: F401
    OOD_SCALE,  # noqa: F401
    PROFILE_CANARY_SCALES,
    PROFILE_ONE_CLASS_VALUES,
    Canary,
    column_canaries,  # noqa: F401
    make_canaries,
    make_canary,
    one_class_canary,  # noqa: F401
    one_class_labels,  # noqa: F401
    profile_canary,  # noqa: F401
)
from audit.dp_validation.canary_multi_canary_audit import multi_canary_audit
from audit.dp_validation.canary_multi_run_audit import FIRST_LOOK_MODELS, PILOT_MODELS, multi_run_canary_audit
from audit.dp_validation.canary_one_run_audit import one_run_canary_audit
from audit.dp_validation.canary_profile_audit import (
    DEFAULT_LOOKS,
    DESIGN_PREFERENCE_Z,  # noqa: F401
    choose_profile_design,  # noqa: F401
    pilot_design_plan,  # noqa: F401
    profile_canary_audit,
    profile_sequential_design,
)
from audit.dp_validation.canary_scoring import (
    MULTI_RUN_STATISTICS,  # noqa: F401
    STATISTICS,  # noqa: F401
    _centred_logit,  # noqa: F401
    _centred_logit_gain,  # noqa: F401
    canary_scores,
    scores_from_log_probabilities,  # noqa: F401
)
from audit.dp_validation.canary_workers import (
    TRAIN_TIMEOUT_S,
    _check_canary_memory,
    _check_count,
    _check_model_output,  # noqa: F401
    _check_trainer,
    _pool_for,
    _trainer_name,
    declared_claim_task,
    train_and_score_task,  # noqa: F401
)
from audit.dp_validation.claims import (
    PrivacyClaim,
    check_stated_claim,
    claim_from_declaration,
    resolve_claim,
)
from audit.dp_validation.mode_power import canary_mode_power
from audit.dp_validation.scope import apply_power
from audit.dp_validation.sequential_looks import declared_design
from audit.errors import AuditInputError
from audit.machinery.bound_results import CanaryAuditResult

__all__ = [
    "CANARY_KINDS",
    "Canary",
    "PrivacyClaim",
    "canary_scores",
    "make_canary",
    "make_canaries",
    "multi_canary_audit",
    "multi_run_canary_audit",
    "one_run_canary_audit",
    "profile_canary_audit",
    "resolve_claim",
    "canary_result",
    "run_canary_audit",
]

AUDIT_MODES = ("profile", "multi-canary", "multi", "one-run")
# The modes whose runs come in looks (docs/canary-audit.md, "Sequential looks per mode"), and why the others do not.
SEQUENTIAL_MODES = ("profile", "multi")
NOT_SEQUENTIAL = {
    "one-run": "--mode one-run is one training run: nothing to look at before it ends",
    "multi-canary": "--mode multi-canary runs to its planned size (its runs are independent, so looks would be "
    "sound, but they are not built yet: docs/canary-audit.md)",
}
# Per-mode defaults of --models and --canaries (None where the mode does not use it).
MODE_DEFAULTS = {"profile": (48000, None), "multi-canary": (200, 32), "multi": (200, None), "one-run": (None, 200)}


def planned_training_runs(mode: str, n_models: int | None = None) -> int | None:
    """Training runs an audit will ask for, pilot included (for progress: "runs finished of runs
    planned"); None where the count depends on what the pilot finds (multi, one-run)."""
    runs = MODE_DEFAULTS[mode][0] if n_models is None else int(n_models)
    if runs is None:
        return None
    if mode == "profile":
        designs = len(PROFILE_CANARY_SCALES) + len(PROFILE_ONE_CLASS_VALUES)
        return runs + max(4 * designs, runs // 4)
    if mode == "multi-canary":
        return runs + max(4, math.ceil(runs / 4))
    return None


def default_audit_data(n_rows: int = 256, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """The harness's default synthetic table (`targets.datasets.make_default_tabular`), small."""
    from targets.datasets import make_default_tabular

    n = _check_count("--rows", n_rows, 20, "n_rows")
    data = make_default_tabular(n, seed)
    return data.features.astype(np.float32), data.labels.astype(np.int64)


def run_canary_audit(
    trainer: str | Callable,
    *,
    kind: str = "out_of_distribution",
    mode: str = "profile",
    n_models: int | None = None,
    n_canaries: int | None = None,
    claimed_epsilon: float | None = None,
    delta: float | None = None,
    confidence: float = 0.95,
    seed: int = 0,
    features=None,
    labels=None,
    n_rows: int = 256,
    pool=None,
    workers: int | None = None,
    timeout: float | None = TRAIN_TIMEOUT_S,
    looks: int | None = None,
    spending: str = "haybittle-peto",
    first_look_runs: int | None = None,
    announce: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """`privacy-audit canary-audit`: resolve the trainer's claim, run the chosen black-box audit.

    Profile and multi modes are sequential (`profile_sequential_design`, `declared_design`: up to `looks` looks,
    default 6, α split by `spending`; `looks=1` is the fixed-size audit; one-run is one run, multi-canary runs to
    its size: `NOT_SEQUENTIAL`); `announce(text)` receives the declared design once the trainer's claim was read
    and before the first training run (the CLI prints it).

    `trainer` is a "module:function" string or a picklable callable; it is loaded and called only
    in isolated worker processes (`pool`, else a WorkerPool of `workers`, default the cores), and
    its CLAIM is read there too: the parent never imports the user's module.
    `mode`: "profile" (the default, `profile_canary_audit`: `n_models` independent runs, default
    48000, plus a quarter as many pilot runs, tested against the claim's whole trade-off curve),
    "multi-canary" (`multi_canary_audit`: `n_models` runs × `n_canaries`
    column canaries, default 200 × 32), "multi" (`multi_run_canary_audit`: K = `n_models` runs
    per side with one canary of `kind`, default 200) or "one-run" (`n_canaries` canaries of
    `kind` in one run, default 200). `kind="dirac"` is refused (exit 2): the Dirac canary is a
    white-box gradient canary that a black-box `train(features, labels, seed)` cannot receive,
    and auditing some other DP-SGD under this trainer's name would say nothing about it.
    Data: (`features`, `labels`) or, when None, the harness's default synthetic table with
    `n_rows` rows. Adds "claim" (where ε came from) and "mode" to the result.
    """
    trainer = _check_trainer(trainer)
    if kind == "dirac":
        raise AuditInputError(
            "kind",
            "dirac inserts a gradient canary inside DP-SGD, which a black-box train(features, labels, "
            "seed) cannot receive; use --kind out_of_distribution or mislabeled to audit this trainer, or "
            "`privacy-audit whitebox-audit --factory module:function` to audit an Opacus training setup with it",
        )
    if kind not in CANARY_KINDS:
        raise AuditInputError("kind", f"expected one of {', '.join(CANARY_KINDS)}, got {kind!r}")
    if mode not in AUDIT_MODES:
        raise AuditInputError("mode", f"expected one of {', '.join(AUDIT_MODES)}, got {mode!r}")
    if mode in ("profile", "multi-canary") and kind != "out_of_distribution":
        raise AuditInputError(
            "kind",
            f"the {mode} mode uses out-of-distribution column canaries; "
            "use --mode multi or one-run for mislabeled canaries",
        )
    default_models, default_canaries = MODE_DEFAULTS[mode]
    n_models = default_models if n_models is None else n_models
    n_canaries = default_canaries if n_canaries is None else n_canaries
    # The counts this mode uses (0 where it uses none; checked below before anything runs).
    models, canaries = (n_models if n_models is not None else 0), (n_canaries if n_canaries is not None else 0)
    # Everything checkable without running user code is checked before a worker starts.
    if mode != "one-run":
        _check_count("--models", n_models, 4 if mode in ("profile", "multi-canary") else 2, "n_models")
    if mode not in ("multi", "profile"):
        _check_count("--canaries", n_canaries, 1 if mode == "multi-canary" else 2, "n_canaries")
    # The one check of the explicit claim (the declared CLAIM is read, and checked, in a worker below).
    stated_epsilon, stated_delta = check_stated_claim(claimed_epsilon, delta)
    if features is None:
        _check_count("--rows", n_rows, 20, "n_rows")
    if looks is not None:
        from audit.machinery.limits import check_count

        looks = check_count("--looks", looks, where="looks")  # the range table (docs/errors.md)
    if looks is not None and mode not in SEQUENTIAL_MODES and looks != 1:
        raise AuditInputError("looks", f"sequential looks apply to --mode profile and multi; {NOT_SEQUENTIAL[mode]}")
    design = None
    if mode == "profile":
        design = profile_sequential_design(
            int(models),
            confidence,
            looks=DEFAULT_LOOKS if looks is None else looks,
            spending=spending,
            first_look_runs=first_look_runs,
        )
    elif mode == "multi":
        design = declared_design(
            int(models),
            confidence,
            looks=looks,
            spending=spending,
            first_look=FIRST_LOOK_MODELS if first_look_runs is None else int(first_look_runs),
        )
    _check_canary_memory(mode, int(models), int(canaries), int(n_rows if features is None else len(features)))
    if features is None:
        features, labels = default_audit_data(n_rows, seed)
    with _pool_for(trainer, pool, workers, timeout) as runner:
        (declared,) = runner.map(declared_claim_task, [(trainer,)])
        # The claim, built once; it flows down unchanged (a stated ε carries no (σ, q, T), so the
        # audits test the accountant's whole profile only when it was declared and not overridden).
        claim = claim_from_declaration(*declared, claimed_epsilon=stated_epsilon, delta=stated_delta)
        common = dict(claim=claim, confidence=confidence, seed=seed, pool=runner)
        if announce is not None and design is not None and mode == "profile":
            pilot = (planned_training_runs(mode, models) or models) - int(models)
            announce(
                f"declared before the first run: {design.describe('audited runs')} (plus up to {pilot:,} pilot "
                "runs, a quarter of each look's size)"
            )
        elif announce is not None and design is not None:
            announce(
                f"declared before the first run: {design.describe('models per side')} (plus {PILOT_MODELS} pilot "
                "runs that choose the canary's label)"
            )
        if mode == "profile":
            result = profile_canary_audit(
                trainer,
                features,
                labels,
                n_runs=models,
                looks=DEFAULT_LOOKS if looks is None else looks,
                spending=spending,
                first_look_runs=first_look_runs,
                **common,
            )
        elif mode == "multi-canary":
            result = multi_canary_audit(trainer, features, labels, n_runs=models, n_canaries=canaries, **common)
        elif mode == "multi":
            result = multi_run_canary_audit(
                trainer,
                features,
                labels,
                canary_kind=kind,
                n_models=models,
                looks=looks,
                spending=spending,
                first_look_models=FIRST_LOOK_MODELS if first_look_runs is None else int(first_look_runs),
                **common,
            )
        else:
            result = one_run_canary_audit(trainer, features, labels, n_canaries=canaries, canary_kind=kind, **common)
    return canary_result(
        result,
        mode=mode,
        trainer=_trainer_name(trainer),
        claim=claim,
        size=n_canaries if mode == "one-run" else n_models,
    )


def canary_result(
    found: dict[str, Any], *, mode: str, trainer: str, claim: PrivacyClaim, size: int | None
) -> dict[str, Any]:
    """A mode's result as the kind's typed result (`CanaryAuditResult`), completed with what every mode shares
    (its mode, the trainer, the claim, the mode's power at its planned `size` and the verdict that power allows),
    serialised once in the field order results files have always had."""
    typed = CanaryAuditResult.from_json(found).with_fields(mode=mode, trainer=trainer, claim=claim.to_dict())
    # Black-box canaries read from the final model: the ceiling is not their power (mode_power).
    power = canary_mode_power(mode, size)
    return typed.with_fields(power=power, verdict=apply_power(dict(typed.bound.own), power)).to_json()
