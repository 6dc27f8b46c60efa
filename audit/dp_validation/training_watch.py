"""What a DP-SGD training run did besides its noisy steps: every parameter accounted for, the noisy
steps counted, the real rows each noise privatised.

`TrainingWatch` hooks a live Opacus DPOptimizer (no change to the user's loop) and is shared by the
in-script API (`in_script.OpacusAudit`, which adds its canaries through `before_pre_step`), the
factory one-run audit (`whitebox-audit --mode one-run --factory`, the same API in the tool's loop)
and the training probe of `conformance --factory`:

* `ParameterLedger`: every parameter of the released model, of `extra_parameters` and of whatever
  else the setup holds (`released_parameters`: modules, tensors and optimizers found in a
  factory's dict, undeclared) is either privatised by the DP optimizer or must not change. A PyTorch
  optimizer-step post-hook (`torch.optim.optimizer.register_optimizer_step_post_hook`) sees every
  optimizer's step: the DP optimizer's inner optimizer stepping without a noisy step (a
  "non-private epoch" through the original optimizer, a pre_step that skipped the noise), or any
  other optimizer stepping a parameter with a gradient (a second, plain optimizer) is a non-private
  update, named; the DP parameters are compared with their value after the last noisy step at every
  step (an in-place edit between steps shows), the others with their value at entry on exit.
  Frozen parameters that stay unchanged are fine and listed.
* the noisy steps (Opacus calls its `step_hook` only on a step that added noise), the physical
  steps (`pre_step` calls, BatchMemoryManager's skipped ones included) and the real per-sample
  rows each noisy step privatised (`rows_check`: several Poisson micro-batches accumulated into
  one noise multiply the true sampling rate).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from audit.machinery.verdict import Check

__all__ = [
    "ROWS_Z",
    "ParameterLedger",
    "TrainingWatch",
    "dataset_size",
    "parameter_checks",
    "released_parameters",
    "rows_check",
]

# The factory protocol's own keys: what the tool trains with, not released tensors.
_SETUP_KEYS = frozenset({"model", "optimizer", "data_loader", "privacy_engine", "epochs", "steps", "test_loader"})
_WALK_DEPTH = 4


def _shape(p) -> str:
    return "×".join(str(s) for s in p.shape) or "scalar"


def _clean(name: str) -> str:
    return name.replace("_module.", "")  # Opacus's GradSampleModule wraps the user's module as `_module`


def released_parameters(made: Any, model: Any = None, optimizer: Any = None) -> dict[str, Any]:
    """Every parameter tensor a factory's setup holds outside `model`, named where it was found:
    `extra_parameters` (declared, names as given), then any other value of the returned dict (its
    `loss` too) that is a module, a tensor that requires a gradient, an optimizer (its parameter
    groups: a second optimizer trains them), or a dict / list / tuple of those. The DP optimizer and
    its inner optimizer are skipped (their parameters are the privatised ones)."""
    import torch

    found: dict[str, Any] = {}
    seen: set[int] = set()
    skip = {id(optimizer), id(getattr(optimizer, "original_optimizer", None))} if optimizer is not None else set()
    if model is not None and hasattr(model, "parameters"):
        seen |= {id(p) for p in model.parameters()}

    def add(name: str, p) -> None:
        if id(p) not in seen:
            seen.add(id(p))
            found[name] = p

    def walk(name: str, value: Any, depth: int) -> None:
        if depth > _WALK_DEPTH or id(value) in skip:
            return
        if isinstance(value, torch.nn.Module):
            for sub, p in value.named_parameters():
                add(_clean(f"{name}.{sub}"), p)
        elif isinstance(value, torch.Tensor):
            if value.requires_grad:
                add(name, value)
        elif isinstance(value, torch.optim.Optimizer):
            for g, group in enumerate(value.param_groups):
                for i, p in enumerate(group["params"]):
                    add(f"{name} ({type(value).__name__}) group {g} parameter {i} ({_shape(p)})", p)
        elif isinstance(value, dict):
            for key, item in value.items():
                walk(f"{name}.{key}" if name else str(key), item, depth + 1)
        elif isinstance(value, (list, tuple)):
            for i, item in enumerate(value):
                walk(f"{name}[{i}]", item, depth + 1)

    if isinstance(made, dict):
        declared = made.get("extra_parameters")
        if isinstance(declared, dict):
            for key, p in declared.items():
                if isinstance(p, torch.Tensor):
                    add(str(key), p)
        for key, value in made.items():
            if key not in _SETUP_KEYS and key != "extra_parameters":
                walk(str(key), value, 1)
    return found


class ParameterLedger:
    """Which parameters the DP optimizer privatises, which the release holds, and every update that
    was not the DP optimizer's noisy step (module docstring)."""

    def __init__(self, optimizer, model=None, extra_parameters: dict[str, Any] | None = None):
        self.optimizer = optimizer
        self.inner = optimizer.original_optimizer
        self.dp = [p for p in optimizer.params if p.requires_grad]
        dp_ids = {id(p) for p in self.dp}
        named: list[tuple[str, Any]] = []
        if model is not None:
            named += [(_clean(name), p) for name, p in model.named_parameters()]
        named += list((extra_parameters or {}).items())
        self.names = {id(p): name for name, p in reversed(named)}  # the first name found wins
        for i, p in enumerate(self.dp):
            self.names.setdefault(id(p), f"DP optimizer parameter #{i} ({_shape(p)}, not in the model given)")
        self.privatised = [self.names[id(p)] for p in self.dp]
        outside, listed = [], set()
        for _, p in named:
            if id(p) not in dp_ids and id(p) not in listed:
                listed.add(id(p))
                outside.append((self.names[id(p)], p))
        self.outside = outside
        self.frozen = [name for name, p in outside if not p.requires_grad]
        self.violations: dict[str, str] = {}
        self._start = [p.detach().clone() for _, p in self.outside]
        self._last = [p.detach().clone() for p in self.dp]
        self.in_noisy_step = False
        self._handle: Any = None

    def _name(self, p) -> str:
        return self.names.get(id(p), f"a parameter of shape {_shape(p)} outside the released model")

    def note(self, p, why: str) -> None:
        self.violations.setdefault(self._name(p), why)

    def start(self) -> None:
        from torch.optim.optimizer import register_optimizer_step_post_hook

        self._handle = register_optimizer_step_post_hook(self._after_any_step)

    def stop(self) -> None:
        if self._handle is not None:
            self._handle.remove()
            self._handle = None

    def _after_any_step(self, opt, args, kwargs) -> None:
        if opt is self.optimizer:
            return  # the DPOptimizer's own step: its inner optimizer's step follows
        if opt is self.inner:
            if self.in_noisy_step:
                self.in_noisy_step = False
                for last, p in zip(self._last, self.dp):
                    last.copy_(p.detach())
                return
            why = (
                "stepped by the DP optimizer's inner (original) optimizer without a noisy step: a non-private "
                f"update ({type(opt).__name__}.step() called directly, or a pre_step that skipped the noise)"
            )
        else:
            why = (
                f"updated by a second optimizer ({type(opt).__name__}) outside the DP optimizer: no clipping, no noise"
            )
        for group in opt.param_groups:
            for p in group["params"]:
                if p.grad is not None:
                    self.note(p, why)

    def check_untouched(self) -> None:
        """Before a DP step: the DP parameters still hold what the last noisy step left."""
        for last, p in zip(self._last, self.dp):
            if not self.in_noisy_step and not _equal(last, p):
                self.note(
                    p,
                    "changed between two noisy steps by something other than the DP optimizer "
                    "(an in-place edit, a load_state_dict, another update rule)",
                )
                last.copy_(p.detach())

    def finish(self) -> None:
        self.check_untouched()
        for (name, p), start in zip(self.outside, self._start):
            if not _equal(start, p):
                self.violations.setdefault(
                    name,
                    "changed during training but not privatised by the DP optimizer "
                    "(frozen, in no optimizer, or outside the module given to make_private)",
                )

    def checks(self, subject: str) -> list[Check]:
        return parameter_checks(self.summary(), subject)

    def summary(self) -> dict[str, Any]:
        return {
            "privatised": self.privatised,
            "frozen": [n for n in self.frozen if n not in self.violations],
            "not_privatised_unchanged": [
                n for n, _ in self.outside if n not in self.violations and n not in self.frozen
            ],
            "non_private_updates": [{"parameter": k, "why": v} for k, v in sorted(self.violations.items())],
        }


def _equal(a, b) -> bool:
    import torch

    return bool(torch.equal(a, b.detach()))


def parameter_checks(summary: dict[str, Any], subject: str) -> list[Check]:
    """The check `ParameterLedger.summary()` decides: failed when any parameter was updated by
    something other than the DP optimizer's noisy step, naming each."""
    frozen, updates = summary["frozen"], summary["non_private_updates"]
    unchanged = summary.get("not_privatised_unchanged") or []
    listed = (
        f"{len(summary['privatised'])} parameter tensor(s) privatised by the DP optimizer"
        + (f"; frozen, unchanged: {', '.join(frozen)}" if frozen else "; none frozen")
        + (f"; trainable but in no optimizer, unchanged: {', '.join(unchanged)}" if unchanged else "")
    )
    assumption = "the accountant's ε covers only updates made by the DP optimizer's noisy step"
    if updates:
        named = "; ".join(f"{u['parameter']}: {u['why']}" for u in updates)
        return [
            Check(
                subject,
                "every trainable parameter privatised",
                f"{len(updates)} parameter(s) updated by something other than the DP optimizer's noisy step — "
                f"{named} ({listed})",
                failed=True,
                assumption=assumption,
            )
        ]
    return [
        Check(
            subject,
            "every trainable parameter privatised",
            f"every parameter that changed was updated only by the DP optimizer's noisy steps ({listed})",
            assumption=assumption,
        )
    ]


# One-sided level of the rows check: far below the claim tests' α/2, so the verdict's family-wise
# error stays α (+ 1e-6); a batch twice the claimed size gives z in the tens at any useful T.
ROWS_Z = 4.753  # Φ⁻¹(1 − 1e-6)


def rows_check(settings: dict[str, Any], n_records: int | None, subject: str) -> list[Check]:
    """Real rows per noisy step vs the accountant's q·n: each noisy step must privatise ONE Poisson
    batch. Accumulating several Poisson micro-batches into one noise (`signal_skip_step` on separate
    draws) multiplies the rows, and the true rate, by their number. Σ rows over T steps is
    Binomial(T·n, q) under the claim: a one-sided z-test at ROWS_Z."""
    mean, q, steps = settings.get("rows_per_noisy_step"), settings.get("sample_rate"), settings.get("steps")
    if mean is None or not q or not steps or not n_records:
        return []
    expected, sd = n_records * q, math.sqrt(n_records * q * (1 - q) / steps) if q < 1 else 0.0
    z = (mean - expected) / sd if sd > 0 else (0.0 if mean <= expected else math.inf)
    bad = z > ROWS_Z
    return [
        Check(
            subject,
            "one Poisson batch per noisy step",
            (
                f"{mean:.1f} real rows per noisy step on average vs q·n = {expected:.1f} (z = {z:.1f}): each noise "
                f"privatised about {mean / expected:.1f} batches — several Poisson micro-batches accumulated into "
                "one noisy step, a true sampling rate above the q the accountant was told"
            )
            if bad
            else f"{mean:.1f} real rows per noisy step on average vs q·n = {expected:.1f} (z = {z:.1f}, one-sided at "
            "1e-6)",
            failed=bad,
            assumption="the accountant's q is the rate at which a record joins one noisy step",
        )
    ]


class TrainingWatch:
    """The hooks of the module docstring on a live DPOptimizer, `ledger` (default: the optimizer's
    parameters only) watching the parameters. `before_pre_step(skip)` runs at the
    start of every `pre_step` (after the user's backward(), before Opacus clips; `skip` is True on a
    physical step the optimizer will skip): the in-script audit inserts its canaries there."""

    def __init__(
        self, optimizer, ledger: ParameterLedger | None = None, before_pre_step: Callable[[bool], None] | None = None
    ):
        self.optimizer = optimizer
        self.ledger = ledger if ledger is not None else ParameterLedger(optimizer)
        self.before_pre_step = before_pre_step
        self.noisy_steps = self.physical_steps = 0
        self.rows_per_noisy_step: list[int] = []
        self._rows = 0
        self._active = False

    def start(self) -> TrainingWatch:
        opt, ledger = self.optimizer, self.ledger
        self._step_hook, self._own_pre_step = opt.step_hook, vars(opt).get("pre_step")
        observer, pre_step = opt.step_hook, opt.pre_step

        def counted(o):
            self.noisy_steps += 1
            self.rows_per_noisy_step.append(self._rows)
            self._rows = 0
            ledger.in_noisy_step = True
            if observer is not None:
                observer(o)

        def watched_pre_step(closure=None):
            ledger.check_untouched()
            queue = getattr(opt, "_step_skip_queue", None) or []
            skip = bool(queue[0]) if queue else False
            sample = next((p.grad_sample for p in ledger.dp if getattr(p, "grad_sample", None) is not None), None)
            if sample is not None:
                self._rows += int(sum(g.shape[0] for g in sample) if isinstance(sample, list) else sample.shape[0])
            if self.before_pre_step is not None:
                self.before_pre_step(skip)
            self.physical_steps += 1
            noisy = self.noisy_steps
            stepped = pre_step(closure) if closure is not None else pre_step()
            if stepped and self.noisy_steps == noisy:
                self._rows = 0  # an update without noise (a finding of the ledger's): its rows joined no noise
            return stepped

        opt.step_hook, opt.pre_step = counted, watched_pre_step
        ledger.start()
        self._active = True
        return self

    def stop(self) -> None:
        if not self._active:
            return
        opt = self.optimizer
        opt.step_hook = self._step_hook
        if self._own_pre_step is None:
            del opt.pre_step
        else:  # the user's own pre_step (an instance attribute) stays theirs
            opt.pre_step = self._own_pre_step
        self.ledger.stop()
        self._active = False

    def rows_mean(self) -> float | None:
        return (
            float(sum(self.rows_per_noisy_step) / len(self.rows_per_noisy_step)) if self.rows_per_noisy_step else None
        )

    def checks(self, settings: dict[str, Any], n_records: int | None, subject: str) -> list[Check]:
        """The ledger's check and the rows check, after `ledger.finish()`."""
        return self.ledger.checks(subject) + rows_check(settings, n_records, subject)


def dataset_size(loader: Any) -> int | None:
    try:
        return len(loader.dataset)
    except Exception:  # noqa: BLE001 - a loader without a sized dataset: the rows check is not run
        return None
