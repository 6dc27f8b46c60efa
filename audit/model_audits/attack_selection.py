"""Which attacks `audit-model` runs on a user's model (what each needs: population data, reference models,
only labels), the checks of the population file against them, and the DP-SGD parameters the reference
models are trained with.
"""

from __future__ import annotations

import math
from typing import Any

from attacks import AttackOptions, attacks_needing, get_attack, knobs_of
from attacks.registry import IN_OUT_REFERENCES, LABELS_ONLY, POPULATION, TRAINS_MODELS
from audit.errors import AuditInputError
from audit.machinery.config import AuditConfig
from audit.model_audits.data_files import _Table, _where

PLD_PRV_TOLERANCE = 0.05


def _claimed_epsilon(config: AuditConfig) -> float:
    epsilons = config.privacy.epsilons
    if len(epsilons) != 1:
        shown = ", ".join("inf" if math.isinf(e) else f"{e:g}" for e in epsilons)
        raise AuditInputError(
            "privacy.epsilons",
            f"must hold exactly one value, the model's claimed ε (inf = non-private), got [{shown}]",
        )
    return float(epsilons[0])


def _attack_names(
    config: AuditConfig,
    attack_names: list[str] | None,
    has_population: bool,
    label_only: bool,
    can_train_references: bool,
    why_not: str,
) -> tuple[list[str], list[str]]:
    """(attacks to run, notes). Score models: `loss` always, population attacks with a population file and a way
    to train reference models. Label-only models: the label-only attack only."""
    explicit = attack_names is not None
    # The `attacks:` section's class is built at import from the attack registry, so its fields are
    # not visible to the type checker.
    section: Any = config.attacks
    names: list[str] = list(dict.fromkeys(attack_names if attack_names is not None else section.names))
    for name in names:
        get_attack(name)  # unknown name → AuditInputError naming attacks.names
    notes: list[str] = []
    if label_only:  # what the attack classes declare: attacks/registry.py
        label_attacks = attacks_needing(LABELS_ONLY)
        chosen = [n for n in names if n in label_attacks]
        score_based = [n for n in names if n not in label_attacks]
        if explicit and score_based:
            raise AuditInputError(
                "--attacks",
                f"the model returns labels only: attack '{score_based[0]}' needs scores; "
                f"use {' or '.join(repr(n) for n in label_attacks)}",
            )
        if score_based:
            notes.append(
                f"the model returns labels only: score-based attacks ({', '.join(score_based)}) cannot run; "
                f"the label-only attack ran instead"
            )
        return chosen or label_attacks[:1], notes
    names = ["loss"] + [n for n in names if n != "loss"]
    needing = [n for n in names if n in population_attacks()]
    if needing and not has_population:
        if explicit:
            raise AuditInputError(
                "--population",
                f"attack '{needing[0]}' trains reference/shadow models on population data: give a population file",
            )
        notes.append(f"attacks {', '.join(needing)} skipped: they need population data (--population)")
        names = [n for n in names if n not in population_attacks()]
    needing = [n for n in names if n in population_attacks()]
    if needing and not can_train_references:
        if explicit:
            raise AuditInputError(
                "--trainer", f"attack '{needing[0]}' trains reference/shadow models like the target: {why_not}"
            )
        notes.append(f"attacks {', '.join(needing)} skipped: {why_not}")
        names = [n for n in names if n not in population_attacks()]
    return names, notes


def population_attacks() -> list[str]:
    """Attacks that draw population data or train shadow / reference models on it (their class says so)."""
    return sorted(set(attacks_needing(POPULATION)) | set(attacks_needing(TRAINS_MODELS)))


def _check_population(names: list[str], population: _Table, n_members: int, options: AttackOptions) -> None:
    where = _where("population file", population.path)
    n_pool = len(population.labels)
    if attacks_needing(IN_OUT_REFERENCES, names) and options.rmia_population > n_pool:
        raise AuditInputError(
            where,
            f"has {n_pool} rows but the reference-model attacks draw attacks.rmia_population = "
            f"{options.rmia_population} population samples from it: lower attacks.rmia_population or give more rows",
        )
    shadow_like = [n for n in names if any(k.name == "n_shadow_models" for k in knobs_of([n]))]  # their knobs say
    if shadow_like:
        needed = n_members + max(20, n_members // 10)
        if n_pool < needed:
            raise AuditInputError(
                where,
                f"has {n_pool} rows; each shadow model trains on as many rows as the target ({n_members} members) "
                f"and keeps some out, so the {shadow_like[0]} attack needs ≥ {needed}: give more rows or drop "
                f"'{shadow_like[0]}'",
            )


def _dpsgd_parameters(config: AuditConfig, n_members: int, claimed: float) -> tuple[float, float, int]:
    """(σ, q, T) as Opacus's make_private_with_epsilon would pick them for this training config."""
    n_batches = math.ceil(n_members / config.training.batch_size)
    sample_rate = 1.0 / n_batches
    steps = config.training.epochs * n_batches
    if math.isinf(claimed):
        return 0.0, sample_rate, steps
    import warnings

    from opacus.accountants.utils import get_noise_multiplier

    try:
        with warnings.catch_warnings():  # the accountants' warnings about their α grid / approximations
            warnings.simplefilter("ignore")
            sigma = get_noise_multiplier(
                target_epsilon=claimed,
                target_delta=config.privacy.delta,
                sample_rate=sample_rate,
                epochs=config.training.epochs,
                accountant=config.privacy.accountant,
            )
    except ValueError as exc:  # "The privacy budget is too low."
        raise AuditInputError("privacy.epsilons", f"no noise multiplier reaches ε = {claimed:g} ({exc})") from None
    return float(sigma), sample_rate, steps
