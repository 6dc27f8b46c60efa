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
* `training_watch.TrainingWatch`: a count of the noisy steps (the optimizer's step hook, which
  Opacus calls only on a step that added noise), compared on exit with what the accountant was
  told; the real rows each noise privatised; and the parameter accounting: every parameter of the
  released model (and `extra_parameters`) is either privatised by the DP optimizer or must not
  change — any optimizer's step (a PyTorch optimizer-step post-hook) that is not the DP
  optimizer's noisy step, and any in-place edit, is a non-private update, named.

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
from typing import Any

import numpy as np

from audit.conformance.opacus_objects import logical_sampler
from audit.dp_validation.training_watch import (
    ParameterLedger,
    TrainingWatch,
    dataset_size,
    parameter_checks,
    rows_check,
)
from audit.errors import AuditInputError

__all__ = ["OpacusAudit", "ParameterLedger", "loader_rate", "parameter_checks", "rows_check"]

_DP_ATTRIBUTES = (
    "noise_multiplier",
    "max_grad_norm",
    "expected_batch_size",
    "original_optimizer",
    "pre_step",
    "step_hook",
)


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
    """The one-run audit of the user's own Opacus training, as a context manager around their loop
    (module docstring; Steinke, Nasr, Jagielski 2023, arXiv 2305.08846).

        with OpacusAudit(privacy_engine, optimizer, model, data_loader=train_loader, out="runs") as audit:
            ...  # the user's loop, unchanged
        audit.verdict["status"]  # "pass" | "fail" | "inconclusive"

    Args:
        privacy_engine: the `opacus.PrivacyEngine` whose accountant states the claim.
        optimizer: the `DPOptimizer` that `make_private` / `make_private_with_epsilon` returned.
        model: the model it returned (its parameters are the release; None: the optimizer's only).
        data_loader: its data loader (the DPDataLoader, or a BatchMemoryManager's: it holds q).
        claimed_epsilon: the ε to test instead of the accountant's; delta: its δ.
        out: the folder that receives `<timestamp>-whitebox-audit/whitebox-audit.json` (None: nothing
            written, the result stays in `.result`).
        canaries: m, the number of gradient canaries (None: from the model size), as `--canaries`.
        canary_kind: auto | dirac | random, as `--canary-kind`.
        canary_scale: the canaries' gradient scale before clipping.
        observe: all (every iterate) | final, as `--observe`.
        confidence: the one-sided confidence of the bounds.
        seed: the seed of the canaries' coins and directions.
        tracking_uri: an MLflow store to log the result to; subject: the name in the verdict.
        extra_parameters: {name: tensor} released beside `model` (checked like its parameters).

    After a normal exit of the block: `.result` (the result dict `gate` and `ledger record` read),
    `.verdict` and `.path` (the file written). Raises `AuditInputError` naming the argument for
    what it cannot audit; an exception inside the block writes nothing.
    """

    def __init__(
        self,
        privacy_engine: Any,
        optimizer: Any,
        model: Any = None,
        *,
        data_loader: Any,
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
        self._own_clip = vars(opt).get("clip_and_accumulate")
        # Per-step cost: the real rows zeroed on the canaries' coordinates after clipping (their clipped
        # sum overwritten there), not before it, except on the witness steps (targets.canaries).
        self.canaries.zero_after_clip = not self.ghost
        self.canaries.attach(opt)  # chains its observer before the accountant's hook
        dp = self.ledger.dp

        def insert(skip: bool) -> None:
            if any(getattr(p, "grad_sample", None) is not None for p in dp):
                self.canaries.insert(join=not skip)
            elif self.ghost:
                self.canaries.insert_into_sum(join=not skip)

        # The watch wraps the canaries' observer: noisy steps counted, rows per noise, every
        # parameter accounted for (training_watch); the canaries go in at each pre_step's start.
        self.watch = TrainingWatch(opt, self.ledger, before_pre_step=insert).start()
        self._active = True
        self._cpu, self._wall = time.process_time(), time.perf_counter()
        return self

    @property
    def running(self) -> bool:
        """True between `start()` and `stop()`: the canaries and the watch are on the optimizer."""
        return self._active

    @property
    def noisy_steps(self) -> int:
        return self.watch.noisy_steps

    @property
    def physical_steps(self) -> int:
        return self.watch.physical_steps

    def stop(self) -> None:
        if not self._active:
            return
        self.cpu_seconds, self.seconds = time.process_time() - self._cpu, time.perf_counter() - self._wall
        self.watch.stop()
        opt = self.optimizer
        opt.step_hook = self._step_hook  # before the canaries' observer was chained in
        if self._own_pre_step is not None:
            opt.pre_step = self._own_pre_step
        if self._own_clip is not None:
            opt.clip_and_accumulate = self._own_clip
        elif "clip_and_accumulate" in vars(opt):
            del opt.clip_and_accumulate
        self._active = False

    def __enter__(self) -> OpacusAudit:
        return self.start()

    def __exit__(self, exc_type, exc, tb) -> None:  # None: an exception in the user's loop propagates
        self.stop()
        if exc_type is None:
            self.finish()

    # -- result ----------------------------------------------------------------------------------

    def _records(self) -> int | None:
        return dataset_size(self.loader)

    def observations(self) -> dict[str, Any]:
        """What the run showed, in the shape `one_run_whitebox.one_run_task` returns."""
        from audit.dp_validation.whitebox_audit import _opacus_settings

        c = self.canaries
        settings = _opacus_settings(self.optimizer, self.loader, self.engine, self.noisy_steps, self.delta)
        settings["physical_steps"] = self.physical_steps
        settings["clipping"] = "per_layer" if self.per_layer else "flat"
        settings["rows_per_noisy_step"] = self.watch.rows_mean() if not self.ghost else None
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
