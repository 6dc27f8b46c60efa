"""Audit the user's own Opacus training from inside their script: `OpacusAudit`.

    with OpacusAudit(privacy_engine, optimizer, model, data_loader=train_loader, out="runs") as audit:
        ...the user's loop, unchanged (BatchMemoryManager, schedulers, checkpoints, any loop)...
    print(audit.verdict["status"], audit.path)

On entry it hooks the user's DPOptimizer (no change to their loop):

* the one-run gradient canaries of `whitebox-audit --mode one-run` (Steinke, Nasr, Jagielski 2023,
  arXiv 2305.08846; `targets.canaries`), inserted into the per-sample gradients at the start of
  `optimizer.pre_step`, i.e. after the user's backward(), before Opacus clips. Under Opacus's
  `BatchMemoryManager` a logical batch is several physical steps, all skipped but the last
  (`signal_skip_step`): the canaries are drawn once per LOGICAL step, at its last physical step, at
  the logical rate q, and the skipped physical steps only have the canaries' coordinates zeroed;
* a count of the noisy steps (the optimizer's step hook, which Opacus calls only on a step that
  added noise), compared on exit with what the accountant was told;
* the parameter accounting: every parameter of the released model (and `extra_parameters`) is
  either privatised by the DP optimizer or must not change. A PyTorch optimizer-step post-hook
  (`torch.optim.optimizer.register_optimizer_step_post_hook`) sees every optimizer's step: the DP
  optimizer's inner optimizer stepping without a noisy step (a "non-private epoch" through the
  original optimizer, a pre_step that skipped the noise), or any other optimizer stepping a
  parameter with a gradient (a second, plain optimizer) is a non-private update, named; the DP
  parameters are compared with their value after the last noisy step at every step (an in-place
  edit between steps shows), and the others with their value at entry on exit.

On exit (no exception) the claim is decided as `whitebox-audit --mode one-run` decides it
(`one_run_whitebox.one_run_result`, the same result block), any non-private update or accountant
disagreement fails the verdict, and `<out>/<timestamp>-whitebox-audit/whitebox-audit.json` is
written with its digest (the file `gate` and `ledger record` read). The hooks are removed on exit,
with or without an exception; an exception writes nothing.
"""

from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Any, Self

import numpy as np

from audit.conformance.opacus_objects import logical_sampler
from audit.errors import AuditInputError
from audit.machinery.verdict import Check

__all__ = ["OpacusAudit", "ParameterLedger", "loader_rate", "parameter_checks", "rows_check"]

_DP_ATTRIBUTES = (
    "noise_multiplier",
    "max_grad_norm",
    "expected_batch_size",
    "original_optimizer",
    "pre_step",
    "step_hook",
)


def _shape(p) -> str:
    return "×".join(str(s) for s in p.shape) or "scalar"


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
            named += [(name.removeprefix("_module."), p) for name, p in model.named_parameters()]
        named += list((extra_parameters or {}).items())
        self.names = {id(p): name for name, p in named}
        for i, p in enumerate(self.dp):
            self.names.setdefault(id(p), f"DP optimizer parameter #{i} ({_shape(p)}, not in the model given)")
        self.privatised = [self.names[id(p)] for p in self.dp]
        self.frozen = [name for name, p in named if not p.requires_grad and id(p) not in dp_ids]
        self.outside = [(name, p) for name, p in named if id(p) not in dp_ids]
        self.violations: dict[str, str] = {}
        self._start = [p.detach().clone() for _, p in self.outside]
        self._last = [p.detach().clone() for p in self.dp]
        self.in_noisy_step = False
        self._handle = None

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
            if not self.in_noisy_step and not torch_equal(last, p):
                self.note(
                    p,
                    "changed between two noisy steps by something other than the DP optimizer "
                    "(an in-place edit, a load_state_dict, another update rule)",
                )
                last.copy_(p.detach())

    def finish(self) -> None:
        self.check_untouched()
        for (name, p), start in zip(self.outside, self._start):
            if not torch_equal(start, p):
                self.violations.setdefault(
                    name,
                    "changed during training but not privatised by the DP optimizer "
                    "(frozen or outside the module given to make_private)",
                )

    def checks(self, subject: str) -> list[Check]:
        return parameter_checks(self.summary(), subject)

    def summary(self) -> dict[str, Any]:
        return {
            "privatised": self.privatised,
            "frozen": self.frozen,
            "not_privatised_unchanged": [
                n for n, _ in self.outside if n not in self.violations and n not in self.frozen
            ],
            "non_private_updates": [{"parameter": k, "why": v} for k, v in sorted(self.violations.items())],
        }


def parameter_checks(summary: dict[str, Any], subject: str) -> list[Check]:
    """The check `ParameterLedger.summary()` decides: failed when any parameter was updated by
    something other than the DP optimizer's noisy step, naming each."""
    frozen, updates = summary["frozen"], summary["non_private_updates"]
    listed = f"{len(summary['privatised'])} parameter tensor(s) privatised by the DP optimizer" + (
        f"; frozen, unchanged: {', '.join(frozen)}" if frozen else "; none frozen"
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


def torch_equal(a, b) -> bool:
    import torch

    return bool(torch.equal(a, b.detach()))


def loader_rate(loader) -> float:
    """The rate the canaries are sampled at: the loader's Poisson rate (the LOGICAL rate q under a
    BatchMemoryManager), or for a loader without one (fixed shuffled batches) 1 / batches per
    epoch, the rate Opacus's `make_private` tells the accountant."""
    poisson = logical_sampler(loader)
    rate = getattr(loader, "sample_rate", None) if poisson is None else poisson.sample_rate
    if rate is None:
        batches = len(loader)
        rate = 1.0 / batches if batches else 1.0
    rate = float(rate)
    if not (math.isfinite(rate) and 0 < rate <= 1):
        raise AuditInputError("data_loader", f"the data loader's sample_rate must be in (0, 1], got {rate!r}")
    return rate


class OpacusAudit:
    """The one-run audit of the user's own training (module docstring). Arguments: the
    `PrivacyEngine`, the `DPOptimizer` and the model `make_private` returned, and its data loader
    (the DPDataLoader, not a BatchMemoryManager's: it holds the logical rate q); `claimed_epsilon`
    overrides the accountant's ε; `out` the folder that receives the result (None: nothing written);
    `extra_parameters` names released tensors outside `model`."""

    def __init__(
        self,
        privacy_engine,
        optimizer,
        model=None,
        *,
        data_loader,
        claimed_epsilon: float | None = None,
        delta: float = 1e-5,
        out: str | Path | None = "runs",
        canaries: int | None = None,
        canary_kind: str = "auto",
        canary_scale: float = 1000.0,
        observe: str = "all",
        confidence: float = 0.95,
        seed: int = 0,
        tracking_uri: str | None = None,
        subject: str | None = None,
        extra_parameters: dict[str, Any] | None = None,
    ):
        from audit.dp_validation.claims import validate_claim
        from audit.dp_validation.one_run_result import CANARY_KINDS
        from audit.dp_validation.whitebox_audit import OBSERVATIONS

        missing = [a for a in _DP_ATTRIBUTES if not hasattr(optimizer, a)]
        if missing:
            raise AuditInputError(
                "optimizer",
                f"is not an Opacus DPOptimizer (no {', '.join(missing)}); pass the "
                "optimizer PrivacyEngine.make_private returned",
            )
        if observe not in OBSERVATIONS:
            raise AuditInputError("observe", f"expected one of {', '.join(OBSERVATIONS)}, got {observe!r}")
        if canary_kind not in CANARY_KINDS:
            raise AuditInputError("canary_kind", f"expected one of {', '.join(CANARY_KINDS)}, got {canary_kind!r}")
        if not (isinstance(delta, (int, float)) and 0 < delta < 1):
            raise AuditInputError("delta", f"must be in (0, 1), got {delta!r}")
        if not (isinstance(confidence, (int, float)) and 0.5 <= confidence < 1):
            raise AuditInputError("confidence", f"must be in [0.5, 1), got {confidence!r}")
        if claimed_epsilon is not None:
            validate_claim(claimed_epsilon, delta, epsilon_flag="claimed_epsilon", delta_flag="delta")
        if out is not None:
            from audit.machinery.run_directory import check_output_folder

            check_output_folder(out, "out")
        self.engine, self.optimizer, self.model, self.loader = privacy_engine, optimizer, model, data_loader
        self.claimed_epsilon, self.delta, self.out, self.observe = claimed_epsilon, float(delta), out, observe
        self.n_canaries, self.canary_kind, self.canary_scale = canaries, canary_kind, float(canary_scale)
        self.confidence, self.seed, self.tracking_uri = float(confidence), int(seed), tracking_uri
        inner = getattr(model, "_module", model)  # the user's module inside Opacus's GradSampleModule
        self.subject = subject or f"in-script OpacusAudit ({type(inner).__name__ if model is not None else 'model'})"
        self.extra_parameters = extra_parameters
        self.result: dict[str, Any] | None = None
        self.path: Path | None = None
        self.verdict: dict[str, Any] | None = None
        self._active = False

    # -- hooks -----------------------------------------------------------------------------------

    def start(self) -> OpacusAudit:
        from targets.canaries import canary_count_for, make_canaries

        opt = self.optimizer
        self.ledger = ParameterLedger(opt, self.model, self.extra_parameters)
        if not self.ledger.dp:
            raise AuditInputError("optimizer", "the DP optimizer has no trainable parameters")
        d = int(sum(p.numel() for p in self.ledger.dp))
        m = canary_count_for(d) if self.n_canaries is None else int(self.n_canaries)
        self.q = loader_rate(self.loader)
        try:
            self.canaries = make_canaries(
                d,
                m,
                kind=self.canary_kind,
                sample_rate=self.q,
                seed=self.seed,
                scale=self.canary_scale,
                noise_multiplier=float(opt.noise_multiplier),
            )
        except ValueError as exc:
            raise AuditInputError("canaries", str(exc)) from None
        self.per_layer = isinstance(getattr(opt, "max_grad_norms", None), (list, tuple))
        if self.per_layer and self.canaries.kind != "dirac":
            # A random direction spans every tensor: only the optimizer's own per-layer clipping
            # knows what it makes of one, so every such canary goes through it as a row.
            self.canaries.max_rows = 10**9
        self.ghost = "FastGradientClipping" in type(opt).__name__
        if self.ghost and self.canaries.kind != "dirac":
            raise AuditInputError(
                "canaries",
                "ghost clipping keeps no per-sample gradients: only Dirac canaries can "
                f"join its clipped sum, and {d} coordinates hold {m} of them at most "
                f"{d // 10} (give canaries ≤ {d // 10}, or a larger model)",
            )
        self._step_hook, self._own_pre_step = opt.step_hook, vars(opt).get("pre_step")
        self.canaries.attach(opt)  # chains its observer before the accountant's hook
        observer = opt.step_hook
        self.noisy_steps = self.physical_steps = 0

        self.rows_per_noisy_step: list[int] = []
        self._rows = 0

        def counted(o):
            self.noisy_steps += 1
            self.rows_per_noisy_step.append(self._rows)
            self._rows = 0
            self.ledger.in_noisy_step = True
            observer(o)

        opt.step_hook = counted
        pre_step = opt.pre_step

        def audited_pre_step(closure=None):
            self.ledger.check_untouched()
            queue = getattr(opt, "_step_skip_queue", None) or []
            skip = bool(queue[0]) if queue else False
            sample = next((p.grad_sample for p in self.ledger.dp if getattr(p, "grad_sample", None) is not None), None)
            if sample is not None:
                self._rows += int(sum(g.shape[0] for g in sample) if isinstance(sample, list) else sample.shape[0])
                self.canaries.insert(join=not skip)
            elif self.ghost:
                self.canaries.insert_into_sum(join=not skip)
            self.physical_steps += 1
            return pre_step(closure) if closure is not None else pre_step()

        opt.pre_step = audited_pre_step
        self.ledger.start()
        self._active = True
        self._cpu, self._wall = time.process_time(), time.perf_counter()
        return self

    def stop(self) -> None:
        if not self._active:
            return
        self.cpu_seconds, self.seconds = time.process_time() - self._cpu, time.perf_counter() - self._wall
        opt = self.optimizer
        opt.step_hook = self._step_hook
        if self._own_pre_step is None:
            del opt.pre_step
        else:  # the user's own pre_step (an instance attribute) stays theirs
            opt.pre_step = self._own_pre_step
        self.ledger.stop()
        self._active = False

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, exc_type, exc, tb) -> bool:
        self.stop()
        if exc_type is None:
            self.finish()
        return False

    # -- result ----------------------------------------------------------------------------------

    def _records(self) -> int | None:
        try:
            return len(self.loader.dataset)
        except Exception:  # noqa: BLE001 - a loader without a sized dataset: the check is not run
            return None

    def observations(self) -> dict[str, Any]:
        """What the run showed, in the shape `one_run_whitebox.one_run_task` returns."""
        from audit.dp_validation.whitebox_audit import _opacus_settings

        c = self.canaries
        settings = _opacus_settings(self.optimizer, self.loader, self.engine, self.noisy_steps, self.delta)
        settings["physical_steps"] = self.physical_steps
        settings["clipping"] = "per_layer" if self.per_layer else "flat"
        settings["rows_per_noisy_step"] = (
            float(np.mean(self.rows_per_noisy_step)) if self.rows_per_noisy_step and not self.ghost else None
        )
        settings["grad_sample_mode"] = "ghost" if self.ghost else "per-sample"
        poisson = logical_sampler(self.loader)
        if poisson is not None:  # a BatchMemoryManager's loader: the logical batches are Poisson at q
            settings["sample_rate"], settings["poisson_sampling"] = float(poisson.sample_rate), True
        return {
            "scores_all": c.scores("all"),
            "scores_final": c.scores("final"),
            "coins": c.coins.copy(),
            "kind": c.kind,
            "m": c.m,
            "n_parameters": int(sum(p.numel() for p in self.ledger.dp)),
            "canary_scale": self.canary_scale,
            "inserted": c.inserted,
            "as_rows": c.as_rows,
            "clip_deviation": c.clip_deviation if c.kind == "dirac" else None,
            "clip_checked_steps": c.clip_checked_steps,
            "steps": self.noisy_steps,
            "settings": settings,
            "seconds": self.seconds,
            "cpu_seconds": self.cpu_seconds,
            "accuracy": None,
            "plain_seconds": None,
            "plain_cpu_seconds": None,
            "plain_accuracy": None,
            "score_all_kind": (
                "log-likelihood ratio of the claimed Bernoulli(q) mixture per step, summed"
                if self.q < 1
                else "sum over steps of the update's projection on the canary"
            ),
        }

    def finish(self, run: dict[str, Any] | None = None, *, write: bool = True) -> dict[str, Any]:
        """Decide the claim from this run (or `run`, observations with plain-run figures added) and
        write the result file (unless `out` is None or `write` is False)."""
        from audit.dp_validation.one_run_result import one_run_result

        self.ledger.finish()
        if run is None:
            run = self.observations()
        if run["steps"] == 0:
            raise AuditInputError("optimizer", "took no noisy step inside the audit: nothing was trained")
        scores = np.asarray(run[f"scores_{self.observe}"], dtype=float)
        if not np.all(np.isfinite(scores)):
            raise AuditInputError(
                "model", "the training produced NaN or infinite parameters; the audit needs finite iterates"
            )
        skipped = run["settings"].get("physical_steps", run["steps"]) - run["steps"]
        extra_checks = self.ledger.checks(self.subject) + rows_check(run["settings"], self._records(), self.subject)
        extra = {
            "parameters": self.ledger.summary(),
            "physical_steps": run["settings"].get("physical_steps", run["steps"]),
            "skipped_physical_steps": skipped,
        }
        self.result = one_run_result(
            run,
            subject=self.subject,
            factory=None,
            builtin=False,
            observe=self.observe,
            delta=self.delta,
            claimed_epsilon=self.claimed_epsilon,
            confidence=self.confidence,
            seed=self.seed,
            device=None,
            extra_checks=extra_checks,
            extra=extra,
            claim_flag="claimed_epsilon",
        )
        if write and self.out is not None:
            from audit.cli.output import record_audit

            self.path, self.result = record_audit(
                "whitebox-audit",
                self.result,
                Path(self.out),
                self.tracking_uri,
                {
                    "subject": self.subject,
                    "mode": "one-run",
                    "observe": self.observe,
                    "canaries": self.result["canaries"]["m"],
                    "seed": self.seed,
                    "in_script": True,
                },
            )
        self.verdict = self.result["verdict"]
        return self.result
