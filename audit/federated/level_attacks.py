"""Membership inference per level on a federation: record level on the final global model (loss,
LiRA offline with reference federations), the honest-but-curious server on one client's update,
and client level across coin-flip federations. Each row carries the claim it tests."""

from __future__ import annotations

from typing import Any

import numpy as np

from attacks.lira import lira_offline_scores
from attacks.model_outputs import logit_scaled_confidence
from audit.errors import AuditInputError
from audit.federated.setup import FederationInputs, federated_section, federation_seed
from audit.federated.tasks import FederationSettings, client_mia_run_task, reference_confidences_task
from audit.machinery.checkpoints import TargetCheckpoints
from reports.figures import epsilon_label
from targets.federated import FederatedTarget
from targets.models import build_mlp
from targets.training import predict_logits


def confidence_scores(model_or_target, features: np.ndarray, labels: np.ndarray) -> np.ndarray:
    logits = (
        model_or_target.logits(features)
        if hasattr(model_or_target, "logits")
        else predict_logits(model_or_target, features)
    )
    return logit_scaled_confidence(logits, labels)


def _map(inputs: FederationInputs, function, tasks: list[tuple], kwargs: dict, progress, what: str) -> list:
    """Tasks on the run's executor (local: here, one after another), a note as each finishes."""
    from audit.machinery.executors import LocalExecutor

    executor = inputs.executor or LocalExecutor()
    done = []

    def note(index: int, _result) -> None:
        done.append(index)
        progress.note(f"{what} {len(done)}/{len(tasks)}")

    return executor.map(function, tasks, kwargs, on_result=note)


def _federation_settings(inputs: FederationInputs, client_data, epsilon: float) -> FederationSettings:
    """The settings every federation a task trains for this target shares (`audit.federated.tasks`)."""
    privacy = inputs.config.privacy
    return FederationSettings(
        client_data, inputs.data.n_classes, inputs.spec, epsilon, privacy.delta, privacy.accountant, inputs.task_device
    )


def reference_confidences(
    inputs: FederationInputs, epsilon: float, index: int, target: FederatedTarget, ckpt: TargetCheckpoints, progress
) -> np.ndarray | None:
    """LiRA offline references: federations trained like the target (same σ per client, same rounds)
    on the pool split the same way; one executor task each, seeded from (seed, target, 1, j)."""
    n_refs = federated_section(inputs.config).n_reference_federations
    if n_refs == 0:
        return None
    stored = ckpt.load_arrays("reference_phis")
    if stored is not None:
        return stored["phi"]
    cand = inputs.splits.candidate_idx
    pool_clients = inputs.client_data(inputs.splits.pool_idx)
    if any(len(y) == 0 for _, y in pool_clients):
        raise AuditInputError(
            "federated.n_reference_federations",
            "a client holds no pool rows to train reference federations on; set it to 0 or use more data",
        )
    kwargs = dict(
        settings=_federation_settings(inputs, pool_clients, epsilon),
        noise_multipliers=[c.noise_multiplier for c in target.clients],
        client_noise_multiplier=target.client_noise_multiplier,
        features=inputs.data.features[cand],
        labels=inputs.data.labels[cand],
    )
    tasks = [(federation_seed(inputs.config.seed, index, 1, j),) for j in range(n_refs)]
    phis = _map(
        inputs,
        reference_confidences_task,
        tasks,
        kwargs,
        progress,
        f"reference federations for {epsilon_label(epsilon)}:",
    )
    phi = np.stack(phis)
    ckpt.save_arrays("reference_phis", {"phi": phi})
    return phi


def client_mia_scores(
    inputs: FederationInputs, epsilon: float, index: int, ckpt: TargetCheckpoints, progress
) -> tuple[np.ndarray, np.ndarray] | None:
    """Runs × clients candidates: coin-flip participation, score = mean confidence on the client's rows;
    one executor task per run, its coins from (seed, target, 2, j) and its training from (seed, target, 3, j)."""
    runs = federated_section(inputs.config).client_mia_runs
    if runs == 0:
        return None
    stored = ckpt.load_arrays("client_mia")
    if stored is not None:
        return stored["scores"], stored["members"].astype(bool)
    kwargs = dict(settings=_federation_settings(inputs, inputs.client_data(inputs.splits.train_idx), epsilon))
    tasks = [
        (federation_seed(inputs.config.seed, index, 2, j), federation_seed(inputs.config.seed, index, 3, j))
        for j in range(runs)
    ]
    outcomes = _map(
        inputs,
        client_mia_run_task,
        tasks,
        kwargs,
        progress,
        f"client-level MIA federations for {epsilon_label(epsilon)}:",
    )
    result = (
        np.asarray([s for scores, _ in outcomes for s in scores]),
        np.asarray([m for _, members in outcomes for m in members], dtype=bool),
    )
    ckpt.save_arrays("client_mia", {"scores": result[0], "members": result[1]})
    return result


def server_update_scores(target: FederatedTarget, inputs: FederationInputs) -> tuple[np.ndarray, np.ndarray] | None:
    """Update-level MIA of the honest-but-curious server on the watched client's candidates."""
    before, after = target.watched_before, target.watched_after  # both set, or neither
    if before is None or after is None:
        return None
    k = target.watched_client
    cand = inputs.splits.candidate_idx
    own = inputs.client_of_row[cand] == k
    x, y = inputs.data.features[cand[own]], inputs.data.labels[cand[own]]
    models = []
    for state in (before, after):
        model = build_mlp(x.shape[1], inputs.spec.hidden_sizes, inputs.data.n_classes, seed=0)
        model.load_state_dict(state)
        models.append(model)
    return confidence_scores(models[1], x, y) - confidence_scores(models[0], x, y), inputs.splits.candidate_member[own]


# ------------------------------------------------------------------------------------------------
# One target
# ------------------------------------------------------------------------------------------------


def attack_rows(
    inputs: FederationInputs,
    epsilon: float,
    index: int,
    target: FederatedTarget,
    levels: dict[str, Any],
    ckpt: TargetCheckpoints,
    progress,
) -> tuple[list[tuple[str, np.ndarray, np.ndarray, np.ndarray, dict]], dict]:
    """Every (name, scores, members, labels, claim) the target is attacked with, plus score columns."""
    config, data, splits = inputs.config, inputs.data, inputs.splits
    cand = splits.candidate_idx
    cand_y, members = data.labels[cand], splits.candidate_member
    site = inputs.client_of_row[cand]
    acc = config.privacy.accountant
    level = levels["level"]

    def record_claim(k: int | None) -> dict:
        if level == "record" and k is not None:
            eps = levels["clients"][k]["epsilon"].get(acc)
            return {"level": "record", "client": k, "epsilon": eps}
        return {"level": "record", "client": k, "epsilon": levels["record"]["epsilon"].get(acc)}

    rows = []
    columns = {"client": site}
    score_sets = {"loss": confidence_scores(target, data.features[cand], cand_y)}
    ref_phi = reference_confidences(inputs, epsilon, index, target, ckpt, progress)
    if ref_phi is not None:
        # Offline LiRA: no reference saw any candidate (the pool is disjoint), so every mask is OUT.
        score_sets["lira_offline"] = lira_offline_scores(
            score_sets["loss"], ref_phi, np.zeros(ref_phi.shape, dtype=bool), ref_phi.shape[0] < 64
        )
    for name, scores in score_sets.items():
        columns[name] = scores
        rows.append((f"{name}/all", scores, members, cand_y, record_claim(None)))
        for k in range(inputs.n_clients):
            own = site == k
            if own.sum() >= 4 and 0 < members[own].sum() < own.sum():
                rows.append((f"{name}/client_{k}", scores[own], members[own], cand_y[own], record_claim(k)))
    server = server_update_scores(target, inputs)
    if server is not None:
        watched = target.watched_client
        own = site == watched
        claim = (
            record_claim(watched)
            if level == "record"
            else {
                "level": "record",
                "client": watched,
                "epsilon": None,
                "note": "none: under client-level DP the server sees clipped updates before the noise"
                if level == "client"
                else "non-private",
            }
        )
        rows.append((f"server_update/client_{watched}", server[0], server[1], cand_y[own], claim))
    client_mia = client_mia_scores(inputs, epsilon, index, ckpt, progress)
    if client_mia is not None:
        claim = {
            "level": "client",
            "client": None,
            "epsilon": (levels["client"] or {}).get("epsilon", {}).get(acc) if level == "client" else None,
        }
        rows.append(("client_mia", client_mia[0], client_mia[1], np.zeros(client_mia[0].size, dtype=np.int64), claim))
    return rows, columns
