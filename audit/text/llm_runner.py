"""The LLM job (preset `llm`): a `transformers` causal LM pretrained on public text, fine-tuned with
Opacus DP-SGD on private text (full fine-tuning and LoRA, at each target ε), and audited from that
one run, black-box, with canaries of two designs (targets/llm_canaries.py).

`run_llm_audit(config)` is the Python API; `privacy-audit run` dispatches here when the config has
an `llm:` section.

* Corpus: the text job's faker records (targets/text_corpus.py). The pool records are the public
  part (tokenizer and pretraining); the members of the candidate records (fair coins) and the
  inserted canaries are the private fine-tuning set. Each canary is one person.
* Claim tested: the accountant's ε of each DP fine-tuning, per person (user-level DP-SGD) or per
  document (`privacy_unit: record`; then each canary is one copy). Each canary design is one attack
  row over its m canaries (membership = the canary's coin): the one-run bound (Steinke, Nasr,
  Jagielski 2023) and the f-DP one-run audit (Mahloujifar, Melis, Chaudhuri 2024) through
  `evaluate_attack`, judged by the verdict (audit.machinery.verdict) with its ceiling, as every audit.
* Power (`Check.power`): a black-box, input-space canary audit of the final model has no proven
  power against a given claim. Its power is taken from the run's own positive control: the same
  canaries, same fine-tuning mode, trained without DP (the ε = ∞ target). Where that control's
  one-run bound exceeds a claim, the audit is shown to detect a fine-tuning that leaks beyond the
  claim (power "control"); otherwise its power is "none" and a passing row reads "not refuted".
  With no ε = ∞ target in the config there is no control and every row is "none".
* Synthetic text (`llm.synthetic_samples` > 0; Mitchell & Andrew 2026, arXiv 2606.10481): text
  sampled from each fine-tuned model trains an auxiliary model (the public pretrained model,
  fine-tuned without DP on the samples), whose canary scores are audited the same way: a release
  of synthetic text is post-processing of the DP model, so the same claim covers it.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, TypedDict, Unpack

import numpy as np
import pandas as pd
import torch

from audit.errors import AuditInputError
from audit.machinery.config import AuditConfig, LLMConfig, config_to_yaml
from audit.machinery.environment import describe_environment
from audit.machinery.policy import Policy
from audit.machinery.progress import as_progress
from audit.machinery.run_directory import StagedRunDirectory, write_json_atomic
from audit.machinery.secrets import redact
from audit.machinery.tracking import AuditTracker, target_metrics
from audit.statistics.accountants import DPSGDEvent, epsilons_for_event
from audit.statistics.attack_evaluation import evaluate_attack
from audit.text.llm_one_run import MODE_LABELS, canary_claim_row, claim_power, control_p_value, deciding_design
from audit.text.llm_setup import LLMSetup, derived_seed, finetune_target, prepare_llm
from audit.text.runner import run_staged_job
from audit.text.trained_targets import UNIT_WORDS, save_canary_scores, target_record
from reports.figures import epsilon_label
from targets.devices import resolve_device
from targets.hf_causal_lm import LORA_SAVED, HFLMSpec, finetune, sample_texts, trainable_share
from targets.llm_canaries import LLMCanaries
from targets.text_models import mean_token_loss

SCHEMA_VERSION = 3
MODE_WORDS = {
    "full": "full fine-tuning (every weight private; Opacus functorch per-sample gradients)",
    "lora": "LoRA fine-tuning (peft adapters, the output head and, with llm.lora_train_embeddings, the token "
    "embedding private; the other pretrained weights frozen)",
}


class RunOptions(TypedDict, total=False):
    """`audit.text.runner.run_text_audit`'s keywords, which `run_llm_audit` takes too."""

    out_dir: str | Path
    tracking_uri: str | None
    preset: str | None
    progress: Any
    policy: Policy | None
    tracking: bool
    resume: str | Path | None
    executor: Any


@dataclass(frozen=True)
class LLMRun:
    results: dict[str, Any]
    run_dir: Path


def epsilon_tag(epsilon: float) -> str:
    return "inf" if math.isinf(epsilon) else f"{epsilon:g}"


def llm_section(config: AuditConfig) -> LLMConfig:
    """The config's `llm:` section; the llm job refuses a config without one (exit 2)."""
    if config.llm is None:
        raise AuditInputError("config", "has no 'llm' section")
    return config.llm


def llm_spec(config: AuditConfig) -> HFLMSpec:
    s = llm_section(config)
    return HFLMSpec.from_section(
        s,
        pretrain_epochs=s.pretrain_epochs,
        pretrain_lr=s.lr,
        lora_rank=s.lora_rank,
        lora_alpha=2 * s.lora_rank,
        lora_lr=s.lora_lr,
        lora_saved=LORA_SAVED + (("wte",) if s.lora_train_embeddings else ()),
    )


SHOWN_BECAUSE = (
    "shown, not tested: each DP fine-tuning's claim is tested by one pre-declared row, its deciding design's "
    "one-run row (whitebox_one_run); the other rows are the comparison"
)


def _set_power(
    rows: list[dict[str, Any]], controls: dict[str, np.ndarray], coins: np.ndarray, confidence: float
) -> None:
    """Each claim row's power from its mode's positive control (audit/text/llm_one_run.py `claim_power`)."""
    p = [
        control_p_value(controls[row["mode"]], coins, row, confidence) if row["mode"] in controls else None
        for row in rows
    ]
    claim_power(rows, p, 1.0 - float(confidence))


def _canary_row(
    name: str,
    design: str,
    mode: str,
    scores: np.ndarray,
    canaries: LLMCanaries,
    *,
    claim: float | None,
    config: AuditConfig,
    seed: int,
    unit: str | None,
) -> dict[str, Any]:
    row = evaluate_attack(
        name,
        scores,
        canaries.inserted,
        np.zeros(canaries.m, dtype=int),
        delta=config.privacy.delta,
        confidence=config.attacks.confidence,
        threshold_seed=seed,
        accountant_epsilon=claim,
    )
    # The row's name carries its fine-tuning: full and LoRA targets share each ε, and every table that
    # lists rows by ε (summary, report, console) must still tell them apart.
    row.update(
        {
            "design": design,
            "design_key": name,
            "mode": mode,
            "kind": "llm_canaries",
            "threat_model": "black-box: the final model's token probabilities on each canary's secret given "
            "its prefix (no gradients, no intermediate models)",
            "n_canaries": canaries.m,
            "n_inserted": int(canaries.inserted.sum()),
            "repetitions": canaries.repetitions,
        }
    )
    if claim is not None:  # the row tests this fine-tuning's own guarantee (one claim per mode and ε)
        row["claim"] = {"epsilon": claim, "level": f"{MODE_LABELS[mode]} fine-tuning · {unit or 'record'}"}
    return row


def results_table(results: dict[str, Any]) -> pd.DataFrame:
    """One row per (fine-tuning, target ε, canary row): the docs' table (results.csv)."""
    rows = []
    for target in results["targets"]:
        claim = target["epsilon_accountant"]
        deciding = target.get("whitebox_one_run") or {}
        for attack in target["attacks"]:
            bound = (attack.get("epsilon_lb") or {}).get("one_run")
            decides = attack["name"] == deciding.get("design_key")  # the claim's one pre-declared test
            rows.append(
                {
                    "finetuning": target["llm"]["finetuning"],
                    "epsilon_target": target["epsilon_target"] if target["epsilon_target"] is not None else math.inf,
                    "epsilon_accountant": claim,
                    "canaries": attack["name"],
                    "m": attack.get("n_canaries"),
                    "eps_lb_one_run": bound,
                    "bound_over_claim": bound / claim if claim and bound is not None else None,
                    "eps_gdp_fdp_one_run": (attack.get("fdp_one_run") or {}).get("epsilon_gdp"),
                    "fdp_claim_refuted": (attack.get("fdp_one_run") or {}).get("claim_refuted"),
                    "tpr_at_fpr_0.01": attack["tpr_at_fpr"].get("0.01"),
                    "auc": attack["auc"],
                    "tests_claim": decides,
                    "claim_p_value": deciding.get("p_value") if decides else None,
                    "claim_fdp_p_value": deciding.get("p_value_fdp") if decides else None,
                    "power": (deciding.get("power") or {}).get("kind") if decides else None,
                    "test_perplexity": target["llm"]["test_perplexity"],
                    "train_seconds": target["train_seconds"],
                }
            )
    return pd.DataFrame(rows)


def run_llm_audit(config: AuditConfig, **options: Unpack[RunOptions]) -> LLMRun:
    """Run the LLM audit described by `config` (which must have an `llm:` section); the keywords are
    `audit.text.runner.run_text_audit`'s (`out_dir`, `tracking_uri`, `preset`, `progress`, `policy`,
    `tracking`), less `resume` and a non-local `executor`, which this job refuses (exit 2)."""
    llm_section(config)  # before anything is made
    if options.get("resume") is not None:
        raise AuditInputError("--resume", "not supported by the llm job yet (its targets take minutes: rerun)")
    if getattr(options.get("executor"), "name", "local") != "local":
        raise AuditInputError("--executor", "the llm job trains in this process only (use --executor local)")
    progress = as_progress(options.get("progress"))
    device = resolve_device(config.device)
    torch.set_num_threads(config.cpu_threads)
    run_dir = StagedRunDirectory(options.get("out_dir", "runs"), config.name)
    run_dir.create()
    results, final = run_staged_job(
        config,
        run_dir,
        lambda tracker: _llm_sweep(config, run_dir.staging, tracker, options.get("preset"), progress, device),
        resume=None,
        progress=progress,
        tracking_uri=options.get("tracking_uri"),
        tracking=options.get("tracking", True),
        policy=options.get("policy"),
        table=results_table,
    )
    return LLMRun(results=results, run_dir=final)


def _llm_sweep(
    config: AuditConfig,
    staging: Path,
    tracker: AuditTracker,
    preset: str | None,
    progress: Any,
    device: torch.device,
) -> dict[str, Any]:
    llm = llm_section(config)
    started, cpu_started = time.perf_counter(), time.process_time()
    spec = llm_spec(config)
    with progress.step("tokenizer, canaries and public pretraining"):
        setup = prepare_llm(config, spec, device)
    corpus, canaries, vocab, pretrained_state = setup.corpus, setup.canaries, setup.vocab, setup.pretrained_state
    private_copies, private_owners = setup.private_copies, setup.private_owners
    test_rows = setup.test_rows
    setup.tokenizer.save(str(staging / "tokenizer.json"))
    parent_id = tracker.start_run(
        config.name,
        tags={
            "preset": preset or "custom",
            "config_hash": config.config_hash(),
            "dataset": corpus.description,
            "kind": "text",
        },
    )
    write_json_atomic(
        staging / "checkpoints" / "mlflow_attempts.json", [{"parent_run_id": parent_id}]
    ) if tracker.enabled else None
    (staging / "config.yaml").write_text(config_to_yaml(config))
    targets: list[dict[str, Any]] = []
    decider = deciding_design(llm.designs)
    one_run_rows: list[dict[str, Any]] = []
    control_scores: dict[str, np.ndarray] = {}  # per mode: the deciding design's scores without DP
    # ε = ∞ first: it is the positive control every DP row's power is read from (_set_power).
    order = sorted(config.privacy.epsilons, key=lambda e: -math.inf if math.isinf(e) else e)
    for mode in llm.modes:
        for index, epsilon in enumerate(order):
            seed = derived_seed(config.seed, 10, llm.modes.index(mode), index)
            label = f"{MODE_LABELS[mode]} {epsilon_label(epsilon)}"
            with progress.step(f"{label}: DP fine-tuning (epochs)", total=spec.epochs) as step:
                trained, model = finetune_target(
                    setup,
                    config,
                    spec,
                    mode=mode,
                    epsilon=epsilon,
                    seed=seed,
                    device=device,
                    on_epoch=lambda e, _: step.update(e),
                )
            epsilons = (
                {}
                if trained.epsilon_target is None or trained.noise_multiplier is None
                else epsilons_for_event(
                    DPSGDEvent(trained.noise_multiplier, trained.sample_rate, trained.steps),
                    config.privacy.delta,
                    config.privacy.accountant,
                )
            )
            claim = epsilons.get(config.privacy.accountant)
            with progress.step(f"{label}: canary audit"):
                scores: dict[str, np.ndarray] = setup.scores(model)
                score_files = [
                    save_canary_scores(
                        staging, f"{mode}_eps_{epsilon_tag(epsilon)}_{d}", scores[d], canaries[d].inserted
                    )
                    for d in llm.designs
                ]
                attacks = [
                    _canary_row(
                        f"canary_{d}_{mode}",
                        d,
                        mode,
                        scores[d],
                        canaries[d],
                        claim=claim,
                        config=config,
                        seed=seed,
                        unit=trained.privacy_unit,
                    )
                    for d in llm.designs
                ]
                one_run = None
                if claim is not None:  # the pre-declared test of this claim (audit/text/llm_one_run.py)
                    one_run = canary_claim_row(
                        scores[decider],
                        canaries[decider].inserted,
                        design=decider,
                        mode=mode,
                        unit=trained.privacy_unit or "record",
                        claim=claim,
                        delta=config.privacy.delta,
                        noise_multiplier=float(trained.noise_multiplier or 0.0),
                        sample_rate=trained.sample_rate,
                        steps=trained.steps,
                        confidence=config.attacks.confidence,
                    )
                    one_run_rows.append(one_run)
                else:
                    control_scores[mode] = scores[decider]
            synthetic: dict[str, Any] | None = None
            if llm.synthetic_samples:
                synthetic_started = (time.perf_counter(), time.process_time())
                with progress.step(f"{label}: synthetic text and auxiliary model"):
                    synthetic, extra, synthetic_scores = _synthetic_text_audit(
                        model,
                        setup,
                        pretrained_state,
                        vocab,
                        spec,
                        config,
                        mode,
                        claim,
                        trained.privacy_unit,
                        seed,
                        device,
                    )
                    attacks += extra
                    score_files += [
                        save_canary_scores(
                            staging,
                            f"{mode}_eps_{epsilon_tag(epsilon)}_{d}_synthetic",
                            synthetic_scores[d],
                            canaries[d].inserted,
                        )
                        for d in llm.designs
                    ]
                # its own cost, apart from the run's: what the synthetic-text audit adds to one target
                synthetic["seconds"] = time.perf_counter() - synthetic_started[0]
                synthetic["cpu_seconds"] = time.process_time() - synthetic_started[1]
            if claim is not None:
                for row in attacks:  # shown beside the deciding row, not tested (one test per claim)
                    row["decides"] = False
                    row["shown_because"] = SHOWN_BECAUSE
            trainable, total = trainable_share(model)
            test_loss = mean_token_loss(model, test_rows)
            targets.append(
                {
                    **target_record(
                        trained,
                        delta=config.privacy.delta,
                        epsilons=epsilons,
                        claim=claim,
                        test_accuracy=None,
                        attacks=attacks,
                        seed=seed,
                    ),
                    "whitebox_one_run": one_run,
                    "llm": {
                        "model": "GPT2LMHeadModel (transformers, built from a config, pretrained on the public "
                        "pool records here)",
                        "finetuning": mode,
                        "finetuning_words": MODE_WORDS[mode],
                        "trainable_parameters": trainable,
                        "parameters": total,
                        "test_loss": test_loss,
                        "test_perplexity": float(math.exp(test_loss)),
                        "synthetic_text": synthetic,
                        # the canary scores (member, score) of each row: recompute the bounds from them
                        "score_files": [str(path.relative_to(staging)) for path in score_files],
                    },
                }
            )
    _set_power(one_run_rows, control_scores, canaries[decider].inserted, config.attacks.confidence)
    child_ids = []
    for target in targets:  # MLflow: one child per (mode, ε)
        child = tracker.start_run(
            f"{config.name} {target['llm']['finetuning']} {epsilon_label(target['epsilon_target'] or math.inf)}",
            parent_id=parent_id,
        )
        child_ids.append(child)
        target["mlflow_run_id"] = child
        metrics = {k: v for k, v in target_metrics(target).items() if k != "test_accuracy"}
        metrics["test_perplexity"] = target["llm"]["test_perplexity"]
        tracker.log_params(
            child,
            {
                "finetuning": target["llm"]["finetuning"],
                "epsilon_target": target["epsilon_target"] or "inf",
                "noise_multiplier": target["noise_multiplier"],
                "steps": target["steps"],
            },
        )
        tracker.log_metrics(child, {k: v for k, v in metrics.items() if v is not None and math.isfinite(v)})
        for path in target["llm"]["score_files"]:
            tracker.log_artifact(child, staging / path)
        tracker.finish(child)
    unit = llm.privacy_unit
    notes = [f"{MODE_WORDS[m]}" for m in llm.modes] + [
        (
            f"each DP fine-tuning's accountant ε is tested by one pre-declared row from this one run, black-box: the "
            f"{decider} canaries' one-run row (Steinke et al.; f-DP test against the claim's DP-SGD curve); its power "
            "comes only from the positive control (the same canaries without DP), and where the control does not "
            "refute the claim at the family's level a passing row reads 'not refuted'; the other canary rows are shown"
        ),
        f"the DP targets' ε is {UNIT_WORDS[unit]}",
    ]
    return {
        "schema_version": SCHEMA_VERSION,
        "kind": "text",
        "config": config.to_plain(),
        "environment": describe_environment(str(device), config.seed),
        "data": {
            "description": corpus.description + "; public part: the pool records (pretraining)",
            "n_rows": len(corpus.candidates) + len(corpus.pool) + len(corpus.test),
            "n_train": int(private_copies.sum()),
            "n_persons": int(private_owners.max()) + 1,
            "privacy_unit": unit,
            "epsilon_unit": UNIT_WORDS[unit],
            "n_public": len(corpus.pool),
            "n_test": len(corpus.test),
            "n_candidates": len(corpus.candidates),
            "membership": "independent fair coin flip per canary (Bernoulli 1/2)",
            "canaries": {
                d: {
                    "m": c.m,
                    "inserted": int(c.inserted.sum()),
                    "repetitions": c.repetitions,
                    "secret_length": c.secret_length,
                }
                for d, c in canaries.items()
            },
            "vocab_size": vocab,
            "new_tokens": llm.new_tokens,
            "canary_loss": llm.canary_loss,
            "canary_score": "log-probability minus the pretrained model's"
            if llm.canary_score_reference
            else "log-probability",
        },
        "attacks_run": [f"canary_{d}_{m}" for m in llm.modes for d in llm.designs],
        "targets": targets,
        "synthetic": [],
        "text": {"seconds": time.perf_counter() - started, "cpu_seconds": time.process_time() - cpu_started},
        "notes": notes,
        "verdict": None,
        "mlflow": {
            "tracking_uri": redact(tracker.tracking_uri),
            "experiment_id": tracker.experiment_id,
            "parent_run_id": parent_id,
            "child_run_ids": child_ids,
            "resumed_from": [],
        }
        if tracker.enabled
        else None,
        "execution": {"executor": "local"},
    }


def _synthetic_text_audit(
    model,
    setup: LLMSetup,
    pretrained_state,
    vocab: int,
    spec: HFLMSpec,
    config: AuditConfig,
    mode: str,
    claim: float | None,
    unit: str | None,
    seed: int,
    device: torch.device,
) -> tuple[dict[str, Any], list[dict[str, Any]], dict[str, np.ndarray]]:
    """Mitchell & Andrew 2026's audit of synthetic text, simplified: sample text from the fine-tuned
    model, fine-tune the public pretrained model on it without DP (the auxiliary model: what anyone
    holding the synthetic text could train), and score the original canaries on the auxiliary model."""
    llm = llm_section(config)
    texts = sample_texts(
        model, llm.synthetic_samples, max_length=llm.max_length, temperature=llm.synthetic_temperature, seed=seed
    )
    auxiliary_spec = replace(spec, epochs=llm.synthetic_epochs)
    _, auxiliary = finetune(
        pretrained_state,
        vocab,
        texts,
        auxiliary_spec,
        mode="full",
        epsilon=math.inf,
        delta=config.privacy.delta,
        accountant=config.privacy.accountant,
        seed=seed + 1,
        device=device,
    )
    canaries = setup.canaries
    scores: dict[str, np.ndarray] = setup.scores(auxiliary)  # the same scoring rule as the target's
    rows = [
        _canary_row(
            f"canary_{d}_synthetic_{mode}",
            d,
            mode,
            scores[d],
            canaries[d],
            claim=claim,
            config=config,
            seed=seed,
            unit=unit,
        )
        for d in llm.designs
    ]
    for row in rows:
        row["threat_model"] = (
            "black-box on an auxiliary model fine-tuned on text sampled from the target "
            "(the synthetic-text release; Mitchell & Andrew 2026)"
        )
    return (
        {
            "samples": len(texts),
            "temperature": llm.synthetic_temperature,
            "auxiliary_epochs": llm.synthetic_epochs,
        },
        rows,
        scores,
    )
