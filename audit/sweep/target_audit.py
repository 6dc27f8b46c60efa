"""One target of the main job: train (or reload) it, attack it, and add its white-box twin and conformance rows.

The sweep (`audit.sweep.runner`) calls `audit_target` once per target ε; every finished piece is checkpointed
in the target's folder, so an interrupted run resumes with only the missing pieces. With a side lane
(`audit.sweep.side_lane`, two or more cores on the local executor) `submit_side_work` queues every target's
training, its reference and shadow banks' tasks (with the σ, q, T and C its training will have) and its twin and
probes, for both processes; `audit_target` takes their results when it needs them (running queued tasks itself
meanwhile), checks the banks' schedule against the trained target, and attacks; the numbers are the same either way.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from attacks import AttackContext, AttackOptions, TargetTraining
from attacks.reference_models import BankPlan, bank_plans, train_models_logits
from audit.machinery.checkpoints import ArrayCache, TargetCheckpoints
from audit.machinery.config import AuditConfig
from audit.machinery.executors import Executor
from audit.machinery.progress import Progress
from audit.machinery.tracking import AuditTracker
from audit.machinery.workers import report_task_progress
from audit.statistics.accountants import DPSGDEvent, epsilons_for_event, pld_epsilon_interval
from audit.statistics.attack_evaluation import best_sound_lower_bound, evaluate_attack
from audit.sweep.side_lane import LaneSharingExecutor, SideLane
from audit.sweep.tasks import train_target_task
from targets.datasets import TabularData
from targets.models import build_model
from targets.splits import AuditSplits
from targets.training import PlannedSchedule, TrainedTarget, TrainingSpec, planned_schedule, train_target

# PLD (tight) may exceed PRV only by discretisation/estimation error; more than this is reported.
PLD_PRV_TOLERANCE = 0.05


def target_seed(config_seed: int, index: int) -> int:
    """Seed of the `index`-th target: one config seed drives everything, streams stay independent."""
    return int(np.random.SeedSequence([config_seed, 1, index]).generate_state(1)[0])


def _target_record(
    trained: TrainedTarget, config: AuditConfig, test_accuracy: float, attacks: list[dict[str, Any]]
) -> tuple[dict[str, Any], list[str]]:
    notes = []
    epsilon: dict[str, float] = {}
    accountant_eps = None
    interval = None
    if trained.epsilon_target is not None and trained.noise_multiplier is not None:
        event = DPSGDEvent(trained.noise_multiplier, trained.sample_rate, trained.steps)
        epsilon = epsilons_for_event(event, trained.delta, config.privacy.accountant)
        accountant_eps = epsilon[config.privacy.accountant]
        # The tight interval judges the accountant (an ε below its lower end is unsound); cached.
        # (without its timing: two runs with the same seed write the same numbers)
        interval = {k: v for k, v in pld_epsilon_interval(event, trained.delta).as_dict().items() if k != "seconds"}
        if not interval["tight"]:
            notes.append(f"ε target {trained.epsilon_target:g}: PLD interval {interval['note']}")
        if epsilon["pld"] > epsilon["prv"] + PLD_PRV_TOLERANCE:
            notes.append(
                f"ε target {trained.epsilon_target:g}: PRV ε {epsilon['prv']:.3f} is below the tight PLD ε "
                f"{epsilon['pld']:.3f} by more than {PLD_PRV_TOLERANCE}"
            )
    best, best_method = best_sound_lower_bound(attacks)
    violation = False  # set by the verdict: Holm over every target's tests (audit.machinery.verdict)
    record = {
        "epsilon_target": trained.epsilon_target,
        "delta": trained.delta,
        "noise_multiplier": trained.noise_multiplier,
        "sample_rate": trained.sample_rate,
        "steps": trained.steps,
        "max_grad_norm": trained.max_grad_norm,
        "poisson_sampling": trained.poisson_sampling,
        "accountant": trained.accountant,
        "epsilon": epsilon,
        "epsilon_accountant": accountant_eps,
        "epsilon_pld_interval": interval,
        "epsilon_engine": trained.accountant_epsilon,
        "test_accuracy": test_accuracy,
        "train_seconds": trained.train_seconds,
        "attacks": attacks,
        "epsilon_lb_best": best,
        "epsilon_lb_best_method": best_method,
        "epsilon_lb_ratio": (best / accountant_eps) if accountant_eps and best is not None else None,
        "violation": bool(violation),
    }
    return record, notes


@dataclass
class SweepInputs:
    config: AuditConfig
    data: TabularData
    splits: AuditSplits
    spec: TrainingSpec
    device: torch.device
    attack_options: AttackOptions
    executor: Executor
    task_device: str
    side: SideLane | None = None  # the second process, where there is one (submit_side_work)
    # Per target index: the schedule its banks were laid out with and each bank's plan with its lane keys
    # (submit_side_work), collected by audit_target once the target is trained.
    banks: dict[int, tuple[PlannedSchedule, list[tuple[BankPlan, list[str]]]]] = field(default_factory=dict)


def _load_or_train_target(
    inputs: SweepInputs, epsilon: float, seed: int, ckpt: TargetCheckpoints, progress: Progress, label: str
) -> TrainedTarget:
    config, data, splits = inputs.config, inputs.data, inputs.splits
    meta, state = ckpt.load_json("target"), ckpt.load_state_dict("target")
    if meta is not None and state is not None:
        model = build_model(
            inputs.spec.architecture, data.features.shape[1], inputs.spec.hidden_sizes, data.n_classes, seed=seed
        )
        model.load_state_dict(state)
        return TrainedTarget(model=model.eval(), **meta)  # type: ignore[arg-type]  # an MLP or a CNN
    with progress.step(f"{label}: training (epochs)", total=inputs.spec.epochs) as step:
        trained = train_target(
            data.features[splits.train_idx],
            data.labels[splits.train_idx],
            data.n_classes,
            inputs.spec,
            epsilon=epsilon,
            delta=config.privacy.delta,
            accountant=config.privacy.accountant,
            seed=seed,
            device=inputs.device,
            on_epoch=lambda epoch, _: step.update(epoch),
            secure_mode=config.privacy.secure_mode,
        )
    ckpt.save_state_dict("target", trained.model.state_dict())
    ckpt.save_json("target", {k: v for k, v in trained.__dict__.items() if k != "model"})
    return trained


def target_checkpoints(staging: Path, epsilon: float) -> TargetCheckpoints:
    return TargetCheckpoints(staging / "checkpoints" / f"eps_{epsilon_tag(epsilon)}")


def train_targets_in_parallel(inputs: SweepInputs, staging: Path, progress: Progress) -> None:
    """Train every target not yet checkpointed as one executor task each; checkpoint each as it
    arrives, so an interruption keeps the finished ones. The per-target loop then reloads them."""
    config, data, splits = inputs.config, inputs.data, inputs.splits
    todo = []
    for index, epsilon in enumerate(config.privacy.epsilons):
        ckpt = target_checkpoints(staging, epsilon)
        if ckpt.load_json("record") is None and ckpt.load_json("target") is None:
            todo.append((index, epsilon, ckpt))
    if not todo:
        return
    progress.note(
        f"training {len(todo)} target(s) on the {inputs.executor.name} executor ({inputs.executor.workers} worker(s))"
    )

    with progress.step("target models trained", total=len(todo)) as trained:  # counts and time left in the log

        def checkpoint(position: int, result: dict[str, Any]) -> None:
            ckpt = todo[position][2]
            ckpt.save_state_dict("target", {k: torch.tensor(v) for k, v in result["state"].items()})
            ckpt.save_json("target", result["meta"])
            trained.advance()

        inputs.executor.map(
            train_target_task,
            [(epsilon, target_seed(config.seed, index)) for index, epsilon, _ in todo],
            dict(
                features=data.features[splits.train_idx],
                labels=data.labels[splits.train_idx],
                n_classes=data.n_classes,
                spec=inputs.spec,
                delta=config.privacy.delta,
                accountant=config.privacy.accountant,
                device=inputs.task_device,
                secure_mode=config.privacy.secure_mode,
            ),
            on_result=checkpoint,
        )


def audit_target(
    inputs: SweepInputs,
    index: int,
    epsilon: float,
    attacks: list,
    ckpt: TargetCheckpoints,
    progress: Progress,
    label: str,
    on_trained: Callable[[TrainedTarget], None] | None = None,
) -> tuple[dict[str, Any], dict[str, np.ndarray], list[str]]:
    """Train (or reload) one target and run every attack on it; each finished piece is checkpointed."""
    config, data, splits = inputs.config, inputs.data, inputs.splits
    seed = target_seed(config.seed, index)
    finished = ckpt.load_json("record")
    if finished is not None:  # completed by an earlier, interrupted attempt
        return finished["record"], ckpt.load_arrays("scores") or {}, finished["notes"]
    side = inputs.side
    if side is not None and side.has(f"target {index}"):
        side.result(f"target {index}")  # trained beside this process and checkpointed: loaded below
    trained = _load_or_train_target(inputs, epsilon, seed, ckpt, progress, label)
    if on_trained is not None:
        on_trained(trained)
    test_x, test_y = data.features[splits.test_idx], data.labels[splits.test_idx]
    cand_y = data.labels[splits.candidate_idx]
    reporter = progress.reporter(label)  # reference / shadow model training inside the attacks
    test_accuracy = float((trained.logits(test_x).argmax(axis=1) == test_y).mean())
    context = _attack_context(
        inputs,
        epsilon,
        seed,
        trained,
        ArrayCache(ckpt),
        # With a side lane, part of each reference and shadow bank trains there while this process trains the rest.
        executor=LaneSharingExecutor(side, label)
        if side is not None and inputs.executor.name == "local"
        else inputs.executor,
        reporter=reporter,
    )
    _collect_banks(inputs, index, trained, context, progress, label)
    attack_records, score_columns = [], {}
    for attack in attacks:
        # total 1: the attack is its unit (its row waits at 0/1 while the shadow or reference models it asked for
        # train on rows of their own, counted in their DP-SGD steps)
        with progress.step(f"{label}: attack {attack.name} (scores, metrics, ε bounds)", total=1) as attack_step:
            stored = ckpt.load_arrays(f"scores_{attack.name}")
            if stored is None:
                try:
                    scores = np.asarray(attack.scores(trained, context), dtype=np.float64)
                finally:
                    reporter.close()
                ckpt.save_arrays(f"scores_{attack.name}", {"scores": scores})
            else:
                scores = stored["scores"]
            score_columns[attack.name] = scores
            attack_records.append(
                evaluate_attack(
                    attack.name,
                    scores,
                    splits.candidate_member,
                    cand_y,
                    delta=config.privacy.delta,
                    confidence=config.attacks.confidence,
                    threshold_seed=seed,
                    accountant_epsilon=trained.accountant_epsilon,
                )
            )
            attack_step.advance()
    record, notes = _target_record(trained, config, test_accuracy, attack_records)
    record["seed"] = seed
    if config.privacy.whitebox_one_run and trained.epsilon_target is not None and trained.accountant_epsilon:
        from audit.sweep.whitebox_one_run import twin_row_entry, twin_task

        if side is not None and side.has(f"twin {index}"):
            twin = side.result(f"twin {index}")
        else:
            with progress.step(f"{label}: {_TWIN_STEP}", total=inputs.spec.epochs + 1) as twin_step:
                twin = twin_task(
                    *_training_rows(inputs),
                    **_twin_arguments(inputs, epsilon, seed),
                    on_epoch=lambda epoch, _: twin_step.update(epoch),
                )
        record["whitebox_one_run"] = twin_row_entry(
            twin, target=trained, target_accuracy=test_accuracy, confidence=config.attacks.confidence
        )
    if config.privacy.conformance and trained.epsilon_target is not None and trained.accountant_history:
        from audit.sweep.conformance_rows import CONFORMANCE_PHASES, conformance_probes_task, conformance_record

        if side is not None and side.has(f"conformance {index}"):
            probes = side.result(f"conformance {index}")
        else:
            with progress.step(f"{label}: {_CONFORMANCE_STEP}", total=CONFORMANCE_PHASES) as probes_step:
                probes = conformance_probes_task(
                    *_training_rows(inputs),
                    **_setup_arguments(inputs, epsilon, seed),
                    on_phase=lambda done, _: probes_step.update(done),
                )
        record["conformance"] = conformance_record(probes, trained)
    ckpt.save_arrays("scores", score_columns)
    ckpt.save_json("record", {"record": record, "notes": notes})
    return record, score_columns, notes


def _attack_context(
    inputs: SweepInputs,
    epsilon: float,
    seed: int,
    trained: TrainedTarget | PlannedSchedule,
    cache: Any,
    *,
    executor: Any,
    reporter: Any = None,
) -> AttackContext:
    """The attacks' view of one target: its data, and how it was (or will be: a `PlannedSchedule`) trained."""
    data, splits = inputs.data, inputs.splits
    return AttackContext(
        candidate_features=data.features[splits.candidate_idx],
        candidate_labels=data.labels[splits.candidate_idx],
        n_classes=data.n_classes,
        pool_features=data.features[splits.pool_idx],
        pool_labels=data.labels[splits.pool_idx],
        training=TargetTraining(
            spec=inputs.spec,
            noise_multiplier=trained.noise_multiplier or 0.0,
            max_grad_norm=trained.max_grad_norm,
            sample_rate=trained.sample_rate,
            steps=trained.steps,
            train_size=len(splits.train_idx),
        ),
        epsilon=epsilon,
        delta=inputs.config.privacy.delta,
        accountant=inputs.config.privacy.accountant,
        seed=seed,
        device=inputs.device,
        options=inputs.attack_options,
        cache=cache,
        executor=executor,
        task_device=inputs.task_device,
        report_progress=reporter,
    )


def _collect_banks(
    inputs: SweepInputs, index: int, trained: TrainedTarget, context: AttackContext, progress: Progress, label: str
) -> None:
    """Put the banks laid out for this target before it was trained (submit_side_work) in its cache, once their
    tasks are done, if they were laid out with the schedule it was trained with (else the attacks train them again,
    with the trained target's σ, q, T and C, and a note says so)."""
    planned = inputs.banks.pop(index, None)
    if planned is None or inputs.side is None:
        return
    schedule, plans = planned
    if not schedule.matches(trained):
        progress.note(
            f"{label}: its training's σ, q, T or C differ from those its reference and shadow models were laid "
            "out with: they are trained again"
        )
        return
    for plan, keys in plans:
        plan.store(context, [inputs.side.result(key) for key in keys])


def model_logger(tracker: AuditTracker, run_id: str, example: np.ndarray, progress: Progress, label: str):
    def log(trained: TrainedTarget) -> None:
        with progress.step(f"{label}: model to MLflow (PyTorch flavour)"):
            tracker.log_torch_model(run_id, trained.model, example.astype(np.float32))

    return log


def epsilon_tag(epsilon: float) -> str:
    return "inf" if math.isinf(epsilon) else f"{epsilon:g}"


_TWIN_STEP = "white-box one-run audit (a twin with gradient canaries: epochs, then scoring)"
_CONFORMANCE_STEP = "conformance checks on its own Opacus setup (probes)"


def _training_rows(inputs: SweepInputs) -> tuple[np.ndarray, np.ndarray, int, TrainingSpec]:
    data, train = inputs.data, inputs.splits.train_idx
    return data.features[train], data.labels[train], data.n_classes, inputs.spec


def _setup_arguments(inputs: SweepInputs, epsilon: float, seed: int) -> dict[str, Any]:
    """What rebuilds the target's Opacus setup: its ε and seed, the run's δ, accountant, device, secure mode."""
    privacy = inputs.config.privacy
    return dict(
        epsilon=float(epsilon),
        delta=privacy.delta,
        accountant=privacy.accountant,
        seed=seed,
        device=inputs.task_device,
        secure_mode=privacy.secure_mode,
    )


def _twin_arguments(inputs: SweepInputs, epsilon: float, seed: int) -> dict[str, Any]:
    data, splits = inputs.data, inputs.splits
    return dict(
        _setup_arguments(inputs, epsilon, seed),
        confidence=inputs.config.attacks.confidence,
        n_canaries=inputs.config.privacy.one_run_canaries,
        test_features=data.features[splits.test_idx],
        test_labels=data.labels[splits.test_idx],
    )


def submit_side_work(
    inputs: SweepInputs, staging: Path, side: SideLane, labels: list[str], attack_names: list[str]
) -> None:
    """Queue on the two lanes (the side process takes them in order; the driver takes the next one whenever it
    would otherwise wait, `SideLane.result`) every piece of the targets not yet finished that needs no attack: per
    target its training (checkpointed as it returns), its shadow and reference models (each bank as its two tasks,
    `attacks.reference_models.model_slices`), and per DP target its twin and its conformance probes. The banks do
    not wait for their target: they are trained with the σ, q, T and C its training will have
    (`targets.training.planned_schedule`: this process calibrates σ once per ε and the side process is handed the
    same float), checked against the trained target before the attacks read them (`_collect_banks`). Order:
    target 1's training and banks, target 2's training and banks, target 1's twin and probes, target 3's …, so the
    driver can attack target i while both lanes work on target i + 1, and the last tasks of the run are short."""
    config = inputs.config
    pending = [
        (index, epsilon)
        for index, epsilon in enumerate(config.privacy.epsilons)
        if target_checkpoints(staging, epsilon).load_json("record") is None
    ]
    n_train = len(inputs.splits.train_idx)
    for index, epsilon in pending:
        ckpt = target_checkpoints(staging, epsilon)
        meta = ckpt.load_json("target")
        if meta is not None:  # trained by an earlier attempt: its banks take its own schedule
            schedule = PlannedSchedule(
                meta["noise_multiplier"], meta["sample_rate"], meta["steps"], meta["max_grad_norm"], None
            )
        else:
            schedule = planned_schedule(
                n_train, inputs.spec, epsilon=epsilon, delta=config.privacy.delta, accountant=config.privacy.accountant
            )
            if schedule.sigma_key is not None and schedule.noise_multiplier is not None:
                side.remember_sigma(schedule.sigma_key, schedule.noise_multiplier)
            _submit_training(inputs, staging, side, labels, index, epsilon)
        seed = target_seed(config.seed, index)
        context = _attack_context(inputs, epsilon, seed, schedule, ArrayCache(ckpt), executor=None)
        plans = []
        for number, plan in enumerate(bank_plans(context, attack_names)):
            keys = []
            steps = max(1, int(plan.shared["spec"].steps))
            for part, (task, (first, stop)) in enumerate(zip(plan.tasks, plan.slices, strict=True)):
                key = f"{plan.key} {part} of target {index}"
                side.submit(
                    key,
                    train_models_logits,
                    task,
                    {**plan.shared, "on_progress": report_task_progress},
                    description=f"{labels[index]}: {plan.what}: models {first + 1}–{stop}, training steps",
                    total=steps,
                    units=_in_steps(steps),
                    priority=(index, 1, number, part),
                )
                keys.append(key)
            plans.append((plan, keys))
        inputs.banks[index] = (schedule, plans)
        if not math.isinf(epsilon):
            _submit_twin_and_probes(inputs, side, labels, index, epsilon)


def _in_steps(steps: int) -> Callable[[tuple[float, int | None]], int]:
    """A bank task's reported (models done, models) as DP-SGD steps of its vectorized batch."""
    return lambda figures: round(figures[0] / max(1, figures[1] or 1) * steps)


def _submit_training(
    inputs: SweepInputs, staging: Path, side: SideLane, labels: list[str], index: int, epsilon: float
) -> None:
    config = inputs.config
    ckpt = target_checkpoints(staging, epsilon)
    if ckpt.load_json("target") is not None:
        return

    def checkpoint(result: dict[str, Any]) -> None:
        ckpt.save_state_dict("target", {k: torch.tensor(v) for k, v in result["state"].items()})
        ckpt.save_json("target", result["meta"])

    side.submit(
        f"target {index}",
        train_target_task,
        (epsilon, target_seed(config.seed, index)),
        dict(
            features=inputs.data.features[inputs.splits.train_idx],
            labels=inputs.data.labels[inputs.splits.train_idx],
            n_classes=inputs.data.n_classes,
            spec=inputs.spec,
            delta=config.privacy.delta,
            accountant=config.privacy.accountant,
            device=inputs.task_device,
            secure_mode=config.privacy.secure_mode,
        ),
        description=f"{labels[index]}: training (epochs)",
        total=inputs.spec.epochs,
        on_result=checkpoint,
        priority=(index, 0),
    )


def _submit_twin_and_probes(inputs: SweepInputs, side: SideLane, labels: list[str], index: int, epsilon: float) -> None:
    from audit.sweep.conformance_rows import CONFORMANCE_PHASES, conformance_probes_task
    from audit.sweep.whitebox_one_run import twin_task

    config = inputs.config
    seed = target_seed(config.seed, index)
    rows: list[tuple[str, Callable[..., dict[str, Any]], dict[str, Any], str, int]] = [
        ("twin", twin_task, _twin_arguments(inputs, epsilon, seed), _TWIN_STEP, inputs.spec.epochs + 1),
        (
            "conformance",
            conformance_probes_task,
            _setup_arguments(inputs, epsilon, seed),
            _CONFORMANCE_STEP,
            CONFORMANCE_PHASES,
        ),
    ]
    wanted = {"twin": config.privacy.whitebox_one_run, "conformance": config.privacy.conformance}
    for kind, task, arguments, what, total in rows:
        if wanted[kind]:
            side.submit(
                f"{kind} {index}",
                task,
                _training_rows(inputs),
                arguments,
                description=f"{labels[index]}: {what}",
                total=total,
                priority=(index + 1, 2),  # after the next target's training and banks
            )
