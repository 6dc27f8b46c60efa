"""The in-script audit API: `from audit.one_run import OpacusAudit` (audit.dp_validation.in_script).

    with OpacusAudit(privacy_engine, optimizer, model, data_loader=train_loader, out="runs") as audit:
        ...your Opacus training loop...

See docs/one-run-audits.md ("Auditing from inside your own script").
"""

from audit.dp_validation.in_script import OpacusAudit, ParameterLedger

__all__ = ["OpacusAudit", "OpacusAuditCallback", "ParameterLedger"]  # noqa: F822 - OpacusAuditCallback: lazy (__getattr__)


def __getattr__(name: str):
    # Lightning is optional: the callback (and Lightning) is imported only when asked for.
    if name == "OpacusAuditCallback":
        from audit.dp_validation.lightning_callback import OpacusAuditCallback

        return OpacusAuditCallback
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
