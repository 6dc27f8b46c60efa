"""Reference and shadow models, trained like the target with the vectorized DP-SGD trainer.

Reference models (LiRA, RMIA) are trained on the audit candidates: every candidate is in exactly
half of the K references (Carlini et al. 2022's balanced design), so each candidate has K/2 IN and
K/2 OUT models. The references' membership is drawn independently of the target's coin flips.
RMIA's population samples z come from the pool and are in no reference's training set.

Shadow models (Shokri et al. 2017) are trained on the pool only: each takes a random subset of the
target's training-set size as its IN set and the rest of the pool as OUT.

Training is split into tasks of `options.models_per_task` models (default: two, `model_slices`), run by the
context's executor (`--executor processes|ray`) or here. A task returns only the models' logits on
the rows the attacks query; model k is seeded from (seed, k) whichever task trains it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from attacks.base import AttackContext
from audit.errors import AuditInputError
from targets.vectorized_dpsgd import DPSGDSpec, train_many


@dataclass(frozen=True)
class ReferenceBank:
    in_masks: np.ndarray  # (K, n_candidates) bool: candidate i in reference k's training set
    candidate_logits: np.ndarray  # (K, n_candidates, C)
    population_features: np.ndarray  # (Z, d) pool rows never used to train a reference
    population_labels: np.ndarray
    population_logits: np.ndarray  # (K, Z, C)


def check_pool_capacity(attack_names: list[str], options, n_pool: int, n_train: int) -> None:
    """Refuse, before anything is trained, settings the pool cannot supply: the knobs that the chosen
    attacks read (as their classes declare them, attacks/registry.py) and that draw from the pool."""
    from attacks.registry import knobs_of

    read = {knob.name for knob in knobs_of(attack_names)}
    if "n_shadow_models" in read:
        _check_shadow_pool(options.n_shadow_models, n_pool, n_train)
    if "rmia_population" in read:
        _check_population_draw(options.rmia_population, n_pool)


def _check_population_draw(n_samples: int, n_pool: int) -> None:
    if n_samples > n_pool:
        raise AuditInputError(
            "attacks.rmia_population",
            f"asks for {n_samples} population samples but the pool holds {n_pool} rows",
        )


def _check_shadow_pool(n_models: int, n_pool: int, n_train: int) -> None:
    if n_models < 1:
        raise AuditInputError("attacks.n_shadow_models", f"must be ≥ 1, got {n_models}")
    # A shadow mimics the target only if it trains on as many rows, and keeps some rows OUT.
    needed = n_train + max(20, n_train // 10)
    if n_pool < needed:
        raise AuditInputError(
            "split",
            f"the shadow pool has {n_pool} rows; {n_models} shadow models each need {n_train} training rows "
            f"plus held-out rows (≥ {needed}): lower the split fractions or add data",
        )


def dpsgd_spec_like_target(context: AttackContext) -> DPSGDSpec:
    t = context.training
    return DPSGDSpec(
        noise_multiplier=t.noise_multiplier,
        max_grad_norm=t.max_grad_norm,
        sample_rate=t.sample_rate,
        steps=t.steps,
        lr=t.spec.lr,
        momentum=t.spec.momentum,
    )


def balanced_in_masks(n_models: int, n_records: int, rng: np.random.Generator) -> np.ndarray:
    """Each record in exactly ⌊K/2⌋ of the K models, the models chosen at random per record."""
    masks = np.zeros((n_models, n_records), dtype=bool)
    for i in range(n_records):
        masks[rng.permutation(n_models)[: n_models // 2], i] = True
    return masks


def train_models_logits(
    in_masks: np.ndarray,
    first_model: int,
    *,
    features: np.ndarray,
    labels: np.ndarray,
    hidden_sizes: tuple[int, ...],
    n_classes: int,
    spec: DPSGDSpec,
    seed: int,
    device: str,
    query_rows: list[np.ndarray],
    architecture: str = "mlp",
    on_progress: Callable[[float, int], None] | None = None,
) -> list[np.ndarray]:
    """A task: train models first_model … first_model + len(in_masks) - 1 of a bank, return their
    logits on each array of `query_rows` (float32, (k, rows, C) each). Plain data in and out
    (`on_progress` only in-process: a callable does not travel to a worker)."""
    models = train_many(
        features.shape[1],
        hidden_sizes,
        n_classes,
        features,
        labels,
        in_masks,
        spec,
        seed=seed,
        device=device,
        first_model=first_model,
        architecture=architecture,
        on_progress=on_progress,
    )
    return [models.logits(rows, device=device).numpy() for rows in query_rows]


# By default a bank trains as two tasks, its last quarter of models in the second: on the run's side lane
# (audit.sweep.side_lane.LaneSharingExecutor) the driver trains the first part while the second process trains the
# other. Per DP target of the default config (CPU seconds, one process, docs/run.md "Where the time goes") the
# driver's own work is its banks, 131 s (23 s for the 8 shadow models, 108 s for the 64 references), and the
# lane's its training, twin and probes, 77 s (30 + 36 + 11; ≈ 8 s for ε = ∞, no twin, no probes): over the six
# targets 786 s against 393 s, so a quarter of each bank on the lane gives each side ≈ 590 s. When the lane has
# not started its part by the time the driver is done with its own, the driver takes it back rather than wait.
# The split is the same with or without a lane, on any executor: which models are stepped together moves the
# last float bits (the padded batch block is the widest Poisson batch among them), so a bank is always these two
# parts and the numbers do not depend on the machine.
SECOND_TASK_SHARE = 1 / 4


def model_slices(n_models: int, models_per_task: int | None) -> list[tuple[int, int]]:
    """[start, stop) of each task's models: `models_per_task` at a time (None: two tasks, the second with the
    last ⌊K/4⌋ models; one task below 4 models)."""
    if models_per_task is None:
        second = int(n_models * SECOND_TASK_SHARE)
        return [(0, n_models - second), (n_models - second, n_models)] if second else [(0, n_models)]
    size = max(1, int(models_per_task))
    return [(k0, min(k0 + size, n_models)) for k0 in range(0, n_models, size)]


def _train_logits(
    context: AttackContext,
    features: np.ndarray,
    labels: np.ndarray,
    in_masks: np.ndarray,
    seed: int,
    query_rows: list[np.ndarray],
    what: str = "models",
) -> list[np.ndarray]:
    """Logits (K, rows, C) of the K models of `in_masks` on each of `query_rows`, trained in tasks.

    A user's own trainer (`context.train_models`, any model) runs here as given, not in tasks."""
    if context.train_models is not None:
        if context.report_progress is not None:  # booked under its own line, not the attack's
            context.report_progress(what, 0, len(in_masks))
        trained = [
            np.asarray(q, dtype=np.float64) for q in context.train_models(features, labels, in_masks, query_rows, seed)
        ]
        if context.report_progress is not None:
            context.report_progress(what, len(in_masks), len(in_masks))
        return trained
    slices, tasks, shared = _bank_tasks(context, features, labels, in_masks, seed, query_rows)
    executor: Any = context.executor
    local = executor is None or getattr(executor, "name", None) == "local"
    # A local executor with a second lane (audit.sweep.side_lane.LaneSharingExecutor) trains the bank's second
    # task there while this process trains the first: the same two tasks, the same numbers.
    shared_bank = local and hasattr(executor, "share") and len(slices) == 2 and context.options.models_per_task is None
    report = context.report_progress
    if shared_bank:
        return _join(_train_shared(executor, tasks, shared, what, report), len(query_rows))
    sender = None if local else getattr(executor, "task_progress", None)
    if not local and sender is None:  # Ray: tasks report nothing on the way, so count them as they return
        return _join(_train_by_task(context, tasks, shared, slices, what), len(query_rows))
    # Count in DP-SGD steps of the vectorized batches, the unit the trainer advances by (models finish only
    # together: "models done" would read 0 until the batch ends and the time left could not be estimated).
    # In this process the trainer calls back after every step; in `processes` workers it sends the same
    # figures through the executor (`task_progress`).
    steps = max(1, int(shared["spec"].steps))
    units, unit_what = len(slices) * steps, f"{what}, training steps"
    done_steps = [0] * len(slices)

    def task_progress(index: int, figures: tuple[float, int | None]) -> None:
        models_done, n_task_models = figures
        done_steps[index] = round(models_done / max(1, n_task_models or 1) * steps)
        if report is not None:
            report(unit_what, sum(done_steps), units)

    if report is not None:
        report(unit_what, 0, units)
    if local:
        parts = []
        for index, task in enumerate(tasks):

            def on_progress(done: float, total: int, index: int = index) -> None:
                task_progress(index, (done, total))

            parts.append(train_models_logits(*task, **shared, on_progress=on_progress))
    else:
        parts = executor.map(train_models_logits, tasks, {**shared, "on_progress": sender}, on_progress=task_progress)
    return _join(parts, len(query_rows))


def _bank_tasks(
    context: AttackContext,
    features: np.ndarray,
    labels: np.ndarray,
    in_masks: np.ndarray,
    seed: int,
    query_rows: list[np.ndarray],
) -> tuple[list[tuple[int, int]], list[tuple[np.ndarray, int]], dict[str, Any]]:
    """A bank's model slices, each task's positional arguments of `train_models_logits` and their common keywords."""
    slices = model_slices(len(in_masks), context.options.models_per_task)
    tasks = [(in_masks[k0:k1], k0) for k0, k1 in slices]
    shared: dict[str, Any] = dict(
        features=features,
        labels=labels,
        hidden_sizes=tuple(context.training.spec.hidden_sizes),
        n_classes=context.n_classes,
        spec=dpsgd_spec_like_target(context),
        seed=seed,
        device=context.task_device or str(context.device),
        query_rows=query_rows,
        architecture=getattr(context.training.spec, "architecture", "mlp"),
    )
    return slices, tasks, shared


@dataclass
class BankPlan:
    """A bank of reference or shadow models laid out before it trains: its cache key, the tasks of
    `train_models_logits` (`tasks[i]` positional, `shared` keywords; `slices[i]` the models of task i) and how the
    tasks' logits become what the cache holds (`finish`). A run schedules the tasks on its two lanes before its
    target is trained (audit.sweep.target_audit); `reference_bank` / `shadow_models` train them here otherwise."""

    key: str
    what: str
    rows: tuple[np.ndarray, np.ndarray, np.ndarray, int]  # (features, labels, in_masks (K, n), seed)
    slices: list[tuple[int, int]]
    tasks: list[tuple[np.ndarray, int]]
    shared: dict[str, Any]
    finish: Callable[[list[np.ndarray]], dict[str, Any]]

    def store(self, context: AttackContext, parts: list[list[np.ndarray]]) -> None:
        """Put the bank trained from the task results `parts` (in task order) in the context's cache."""
        context.cache[self.key] = self.finish(_join(parts, len(self.shared["query_rows"])))


def bank_plans(context: AttackContext, attack_names: list[str]) -> list[BankPlan]:
    """The banks the attacks `attack_names` will ask for (by the knobs they read, attacks/registry.py) and the
    context's cache does not hold yet, laid out as tasks; none where a user's trainer trains them
    (`context.train_models`)."""
    from attacks.registry import knobs_of

    if context.train_models is not None:
        return []
    read = {knob.name for knob in knobs_of(attack_names)}
    plans = []
    if "n_shadow_models" in read and "shadow_models" not in context.cache:
        plans.append(_shadow_plan(context, context.training.train_size))
    if "n_reference_models" in read and "reference_bank" not in context.cache:
        plans.append(_reference_plan(context))
    return plans


def _train_shared(executor: Any, tasks: list, shared: dict, what: str, report: Any) -> list:
    """The first task here, the second queued on the executor's side lane ahead of the lane's other work; each part
    counted in its DP-SGD steps on a line of its own. If the lane has not started its part when this process is
    done with its own (it was busy with a task of its own), this process takes it back and trains it too."""
    steps = max(1, int(shared["spec"].steps))
    (here_masks, _), (side_masks, side_first) = tasks
    handle = executor.share(
        train_models_logits,
        tasks[1],
        shared,
        what=f"{what}: {len(side_masks)} in the side process (from model {side_first + 1}), training steps",
        total=steps,
        units=lambda figures: round(figures[0] / max(1, figures[1] or 1) * steps),
    )

    def train_here(task: tuple, line: str) -> list[np.ndarray]:
        def on_progress(done: float, total: int) -> None:
            if report is not None:
                report(line, round(done / max(1, total) * steps), steps)

        on_progress(0, 1)
        return train_models_logits(*task, **shared, on_progress=on_progress)

    first = train_here(tasks[0], f"{what}: {len(here_masks)} here, training steps")
    if handle.take_back():
        second = train_here(
            tasks[1], f"{what}: {len(side_masks)} more here (the side process was busy), training steps"
        )
    else:  # on a line of its own, so the log shows how long this process waited for the other lane
        wait = f"{what}: waiting for the {len(side_masks)} in the side process"
        if report is not None:
            report(wait, 0, 1)
        second = handle.result()
        if report is not None:
            report(wait, 1, 1)
    return [first, second]


def _train_by_task(context: AttackContext, tasks: list, shared: dict, slices: list, what: str) -> list:
    """Train on an executor whose tasks report only when they return: progress counts models by finished task."""
    report, n_models = context.report_progress, slices[-1][1]
    if report is not None:
        report(what, 0, n_models)
    finished = [0]

    def on_result(index: int, _result) -> None:
        k0, k1 = slices[index]
        finished[0] += k1 - k0
        if report is not None:
            report(what, finished[0], n_models)

    executor: Any = context.executor
    return executor.map(train_models_logits, tasks, shared, on_result=on_result)


def _join(parts: list, n_queries: int) -> list[np.ndarray]:
    if len(parts) == 1:
        return parts[0]
    return [np.concatenate([part[i] for part in parts]) for i in range(n_queries)]


def reference_bank(context: AttackContext) -> ReferenceBank:
    """Train (once per target, cached in the context) the K reference models."""
    if "reference_bank" not in context.cache:
        _train_plan(context, _reference_plan(context))
    return ReferenceBank(**context.cache["reference_bank"])


def _reference_plan(context: AttackContext) -> BankPlan:
    options = context.options
    n_models = options.n_reference_models
    if n_models < 2:
        raise AuditInputError(
            "attacks.n_reference_models", f"must be ≥ 2 (half IN, half OUT per candidate), got {n_models}"
        )
    _check_population_draw(options.rmia_population, len(context.pool_features))  # the bank draws them
    rng = np.random.default_rng([context.seed, 0xA11A])
    masks = balanced_in_masks(n_models, len(context.candidate_features), rng)
    population = rng.choice(len(context.pool_features), size=options.rmia_population, replace=False)
    pop_x, pop_y = context.pool_features[population], context.pool_labels[population]

    def finish(logits: list[np.ndarray]) -> dict[str, Any]:
        candidate_logits, population_logits = logits
        bank = ReferenceBank(
            in_masks=masks,
            candidate_logits=candidate_logits,
            population_features=pop_x,
            population_labels=pop_y,
            population_logits=population_logits,
        )
        return asdict(bank)  # plain arrays: the cache may checkpoint them to disk

    return _plan(
        context,
        "reference_bank",
        f"{n_models} reference models",
        (context.candidate_features, context.candidate_labels, masks, context.seed + 1),
        [context.candidate_features, pop_x],
        finish,
    )


def _plan(
    context: AttackContext,
    key: str,
    what: str,
    rows: tuple[np.ndarray, np.ndarray, np.ndarray, int],
    query_rows: list[np.ndarray],
    finish: Callable[[list[np.ndarray]], dict[str, Any]],
) -> BankPlan:
    features, labels, masks, seed = rows
    slices, tasks, shared = _bank_tasks(context, features, labels, masks, seed, query_rows)
    return BankPlan(key, what, rows, slices, tasks, shared, finish)


def _train_plan(context: AttackContext, plan: BankPlan) -> None:
    """Train a bank here (or on the context's executor) and cache it."""
    logits = _train_logits(context, *plan.rows, plan.shared["query_rows"], what=plan.what)
    context.cache[plan.key] = plan.finish(logits)


@dataclass(frozen=True)
class ShadowModels:
    in_masks: np.ndarray  # (k, n_pool) bool
    pool_logits: np.ndarray  # (k, n_pool, C)


def shadow_models(context: AttackContext, n_train: int) -> ShadowModels:
    _check_shadow_pool(context.options.n_shadow_models, len(context.pool_features), n_train)
    if "shadow_models" not in context.cache:
        _train_plan(context, _shadow_plan(context, n_train))
    return ShadowModels(**context.cache["shadow_models"])


def _shadow_plan(context: AttackContext, n_train: int) -> BankPlan:
    n_models = context.options.n_shadow_models
    n_pool = len(context.pool_features)
    _check_shadow_pool(n_models, n_pool, n_train)
    rng = np.random.default_rng([context.seed, 0x5AD0])
    masks = np.zeros((n_models, n_pool), dtype=bool)
    for k in range(n_models):
        masks[k, rng.choice(n_pool, size=n_train, replace=False)] = True

    def finish(logits: list[np.ndarray]) -> dict[str, Any]:
        (pool_logits,) = logits
        return asdict(ShadowModels(in_masks=masks, pool_logits=pool_logits))

    return _plan(
        context,
        "shadow_models",
        f"{n_models} shadow models",
        (context.pool_features, context.pool_labels, masks, context.seed + 2),
        [context.pool_features],
        finish,
    )
