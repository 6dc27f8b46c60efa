"""Membership-inference attacks, chosen by name. A new attack = one module + one entry here."""
from __future__ import annotations

from attacks.base import AttackContext, MembershipAttack, QueryableModel
from attacks.loss import LossAttack

ATTACKS: dict[str, type] = {
    "loss": LossAttack,
}


def get_attack(name: str) -> MembershipAttack:
    from audit.errors import AuditInputError

    if name not in ATTACKS:
        raise AuditInputError("attacks.names", f"unknown attack '{name}'; available: {', '.join(sorted(ATTACKS))}")
    return ATTACKS[name]()


__all__ = ["ATTACKS", "AttackContext", "MembershipAttack", "QueryableModel", "get_attack"]
