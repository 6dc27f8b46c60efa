"""What every membership-inference attack receives and returns.

An attack turns (target model, candidates) into one membership score per candidate, higher =
more likely a member. Everything an attack may use beyond the target's outputs (population data
for shadows/references, how the target was trained) is in `AttackContext`, so the threat model of
each attack is visible in what it reads.
"""

from __future__ import annotations

from collections.abc import Callable, MutableMapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

import numpy as np

if TYPE_CHECKING:  # types only: an attack's description is read without importing PyTorch
    import torch

    from attacks.registry import Knob
    from targets.training import TrainingSpec


class QueryableModel(Protocol):
    def logits(self, features: np.ndarray) -> np.ndarray: ...


class AttackOptions:
    """The attacks' knobs: one value per `Knob` the registered attacks declare (attacks/registry.py),
    each defaulting to its declaration; read as attributes (`options.rmia_a`). Immutable and hashable.
    Built from the config's `attacks:` section (validated there) by audit/machinery/attack_setup.py."""

    __slots__ = ("_values",)

    def __init__(self, **values: Any):
        from attacks.registry import all_knobs

        knobs = all_knobs()
        unknown = sorted(set(values) - {k.name for k in knobs})
        if unknown:
            raise TypeError(f"AttackOptions has no knob {unknown[0]!r} (no registered attack declares it)")
        object.__setattr__(self, "_values", {k.name: values.get(k.name, k.default) for k in knobs})

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        try:
            return self._values[name]
        except KeyError:
            raise AttributeError(f"AttackOptions has no knob {name!r}") from None

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("AttackOptions is immutable")

    def as_dict(self) -> dict[str, Any]:
        return dict(self._values)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, AttackOptions) and self._values == other._values

    def __hash__(self) -> int:
        return hash(tuple(sorted(self._values.items())))

    def __repr__(self) -> str:
        return "AttackOptions(" + ", ".join(f"{k}={v!r}" for k, v in self._values.items()) + ")"

    def __reduce__(self):  # to workers: the values as they are, whatever that process registered
        return (_options_from_values, (dict(self._values),))


def _options_from_values(values: dict[str, Any]) -> AttackOptions:
    options = object.__new__(AttackOptions)
    object.__setattr__(options, "_values", values)
    return options


class TaskRunner(Protocol):
    """Where model-training tasks run (an executor of the audit): results in task order."""

    def map(self, function, tasks, kwargs=None) -> list: ...


@dataclass(frozen=True)
class TargetTraining:
    """How the target was trained: reference and shadow models are trained exactly the same way."""

    spec: TrainingSpec
    noise_multiplier: float  # 0 for the non-private target
    max_grad_norm: float | None  # None for the non-private target
    sample_rate: float
    steps: int
    train_size: int  # rows in the target's training set


@dataclass(frozen=True)
class AttackContext:
    candidate_features: np.ndarray
    candidate_labels: np.ndarray
    n_classes: int
    # Population data the attacker may draw from (disjoint from candidates and the test set).
    pool_features: np.ndarray
    pool_labels: np.ndarray
    training: TargetTraining
    epsilon: float
    delta: float
    accountant: str
    seed: int
    device: torch.device
    options: AttackOptions = field(default_factory=AttackOptions)
    # What attacks train once per target (reference/shadow model outputs, as dicts of arrays),
    # shared between attacks and, in a `run`, checkpointed to disk for --resume.
    cache: MutableMapping[str, Any] = field(default_factory=dict, compare=False, repr=False)
    # How reference/shadow models are trained when the target is not the harness's own MLP:
    # `train_models(features, labels, in_masks (K, n) bool, queries: list of arrays, seed)` returns,
    # per query set, a (K, n_query, C) array of model k's logits. None = the vectorized DP-SGD
    # trainer with `training` (σ, q, T, C) on `training.spec`'s architecture.
    train_models: Callable[..., list[np.ndarray]] | None = field(default=None, compare=False, repr=False)
    # How reference/shadow models are trained: None = here, in this process. `task_device` is the
    # device string the tasks resolve (default: `device`); a Ray cluster's GPU nodes resolve "auto".
    executor: TaskRunner | None = field(default=None, compare=False, repr=False)
    task_device: str | None = None
    # Not part of the threat model: `report_progress(what, done, total)` tells the caller how far
    # long pieces (training K reference or shadow models) have got; None = nobody is listening.
    report_progress: Callable[[str, float, int | None], None] | None = field(default=None, compare=False, repr=False)


class MembershipAttack(Protocol):
    """What an attack class declares (attacks/registry.py reads it) and does."""

    name: str
    threat_model: str  # one sentence, copied into reports
    needs: ClassVar[frozenset[str]]  # words of attacks.registry.NEEDS
    knobs: ClassVar[tuple[Knob, ...]]  # its settings: config, AttackOptions, range table
    method_note: ClassVar[tuple[str, str]]  # (title, text) for report.html's method notes
    citation: ClassVar[str]  # the paper in a few words

    def scores(self, target: QueryableModel, context: AttackContext) -> np.ndarray: ...
