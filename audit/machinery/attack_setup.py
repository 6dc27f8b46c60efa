"""The attacks' knobs, read from the config in one place for every job that runs attacks."""
from __future__ import annotations

from attacks import AttackOptions
from audit.machinery.config import AuditConfig

__all__ = ["attack_options"]


def attack_options(config: AuditConfig) -> AttackOptions:
    a = config.attacks
    return AttackOptions(
        n_shadow_models=a.n_shadow_models, n_reference_models=a.n_reference_models,
        lira_global_variance=a.lira_global_variance, rmia_a=a.rmia_a, rmia_gamma=a.rmia_gamma,
        rmia_population=a.rmia_population, label_only_queries=a.label_only_queries,
        label_only_noise=a.label_only_noise, models_per_task=a.models_per_task,
    )
