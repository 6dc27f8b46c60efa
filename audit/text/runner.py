"""The text job: for each target ε, train a small causal LM on a generated corpus with canaries,
attack membership of its documents, measure the canaries' exposure and what can be extracted.

`run_text_audit(config)` is the Python API; `privacy-audit run` dispatches here when the config
has a `text:` section (preset `text`).

* Corpus (targets/text_corpus.py): faker records; candidates are members by fair coin flips, so
  the one-run bound (Steinke, Nasr, Jagielski 2023) applies to every LM attack's scores on them,
  and the accountant's ε is the claim each attack row tests (the verdict of every job:
  audit.machinery.verdict, Holm over all rows of all private targets). Each candidate is one
  person with one document, so the claim is the same at either privacy unit.
* The privacy unit (`text.privacy_unit`): "person" (default) trains the DP targets with user-level
  DP-SGD, so the ε is per person — a canary's k copies are one person's and covered by it;
  "record" clips each document, and a canary inserted k times is then protected only at group
  level (about k·ε). Exposure and extraction are shown either way, not claim tests.
* The reference model of `reference_ratio` is trained once, without DP, on the pool records
  (disjoint from the candidates) with the targets' architecture and schedule.
* The blind baseline (text alone, no model; Das et al. 2024) runs once on the candidates: with
  coin-flip membership it should be at chance; above chance flags distribution shift.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import numpy as np
import pandas as pd
import torch

from attacks import BlindBaseline, TextAttackContext, get_text_attack
from attacks.text_outputs import CausalLanguageModel, token_statistics
from audit.errors import AuditInputError
from audit.machinery.config import AuditConfig, TextConfig, config_to_yaml, read_config_file
from audit.machinery.crash_log import set_log_folder
from audit.machinery.environment import describe_environment
from audit.machinery.executors import LocalExecutor
from audit.machinery.policy import Policy
from audit.machinery.progress import as_progress
from audit.machinery.run_directory import (
    StagedRunDirectory,
    run_attempt,
    write_json_atomic,
    write_result_json_atomic,
    write_text_atomic,
)
from audit.machinery.secrets import redact
from audit.machinery.tracking import AuditTracker, NullTracker, experiment_name, open_tracker, target_metrics
from audit.machinery.verdict import verdict_for_results, verdict_tags
from audit.statistics.accountants import DPSGDEvent, epsilons_for_event
from audit.statistics.attack_evaluation import evaluate_attack
from audit.text.memorisation import canary_exposures, exposure_summary, record_extraction
from audit.text.trained_targets import (
    UNIT_WORDS,
    as_plain,
    load_trained,
    save_trained,
    target_checkpoints,
    target_record,
    text_target_task,
)
from reports.figures import epsilon_label
from reports.html_report import write_html_report
from reports.junit import write_junit_xml
from reports.markdown_summary import write_summary_markdown
from reports.text_figures import plot_exposure_vs_repetitions
from targets.devices import resolve_device
from targets.text_corpus import TextCorpus, make_text_corpus
from targets.text_models import (
    PAD,
    TextTrainingSpec,
    TrainedTextTarget,
    encode_texts,
    mean_token_loss,
    train_text_target,
    train_tokenizer,
)

SCHEMA_VERSION = 3


def text_section(config: AuditConfig) -> TextConfig:
    """The config's `text:` section; the text job refuses a config without one (exit 2)."""
    if config.text is None:
        raise AuditInputError("config", "has no 'text' section")
    return config.text


@dataclass(frozen=True)
class TextRun:
    results: dict[str, Any]
    run_dir: Path


def _seed(config_seed: int, index: int) -> int:
    return int(np.random.SeedSequence([config_seed, 5, index]).generate_state(1)[0])


def text_training_spec(config: AuditConfig) -> TextTrainingSpec:
    return TextTrainingSpec.from_section(text_section(config))


@torch.no_grad()
def next_token_accuracy(model, token_ids: np.ndarray) -> float:
    ids = torch.as_tensor(token_ids, device=next(model.parameters()).device)
    predicted = model.logits(ids)[:, :-1].argmax(-1)
    valid = ids[:, 1:] != PAD
    return float((predicted == ids[:, 1:])[valid].float().mean())


def _accounted(trained: TrainedTextTarget, config: AuditConfig) -> dict[str, float]:
    if trained.epsilon_target is None or trained.noise_multiplier is None:
        return {}
    event = DPSGDEvent(trained.noise_multiplier, trained.sample_rate, trained.steps)
    return epsilons_for_event(event, trained.delta, config.privacy.accountant)


def _audit_target(
    config: AuditConfig,
    corpus: TextCorpus,
    tokenizer,
    encoded: dict[str, np.ndarray],
    reference_stats,
    epsilon: float,
    index: int,
    progress,
    device: torch.device,
    staging: Path,
) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    text = text_section(config)
    seed = _seed(config.seed, index + 1)
    spec = text_training_spec(config)
    label = f"target {index + 1}/{len(config.privacy.epsilons)} ({epsilon_label(epsilon)})"
    ckpt = target_checkpoints(staging, epsilon)
    finished, finished_scores = ckpt.load_json("record"), ckpt.load_arrays("scores")
    if finished is not None and finished_scores is not None:  # audited by an earlier attempt of this run (--resume)
        progress.note(f"{label}: reused from the interrupted run")
        return finished, finished_scores
    trained = load_trained(ckpt, tokenizer.get_vocab_size(), spec)  # trained by an executor or an earlier attempt
    if trained is None:
        with progress.step(f"{label}: training (epochs)", total=spec.epochs) as step:
            trained = train_text_target(
                encoded["train"],
                tokenizer.get_vocab_size(),
                spec,
                epsilon=epsilon,
                delta=config.privacy.delta,
                accountant=config.privacy.accountant,
                seed=seed,
                device=device,
                owners=_owners(config, encoded),
                on_epoch=lambda e, _: step.update(e),
            )
        save_trained(ckpt, as_plain(trained))
    model = trained.model.to(device)
    members = corpus.candidate_member
    with progress.step(f"{label}: membership attacks"):
        stats = token_statistics(cast(CausalLanguageModel, model), encoded["candidates"])
        context = TextAttackContext(
            [r.text for r in corpus.candidates], reference=reference_stats, min_k_fraction=text.min_k_fraction
        )
        epsilons = _accounted(trained, config)
        claim = epsilons.get(config.privacy.accountant)
        attacks, columns = [], {}
        for name in text.attacks:
            scores = np.asarray(get_text_attack(name).scores(stats, context), dtype=np.float64)
            columns[name] = scores
            row = evaluate_attack(
                name,
                scores,
                members,
                np.zeros(len(members), dtype=int),
                delta=config.privacy.delta,
                confidence=config.attacks.confidence,
                threshold_seed=seed,
                accountant_epsilon=claim,
            )
            attacks.append(row)
    with progress.step(f"{label}: canary exposure and extraction"):
        canaries = canary_exposures(
            model,
            tokenizer,
            corpus,
            exact_limit=text.exact_exposure_limit,
            samples=text.exposure_samples,
            beams=text.beams,
            seed=seed,
        )
        records = record_extraction(model, tokenizer, corpus, text.extraction_records, seed)
    test_loss = mean_token_loss(model, encoded["test"])
    record = {
        **target_record(
            trained,
            delta=config.privacy.delta,
            epsilons=epsilons,
            claim=claim,
            test_accuracy=next_token_accuracy(model, encoded["test"]),
            attacks=attacks,
            seed=seed,
        ),
        "text": {
            "test_loss": test_loss,
            "test_perplexity": float(math.exp(test_loss)),
            "train_loss": mean_token_loss(model, encoded["members"]),
            "canaries": canaries,
            "exposure": exposure_summary(canaries, corpus.secret_space),
            "record_extraction": records,
        },
    }
    ckpt.save_arrays("scores", columns)
    ckpt.save_json("record", record)  # last: the target is finished
    return record, columns


def _owners(config: AuditConfig, encoded: dict[str, np.ndarray]) -> np.ndarray | None:
    """Each training document's person at person level; None (each document its own unit) at record level."""
    return encoded["owners"] if text_section(config).privacy_unit == "person" else None


def _train_targets_on(
    executor, config: AuditConfig, encoded: dict[str, np.ndarray], vocab_size: int, staging: Path, device: str, progress
) -> None:
    """On a parallel executor, every target not yet trained is one task (seeded as in the loop),
    checkpointed as it arrives; `_audit_target` then loads it instead of training."""
    todo = [
        (index, epsilon)
        for index, epsilon in enumerate(config.privacy.epsilons)
        if target_checkpoints(staging, epsilon).load_json("record") is None
        and target_checkpoints(staging, epsilon).load_json("trained") is None
    ]
    if not todo:
        return
    with progress.step(f"training {len(todo)} target(s) on the {executor.name} executor"):
        executor.map(
            text_target_task,
            [(epsilon, _seed(config.seed, index + 1)) for index, epsilon in todo],
            dict(
                token_ids=encoded["train"],
                owners=_owners(config, encoded),
                vocab_size=vocab_size,
                spec=text_training_spec(config),
                delta=config.privacy.delta,
                accountant=config.privacy.accountant,
                device=executor.task_device(config.device, device),
            ),
            on_result=lambda position, plain: save_trained(target_checkpoints(staging, todo[position][1]), plain),
        )


def _blind_baseline(corpus: TextCorpus, config: AuditConfig) -> dict[str, Any]:
    texts = [r.text for r in corpus.candidates]
    _, auc, p_value = BlindBaseline().test(texts, corpus.candidate_member, seed=config.seed)
    shift = p_value <= 1 - config.attacks.confidence
    return {
        "name": "blind_baseline",
        "auc": auc,
        "p_value_above_chance": p_value,
        "p_value_method": "label permutation of the cross-fitted classifier",
        "distribution_shift": bool(shift),
        "separates": bool(shift),
        "reading": (
            "members and non-members are distinguishable from the text alone: attack AUCs on these sets "
            "measure that shift, not leakage"
            if shift
            else "the text alone does not separate members from non-members (no distribution shift found)"
        ),
    }


def results_table(results: dict[str, Any]) -> pd.DataFrame:
    """One row per target ε: utility, best attack, exposure by repetitions, extraction (docs' table)."""
    rows = []
    for target in results["targets"]:
        text = target["text"]
        row = {
            "epsilon_target": target["epsilon_target"] if target["epsilon_target"] is not None else math.inf,
            "epsilon_accountant": target["epsilon_accountant"],
            "test_perplexity": text["test_perplexity"],
            "best_auc": max(a["auc"] for a in target["attacks"]),
            "eps_lb_best": target["epsilon_lb_best"],
        }
        for entry in text["exposure"]:
            row[f"exposure_rep{entry['repetitions']}"] = entry["exposure_mean"]
        row["canaries_extracted_greedy"] = sum(e["greedy_extracted"] for e in text["exposure"] if e["repetitions"])
        row["canaries_extracted_beam"] = sum(e["beam_extracted"] for e in text["exposure"] if e["repetitions"])
        row["phones_extracted_members"] = text["record_extraction"]["phone"]["members_recovered"]
        row["addresses_extracted_members"] = text["record_extraction"]["address"]["members_recovered"]
        rows.append(row)
    return pd.DataFrame(rows)


def run_text_audit(
    config: AuditConfig,
    *,
    out_dir: str | Path = "runs",
    tracking_uri: str | None = None,
    preset: str | None = None,
    progress=None,
    policy: Policy | None = None,
    tracking: bool = True,
    resume: str | Path | None = None,
    executor: Any = None,
) -> TextRun:
    """Run the text audit described by `config` (which must have a `text:` section).

    `resume` (a staging folder or "latest"): continue an interrupted run of the same config, reusing
    its finished targets (trained and audited) and trained models. `executor` (`run --executor`;
    default local, in this process with per-epoch progress): trains the targets not yet trained as
    parallel tasks; the numbers do not depend on it."""
    text_section(config)  # before anything is made
    progress = as_progress(progress)
    device = resolve_device(config.device)  # models train and are queried there (CUDA when present)
    torch.set_num_threads(config.cpu_threads)
    text = text_section(config)
    corpus = make_text_corpus(
        n_candidates=text.n_candidates,
        n_pool=text.n_pool,
        n_test=text.n_test,
        repetitions=tuple(text.repetitions),
        canaries_per_repetition=text.canaries_per_repetition,
        n_controls=text.control_canaries,
        secret_digits=text.secret_digits,
        seed=config.seed,
    )
    if resume is not None:
        run_dir = StagedRunDirectory.resume(out_dir, resume, config.name)
        stored = AuditConfig.model_validate(read_config_file(run_dir.staging / "config.yaml")).config_hash()
        if stored != config.config_hash():
            raise AuditInputError(
                f"--resume '{resume}'",
                f"that run was started with another config (hash {stored}, "
                f"now {config.config_hash()}); resume with the same config",
            )
    else:
        run_dir = StagedRunDirectory(out_dir, config.name)
        run_dir.create()
    results, final = run_staged_job(
        config,
        run_dir,
        lambda tracker: _text_sweep(
            config, corpus, run_dir.staging, tracker, preset, progress, str(device), executor or LocalExecutor()
        ),
        resume=resume,
        progress=progress,
        tracking_uri=tracking_uri,
        tracking=tracking,
        policy=policy,
    )
    return TextRun(results=results, run_dir=final)


def run_staged_job(
    config: AuditConfig,
    run_dir: StagedRunDirectory,
    sweep: Callable[[AuditTracker], dict[str, Any]],
    *,
    resume: str | Path | None,
    progress: Any,
    tracking_uri: str | None,
    tracking: bool,
    policy: Policy | None,
    table: Callable[[dict[str, Any]], pd.DataFrame] | None = None,
) -> tuple[dict[str, Any], Path]:
    """The text and llm jobs' run around their sweep: the MLflow tracker, `sweep(tracker)` in the staged
    folder (an interrupted or failed attempt left as the run machinery leaves it), then the verdict and
    every output (`_write_outputs`, `table` for results.csv), the folder committed and the parent run
    finished. Returns (results, the final folder)."""
    set_log_folder(run_dir.staging)
    with run_attempt(run_dir, resume, progress) as attempt:
        # tracking off is a NullTracker: the AuditTracker interface doing nothing (typed as one, as the sweep's)
        tracker: Any = open_tracker(tracking_uri, experiment_name("run", config.name), command="run", enabled=tracking)
        attempt["tracker"] = tracker
        results = sweep(tracker)
        with progress.step("report, summary and MLflow artifacts"):
            _write_outputs(results, run_dir.staging, policy, tracker, table=table)
        final = run_dir.commit()
        parent = (results.get("mlflow") or {}).get("parent_run_id")
        if parent:
            tracker.log_artifact(parent, final / "results.json")
            tracker.finish(parent, "FINISHED")
        return results, final


def _write_outputs(
    results: dict[str, Any],
    folder: Path,
    policy: Policy | None,
    tracker: AuditTracker | NullTracker,
    table: Any = None,
) -> None:
    """The verdict, then results.csv (`table(results)`, the text job's table by default), results.json with
    its digest, report.html, summary.md, junit.xml and the MLflow tags: shared by the text and llm jobs."""
    decided, evaluation = verdict_for_results(results, policy)
    results.clear()
    results.update(decided)
    write_text_atomic(folder / "results.csv", (table or results_table)(results).to_csv(index=False))
    write_result_json_atomic(folder / "results.json", results)
    outputs = [
        write_html_report(results, folder, evaluation=evaluation),
        write_summary_markdown(results, folder / "summary.md", evaluation=evaluation),
        write_junit_xml(results, folder / "junit.xml", evaluation=evaluation),
    ]
    parent = (results.get("mlflow") or {}).get("parent_run_id")
    if parent:
        tracker.set_tags(parent, verdict_tags(results["verdict"]))
        for path in outputs:
            tracker.log_artifact(parent, path)


def _text_sweep(
    config: AuditConfig,
    corpus: TextCorpus,
    staging: Path,
    tracker: AuditTracker,
    preset: str | None,
    progress,
    device: str,
    executor,
) -> dict[str, Any]:
    text = text_section(config)
    environment = describe_environment(device, config.seed)
    attempts_path = staging / "checkpoints" / "mlflow_attempts.json"
    earlier = json.loads(attempts_path.read_text()) if attempts_path.is_file() else []
    for old in earlier:  # runs a killed attempt left RUNNING
        tracker.close_if_running([old["parent_run_id"], *old["child_run_ids"]], "KILLED")
    tags = {
        "preset": preset or "custom",
        "config_hash": config.config_hash(),
        "dataset": corpus.description,
        "kind": "text",
    }
    if earlier:
        tags["resumed_from"] = ",".join(old["parent_run_id"] for old in earlier)
    parent_id = tracker.start_run(config.name, tags=tags)
    attempt: dict[str, Any] = {"parent_run_id": parent_id, "child_run_ids": []}
    if tracker.enabled:
        write_json_atomic(attempts_path, earlier + [attempt])
    tracker.log_params(
        parent_id,
        {
            "seed": config.seed,
            "delta": config.privacy.delta,
            "accountant": config.privacy.accountant,
            "n_targets": len(config.privacy.epsilons),
            "secret_digits": text.secret_digits,
            "repetitions": ",".join(map(str, text.repetitions)),
        },
    )
    write_text_atomic(staging / "config.yaml", config_to_yaml(config))
    started = time.perf_counter()
    with progress.step("corpus, tokenizer and reference model"):
        tokenizer = train_tokenizer([r.text for r in corpus.pool], text.vocab_size)
        tokenizer.save(str(staging / "tokenizer.json"))
        length = text.max_length
        documents, owners = corpus.training_documents()
        encoded = {
            "train": encode_texts(tokenizer, documents, length),
            "owners": owners,
            "candidates": encode_texts(tokenizer, [r.text for r in corpus.candidates], length),
            "members": encode_texts(tokenizer, [r.text for r in corpus.member_records], length),
            "pool": encode_texts(tokenizer, [r.text for r in corpus.pool], length),
            "test": encode_texts(tokenizer, [r.text for r in corpus.test], length),
        }
        reference_stats = None
        if "reference_ratio" in text.attacks:
            reference = train_text_target(
                encoded["pool"],
                tokenizer.get_vocab_size(),
                text_training_spec(config),
                epsilon=math.inf,
                delta=config.privacy.delta,
                accountant=config.privacy.accountant,
                seed=_seed(config.seed, 0),
                device=torch.device(device),
            )
            reference_stats = token_statistics(
                cast(CausalLanguageModel, reference.model.to(device)), encoded["candidates"]
            )
    if executor.name != "local":  # local trains each target in the loop, with per-epoch progress
        _train_targets_on(executor, config, encoded, tokenizer.get_vocab_size(), staging, device, progress)
    blind = _blind_baseline(corpus, config)
    targets, child_ids = [], []
    scores_dir = staging / "scores"
    scores_dir.mkdir(exist_ok=True)
    for index, epsilon in enumerate(config.privacy.epsilons):
        child = tracker.start_run(f"{config.name} {epsilon_label(epsilon)}", parent_id=parent_id)
        child_ids.append(child)
        if tracker.enabled:
            attempt["child_run_ids"] = child_ids
            write_json_atomic(attempts_path, earlier + [attempt])
        record, columns = _audit_target(
            config, corpus, tokenizer, encoded, reference_stats, epsilon, index, progress, torch.device(device), staging
        )
        record["mlflow_run_id"] = child
        record["blind_baseline"] = blind  # read by the leakage statement (audit.machinery.leakage)
        targets.append(record)
        tag = "inf" if math.isinf(epsilon) else f"{epsilon:g}"
        scores_path = scores_dir / f"scores_eps_{tag}.csv"
        pd.DataFrame(
            {
                "candidate_index": np.arange(len(corpus.candidates)),
                "member": corpus.candidate_member.astype(int),
                **columns,
            }
        ).to_csv(scores_path, index=False)
        metrics = target_metrics(record)
        metrics["test_perplexity"] = record["text"]["test_perplexity"]
        for entry in record["text"]["exposure"]:
            metrics[f"exposure_rep{entry['repetitions']}"] = entry["exposure_mean"]
            metrics[f"extracted_beam_rep{entry['repetitions']}"] = float(entry["beam_extracted"])
        tracker.log_params(
            child,
            {
                "epsilon_target": tag,
                "noise_multiplier": record["noise_multiplier"],
                "steps": record["steps"],
                "seed": record["seed"],
            },
        )
        tracker.log_metrics(child, {k: v for k, v in metrics.items() if v is None or math.isfinite(v)})
        tracker.log_artifact(child, scores_path)
        tracker.finish(child)
    figure = plot_exposure_vs_repetitions(
        [(epsilon_label(t["epsilon_target"]), t["text"]["exposure"]) for t in targets],
        staging / "figures" / "exposure_vs_repetitions.png",
        ceiling=math.log2(corpus.secret_space),
    )
    tracker.log_artifact(parent_id, figure)
    unit_note = (
        "the DP targets' ε is per person (user-level DP-SGD: persons sampled, each person's documents "
        "clipped together): a canary inserted k times is one person's secret, covered by that ε"
        if text.privacy_unit == "person"
        else "the DP targets' ε is per document (record level): a secret inserted k times is k documents, "
        "protected only at group level (about k·ε)"
    )
    notes = [
        f"{unit_note}; exposure and extraction are shown, not tested against the claim",
        f"blind baseline (text alone, Das et al. 2024): AUC {blind['auc']:.3f}; {blind['reading']}",
    ]
    return {
        "schema_version": SCHEMA_VERSION,
        "kind": "text",
        "config": config.to_plain(),
        "environment": environment,
        "data": {
            "description": corpus.description,
            "n_rows": len(corpus.candidates) + len(corpus.pool) + len(corpus.test),
            "n_train": int(len(encoded["train"])),
            "n_persons": int(encoded["owners"].max()) + 1,
            "privacy_unit": text.privacy_unit,
            "epsilon_unit": UNIT_WORDS[text.privacy_unit],
            "n_test": len(corpus.test),
            "n_candidates": len(corpus.candidates),
            "n_pool": len(corpus.pool),
            "membership": "independent fair coin flip per candidate record (Bernoulli 1/2)",
            "n_canaries": sum(c.repetitions > 0 for c in corpus.canaries),
            "n_control_canaries": sum(c.repetitions == 0 for c in corpus.canaries),
            "secret_space": corpus.secret_space,
            "vocab_size": tokenizer.get_vocab_size(),
        },
        "attacks_run": list(text.attacks),
        "targets": targets,
        "synthetic": [],
        "text": {
            "blind_baseline": blind,
            "seconds": time.perf_counter() - started,
            "exposure_figure": str(Path("figures") / figure.name),
        },
        "notes": notes,
        "verdict": None,
        "mlflow": {
            "tracking_uri": redact(tracker.tracking_uri),
            "experiment_id": tracker.experiment_id,
            "parent_run_id": parent_id,
            "child_run_ids": child_ids,
            "resumed_from": [old["parent_run_id"] for old in earlier],
        }
        if tracker.enabled
        else None,
        "execution": executor.describe(),  # where the targets trained; the numbers do not depend on it
    }
