"""The in-script one-run audit as a PyTorch Lightning callback: `OpacusAuditCallback`.

    trainer = Trainer(..., callbacks=[OpacusAuditCallback(out="runs")])
    trainer.fit(model)  # a LightningModule whose configure_optimizers calls PrivacyEngine.make_private

The usual Opacus + Lightning pattern (Opacus's own examples/mnist_lightning.py) makes the DP optimizer
inside `configure_optimizers`, so the optimizer exists only once the trainer has set up. The callback
starts an `in_script.OpacusAudit` on the trainer's optimizer, the LightningModule (its parameters
are the release) and the trainer's train loader at `on_train_start`, and decides and writes on
`on_train_end`: the same hooks, the same result file `gate` and `ledger record` read. No second
implementation: every check is OpacusAudit's. An exception in training removes the hooks and
writes nothing (`on_exception`).

Lightning is an optional dependency (`pip install privacy-audit[lightning]`); importing this module
imports it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import lightning.pytorch as pl

from audit.dp_validation.in_script import OpacusAudit
from audit.errors import AuditInputError

__all__ = ["OpacusAuditCallback"]


def _privacy_engine(pl_module: Any) -> Any:
    """The PrivacyEngine the LightningModule holds as an attribute (the usual pattern)."""
    from opacus import PrivacyEngine

    found = [value for value in vars(pl_module).values() if isinstance(value, PrivacyEngine)]
    if len(found) != 1:
        raise AuditInputError(
            "privacy_engine",
            f"the LightningModule holds {len(found)} PrivacyEngine attributes; pass "
            "OpacusAuditCallback(privacy_engine=...) the one whose accountant states the claim",
        )
    return found[0]


class OpacusAuditCallback(pl.Callback):
    """`in_script.OpacusAudit` around `trainer.fit` (module docstring).

    Args:
        privacy_engine: the `opacus.PrivacyEngine` (None: the one the LightningModule holds as an attribute).
        out: the folder that receives `<timestamp>-whitebox-audit/whitebox-audit.json` (None: nothing written).
        **audit_options: any other keyword of `OpacusAudit` (claimed_epsilon, delta, canaries, seed, ...).

    After `trainer.fit`: `.audit` (the OpacusAudit: `.result`, `.verdict`, `.path`) and `.verdict`.
    """

    def __init__(self, privacy_engine: Any = None, *, out: str | Path | None = "runs", **audit_options: Any):
        super().__init__()
        if "data_loader" in audit_options:
            raise AuditInputError("data_loader", "the callback reads the trainer's train loader; do not pass one")
        self.privacy_engine, self.out, self.options = privacy_engine, out, audit_options
        self.audit: OpacusAudit | None = None

    @property
    def verdict(self) -> dict[str, Any] | None:
        return None if self.audit is None else self.audit.verdict

    def on_train_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        # The DP optimizer is the one make_private returned; any other optimizer stays the ledger's
        # business (its steps on released parameters are non-private updates, a finding, not bad input).
        private = [opt for opt in trainer.optimizers if hasattr(opt, "original_optimizer")]
        if len(private) != 1:
            raise AuditInputError(
                "configure_optimizers",
                f"returned {len(private)} Opacus DP optimizers; the audit needs exactly the one "
                "PrivacyEngine.make_private returned",
            )
        loader = trainer.train_dataloader
        if loader is None:
            raise AuditInputError("train_dataloader", "the trainer has no train loader")
        engine = self.privacy_engine if self.privacy_engine is not None else _privacy_engine(pl_module)
        self.audit = OpacusAudit(engine, private[0], pl_module, data_loader=loader, out=self.out, **self.options)
        self.audit.start()

    def on_train_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if self.audit is not None and self.audit.running:
            self.audit.stop()
            self.audit.finish()

    def on_exception(self, trainer: pl.Trainer, pl_module: pl.LightningModule, exception: BaseException) -> None:
        if self.audit is not None:
            self.audit.stop()  # the hooks go; nothing is written
