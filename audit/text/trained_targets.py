"""The text job's targets as checkpoints: what lets `run --preset text` resume and train on an executor.

Each target ε has a folder `checkpoints/text_eps_<ε>/` in the run's staging folder:

* `trained.json` + `model.pt` (weights only, `torch.load(weights_only=True)`): the trained target,
  written as soon as it is trained (by this process, or by an executor task, which returns it);
* `record.json` + `scores.npz`: the target's finished audit (its results.json record and the
  attacks' scores), written last.

A resumed run reuses a finished record as is, audits a trained-but-unaudited model without
retraining it, and trains the rest. Every target seeds itself from (config seed, its index), so
`local`, `processes` and `ray` — and a resumed run — give the same numbers on the CPU.
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch

from audit.machinery.checkpoints import TargetCheckpoints
from targets.text_models import TextTrainingSpec, TrainedTextTarget, build_text_model, train_text_target


def target_checkpoints(staging: Path, epsilon: float) -> TargetCheckpoints:
    return TargetCheckpoints(staging / "checkpoints" / f"text_eps_{'inf' if math.isinf(epsilon) else f'{epsilon:g}'}")


def text_target_task(
    epsilon: float,
    seed: int,
    *,
    token_ids: np.ndarray,
    owners: np.ndarray | None,
    vocab_size: int,
    spec: TextTrainingSpec,
    delta: float,
    accountant: str,
    device: str,
) -> dict[str, Any]:
    """One executor task: train one text target and return it as plain data (weights on the CPU)."""
    trained = train_text_target(
        token_ids,
        vocab_size,
        spec,
        epsilon=epsilon,
        delta=delta,
        accountant=accountant,
        seed=seed,
        device=torch.device(device),
        owners=owners,
    )
    return as_plain(trained)


UNIT_WORDS = {
    "person": "ε per person (all of one person's documents, including repeated canaries)",
    "record": "ε per document (record level: a secret repeated k times is protected at about k·ε)",
}


def target_record(
    trained: TrainedTextTarget,
    *,
    delta: float,
    epsilons: dict[str, float],
    claim: float | None,
    test_accuracy: float | None,
    attacks: list[dict[str, Any]],
    seed: int,
) -> dict[str, Any]:
    """The results.json fields every language-model target shares (the text job's and the llm job's):
    its DP training, its claim, its attacks and their best sound bound; each job adds its own block."""
    from audit.statistics.attack_evaluation import best_sound_lower_bound

    best, best_method = best_sound_lower_bound(attacks)
    return {
        "kind": "text",
        "epsilon_target": trained.epsilon_target,
        "delta": delta,
        "noise_multiplier": trained.noise_multiplier,
        "sample_rate": trained.sample_rate,
        "steps": trained.steps,
        "max_grad_norm": trained.max_grad_norm,
        "poisson_sampling": trained.epsilon_target is not None,
        "privacy_unit": trained.privacy_unit,
        "epsilon_unit": UNIT_WORDS.get(trained.privacy_unit or ""),
        "n_privacy_units": trained.n_units,
        "accountant": trained.accountant,
        "epsilon": epsilons,
        "epsilon_accountant": claim,
        "epsilon_engine": trained.accountant_epsilon,
        "test_accuracy": test_accuracy,
        "train_seconds": trained.train_seconds,
        "attacks": attacks,
        "epsilon_lb_best": best,
        "epsilon_lb_best_method": best_method,
        "epsilon_lb_ratio": best / claim if claim and best is not None else None,
        "violation": False,  # set by the verdict
        "seed": seed,
    }


def as_plain(trained: TrainedTextTarget) -> dict[str, Any]:
    meta = {f.name: getattr(trained, f.name) for f in dataclasses.fields(trained) if f.name != "model"}
    return {"meta": meta, "state": {k: v.detach().cpu() for k, v in trained.model.state_dict().items()}}


def save_trained(ckpt: TargetCheckpoints, plain: dict[str, Any]) -> None:
    ckpt.save_state_dict("model", plain["state"])
    ckpt.save_json("trained", plain["meta"])  # last: its presence says the weights are complete


def load_trained(ckpt: TargetCheckpoints, vocab_size: int, spec: TextTrainingSpec) -> TrainedTextTarget | None:
    meta = ckpt.load_json("trained")
    state = ckpt.load_state_dict("model") if meta is not None else None
    if meta is None or state is None:
        return None
    model = build_text_model(vocab_size, spec, seed=0)
    model.load_state_dict(state)
    return TrainedTextTarget(model=model.eval(), **meta)


def save_canary_scores(staging: Path, tag: str, scores: np.ndarray, inserted: np.ndarray) -> Path:
    """The llm job's scores of one canary design on one target, `scores/scores_<mode>_eps_<ε>_<design>.csv`:
    `member` (the canary's coin) and `score` (higher = inserted), the columns `privacy-audit audit-scores
    --membership-randomized` reads, so anyone can recompute the bounds (docs/language-models.md)."""
    path = staging / "scores" / f"scores_{tag}.csv"
    path.parent.mkdir(exist_ok=True)
    frame = {"canary_index": np.arange(len(scores)), "member": np.asarray(inserted).astype(int), "score": scores}
    pd.DataFrame(frame).to_csv(path, index=False)
    return path
