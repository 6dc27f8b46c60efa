"""The main job: sweep target ε, train, attack, bound, compare with the accountant, track, write.

`run_audit(config)` is the Python API (usable from a notebook); the CLI's `run` is a thin shell
around it. Data flows one way: config → targets (data, splits, training) → attacks (scores) →
audit (metrics, bounds, verdict, MLflow) → reports (figures, tables).
One target's steps (train, attack, twin, conformance) are in `audit.sweep.target_audit`; the second process
that runs part of them beside this one in `audit.sweep.side_lane`.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from attacks import get_attack
from audit.errors import AuditInputError
from audit.machinery.attack_setup import attack_options
from audit.machinery.checkpoints import TargetCheckpoints
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
from audit.statistics.attack_evaluation import roc_points
from audit.sweep.inputs import prepare_inputs, resolve_resume
from audit.sweep.outputs import write_outputs
from audit.sweep.side_lane import SideLane, side_lane_wanted
from audit.sweep.target_audit import (
    SweepInputs,
    audit_target,
    epsilon_tag,
    model_logger,
    submit_side_work,
    target_checkpoints,
    target_seed,
    train_targets_in_parallel,
)
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
from targets.splits import AuditSplits
from targets.training import TrainingSpec

__all__ = ["SCHEMA_VERSION", "AuditRun", "results_table", "run_audit", "target_seed"]

SCHEMA_VERSION = 3


@dataclass(frozen=True)
class AuditRun:
    results: dict[str, Any]
    run_dir: Path


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
    side_process: bool | None = None,
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
    `side_process`: run each target's training, white-box twin and conformance probes in a second process
    beside the reference-model training (`audit.sweep.side_lane`); None: on the local executor when this
    machine gives the run two or more cores. The numbers are the same either way.
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
        # An AuditTracker, or a NullTracker with tracking off (its run ids are None): both take what follows.
        tracker: Any = open_tracker(tracking_uri, experiment_name("run", config.name), command="run", enabled=tracking)
        attempt["tracker"] = tracker
        with _side_lane(progress, config, executor, side_process, device.type == "cpu") as side:
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
                side,
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
                "epsilon_target": epsilon_tag(math.inf if entry["epsilon_target"] is None else entry["epsilon_target"]),
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


@contextmanager
def _side_lane(
    progress: Progress, config: AuditConfig, executor: Executor, requested: bool | None, on_cpu: bool
) -> Iterator[SideLane | None]:
    if not side_lane_wanted(executor.name, requested):
        yield None
        return
    with SideLane(progress, threads=config.cpu_threads if on_cpu else None) as side:  # torch threads as run_audit's
        yield side


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
    side: SideLane | None = None,
) -> tuple[dict[str, Any], str | None]:
    inputs = SweepInputs(
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

    if executor.name != "local":  # local trains each target in the loop (or on the side lane), with per-epoch progress
        train_targets_in_parallel(inputs, staging, progress)
    n_targets = len(config.privacy.epsilons)
    if side is not None:
        inputs.side = side
        labels = [f"target {i + 1}/{n_targets} ({epsilon_label(e)})" for i, e in enumerate(config.privacy.epsilons)]
        submit_side_work(inputs, staging, side, labels, [a.name for a in attacks])
    members = splits.candidate_member
    targets, notes, curves = [], list(run_warnings), []
    all_targets = progress.begin("targets", total=len(config.privacy.epsilons))
    for index, epsilon in enumerate(config.privacy.epsilons):
        label, tag = epsilon_label(epsilon), epsilon_tag(epsilon)
        step_label = f"target {index + 1}/{n_targets} ({label})"
        child_id = tracker.start_run(f"{config.name} {label}", parent_id=parent_id)
        attempt["child_run_ids"].append(child_id)
        save_attempts()
        record, score_columns, target_notes = audit_target(
            inputs,
            index,
            epsilon,
            attacks,
            target_checkpoints(staging, epsilon),
            progress,
            step_label,
            on_trained=model_logger(tracker, child_id, data.features[:1], progress, step_label) if log_models else None,
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
