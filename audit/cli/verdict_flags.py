"""The flags that say how a verdict maps to the exit code, shared by every command that prints one.

* `--allow-leak`: on a command whose subject is the user's own release (synth-check's synthetic
  table, audit-model's model, audit-scores' scores) a LEAKS statement is a finding, exit 1, by
  default — a CI gate "blocking leaky releases" expects a copied training table to fail.
  `--allow-leak` makes the run report-only (exit 0, the same LEAKS line). `run`'s built-in ε = ∞
  reference target is not a release and never takes these flags.
* `--fail-on-leak`: the old opt-in; failing on a leak is now the default, so it is kept as a
  hidden no-op for scripts that still pass it, and `--no-fail-on-leak` (the old default spelled
  out) means `--allow-leak`. Given together with a contradicting `--allow-leak` it is refused.
* `--fail-on-inconclusive`: exit 1 with the reason when the verdict is INCONCLUSIVE (a claim
  untestable here or not refuted by a mode without power against it).
"""

from __future__ import annotations

from typing import Annotated

import typer

from audit.errors import AuditInputError

FailOnInconclusiveOption = Annotated[
    bool,
    typer.Option(
        "--fail-on-inconclusive/--no-fail-on-inconclusive",
        help="exit 1 when the verdict is INCONCLUSIVE (a claim this audit could not have refuted), with the reason",
    ),
]

AllowLeakOption = Annotated[
    bool,
    typer.Option(
        "--allow-leak/--no-allow-leak",
        help="report-only: LEAKS on this release exits 0 (by default a release that leaks exits 1)",
    ),
]
# Hidden: the default now; kept so that existing CI scripts passing it keep working.
LegacyFailOnLeakOption = Annotated[
    bool | None,
    typer.Option(
        "--fail-on-leak/--no-fail-on-leak",
        hidden=True,
        help="(the default now) exit 1 when the release LEAKS; kept for compatibility",
    ),
]


def leak_fails(allow_leak: bool, legacy_fail_on_leak: bool | None = None) -> bool:
    """Whether a LEAKS statement on the user's own release fails the verdict: yes unless
    `--allow-leak` (or the old `--no-fail-on-leak`). `--fail-on-leak` is a no-op now."""
    if allow_leak and legacy_fail_on_leak:
        raise AuditInputError(
            "--allow-leak", "contradicts --fail-on-leak; give one of them (failing on a leak is the default)"
        )
    return not (allow_leak or legacy_fail_on_leak is False)
