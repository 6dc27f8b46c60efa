"""Reading results.json dicts defensively, for every renderer (HTML, Markdown, JUnit)."""

from __future__ import annotations

from typing import Any, TypeGuard

from audit.machinery.leakage import finetuning_label, tpr_at  # noqa: F401  (re-exported: one reading of each)


def get(mapping: Any, *keys: str, default: Any = None) -> Any:
    """mapping[k1][k2]… or `default` where a key is missing or a level is not a dict."""
    for key in keys:
        if not isinstance(mapping, dict) or key not in mapping:
            return default
        mapping = mapping[key]
    return mapping


def is_number(value: Any) -> TypeGuard[int | float]:
    """A JSON number: int or float, not a bool (the guard lets a checker use it as one)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def attack_names(results: dict[str, Any]) -> list[str]:
    """Attacks in run order, including any that only appear inside a target."""
    names = [str(n) for n in results.get("attacks_run") or []]
    for target in results.get("targets") or []:
        for attack in target.get("attacks") or []:
            if attack.get("name") is not None and str(attack["name"]) not in names:
                names.append(str(attack["name"]))
    return names


def confidence(results: dict[str, Any]) -> float | None:
    for target in results.get("targets") or []:
        for attack in target.get("attacks") or []:
            if is_number(attack.get("confidence")):
                return attack["confidence"]
    value = get(results, "config", "attacks", "confidence")
    return value if is_number(value) else None


def subject_status(verdict: dict[str, Any], subject: str) -> str:
    """The one word for a subject (`targets[i]`, `synthetic[i]`) the verdict judged: refuted /
    untestable here / not refuted / held from its claims (the weaker wins), or, without a DP claim, its leakage
    statement ("no DP claim · LEAKS"); "—" when the verdict says nothing about it."""
    claims = [
        c
        for c in verdict.get("claims") or []
        if isinstance(c, dict) and c.get("subject") == subject and c.get("kind") != "policy rule"
    ]
    statuses = [c.get("status") for c in claims]
    for status in ("refuted", "untestable", "not_refuted", "held"):  # the weakest status speaks for the subject
        if status in statuses:
            return {"untestable": "untestable here", "not_refuted": "not refuted"}.get(status, status)
    for entry in verdict.get("leakage") or []:
        if isinstance(entry, dict) and entry.get("subject") == subject:
            return "no DP claim · " + ("LEAKS" if entry.get("status") == "leaks" else "no significant leakage found")
    return "—"
