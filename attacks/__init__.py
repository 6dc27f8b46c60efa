"""Membership-inference attacks, chosen by name. A new attack = one module + one entry here."""
from __future__ import annotations

from attacks.label_only import LabelOnlyAttack
from attacks.base import AttackContext, AttackOptions, MembershipAttack, QueryableModel, TargetTraining
from attacks.lira import LiraOfflineAttack, LiraOnlineAttack
from attacks.loss import LossAttack
from attacks.rmia import RmiaAttack
from attacks.shadow import ShadowAttack

ATTACKS: dict[str, type] = {
    "loss": LossAttack,
    "shadow": ShadowAttack,
    "lira": LiraOnlineAttack,
    "lira_offline": LiraOfflineAttack,
    "rmia": RmiaAttack,
    "label_only": LabelOnlyAttack,
}


def get_attack(name: str) -> MembershipAttack:
    from audit.errors import AuditInputError

    if name not in ATTACKS:
        raise AuditInputError("attacks.names", f"unknown attack '{name}'; available: {', '.join(sorted(ATTACKS))}")
    return ATTACKS[name]()


__all__ = ["ATTACKS", "AttackContext", "AttackOptions", "MembershipAttack", "QueryableModel", "TargetTraining",
           "get_attack"]
