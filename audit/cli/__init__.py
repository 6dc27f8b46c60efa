"""The `privacy-audit` command line: thin commands that parse flags, call a job, print, set the exit code.

`app.py` holds the app and `main` (exit codes); one module per job's commands registers them.
"""

from audit.cli import (  # noqa: F401 - importing a module registers its commands, in this order
    bench_command,
    dp_commands,
    ledger_commands,
    model_commands,
    presets_command,
    results_commands,
    run_command,
    synthetic_command,
    whitebox_commands,
)
from audit.cli.app import app, main

__all__ = ["app", "main"]
