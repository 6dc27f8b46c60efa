"""The attacks' knobs, read from the config in one place for every job that runs attacks."""

from __future__ import annotations

from attacks import AttackOptions, all_knobs
from audit.machinery.config import AuditConfig

__all__ = ["attack_options"]


def attack_options(config: AuditConfig) -> AttackOptions:
    """Every registered attack's knobs (attacks/registry.py) as the config's `attacks:` section sets them."""
    a = config.attacks
    return AttackOptions(**{knob.name: getattr(a, knob.name) for knob in all_knobs() if hasattr(a, knob.name)})
