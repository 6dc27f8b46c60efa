"""The flags of the sequential audits (`--looks`, `--spending`: issue #40) and the two lines they print: the design
declared before the first run, and the runs used of runs planned with why the audit stopped.

Shared by `canary-audit` (profile mode), `mechanism-audit` and `whitebox-audit --mode runs`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

import typer

from audit.cli.app import console

if TYPE_CHECKING:  # the statistics import scipy: `--help` and start-up stay light (tests/test_cli_startup.py)
    from audit.statistics.sequential import GroupSequentialDesign

__all__ = ["LooksOption", "SpendingOption", "print_declared_design", "print_runs_used"]

LooksOption = Annotated[
    int | None,
    typer.Option(
        "--looks",
        help="looks at the evidence (the planned size halved each time; default 6; stops at the first that refutes); "
        "1 = fixed size",
    ),
]
SpendingOption = Annotated[
    str,
    typer.Option("--spending", help="how α is split over the looks: haybittle-peto | obrien-fleming | bonferroni"),
]


def _say(text: str) -> None:
    console.print(text, soft_wrap=True, markup=False, highlight=False)


def print_declared_design(design: GroupSequentialDesign, unit: str, extra: str = "") -> None:
    """The planned size, the looks and their levels, printed before the first run."""
    _say(f"declared before the first run: {design.describe(unit)}{extra}")


def print_runs_used(result: dict[str, Any], unit: str) -> None:
    """Runs used of runs planned, and why the audit stopped (nothing for a result without a `sequential` block)."""
    sequential = result.get("sequential")
    if isinstance(sequential, dict):
        _say(
            f"{unit}: {sequential['runs_used']:,} of {sequential['runs_planned']:,} planned; "
            f"{sequential['stop_reason']}"
        )
