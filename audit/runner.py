"""The main job: sweep target ε, train, attack, bound, compare with the accountant, track, write.

`run_audit(config)` is the Python API (usable from a notebook); the CLI's `run` is a thin shell
around it. Data flows one way: config → targets (data, splits, training) → attacks (scores) →
audit (metrics, bounds, verdict, MLflow) → reports (figures, tables).
"""
from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import pandas as pd

from attacks import AttackContext, AttackOptions, TargetTraining, get_attack
from attacks.reference_models import check_pool_capacity
from audit.accountants import DPSGDEvent, epsilons_for_event
from audit.attack_evaluation import best_sound_lower_bound, evaluate_attack, roc_points
from audit.config import AuditConfig, config_to_yaml
from audit.environment import describe_environment
from audit.errors import AuditInputError
from audit.run_directory import StagedRunDirectory, write_json_atomic, write_text_atomic
from audit.tracking import AuditTracker
from reports.figures import RocCurve, epsilon_label, plot_empirical_vs_accountant, plot_privacy_utility, plot_roc_curves
from targets.datasets import TabularData, load_dataset
from targets.devices import resolve_device
from targets.splits import AuditSplits, make_audit_splits
from targets.training import TrainedTarget, TrainingSpec, train_target

SCHEMA_VERSION = 1
# PLD (tight) may exceed PRV only by discretisation/estimation error; more than this is reported.
PLD_PRV_TOLERANCE = 0.05


class Progress(Protocol):
    def target_started(self, index: int, total: int, label: str, epochs: int) -> None: ...
    def epoch_done(self, epoch: int, epochs: int) -> None: ...
    def note(self, text: str) -> None: ...


class _Silent:
    def target_started(self, index: int, total: int, label: str, epochs: int) -> None:
        pass

    def epoch_done(self, epoch: int, epochs: int) -> None:
        pass

    def note(self, text: str) -> None:
        pass


@dataclass(frozen=True)
class AuditRun:
    results: dict[str, Any]
    run_dir: Path


def target_seed(config_seed: int, index: int) -> int:
    """Seed of the `index`-th target: one config seed drives everything, streams stay independent."""
    return int(np.random.SeedSequence([config_seed, 1, index]).generate_state(1)[0])


def _attack_options(config: AuditConfig) -> AttackOptions:
    a = config.attacks
    return AttackOptions(
        n_shadow_models=a.n_shadow_models, n_reference_models=a.n_reference_models,
        lira_global_variance=a.lira_global_variance, rmia_a=a.rmia_a, rmia_gamma=a.rmia_gamma,
        rmia_population=a.rmia_population,
    )


def _validate_training_set(data: TabularData, splits: AuditSplits, delta: float) -> list[str]:
    train_labels = data.labels[splits.train_idx]
    if np.unique(train_labels).size < 2:
        raise AuditInputError("data", "the members drawn for training hold a single class; use more or more balanced data")
    warnings_out = []
    n_train = len(splits.train_idx)
    if delta >= 1.0 / n_train:
        warnings_out.append(
            f"δ = {delta:g} ≥ 1/n = {1 / n_train:.2g} (n = {n_train} training rows): such a δ permits "
            "releasing a whole record; choose δ well below 1/n"
        )
    return warnings_out


def _target_record(
    trained: TrainedTarget, config: AuditConfig, test_accuracy: float, attacks: list[dict[str, Any]]
) -> tuple[dict[str, Any], list[str]]:
    notes = []
    epsilon: dict[str, float] = {}
    accountant_eps = None
    if trained.epsilon_target is not None:
        event = DPSGDEvent(trained.noise_multiplier, trained.sample_rate, trained.steps)
        epsilon = epsilons_for_event(event, trained.delta, config.privacy.accountant)
        accountant_eps = epsilon[config.privacy.accountant]
        if epsilon["pld"] > epsilon["prv"] + PLD_PRV_TOLERANCE:
            notes.append(
                f"ε target {trained.epsilon_target:g}: PRV ε {epsilon['prv']:.3f} is below the tight PLD ε "
                f"{epsilon['pld']:.3f} by more than {PLD_PRV_TOLERANCE}"
            )
    best, best_method = best_sound_lower_bound(attacks)
    violation = accountant_eps is not None and best > accountant_eps
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
        "epsilon_engine": trained.accountant_epsilon,
        "test_accuracy": test_accuracy,
        "train_seconds": trained.train_seconds,
        "attacks": attacks,
        "epsilon_lb_best": best,
        "epsilon_lb_best_method": best_method,
        "epsilon_lb_ratio": (best / accountant_eps) if accountant_eps else None,
        "violation": bool(violation),
    }
    return record, notes


def _child_metrics(record: dict[str, Any]) -> dict[str, float | None]:
    metrics: dict[str, float | None] = {f"eps_{name}": value for name, value in record["epsilon"].items()}
    metrics["test_accuracy"] = record["test_accuracy"]
    metrics["eps_lb_best"] = record["epsilon_lb_best"]
    for attack in record["attacks"]:
        name = attack["name"]
        metrics[f"{name}_auc"] = attack["auc"]
        metrics[f"{name}_advantage"] = attack["advantage"]
        for level, value in attack["tpr_at_fpr"].items():
            metrics[f"{name}_tpr_at_fpr_{level}"] = value
        metrics[f"{name}_eps_lb_cp"] = attack["epsilon_lb"]["clopper_pearson"]
        metrics[f"{name}_eps_lb_one_run"] = attack["epsilon_lb"]["one_run"]
        metrics[f"{name}_eps_gdp_estimate"] = attack["epsilon_estimate_gdp"]["epsilon"]
    return {k: v for k, v in metrics.items() if v is None or math.isfinite(v)}


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
    progress: Progress | None = None,
) -> AuditRun:
    """Run the whole audit described by `config`; returns the results dict and the run folder.

    Raises AuditInputError for bad input before anything is trained; on any error the staging
    folder is removed and the MLflow runs are marked FAILED (KILLED on Ctrl-C).
    """
    progress = progress or _Silent()
    device = resolve_device(config.device)
    data = load_dataset(
        config.data.source, n_rows=config.data.n_rows, seed=config.seed, path=config.data.path, label=config.data.label
    )
    splits = make_audit_splits(
        data.n_rows,
        test_fraction=config.split.test_fraction,
        candidate_fraction=config.split.candidate_fraction,
        seed=config.seed,
    )
    run_warnings = _validate_training_set(data, splits, config.privacy.delta)
    attacks = [get_attack(name) for name in config.attacks.names]
    check_pool_capacity(config.attacks.names, _attack_options(config), len(splits.pool_idx), len(splits.train_idx))
    for text in run_warnings:
        progress.note(f"warning: {text}")

    run_dir = StagedRunDirectory(out_dir, config.name)
    staging = run_dir.create()
    tracker = None
    try:
        tracker = AuditTracker(tracking_uri, config.name)
        results = _sweep(config, data, splits, attacks, device, staging, tracker, preset, run_warnings, progress)
        final = run_dir.commit()
        results_path = final / "results.json"
        tracker.log_artifact(results["mlflow"]["parent_run_id"], results_path)
        tracker.finish(results["mlflow"]["parent_run_id"], "FINISHED")
        return AuditRun(results=results, run_dir=final)
    except BaseException as exc:
        if tracker is not None:
            tracker.fail_open_runs("KILLED" if isinstance(exc, KeyboardInterrupt) else "FAILED")
        run_dir.discard()
        raise


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
) -> dict[str, Any]:
    spec = TrainingSpec(**config.training.model_dump())
    environment = describe_environment(str(device), config.seed)
    parent_id = tracker.start_run(
        config.name,
        tags={
            "preset": preset or "custom",
            "config_hash": config.config_hash(),
            "git_sha": environment["git_sha"] or "unknown",
            "dataset": data.description,
        },
    )
    tracker.log_params(parent_id, {"seed": config.seed, "device": str(device), "delta": config.privacy.delta,
                                   "accountant": config.privacy.accountant, "n_targets": len(config.privacy.epsilons)})
    figures = staging / "figures"
    scores_dir = staging / "scores"
    figures.mkdir()
    scores_dir.mkdir()
    splits.save(staging / "splits.npz")
    write_text_atomic(staging / "config.yaml", config_to_yaml(config))

    train_x, train_y = data.features[splits.train_idx], data.labels[splits.train_idx]
    test_x, test_y = data.features[splits.test_idx], data.labels[splits.test_idx]
    cand_x, cand_y = data.features[splits.candidate_idx], data.labels[splits.candidate_idx]
    members = splits.candidate_member
    attack_options = _attack_options(config)
    targets, notes, curves = [], list(run_warnings), []
    child_ids = []
    for index, epsilon in enumerate(config.privacy.epsilons):
        label = epsilon_label(epsilon)
        progress.target_started(index, len(config.privacy.epsilons), label, spec.epochs)
        seed = target_seed(config.seed, index)
        child_id = tracker.start_run(f"{config.name} {label}", parent_id=parent_id)
        trained = train_target(
            train_x, train_y, data.n_classes, spec,
            epsilon=epsilon, delta=config.privacy.delta, accountant=config.privacy.accountant,
            seed=seed, device=device, on_epoch=progress.epoch_done,
        )
        test_accuracy = float((trained.logits(test_x).argmax(axis=1) == test_y).mean())
        context = AttackContext(
            candidate_features=cand_x, candidate_labels=cand_y, n_classes=data.n_classes,
            pool_features=data.features[splits.pool_idx], pool_labels=data.labels[splits.pool_idx],
            training=TargetTraining(
                spec=spec, noise_multiplier=trained.noise_multiplier or 0.0, max_grad_norm=trained.max_grad_norm,
                sample_rate=trained.sample_rate, steps=trained.steps, train_size=len(train_y),
            ),
            epsilon=epsilon, delta=config.privacy.delta, accountant=config.privacy.accountant, seed=seed,
            device=device, options=attack_options,
        )
        accountant_eps = trained.accountant_epsilon
        attack_records, score_columns = [], {}
        for attack in attacks:
            scores = np.asarray(attack.scores(trained, context), dtype=np.float64)
            score_columns[attack.name] = scores
            attack_records.append(
                evaluate_attack(
                    attack.name, scores, members, cand_y, delta=config.privacy.delta,
                    confidence=config.attacks.confidence, threshold_seed=seed, accountant_epsilon=accountant_eps,
                )
            )
            fpr, tpr = roc_points(scores, members)
            curves.append((epsilon, attack.name, fpr, tpr))
        record, target_notes = _target_record(trained, config, test_accuracy, attack_records)
        record["mlflow_run_id"] = child_id
        record["seed"] = seed
        notes += target_notes
        targets.append(record)

        tag = "inf" if math.isinf(epsilon) else f"{epsilon:g}"
        scores_path = scores_dir / f"scores_eps_{tag}.csv"
        pd.DataFrame(
            {"candidate_index": splits.candidate_idx, "member": members.astype(int), "label": cand_y, **score_columns}
        ).to_csv(scores_path, index=False)
        roc_path = plot_roc_curves(
            [RocCurve(name, f, t) for (e, name, f, t) in curves if e == epsilon],
            figures / f"roc_eps_{tag}.png",
            title=f"ROC, {label}",
        )
        tracker.log_params(child_id, {
            "epsilon_target": tag, "delta": config.privacy.delta, "noise_multiplier": record["noise_multiplier"],
            "sample_rate": record["sample_rate"], "steps": record["steps"], "max_grad_norm": record["max_grad_norm"],
            "accountant": record["accountant"], "seed": seed,
        })
        tracker.log_metrics(child_id, _child_metrics(record))
        tracker.log_artifact(child_id, roc_path)
        tracker.log_artifact(child_id, scores_path)
        tracker.finish(child_id)
        child_ids.append(child_id)

    attack_names = [a.name for a in attacks]
    roc_all = plot_roc_curves(
        [RocCurve(f"{epsilon_label(e)} ({n})", f, t) for (e, n, f, t) in curves],
        figures / "roc_all.png",
        title="ROC of every target",
    )
    private = [t for t in targets if t["epsilon_target"] is not None]
    eps_fig = plot_empirical_vs_accountant(
        [t["epsilon_accountant"] for t in private],
        [t["epsilon_lb_best"] for t in private],
        [epsilon_label(t["epsilon_target"]) for t in private],
        figures / "empirical_vs_accountant.png",
    )
    utility_fig = plot_privacy_utility(
        [t["epsilon_target"] for t in targets],
        [t["test_accuracy"] for t in targets],
        [max(a["auc"] for a in t["attacks"]) for t in targets],
        figures / "privacy_utility.png",
    )
    violations = [t for t in targets if t["violation"]]
    reasons = [
        f"ε target {t['epsilon_target']:g}: empirical lower bound {t['epsilon_lb_best']:.3f} "
        f"({t['epsilon_lb_best_method']}) exceeds accountant ε {t['epsilon_accountant']:.3f}"
        for t in violations
    ]
    results = {
        "schema_version": SCHEMA_VERSION,
        "config": config.to_plain(),
        "environment": environment,
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
        "synthetic": [],
        "notes": notes,
        "verdict": {"passed": not violations, "policy": None, "reasons": reasons},
        "mlflow": {"tracking_uri": tracker.tracking_uri, "experiment_id": tracker.experiment_id,
                   "parent_run_id": parent_id, "child_run_ids": child_ids},
    }
    write_json_atomic(staging / "results.json", results)
    write_text_atomic(staging / "results.csv", results_table(results).to_csv(index=False))
    for figure in (roc_all, eps_fig, utility_fig):
        tracker.log_artifact(parent_id, figure)
    tracker.log_metrics(parent_id, {"n_violations": float(len(violations))})
    tracker.log_artifact(parent_id, staging / "config.yaml")
    return results
