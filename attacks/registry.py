"""The attack registry: each attack class describes itself, every consumer reads the description here.

An attack class declares, as class attributes (see `attacks.loss.LossAttack` for the smallest one):

- `name`, `threat_model` — the registry name and one sentence copied into reports;
- `needs` — what the attacker needs beyond black-box queries and the candidates (the `NEEDS` words);
- `knobs` — its settings (`Knob`: type, default, range and why); the config's `attacks:` section,
  `AttackOptions`, the range table of docs/errors.md and the memory estimate are built from them;
- `method_note` — (title, text) shown under "Method notes" in report.html, `citation` — the paper in
  a few words ("Yeom et al. 2018").

Built-in attacks are listed below as "module:Class" and imported on first use (a config check or
`--help` that needs only the names does not pay for PyTorch, scikit-learn or SciPy). A new attack
is one file and one call, `register_attack(TheClass)`. Nothing here imports the audit machinery.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

# What an attack may need, in words the model audits check against their inputs.
POPULATION = "population"  # rows from the candidates' distribution (the pool / --population file)
TRAINS_MODELS = "trains_models"  # trains shadow or reference models exactly like the target (a trainer)
IN_OUT_REFERENCES = "in_out_references"  # reference models each trained on half of the candidates
LABELS_ONLY = "labels_only"  # works from predicted labels alone (runs on label-only models)
TEXT = "text"  # a language-model attack: (TokenStatistics, TextAttackContext) → scores
NEEDS = (POPULATION, TRAINS_MODELS, IN_OUT_REFERENCES, LABELS_ONLY, TEXT)


@dataclass(frozen=True)
class Knob:
    """One attack setting: a field of the config's `attacks:` section and of `AttackOptions`.

    `low`/`high` bound it (`low_open`: strictly above `low`; `high=None`: no upper bound); `choices`
    makes it one of a few words; `optional`: None is allowed (and means the default behaviour).
    `counts_models`: its value is a number of models trained per target (the memory estimate)."""

    name: str
    kind: type
    default: Any
    why: str
    low: float | None = None
    high: float | None = None
    low_open: bool = False
    choices: tuple[str, ...] | None = None
    optional: bool = False
    counts_models: bool = False

    def range_text(self) -> str:
        """The range as the table in docs/errors.md writes it."""
        if self.choices:
            return " | ".join(self.choices)
        if self.low is None:
            return "any"
        if self.kind is int and self.high is not None:
            return f"[{int(self.low):,}, {int(self.high):,}]"
        high = "∞)" if self.high is None else f"{self.high:g}]"
        return f"{'(' if self.low_open else '['}{self.low:g}, {high}"


# Knobs of how shadow/reference models are trained, shared by every attack that trains models;
# always present (after the attacks' own knobs) so configs stay valid whatever attacks are chosen.
SHARED_KNOBS = (
    Knob("models_per_task", int, None, "reference models trained by one task", low=1, high=100_000, optional=True),
)


class _Registry(Mapping):
    """name → attack class; built-ins imported from "module:Class" on first lookup, plug-ins held."""

    def __init__(self, entries: dict[str, str]):
        self._entries: dict[str, str | type] = dict(entries)

    def __getitem__(self, name: str) -> type:
        entry = self._entries[name]
        if isinstance(entry, type):
            return entry
        module, _, cls = entry.partition(":")
        return getattr(importlib.import_module(module), cls)

    def __contains__(self, name: object) -> bool:  # Mapping's default would import the class
        return name in self._entries

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)


ATTACKS: Mapping[str, type] = _Registry(
    {
        "loss": "attacks.loss:LossAttack",
        "shadow": "attacks.shadow:ShadowAttack",
        "lira": "attacks.lira:LiraOnlineAttack",
        "lira_offline": "attacks.lira:LiraOfflineAttack",
        "rmia": "attacks.rmia:RmiaAttack",
        "label_only": "attacks.label_only:LabelOnlyAttack",
    }
)

# Membership attacks on causal language models: (TokenStatistics, TextAttackContext) → scores.
TEXT_ATTACKS: Mapping[str, type] = _Registry(
    {
        "lm_loss": "attacks.text_loss:LanguageModelLossAttack",
        "zlib_ratio": "attacks.zlib_ratio:ZlibRatioAttack",
        "min_k": "attacks.min_k:MinKAttack",
        "min_k_plus_plus": "attacks.min_k_plus_plus:MinKPlusPlusAttack",
        "reference_ratio": "attacks.reference_ratio:ReferenceRatioAttack",
    }
)

# Attacks that score records against a released table rather than a model (synth-check): described
# here so reports read their method notes from the same place.
RELEASE_ATTACKS: Mapping[str, type] = _Registry(
    {
        "distance": "attacks.distance_attack:DistanceAttack",
    }
)

_version = 0  # bumped by every (un)registration: the config rebuilds its `attacks:` section from it


def registry_version() -> int:
    """A number that changes whenever an attack is registered or removed."""
    return _version


def _registry_for(cls: type) -> _Registry:
    return TEXT_ATTACKS if TEXT in getattr(cls, "needs", ()) else ATTACKS  # type: ignore[return-value]


def register_attack(cls: type) -> type:
    """Add the attack class `cls` under `cls.name` (usable as a decorator). The class describes itself
    (module docstring of this file); a text attack (`TEXT in cls.needs`) joins `TEXT_ATTACKS`."""
    global _version
    name = getattr(cls, "name", None)
    if not isinstance(name, str) or not name.isidentifier():
        raise ValueError(f"an attack needs a `name` that is an identifier, got {name!r}")
    if name in ATTACKS or name in TEXT_ATTACKS:
        raise ValueError(f"attack '{name}' is already registered")
    unknown = sorted(set(getattr(cls, "needs", ())) - set(NEEDS))
    if unknown:
        raise ValueError(f"attack '{name}' needs {unknown[0]!r}: not one of {', '.join(NEEDS)}")
    taken = {k.name: k for k in all_knobs()}
    for knob in getattr(cls, "knobs", ()):
        if knob.name in taken and taken[knob.name] != knob:
            raise ValueError(f"attack '{name}' redeclares knob '{knob.name}' differently from another attack")
    _registry_for(cls)._entries[name] = cls
    _version += 1
    return cls


def unregister_attack(name: str) -> None:
    """Remove a registered attack (a plug-in's teardown; tests)."""
    global _version
    for registry in (ATTACKS, TEXT_ATTACKS):
        if name in registry:
            del registry._entries[name]  # type: ignore[attr-defined]
            _version += 1
            return
    raise KeyError(name)


def all_knobs() -> tuple[Knob, ...]:
    """Every model attack's knobs, each once, in registry order, then the shared training knobs."""
    seen: dict[str, Knob] = {}
    for name in ATTACKS:
        for knob in getattr(ATTACKS[name], "knobs", ()):
            seen.setdefault(knob.name, knob)
    for knob in SHARED_KNOBS:
        seen.setdefault(knob.name, knob)
    return tuple(seen.values())


def attacks_needing(need: str, names: list[str] | tuple[str, ...] | None = None) -> list[str]:
    """The attacks (of `names`, default all model attacks) whose class declares `need`."""
    if need not in NEEDS:
        raise ValueError(f"unknown need {need!r}; one of {', '.join(NEEDS)}")
    pool = list(ATTACKS) if names is None else list(names)
    return [n for n in pool if n in ATTACKS and need in getattr(ATTACKS[n], "needs", ())]


def knobs_of(names: list[str] | tuple[str, ...]) -> tuple[Knob, ...]:
    """The knobs the attacks `names` read (each once)."""
    seen: dict[str, Knob] = {}
    for name in names:
        if name in ATTACKS:
            for knob in getattr(ATTACKS[name], "knobs", ()):
                seen.setdefault(knob.name, knob)
    return tuple(seen.values())


def describe(name: str) -> type | None:
    """The class of attack `name` in any registry (model, text, release), None when unknown."""
    for registry in (ATTACKS, TEXT_ATTACKS, RELEASE_ATTACKS):
        if name in registry:
            return registry[name]
    return None


def method_note(name: str) -> tuple[str, str]:
    """(title, text) of attack `name` for report.html: its `method_note`, else its threat model."""
    cls = describe(name)
    if cls is None:
        return name, "No method note is recorded for this attack name."
    note = getattr(cls, "method_note", None)
    if note:
        return note
    return name, str(getattr(cls, "threat_model", "No method note is recorded for this attack name."))


def citation(name: str) -> str:
    """The paper of attack `name` in a few words ("Yeom et al. 2018"), empty when it names none."""
    cls = describe(name)
    return str(getattr(cls, "citation", "")) if cls is not None else ""
