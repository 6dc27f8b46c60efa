"""Membership-inference attacks, chosen by name. A new attack = one module + one entry here."""
from __future__ import annotations

from attacks.label_only import LabelOnlyAttack
from attacks.base import AttackContext, AttackOptions, MembershipAttack, QueryableModel, TargetTraining
from attacks.lira import LiraOfflineAttack, LiraOnlineAttack
from attacks.loss import LossAttack
from attacks.rmia import RmiaAttack
from attacks.shadow import ShadowAttack
from attacks.blind_baseline import BlindBaseline
from attacks.min_k import MinKAttack
from attacks.min_k_plus_plus import MinKPlusPlusAttack
from attacks.reference_ratio import ReferenceRatioAttack
from attacks.text_base import TextAttackContext, TextMembershipAttack
from attacks.text_loss import LanguageModelLossAttack
from attacks.zlib_ratio import ZlibRatioAttack

ATTACKS: dict[str, type] = {
    "loss": LossAttack,
    "shadow": ShadowAttack,
    "lira": LiraOnlineAttack,
    "lira_offline": LiraOfflineAttack,
    "rmia": RmiaAttack,
    "label_only": LabelOnlyAttack,
}

# Membership attacks on causal language models: (TokenStatistics, TextAttackContext) → scores.
TEXT_ATTACKS: dict[str, type] = {
    "lm_loss": LanguageModelLossAttack,
    "zlib_ratio": ZlibRatioAttack,
    "min_k": MinKAttack,
    "min_k_plus_plus": MinKPlusPlusAttack,
    "reference_ratio": ReferenceRatioAttack,
}


def get_text_attack(name: str) -> TextMembershipAttack:
    from audit.errors import AuditInputError

    if name not in TEXT_ATTACKS:
        raise AuditInputError("text.attacks", f"unknown text attack '{name}'; available: {', '.join(TEXT_ATTACKS)}")
    return TEXT_ATTACKS[name]()


def get_attack(name: str) -> MembershipAttack:
    from audit.errors import AuditInputError

    if name not in ATTACKS:
        raise AuditInputError("attacks.names", f"unknown attack '{name}'; available: {', '.join(sorted(ATTACKS))}")
    return ATTACKS[name]()


__all__ = ["ATTACKS", "TEXT_ATTACKS", "BlindBaseline", "TextAttackContext", "get_text_attack", "AttackContext", "AttackOptions", "MembershipAttack", "QueryableModel", "TargetTraining",
           "get_attack"]
