"""Audit the user's own trained model, whatever it is: membership inference on their member/non-member files.

Inputs
------
* the model (`targets.model_sources`, one interface for every kind; the attacks never see which):
  a PyTorch `nn.Module` built by the user's `module:factory` with a state_dict (`torch.load(...,
  weights_only=True)`) or safetensors file — or, without a factory, the harness's own `MLP`
  (`training.hidden_sizes`); a scikit-learn estimator saved with skops (trusted types only); an
  ONNX file (onnxruntime); a black-box `module:function` returning logits, probabilities or, for
  a label-only model, classes; from Python, a live `nn.Module`, fitted estimator or callable.
  Factories and functions run in an isolated worker process (audit/machinery/workers.py);
* the config (`privacy.epsilons` holds exactly ONE value, the model's claimed ε, `inf` =
  non-private; `training` says how a torch model was trained; `model:` may name everything here);
* the members file (the model's whole training set), the non-members file (records from the same
  distribution the model never saw) and optionally a population file (more such records, for the
  reference/shadow models of `lira`, `lira_offline`, `rmia`, `shadow`): CSV or Parquet with the
  same columns in every file (the label column and the features exactly as the model consumes
  them), or `.npz` with arrays `features` (n, ...) of any shape (images n×C×H×W) and `labels`.
  NO transformation is applied: the numbers in the files are fed to the model as they are.
  Labels are the model's output class indices 0..K-1;
* how reference/shadow models are trained: the user's `train(features, labels, seed) -> model`
  (`--trainer`, the `canary-audit` contract), in parallel worker processes; without it, for a torch
  model (the factory's architecture or the harness's MLP), the vectorized DP-SGD trainer. Without
  either, those attacks are skipped (or refused when named).

Membership here is given by the files, not drawn by a fair coin per record, so the one-run bound
of Steinke et al. (2023) is not claimed (reported as None); the Clopper-Pearson bound (threshold
chosen on one random half of the candidates, bound computed on the other) is what may decide a
violation: decided by audit.machinery.verdict from bounds proven for the setting only.

The result is a results dict (schema_version 2) with one target, the shape of
`audit.model_audits.score_audit.audit_scores`'s, so `write_outputs`, the report and the policy gate apply.
"""

from __future__ import annotations

import math
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch

from attacks import AttackContext, TargetTraining, attacks_needing, get_attack
from attacks.registry import IN_OUT_REFERENCES
from audit.errors import AuditInputError
from audit.machinery.attack_setup import attack_options
from audit.machinery.config import AuditConfig, ModelSourceConfig
from audit.machinery.environment import describe_environment
from audit.machinery.executors import check_executor_options, make_user_code_executor
from audit.machinery.user_code import check_spec
from audit.machinery.verdict import verdict_for_results
from audit.model_audits.attack_selection import (
    PLD_PRV_TOLERANCE,
    _attack_names,
    _check_population,
    _claimed_epsilon,
    _dpsgd_parameters,
    population_attacks,
)
from audit.model_audits.data_files import _file_sha256, _read_data
from audit.model_audits.model_opening import _model_settings, _n_classes, _open_source
from audit.model_audits.user_models import user_trainer, vectorized_factory_trainer
from audit.statistics.accountants import DPSGDEvent, epsilons_for_event
from audit.statistics.attack_evaluation import best_sound_lower_bound, evaluate_attack
from audit.statistics.distribution_shift import blind_baseline
from targets.devices import resolve_device
from targets.training import TrainingSpec
from targets.vectorized_dpsgd import DPSGDSpec

SCHEMA_VERSION = 3


# --------------------------------------------------------------------------------------------
# the audit


def audit_user_model(
    config: AuditConfig,
    *,
    model: Any = None,
    output: str | None = None,
    weights: Path | str | None = None,
    factory: str | None = None,
    skops: Path | str | None = None,
    onnx: Path | str | None = None,
    function: str | None = None,
    trainer: str | None = None,
    members: Path | str | tuple | None = None,
    nonmembers: Path | str | tuple | None = None,
    label: str | None = None,
    population: Path | str | tuple | None = None,
    attack_names: list[str] | None = None,
    device: str = "auto",
    workers: int | None = None,
    executor: str = "processes",
    ray_address: str | None = None,
    scores_path: Path | None = None,
) -> dict[str, Any]:
    """Membership-inference audit of the user's own trained model; a results dict (schema_version 3).

    The model is one of: `model`, a live object (an `nn.Module`, a fitted estimator, a prediction
    callable — for notebooks; it runs in this process); `weights` (+ `factory` "module:function"
    building the `nn.Module`; without it the harness's MLP with `training.hidden_sizes`); `skops`;
    `onnx`; `function` ("module:function", a black box). `output` says what it returns (logits |
    probabilities | labels; labels = label-only, only the `label_only` attack runs). Factories and
    functions run in an isolated worker process. Every argument left None is taken from the
    config's `model:` section.

    Data: `members` (the model's training set), `nonmembers` (never seen, same distribution),
    `population` (more such rows, for reference/shadow models): CSV/Parquet with the `label`
    column, or `.npz` with arrays `features` (n, ...) and `labels` (n,), or (features, labels)
    pairs from Python. Reference/shadow models (`lira`, `lira_offline`, `rmia`, `shadow`) are
    trained by the user's `trainer` ("module:function", train(features, labels, seed) -> model,
    one task per model on `executor` — local (one isolated child process) | processes (`workers`
    of them, default the cores) | ray (`ray_address`, or a local cluster of `workers` CPUs); the
    same numbers on each) or, for the harness's MLP, by the vectorized DP-SGD trainer.

    `config`: `privacy.epsilons` holds exactly one value (the claimed ε, inf = non-private),
    `privacy.delta`/`accountant`, `attacks`, `seed`, and `training` (how a torch model was
    trained). `scores_path`: every candidate's membership, label and scores written as CSV.
    All user mistakes raise AuditInputError (exit 2) before any reference model is trained.
    """
    check_executor_options(executor, workers, ray_address)
    torch_device = resolve_device(device if device != "auto" else config.device)
    # Small models: on a shared CPU a second spinning OpenMP thread makes training many times slower
    # (the same reason `run` uses `config.cpu_threads`, default 1). Restored on return.
    threads = int(getattr(config, "cpu_threads", 1)) if torch_device.type == "cpu" else None
    previous = torch.get_num_threads()
    if threads is not None:
        torch.set_num_threads(threads)
    settings = _model_settings(
        config,
        dict(
            weights=weights,
            factory=factory,
            skops=skops,
            onnx=onnx,
            function=function,
            output=output,
            trainer=trainer,
            members=None if isinstance(members, tuple) else members,
            label=label,
            nonmembers=None if isinstance(nonmembers, tuple) else nonmembers,
            population=None if isinstance(population, tuple) else population,
        ),
    )
    if (
        settings.trainer is not None
        and model is None
        and settings.weights
        and not settings.factory
        and not (settings.skops or settings.onnx or settings.function)
    ):
        # An option that cannot apply is refused, never silently ignored: the built-in MLP's reference
        # models are trained by the harness's own DP-SGD, like the target it stands for.
        raise AuditInputError(
            "--trainer",
            "does not apply to the built-in MLP (--weights without --factory): its "
            "reference models are trained by the harness; drop --trainer, or give --factory for "
            "your own architecture",
        )
    data_sources = {
        "members": members if isinstance(members, tuple) else settings.members,
        "nonmembers": nonmembers if isinstance(nonmembers, tuple) else settings.nonmembers,
        "population": population if isinstance(population, tuple) else settings.population,
    }
    try:
        with ExitStack() as stack:
            return _audit(
                config,
                settings,
                model,
                data_sources,
                attack_names=attack_names,
                torch_device=torch_device,
                execution=dict(kind=executor, workers=workers, ray_address=ray_address),
                scores_path=scores_path,
                stack=stack,
            )
    finally:
        torch.set_num_threads(previous)


def _audit(
    config: AuditConfig,
    settings: ModelSourceConfig,
    live_model: Any,
    data_sources: dict[str, Any],
    *,
    attack_names: list[str] | None,
    torch_device: torch.device,
    execution: dict[str, Any],
    scores_path: Path | None,
    stack: ExitStack,
) -> dict[str, Any]:
    claimed = _claimed_epsilon(config)
    options = attack_options(config)
    for role in ("members", "nonmembers"):
        if data_sources[role] is None:
            raise AuditInputError(f"--{role}", f"give the {role} file (CSV, Parquet or .npz)")

    # Data: members first, its columns / row shape is the reference for the other files.
    label = settings.label
    member_table = _read_data(data_sources["members"], "members file", label, None)
    nonmember_table = _read_data(data_sources["nonmembers"], "non-members file", label, member_table)
    population_table = (
        _read_data(data_sources["population"], "population file", label, member_table)
        if data_sources["population"] is not None
        else None
    )
    tables = [t for t in (member_table, nonmember_table, population_table) if t is not None]
    n_members, n_nonmembers = len(member_table.labels), len(nonmember_table.labels)

    # The specs' form is checked here; the user's modules are imported only in isolated workers.
    for flag, spec in (
        ("--factory", settings.factory),
        ("--function", settings.function),
        ("--trainer", settings.trainer),
    ):
        if spec is not None:
            check_spec(spec, flag)
    source = _open_source(settings, live_model, config, tables, stack)
    notes = list(source.notes)
    n_classes = _n_classes(source, tables)
    can_train = source.kind in ("mlp", "torch") or settings.trainer is not None
    why_not = (
        "give a trainer (--trainer module:function, train(features, labels, seed) -> model) that trains "
        "models like the audited one"
    )
    names, attack_notes = _attack_names(
        config, attack_names, population_table is not None, source.query.label_only, can_train, why_not
    )
    notes += attack_notes
    if population_table is not None:
        _check_population(names, population_table, n_members, options)

    # Sanity notes on the inputs (not errors: duplicates happen in real data).
    member_hashes = set(member_table.hashes.tolist())
    shared = int(sum(h in member_hashes for h in nonmember_table.hashes.tolist()))
    if shared:
        notes.append(
            f"{shared} non-member row(s) are identical to a member row (features and label): an attack "
            "cannot tell them apart, which makes the bounds conservative"
        )
    if population_table is not None:
        candidate_hashes = member_hashes | set(nonmember_table.hashes.tolist())
        overlap = int(sum(h in candidate_hashes for h in population_table.hashes.tolist()))
        if overlap:
            notes.append(
                f"{overlap} population row(s) are identical to a candidate row; the population should be "
                "disjoint from the members and non-members"
            )
    if config.privacy.delta >= 1.0 / n_members:
        notes.append(
            f"δ = {config.privacy.delta:g} ≥ 1/n = {1 / n_members:.2g} (n = {n_members} members): "
            "such a δ permits releasing a whole record; choose δ well below 1/n"
        )

    # How the model was (claimed to be) trained: harness references are trained the same way.
    private = math.isfinite(claimed)
    attack_section: Any = config.attacks  # its class is built from the attack registry at import
    sigma, sample_rate, steps = _dpsgd_parameters(config, n_members, claimed) if source.dpsgd else (0.0, 1.0, 0)
    training_spec = TrainingSpec(**config.training.model_dump())
    max_grad_norm = config.training.max_grad_norm if private and source.dpsgd else None
    seed = config.seed
    candidate_features = np.concatenate([member_table.features, nonmember_table.features])
    candidate_labels = np.concatenate([member_table.labels, nonmember_table.labels])
    membership = np.concatenate([np.ones(n_members, dtype=bool), np.zeros(n_nonmembers, dtype=bool)])
    if population_table is not None:
        pool_features, pool_labels = population_table.features, population_table.labels
    else:
        pool_features = np.empty((0, *member_table.features.shape[1:]), dtype=np.float32)
        pool_labels = np.empty(0, dtype=np.int64)
    train_models = None
    trainer_executors: list = []  # started on first use: no workers (or Ray cluster) unless a model trains

    def trainer_executor():
        if not trainer_executors:
            trainer_executors.append(
                stack.enter_context(
                    make_user_code_executor(
                        execution["kind"],
                        workers=execution["workers"],
                        ray_address=execution["ray_address"],
                        timeout=settings.timeout,
                        name=f"model.trainer {settings.trainer}",
                        what="trainer",
                    )
                )
            )
        return trainer_executors[0]

    if settings.trainer is not None and source.kind != "mlp":
        train_models = user_trainer(settings.trainer, pool=trainer_executor)
    elif source.kind == "torch":  # the factory's architecture, trained by the vectorized DP-SGD trainer
        assert settings.factory is not None  # a torch source is always a factory's module
        dpsgd = DPSGDSpec(
            noise_multiplier=sigma if private else 0.0,
            max_grad_norm=max_grad_norm,
            sample_rate=sample_rate,
            steps=steps,
            lr=config.training.lr,
            momentum=config.training.momentum,
        )
        train_models = vectorized_factory_trainer(settings.factory, n_classes, dpsgd, timeout=settings.timeout)
    context = AttackContext(
        candidate_features=candidate_features,
        candidate_labels=candidate_labels,
        n_classes=n_classes,
        pool_features=pool_features,
        pool_labels=pool_labels,
        training=TargetTraining(
            spec=training_spec,
            noise_multiplier=sigma if private else 0.0,
            max_grad_norm=max_grad_norm,
            sample_rate=sample_rate,
            steps=steps,
            train_size=n_members,
        ),
        epsilon=claimed,
        delta=config.privacy.delta,
        accountant=config.privacy.accountant,
        seed=seed,
        device=torch_device,
        options=options,
        train_models=train_models,
    )

    attack_records, score_columns = [], {}
    for name in names:
        scores = np.asarray(get_attack(name).scores(source.query, context), dtype=np.float64)
        score_columns[name] = scores
        attack_records.append(
            evaluate_attack(
                name,
                scores,
                membership,
                candidate_labels,
                delta=config.privacy.delta,
                confidence=attack_section.confidence,
                threshold_seed=seed,
                accountant_epsilon=claimed if private else None,
                membership_randomized=False,
            )
        )

    epsilon: dict[str, float] = {}
    if private and source.dpsgd:
        epsilon = epsilons_for_event(
            DPSGDEvent(sigma, sample_rate, steps), config.privacy.delta, config.privacy.accountant
        )
        if epsilon["pld"] > epsilon["prv"] + PLD_PRV_TOLERANCE:
            notes.append(
                f"PRV ε {epsilon['prv']:.3f} is below the tight PLD ε {epsilon['pld']:.3f} by more than "
                f"{PLD_PRV_TOLERANCE}"
            )
    test_accuracy = float((source.query.predict_labels(nonmember_table.features) == nonmember_table.labels).mean())
    best, best_method = best_sound_lower_bound(attack_records)
    violation = False  # decided by audit.machinery.verdict (only bounds proven for the setting)
    dpsgd_known = private and source.dpsgd
    target_record: dict[str, Any] = {
        "epsilon_target": claimed if private else None,
        "delta": config.privacy.delta,
        "noise_multiplier": sigma if dpsgd_known else None,
        "sample_rate": sample_rate if source.dpsgd else None,
        "steps": steps if source.dpsgd else None,
        "max_grad_norm": max_grad_norm,
        "poisson_sampling": True if dpsgd_known else None,
        "accountant": config.privacy.accountant if dpsgd_known else None,
        "epsilon": epsilon,
        "epsilon_accountant": epsilon.get(config.privacy.accountant) if dpsgd_known else None,
        "epsilon_engine": None,
        "test_accuracy": test_accuracy,
        "train_seconds": None,
        "attacks": attack_records,
        "epsilon_lb_best": best,
        "epsilon_lb_best_method": best_method,
        "epsilon_lb_ratio": best / claimed if private and best is not None else None,
        "violation": bool(violation),
        "seed": seed,
        # Das et al. 2024 (arXiv 2406.16201): the user's member / non-member files must not be
        # separable without the model, or the leakage figures above measure the split, not the model.
        "blind_baseline": blind_baseline(
            candidate_features, candidate_labels, membership, alpha=1 - attack_section.confidence, seed=seed
        ),
    }
    reasons: list[str] = []
    if target_record["blind_baseline"].get("separates"):
        shift = target_record["blind_baseline"]
        notes.append(
            f"distribution shift: a classifier on the records alone (no model) separates the members file "
            f"from the non-members file (AUC {shift['auc']:.3f}, p = {shift['p_value']:.2g}); the leakage "
            "figures are confounded: they need not come from the model (Das et al. 2024, arXiv 2406.16201)"
        )

    notes += [
        "membership is given by the members / non-members files, not drawn by a fair coin per record: the one-run "
        "bound (Steinke et al. 2023) is not computed, and the Clopper-Pearson bound over one model's candidates "
        "assumes independent trials: it is shown but decides nothing, so a claimed ε is reported inconclusive. The "
        "bounds speak about membership only if the non-members come from the same distribution as the members "
        "(ideally a random hold-out of the same data); otherwise an attack may be telling the distributions apart",
        "test_accuracy is the model's accuracy on the non-members file",
        "the features are fed to the model exactly as given in the files: no standardisation, encoding or "
        "other transformation is applied",
    ]
    if source.query.label_only:
        notes.append(
            "the model returns labels only: the label-only attack (noise robustness, Choquette-Choo et al. "
            "2021) is a weaker adversary than score-based attacks, so its bound is a floor for a model whose "
            "scores are also exposed"
        )
    if private and source.dpsgd:
        notes.append(
            f"claimed ε {claimed:g}: the audit assumes DP-SGD with Poisson sampling as Opacus's "
            f"make_private_with_epsilon would run it with the config's training section: q = 1/⌈{n_members}/"
            f"{config.training.batch_size}⌉ = {sample_rate:.4g}, T = {steps}, C = {max_grad_norm:g}, σ = {sigma:.4f} "
            f"({config.privacy.accountant} accountant); the accountant ε is for these (σ, q, T), the violation "
            "check compares with the claimed ε"
        )
    elif private:
        notes.append(
            f"claimed ε {claimed:g}: the model is not a torch model trained by DP-SGD as the config describes, "
            "so no accountant ε is computed; the violation check compares the bounds with the claimed ε"
        )
    if any(n in population_attacks() for n in names):
        how = (
            f"by the user's trainer {settings.trainer}"
            if settings.trainer is not None and source.kind != "mlp"
            else f"as {settings.factory}'s architecture by the vectorized DP-SGD trainer (the config's training section"
            + (", same σ, q, T, C)" if private else ", non-private)")
            if source.kind == "torch"
            else "like the target is assumed to have been trained (the config's training section"
            + (", same σ, q, T, C)" if private else ", non-private)")
        )
        notes.append(
            f"reference/shadow models are trained {how}; a reference model trained differently from the "
            "target makes those attacks weaker, never the bounds unsound"
        )
    if attacks_needing(IN_OUT_REFERENCES, names) and abs(n_members - n_nonmembers) > 0.1 * n_members:
        notes.append(
            f"reference models each train on half of the {n_members + n_nonmembers} candidates while the target "
            f"trained on {n_members} members: equal-sized member and non-member files mimic the target best"
        )

    if scores_path is not None:
        from audit.machinery.run_directory import write_text_atomic

        frame = pd.DataFrame({"member": membership.astype(int), "label": candidate_labels, **score_columns})
        write_text_atomic(Path(scores_path), frame.to_csv(index=False))

    files = {
        "members": member_table.path,
        "nonmembers": nonmember_table.path,
        "population": population_table.path if population_table is not None else None,
    }
    model_description = source.record.get("path") or source.record.get("function") or source.record.get("type")
    data = {
        "description": f"user model {Path(str(model_description)).name} on {member_table.path.name} (members) / "
        f"{nonmember_table.path.name} (non-members)"
        + (f", population {population_table.path.name}" if population_table is not None else ""),
        "n_rows": int(sum(len(t.labels) for t in tables)),
        "n_features": int(np.prod(member_table.features.shape[1:])),
        "feature_shape": [int(d) for d in member_table.features.shape[1:]],
        "n_classes": int(n_classes),
        "n_train": int(n_members),
        "n_candidates": int(n_members + n_nonmembers),
        "n_members": int(n_members),
        "n_nonmembers": int(n_nonmembers),
        "n_pool": int(len(pool_labels)),
        "membership": "given by the user's files (members = the model's training set); not randomized",
        "label": label,
        "feature_columns": (
            [c for c in member_table.frame.columns if c != label] if member_table.frame is not None else None
        ),
        "files": {k: str(v) if v is not None else None for k, v in files.items()},
        "files_sha256": {k: _file_sha256(v) for k, v in files.items() if v is not None and v.is_file()},
        "model": source.record,
    }
    if source.kind in ("mlp", "torch"):
        data["weights"] = {k: source.record[k] for k in ("path", "format", "sha256", "architecture")}
    results = {
        "schema_version": SCHEMA_VERSION,
        "config": config.to_plain(),
        "environment": describe_environment(str(torch_device), seed),
        "data": data,
        "attacks_run": names,
        "targets": [target_record],
        "synthetic": [],
        "notes": notes,
        "verdict": {"status": "pass", "passed": not violation, "policy": None, "reasons": reasons},
    }
    if trainer_executors:  # where the user's trainer ran; the numbers do not depend on it
        results["execution"] = trainer_executors[0].describe()
    return verdict_for_results(results)[0]  # the one verdict model: proven bounds, Holm
