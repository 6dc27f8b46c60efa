"""`conformance --factory` and `whitebox-audit --mode one-run --factory` on the usage setups of
audit.demos.whitebox_factories, in this process: the commands' task and decision without their spawned
worker (a fresh interpreter importing torch and Opacus: ~6 s of CPU per command). The rows that show the
commands' exit codes go through the real CLI (tests/test_opacus_setup_table.py,
tests/test_conformance_opacus_usage.py)."""

from __future__ import annotations

import warnings

F = "audit.demos.whitebox_factories:"


def conformance_in_process(factory: str) -> tuple[set[str], dict]:
    """The failed checks' names and the task's result of `conformance --factory` (seed 0, α 0.01: the defaults)."""
    from audit.dp_validation.opacus_conformance import opacus_conformance_task

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        found = opacus_conformance_task(F + factory, 0, 0.01)
    return {c["check"] for c in found["checks"] if not c["passed"]}, found


def one_run_in_process(factory: str) -> dict:
    """`whitebox-audit --mode one-run --factory` without its worker process: the same task and decision."""
    from audit.dp_validation.one_run_result import one_run_result
    from audit.dp_validation.one_run_whitebox import one_run_task
    from audit.dp_validation.training_watch import parameter_checks, rows_check

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        run = one_run_task(F + factory, None, None, "auto", 1000.0, 0, 1e-5, False)
    subject = f"--factory {F + factory}"
    return one_run_result(
        run,
        subject=subject,
        factory=F + factory,
        builtin=False,
        observe="all",
        delta=1e-5,
        claimed_epsilon=None,
        confidence=0.95,
        seed=0,
        device=None,
        extra_checks=parameter_checks(run["parameters"], subject)
        + rows_check(run["settings"], run.get("n_records"), subject),
        extra={"parameters": run["parameters"], "physical_steps": run["settings"].get("physical_steps", run["steps"])},
    )
