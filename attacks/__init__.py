"""Membership-inference attacks, chosen by name. A new attack = one module whose class describes itself
(needs, knobs, threat model, method note) + one `register_attack(TheClass)`: attacks/registry.py.

Each attack's module is imported when the attack (or a name below) is first used, not when `attacks`
is: a synthetic-data check that needs only `attacks.distance`, or a config check that needs only
the names, does not pay for PyTorch's model attacks, scikit-learn's shadow models and SciPy's
statistics (~1 s of CPU in a fresh process)."""

from __future__ import annotations

import importlib

from attacks.registry import (
    ATTACKS,
    NEEDS,
    TEXT_ATTACKS,
    Knob,
    all_knobs,
    attacks_needing,
    knobs_of,
    method_note,
    register_attack,
    unregister_attack,
)

# The names `from attacks import X` gives, and the module each comes from (imported on first use).
_EXPORTS = {
    "AttackContext": "attacks.base",
    "AttackOptions": "attacks.base",
    "MembershipAttack": "attacks.base",
    "QueryableModel": "attacks.base",
    "TargetTraining": "attacks.base",
    "BlindBaseline": "attacks.blind_baseline",
    "TextAttackContext": "attacks.text_base",
    "TextMembershipAttack": "attacks.text_base",
    "LabelOnlyAttack": "attacks.label_only",
    "LiraOfflineAttack": "attacks.lira",
    "LiraOnlineAttack": "attacks.lira",
    "LossAttack": "attacks.loss",
    "RmiaAttack": "attacks.rmia",
    "ShadowAttack": "attacks.shadow",
    "MinKAttack": "attacks.min_k",
    "MinKPlusPlusAttack": "attacks.min_k_plus_plus",
    "ReferenceRatioAttack": "attacks.reference_ratio",
    "LanguageModelLossAttack": "attacks.text_loss",
    "ZlibRatioAttack": "attacks.zlib_ratio",
}


def __getattr__(name: str):
    if name in _EXPORTS:
        value = getattr(importlib.import_module(_EXPORTS[name]), name)
        globals()[name] = value  # looked up once
        return value
    raise AttributeError(f"module 'attacks' has no attribute {name!r}")


def get_text_attack(name: str):
    """A fresh instance of the text attack `name` (a `TextMembershipAttack`)."""
    from audit.errors import AuditInputError

    if name not in TEXT_ATTACKS:
        raise AuditInputError("text.attacks", f"unknown text attack '{name}'; available: {', '.join(TEXT_ATTACKS)}")
    return TEXT_ATTACKS[name]()


def get_attack(name: str):
    """A fresh instance of the attack `name` (a `MembershipAttack`)."""
    from audit.errors import AuditInputError

    if name not in ATTACKS:
        raise AuditInputError("attacks.names", f"unknown attack '{name}'; available: {', '.join(sorted(ATTACKS))}")
    return ATTACKS[name]()


__all__ = [
    "ATTACKS",
    "TEXT_ATTACKS",
    "NEEDS",
    "Knob",
    "all_knobs",
    "attacks_needing",
    "knobs_of",
    "method_note",
    "register_attack",
    "unregister_attack",
    "BlindBaseline",
    "TextAttackContext",
    "get_text_attack",
    "AttackContext",
    "AttackOptions",
    "MembershipAttack",
    "QueryableModel",
    "TargetTraining",
    "get_attack",
]
