"""Library errors name parameters; the commands name flags. One table maps the first to the second.

The library functions of the DP-validation jobs (`audit.dp_validation`) raise
`AuditInputError("claimed_epsilon", ...)`, naming the parameter a Python caller passed. When the
same error ends a command, `audit/cli/app.py` shows it under the flag the user typed
(`--claimed-epsilon: ...`) with `flag_error`. A parameter missing from the table keeps its name.
Where one command spells a parameter's flag differently (canary-audit's runs are `--models`, its
canary kind `--kind`), `COMMAND_FLAGS` says so for that command only.
"""

from __future__ import annotations

import re

from audit.errors import AuditInputError

__all__ = ["COMMAND_FLAGS", "FLAG_COMMANDS", "PARAMETER_FLAGS", "flag_error"]

# Parameter of a dp_validation library function → the flag of its command.
PARAMETER_FLAGS: dict[str, str] = {
    "claimed_epsilon": "--claimed-epsilon",
    "delta": "--delta",
    "seed": "--seed",
    "factory": "--factory",
    "builtin": "--builtin",
    "observe": "--observe",
    "device": "--device",
    "n_runs": "--runs",
    "n_models": "--models",
    "looks": "--looks",
    "spending": "--spending",
    "n_trials": "--trials",
    "n_canaries": "--canaries",
    "canary_kind": "--canary-kind",
    "noise_multiplier": "--noise-multiplier",
    "sample_rate": "--sample-rate",
    "steps": "--steps",
    "max_grad_norm": "--max-grad-norm",
    "mechanism": "--mechanism",
    "accountant": "--accountant",
    "trainer": "--trainer",
    "workers": "--workers",
    "timeout": "--timeout",
    "alpha": "--alpha",
    "kind": "--kind",
    "mode": "--mode",
    "n_rows": "--rows",
}

# Per command, the parameters whose flag differs from the table above.
COMMAND_FLAGS: dict[str, dict[str, str]] = {
    # `run_canary_audit(n_models=...)` hands the count to each mode's own function as `n_runs`
    # (profile, multi-canary) or `n_models` (multi), and the kind as `canary_kind`.
    "canary-audit": {"n_runs": "--models", "canary_kind": "--kind"},
}

# The commands whose library functions name parameters (the others name their flags or config fields).
FLAG_COMMANDS = frozenset(
    {"accountants", "whitebox-audit", "mechanism-audit", "accountant-check", "canary-audit", "conformance"}
)


def flag_error(error: AuditInputError, command: str | None) -> AuditInputError:
    """`error` with its parameter name replaced by the command's flag (the same error when there is none)."""
    if command not in FLAG_COMMANDS:
        return error
    # `where` is a parameter ("trainer") or a path inside one ("trainer: CLAIM['delta']", "trainer[0]"):
    # the parameter at its head becomes the flag, the rest of the path stays.
    head = re.match(r"[A-Za-z_][A-Za-z0-9_]*", error.where or "")
    flags = {**PARAMETER_FLAGS, **COMMAND_FLAGS.get(command or "", {})}
    if head is None or head.group(0) not in flags:
        return error
    return AuditInputError(flags[head.group(0)] + error.where[head.end() :], error.message)
