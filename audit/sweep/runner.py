"""The main job: sweep target ε, train, attack, bound, compare with the accountant, track, write.

`run_audit(config)` is the Python API (usable from a notebook); the CLI's `run` is a thin shell
around it. Data flows one way: config → targets (data, splits, training) → attacks (scores) →
audit (metrics, bounds, verdict, MLflow) → reports (figures, tables).
This module is over 600 lines since wave 4's formatting pass (ruff format puts long calls one argument a line): the sweep loop; next split: per-target steps apart from the sweep
(issue #37).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from attacks import AttackContext, AttackOptions, TargetTraining, get_attack
from audit.errors import AuditInputError
from audit.machinery.attack_setup import attack_options
from audit.machinery.checkpoints import ArrayCache, TargetCheckpoints
from audit.machinery.config import AuditConfig, config_to_yaml
from audit.machinery.crash_log import set_log_folder
from audit.machinery.environment import describe_environment
from audit.machinery.executors import Executor, LocalExecutor
from audit.machinery.policy import Policy
from audit.machinery.progress import Progress, as_progress
from audit.machinery.run_directory import StagedRunDirectory, run_attempt, write_json_atomic, write_text_atomic
from audit.machinery.secrets import redact
from audit.machinery.tracking import (
    AuditTracker,
    check_tracking_uri,
    experiment_name,
    open_tracker,
    synthetic_risk_metrics,
    target_metrics,
)
from audit.statistics.accountants import DPSGDEvent, epsilons_for_event, pld_epsilon_interval
from audit.statistics.attack_evaluation import best_sound_lower_bound, evaluate_attack, roc_points
from audit.sweep.inputs import prepare_inputs, resolve_resume
from audit.sweep.outputs import write_outputs
from audit.sweep.tasks import train_target_task
from reports.figures import (
    RocCurve,
    epsilon_label,
    plot_empirical_vs_accountant,
    plot_privacy_utility,
    plot_roc_curves,
    plot_roc_panels,
    plot_synthetic_summary,
)
from targets.datasets import TabularData
from targets.devices import resolve_device
from targets.models import build_model
from targets.splits import AuditSplits
from targets.training import TrainedTarget, TrainingSpec, train_target

SCHEMA_VERSION = 3
# PLD (tight) may exceed PRV only by discretisation/estimation error; more than this is reported.
PLD_PRV_TOLERANCE = 0.05


@dataclass(frozen=True)
class AuditRun:
    results: dict[str, Any]
    run_dir: Path


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
    if trained.epsilon_target is not None:
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


def results_table(results: dict[str, Any]) -> pd.DataFrame:
    """One row per (target, attack): the flat view written as results.csv."""
    rows = []
    for target in results["targets"]:
        for attack in target["attacks"]:
            rows.append(
                {
                    "epsilon_target": target["epsilon_target"] if target["epsilon_target"] is not None else math.inf,
                    "delta": target["delta"],
                    "noise_multiplier": target["noise_multiplier"],
                    "sample_rate": target["sample_rate"],
                    "steps": target["steps"],
                    **{f"eps_{k}": v for k, v in target["epsilon"].items()},
                    "test_accuracy": target["test_accuracy"],
                    "attack": attack["name"],
                    "auc": attack["auc"],
                    "auc_ci_low": attack["auc_ci"][0],
                    "auc_ci_high": attack["auc_ci"][1],
                    **{f"tpr_at_fpr_{k}": v for k, v in attack["tpr_at_fpr"].items()},
                    "advantage": attack["advantage"],
                    "eps_lb_cp": attack["epsilon_lb"]["clopper_pearson"],
                    "eps_lb_one_run": attack["epsilon_lb"]["one_run"],
                    "eps_gdp_estimate": attack["epsilon_estimate_gdp"]["epsilon"],
                    "eps_lb_best": target["epsilon_lb_best"],
                    "violation": target["violation"],
                }
            )
    return pd.DataFrame(rows)


def run_audit(
    config: AuditConfig,
    *,
    out_dir: str | Path = "runs",
    tracking_uri: str | None = None,
    preset: str | None = None,
    progress: Progress | Callable[[dict], None] | None = None,
    resume: str | Path | None = None,
    policy: Policy | None = None,
    executor: Executor | None = None,
    tracking: bool = True,
    log_models: bool = False,
) -> AuditRun:
    """Run the whole audit described by `config`; returns the results dict and the run folder.

    `executor` (default `LocalExecutor`: here, one task after another) runs the parallel work:
    target training per ε, reference/shadow model tasks, synthetic generators. The numbers do not
    depend on it; a run interrupted under one executor resumes under any other.

    Bad input raises AuditInputError before anything is trained, and nothing is left on disk. An
    interruption (Ctrl-C, SIGTERM, SIGKILL) or a crash leaves the hidden staging folder with every
    finished piece checkpointed: `resume="latest"` (or the folder's path) recomputes only what is
    missing. MLflow runs of an interrupted attempt end KILLED (FAILED after an error), never RUNNING.
    `progress`: silent by default; an `audit.machinery.progress.Progress`, or any callable that
    receives one dict per step start / update / finish and per note (`audit.machinery.progress`).
    `tracking=False`: nothing is logged to MLflow (results["mlflow"] is None); otherwise the runs go
    to experiment `privacy-audit/run/<config name>` of `tracking_uri` (default sqlite:///mlflow.db).
    `log_models`: also log each target model trained in this attempt in MLflow's PyTorch flavour
    (child run artifact `model`; about a second per model).
    """
    progress = as_progress(progress)
    executor = executor or LocalExecutor()
    device = resolve_device(config.device)
    if device.type == "cpu":
        import torch

        torch.set_num_threads(config.cpu_threads)
    # No progress step before the inputs are all checked: bad input stays one line on stderr.
    data, splits, run_warnings = prepare_inputs(config)
    attacks = [get_attack(name) for name in config.attacks.names]
    for text in run_warnings:
        progress.note(f"warning: {text}")

    if tracking:
        check_tracking_uri(tracking_uri)  # before any folder is made: a bad store leaves nothing behind
    if resume is not None:
        run_dir = resolve_resume(config, out_dir, resume)
    else:
        run_dir = StagedRunDirectory(out_dir, config.name)
        run_dir.create()
    set_log_folder(run_dir.staging)  # an internal error's log lands in the run's own folder
    with run_attempt(run_dir, resume, progress) as attempt:
        tracker = attempt["tracker"] = open_tracker(
            tracking_uri, experiment_name("run", config.name), command="run", enabled=tracking
        )
        results, parent_id = _sweep(
            config,
            data,
            splits,
            attacks,
            device,
            run_dir.staging,
            tracker,
            preset,
            run_warnings,
            progress,
            executor,
            log_models,
        )
        from audit.sweep.outputs import OUTPUTS

        with progress.step("report, summary and MLflow artifacts", total=OUTPUTS) as outputs_step:
            write_outputs(
                results,
                run_dir.staging,
                policy,
                tracker,
                parent_id,
                on_written=lambda done, _: outputs_step.update(done),
            )
            tracker.set_verdict(parent_id, results["verdict"])
        final = run_dir.commit()
        tracker.log_artifact(parent_id, final / "results.json")
        tracker.finish(parent_id, "FINISHED")
        return AuditRun(results=results, run_dir=final)


@dataclass
class _SweepInputs:
    config: AuditConfig
    data: TabularData
    splits: AuditSplits
    spec: TrainingSpec
    device: object
    attack_options: AttackOptions
    executor: Executor
    task_device: str


def _load_or_train_target(
    inputs: _SweepInputs, epsilon: float, seed: int, ckpt: TargetCheckpoints, progress: Progress, label: str
) -> TrainedTarget:
    config, data, splits = inputs.config, inputs.data, inputs.splits
    meta, state = ckpt.load_json("target"), ckpt.load_state_dict("target")
    if meta is not None and state is not None:
        model = build_model(
            inputs.spec.architecture, data.features.shape[1], inputs.spec.hidden_sizes, data.n_classes, seed=seed
        )
        model.load_state_dict(state)
        return TrainedTarget(model=model.eval(), **meta)
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


def _target_checkpoints(staging: Path, epsilon: float) -> TargetCheckpoints:
    return TargetCheckpoints(staging / "checkpoints" / f"eps_{_epsilon_tag(epsilon)}")


def _train_targets_in_parallel(inputs: _SweepInputs, staging: Path, progress: Progress) -> None:
    """Train every target not yet checkpointed as one executor task each; checkpoint each as it
    arrives, so an interruption keeps the finished ones. The per-target loop then reloads them."""
    config, data, splits = inputs.config, inputs.data, inputs.splits
    todo = []
    for index, epsilon in enumerate(config.privacy.epsilons):
        ckpt = _target_checkpoints(staging, epsilon)
        if ckpt.load_json("record") is None and ckpt.load_json("target") is None:
            todo.append((index, epsilon, ckpt))
    if not todo:
        return
    progress.note(
        f"training {len(todo)} target(s) on the {inputs.executor.name} executor ({inputs.executor.workers} worker(s))"
    )

    import torch

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


def _audit_target(
    inputs: _SweepInputs,
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
        return finished["record"], ckpt.load_arrays("scores"), finished["notes"]
    trained = _load_or_train_target(inputs, epsilon, seed, ckpt, progress, label)
    if on_trained is not None:
        on_trained(trained)
    test_x, test_y = data.features[splits.test_idx], data.labels[splits.test_idx]
    cand_y = data.labels[splits.candidate_idx]
    reporter = progress.reporter(label)  # reference / shadow model training inside the attacks
    test_accuracy = float((trained.logits(test_x).argmax(axis=1) == test_y).mean())
    context = AttackContext(
        candidate_features=data.features[splits.candidate_idx],
        candidate_labels=cand_y,
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
        delta=config.privacy.delta,
        accountant=config.privacy.accountant,
        seed=seed,
        device=inputs.device,
        options=inputs.attack_options,
        cache=ArrayCache(ckpt),
        executor=inputs.executor,
        task_device=inputs.task_device,
        report_progress=reporter,
    )
    attack_records, score_columns = [], {}
    for attack in attacks:
        with progress.step(f"{label}: attack {attack.name} (scores, metrics, ε bounds)"):
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
    record, notes = _target_record(trained, config, test_accuracy, attack_records)
    record["seed"] = seed
    if config.privacy.whitebox_one_run and trained.epsilon_target is not None and trained.accountant_epsilon:
        from audit.sweep.whitebox_one_run import whitebox_one_run_entry

        with progress.step(
            f"{label}: white-box one-run audit (a twin with gradient canaries: epochs)", total=inputs.spec.epochs
        ) as twin_step:
            record["whitebox_one_run"] = whitebox_one_run_entry(
                data.features[splits.train_idx],
                data.labels[splits.train_idx],
                data.n_classes,
                inputs.spec,
                target=trained,
                target_accuracy=test_accuracy,
                test_features=test_x,
                test_labels=test_y,
                accountant=config.privacy.accountant,
                seed=seed,
                device=inputs.device,
                confidence=config.attacks.confidence,
                n_canaries=config.privacy.one_run_canaries,
                secure_mode=config.privacy.secure_mode,
                on_epoch=lambda epoch, _: twin_step.update(epoch),
            )
    if config.privacy.conformance and trained.epsilon_target is not None and trained.accountant_history:
        from audit.sweep.conformance_rows import CONFORMANCE_PHASES, conformance_entry

        with progress.step(
            f"{label}: conformance checks on its own Opacus setup (probes)", total=CONFORMANCE_PHASES
        ) as probes_step:
            record["conformance"] = conformance_entry(
                data.features[splits.train_idx],
                data.labels[splits.train_idx],
                data.n_classes,
                inputs.spec,
                target=trained,
                accountant=config.privacy.accountant,
                seed=seed,
                device=inputs.device,
                secure_mode=config.privacy.secure_mode,
                on_phase=lambda done, _: probes_step.update(done),
            )
    ckpt.save_arrays("scores", score_columns)
    ckpt.save_json("record", {"record": record, "notes": notes})
    return record, score_columns, notes


def _synthetic_part(
    config: AuditConfig,
    data: TabularData,
    splits: AuditSplits,
    staging: Path,
    tracker: AuditTracker,
    parent_id: str,
    progress: Progress,
    executor: Executor,
) -> list[dict[str, Any]]:
    """The `synthetic:` sweep: checked once per (generator, ε), checkpointed, one MLflow child each."""
    if config.synthetic is None:
        return []
    if data.frame is None:
        raise AuditInputError("synthetic", f"{data.description} has no raw table to train synthesizers on")
    from audit.sweep.synthetic_sweep import generator_runs, synthetic_sweep

    ckpt = TargetCheckpoints(staging / "checkpoints" / "synthetic")
    entries = ckpt.load_json("entries")
    if entries is None:
        # Releases an interrupted attempt finished (in any order, on a parallel executor).
        stored = {i: ckpt.load_json(f"entry_{i}") for i in range(len(generator_runs(config)))}
        finished = {i: entry for i, entry in stored.items() if entry is not None}
        entries = synthetic_sweep(
            config,
            data.frame,
            splits,
            progress,
            executor=None if executor.name == "local" else executor,
            finished=finished,
            on_entry=lambda i, entry: ckpt.save_json(f"entry_{i}", entry),
        )
        ckpt.save_json("entries", entries)
    for entry in entries:
        # The sweep's non-DP generators are reference baselines (like the ε = ∞ target): their leak
        # tests are shown, they do not fail the run; a DP generator's ε is a claim the verdict tests.
        entry["baseline"] = entry["epsilon_target"] is None
        label = f"{entry['generator']} {epsilon_label(entry['epsilon_target'])}"
        child = tracker.start_run(f"{config.name} synthetic {label}", parent_id=parent_id)
        tracker.log_params(
            child,
            {
                "generator": entry["generator"],
                "epsilon_target": _epsilon_tag(
                    math.inf if entry["epsilon_target"] is None else entry["epsilon_target"]
                ),
            },
        )
        tracker.log_metrics(
            child,
            {
                "dcr_share": entry["dcr"]["dcr_share"],
                "nndr_p10": entry["nndr"]["p10"],
                "mia_auc": entry["mia"]["auc"],
                "mia_eps_lb_cp": entry["mia"]["epsilon_lb"]["clopper_pearson"],
                "mia_eps_lb_one_run": entry["mia"]["epsilon_lb"].get("one_run"),
                **synthetic_risk_metrics(entry),
            },
        )
        tracker.finish(child)
    tracker.log_artifact(parent_id, plot_synthetic_summary(entries, staging / "figures" / "synthetic_summary.png"))
    return entries


def _model_logger(tracker: AuditTracker, run_id: str, example: np.ndarray, progress: Progress, label: str):
    def log(trained: TrainedTarget) -> None:
        with progress.step(f"{label}: model to MLflow (PyTorch flavour)"):
            tracker.log_torch_model(run_id, trained.model, example.astype(np.float32))

    return log


def _epsilon_tag(epsilon: float) -> str:
    return "inf" if math.isinf(epsilon) else f"{epsilon:g}"


def _sweep(
    config: AuditConfig,
    data: TabularData,
    splits: AuditSplits,
    attacks: list,
    device,
    staging: Path,
    tracker: AuditTracker,
    preset: str | None,
    run_warnings: list[str],
    progress: Progress,
    executor: Executor,
    log_models: bool = False,
) -> tuple[dict[str, Any], str | None]:
    inputs = _SweepInputs(
        config,
        data,
        splits,
        TrainingSpec(**config.training.model_dump()),
        device,
        attack_options(config),
        executor,
        executor.task_device(config.device, str(device)),
    )
    environment = describe_environment(str(device), config.seed)
    attempts_path = staging / "checkpoints" / "mlflow_attempts.json"
    earlier_attempts = json.loads(attempts_path.read_text()) if attempts_path.is_file() else []
    for attempt in earlier_attempts:  # a SIGKILLed attempt could not close its own runs
        tracker.close_if_running([attempt["parent_run_id"], *attempt["child_run_ids"]], "KILLED")
    parent_tags = {
        "preset": preset or "custom",
        "config_hash": config.config_hash(),
        "dataset": data.description,
    }
    if earlier_attempts:
        parent_tags["resumed_from"] = ",".join(a["parent_run_id"] for a in earlier_attempts)
    parent_id = tracker.start_run(config.name, tags=parent_tags)
    attempt = {"parent_run_id": parent_id, "child_run_ids": []}

    def save_attempts() -> None:
        write_json_atomic(attempts_path, earlier_attempts + [attempt])

    save_attempts()
    frame = data.frame if data.frame is not None else pd.DataFrame(data.features).assign(label=data.labels)
    tracker.log_table(parent_id, frame, name=data.description, source=config.data.path, context="audit data")
    tracker.log_params(
        parent_id,
        {
            "seed": config.seed,
            "device": str(device),
            "delta": config.privacy.delta,
            "accountant": config.privacy.accountant,
            "n_targets": len(config.privacy.epsilons),
        },
    )
    figures = staging / "figures"
    scores_dir = staging / "scores"
    figures.mkdir(exist_ok=True)
    scores_dir.mkdir(exist_ok=True)
    splits.save(staging / "splits.npz")
    write_text_atomic(staging / "config.yaml", config_to_yaml(config))

    if executor.name != "local":  # local trains each target in the loop, with per-epoch progress
        _train_targets_in_parallel(inputs, staging, progress)
    members = splits.candidate_member
    targets, notes, curves = [], list(run_warnings), []
    all_targets = progress.begin("targets", total=len(config.privacy.epsilons))
    for index, epsilon in enumerate(config.privacy.epsilons):
        label, tag = epsilon_label(epsilon), _epsilon_tag(epsilon)
        step_label = f"target {index + 1}/{len(config.privacy.epsilons)} ({label})"
        child_id = tracker.start_run(f"{config.name} {label}", parent_id=parent_id)
        attempt["child_run_ids"].append(child_id)
        save_attempts()
        record, score_columns, target_notes = _audit_target(
            inputs,
            index,
            epsilon,
            attacks,
            _target_checkpoints(staging, epsilon),
            progress,
            step_label,
            on_trained=_model_logger(tracker, child_id, data.features[:1], progress, step_label)
            if log_models
            else None,
        )
        record["mlflow_run_id"] = child_id
        notes += target_notes
        targets.append(record)
        bookkeeping = progress.begin(f"{step_label}: ROC figure, scores file, MLflow", total=3)
        for name, scores in score_columns.items():
            fpr, tpr = roc_points(scores, members)
            curves.append((epsilon, name, fpr, tpr))

        scores_path = scores_dir / f"scores_eps_{tag}.csv"
        pd.DataFrame(
            {
                "candidate_index": splits.candidate_idx,
                "member": members.astype(int),
                "label": data.labels[splits.candidate_idx],
                **score_columns,
            }
        ).to_csv(scores_path, index=False)
        bookkeeping.advance()
        roc_path = plot_roc_curves(
            [RocCurve(name, f, t) for (e, name, f, t) in curves if e == epsilon],
            figures / f"roc_eps_{tag}.png",
            title=f"ROC, {label}",
        )
        bookkeeping.advance()
        tracker.log_params(
            child_id,
            {
                "epsilon_target": tag,
                "delta": config.privacy.delta,
                "noise_multiplier": record["noise_multiplier"],
                "sample_rate": record["sample_rate"],
                "steps": record["steps"],
                "max_grad_norm": record["max_grad_norm"],
                "accountant": record["accountant"],
                "seed": record["seed"],
            },
        )
        tracker.log_metrics(child_id, target_metrics(record))
        tracker.log_artifact(child_id, roc_path)
        tracker.log_artifact(child_id, scores_path)
        tracker.finish(child_id)
        bookkeeping.advance()
        progress.end(bookkeeping)
        all_targets.advance()
    progress.end(all_targets)

    synthetic = _synthetic_part(config, data, splits, staging, tracker, parent_id, progress, executor)
    attack_names = [a.name for a in attacks]
    figures_step = progress.begin("figures", total=3)
    target_epsilons = list(dict.fromkeys(e for (e, _, _, _) in curves))
    roc_all = plot_roc_panels(
        [(epsilon_label(eps), [RocCurve(n, f, t) for (e, n, f, t) in curves if e == eps]) for eps in target_epsilons],
        figures / "roc_all.png",
        title="ROC of every target (log-log)",
    )
    figures_step.advance()
    private = [t for t in targets if t["epsilon_target"] is not None]
    eps_fig = plot_empirical_vs_accountant(
        [t["epsilon_accountant"] for t in private],
        [t["epsilon_lb_best"] or 0.0 for t in private],
        [epsilon_label(t["epsilon_target"]) for t in private],
        figures / "empirical_vs_accountant.png",
    )
    figures_step.advance()
    utility_fig = plot_privacy_utility(
        [t["epsilon_target"] for t in targets],
        [t["test_accuracy"] for t in targets],
        [max(a["auc"] for a in t["attacks"]) for t in targets],
        figures / "privacy_utility.png",
    )
    figures_step.advance()
    progress.end(figures_step)
    results = {
        "schema_version": SCHEMA_VERSION,
        "config": config.to_plain(),
        "environment": environment,
        "execution": executor.describe(),  # where the tasks ran; the numbers do not depend on it
        "data": {
            "description": data.description,
            "n_rows": data.n_rows,
            "n_features": int(data.features.shape[1]),
            "n_classes": data.n_classes,
            "n_train": int(len(splits.train_idx)),
            "n_test": int(len(splits.test_idx)),
            "n_candidates": int(len(splits.candidate_idx)),
            "n_pool": int(len(splits.pool_idx)),
            "membership": "independent fair coin flip per candidate (Bernoulli 1/2)",
        },
        "attacks_run": attack_names,
        "targets": targets,
        "synthetic": synthetic,
        "notes": notes,
        "verdict": None,  # decided in write_outputs, from every check at once
        "mlflow": {
            "tracking_uri": redact(tracker.tracking_uri),
            "experiment_id": tracker.experiment_id,
            "parent_run_id": parent_id,
            "child_run_ids": attempt["child_run_ids"],
            "resumed_from": [a["parent_run_id"] for a in earlier_attempts],
        }
        if tracker.enabled
        else None,
    }
    write_text_atomic(staging / "results.csv", results_table(results).to_csv(index=False))
    for figure in (roc_all, eps_fig, utility_fig):
        tracker.log_artifact(parent_id, figure)
    tracker.log_artifact(parent_id, staging / "config.yaml")
    return results, parent_id
