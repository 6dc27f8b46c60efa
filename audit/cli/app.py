"""The Typer app, its consoles and exit codes, and `main`: how every command's ending maps to an exit code.

Exit codes, every command: 0 pass, inconclusive or no claim (LEAKS / NO SIGNIFICANT LEAKAGE FOUND);
1 a finding (a refuted claim, a failed policy rule, an unsound accountant; LEAKS on the user's own release
  unless --allow-leak; INCONCLUSIVE with --fail-on-inconclusive);
2 bad input — one line naming the field, file or column, no traceback, nothing half-written;
3 internal error — one line naming a log file that holds the traceback; 130 interrupted.
"""

from __future__ import annotations

import errno
import os
import sys
from typing import Annotated

import typer
import typer.core
import typer.models
from rich.console import Console

from audit.errors import AuditInputError

try:  # recent typer vendors its own click: its exceptions are the ones raised
    from typer._click import exceptions as click_exceptions
except ImportError:  # pragma: no cover - older typer uses click itself
    from click import exceptions as click_exceptions  # type: ignore[no-redef]


class _AuditCommand(typer.core.TyperCommand):
    """Usage lines in the conventional spelling: `gate [OPTIONS] RESULTS`, not typer's `{RESULTS}`."""

    def collect_usage_pieces(self, ctx) -> list[str]:
        return [piece.removeprefix("{").removesuffix("}") for piece in super().collect_usage_pieces(ctx)]

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        # Option help that lists the registered attacks is filled in when the command is built (each
        # invocation), so an attack registered by a plug-in is listed like a built-in one; names only,
        # no attack module is imported.
        for param in self.params:
            if "{attack_names}" in (getattr(param, "help", None) or ""):
                from attacks import ATTACKS, TEXT_ATTACKS

                param.help = param.help.replace("{attack_names}", ", ".join(ATTACKS)).replace(
                    "{text_attack_names}", ", ".join(TEXT_ATTACKS)
                )

    def get_short_help_str(self, limit: int = 45) -> str:
        # The command list wraps long lines; cutting them at 45 characters with "..." hid what they do.
        return super().get_short_help_str(limit=300)


class AuditApp(typer.Typer):
    """Every command gets the conventional usage line and untruncated one-line help."""

    def command(self, *args, cls=None, **kwargs):
        return super().command(*args, cls=cls or _AuditCommand, **kwargs)


def switch(name: str, help: str) -> typer.models.OptionInfo:  # noqa: A002 - typer's word
    """A boolean option as an on/off pair (`--x/--no-x`), shown without a `<bool>` value to type."""
    return typer.Option(f"--{name}/--no-{name}", help=help, metavar="")


app = AuditApp(
    add_completion=False,
    rich_markup_mode=None,
    pretty_exceptions_enable=False,  # tracebacks go to a log file (exit 3), never to the terminal
    no_args_is_help=True,
    help="Audit trained models and synthetic data for membership leakage; compare empirical ε with the accountant's.",
)
# Off a terminal (piped, CI logs, `make audit > log`) rich would wrap every line at 80 columns, splitting
# phrases mid-way (`δ` / `1e-05)`) and truncating wide table headers: there, text is never wrapped (one
# message, one line, greppable) and tables get room for their widest headers. COLUMNS, when set, wins.
OFF_TERMINAL_WIDTH = 240


class EscapingConsole(Console):
    """A rich Console that escapes control characters in every string it renders — lines, table
    cells, titles — with the one escaping function (audit.errors.escape_controls): a file name,
    column name, config key, model folder name or message of the user's code that holds terminal
    escape sequences is shown as `\\x1b[2J`, never executed by the terminal."""

    def render_str(self, text: str, **kwargs):
        from audit.errors import escape_controls

        return super().render_str(escape_controls(text), **kwargs)


def shown(value) -> str:
    """A user-controlled string (a path, a column or config key, a message quoting them) for a
    console line with markup: control characters escaped and rich markup escaped, so `[/x]` in a
    folder name neither styles the line nor breaks it."""
    from rich.markup import escape

    from audit.errors import escape_controls
    from audit.machinery.secrets import redact

    return escape(escape_controls(redact(str(value))))


def make_console(*, stderr: bool = False) -> Console:
    console = EscapingConsole(stderr=stderr)
    if console.is_terminal:
        return console
    columns = os.environ.get("COLUMNS", "")
    return EscapingConsole(
        stderr=stderr, width=int(columns) if columns.isdigit() else OFF_TERMINAL_WIDTH, soft_wrap=True
    )


console = make_console()
err_console = make_console(stderr=True)

EXIT_OK, EXIT_FAILED, EXIT_BAD_INPUT, EXIT_INTERNAL_ERROR, EXIT_INTERRUPTED = 0, 1, 2, 3, 130


def sigterm_as_interrupt() -> None:
    """SIGTERM (a CI timeout, a scheduler) ends every command like Ctrl-C: exit 130, runs marked
    KILLED, checkpoints kept, worker process groups killed. Only from the main thread."""
    import threading

    from audit.machinery.interrupts import install_interrupt_handlers

    # SIGINT too: the handler notes that a signal arrived, so an interrupt a library turned into
    # another exception still ends as 130 (audit/machinery/interrupts.py).
    if threading.current_thread() is threading.main_thread():
        install_interrupt_handlers()


def installed_version() -> str:
    """The version of the installed distribution (pyproject's), or 'unknown' when run from a bare tree."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("privacy-audit")
    except PackageNotFoundError:
        return "unknown (not installed)"


def _print_version(value: bool) -> None:
    if value:
        print(f"privacy-audit {installed_version()}")
        raise typer.Exit(EXIT_OK)


@app.callback()
def _commands(
    version: Annotated[
        bool,
        typer.Option("--version", callback=_print_version, is_eager=True, help="Print the installed version and exit."),
    ] = False,
) -> None:
    """privacy-audit: membership-inference audits with empirical ε next to the accountant's ε."""


# The most characters of one error line: messages quote at most ~200 characters of the input, and
# this is the backstop should one ever embed more (a path, a repr) — never a megabyte line.
_LINE_LIMIT = 1000
# The environment refusing a write (full disk, read-only or forbidden folder): the user's to fix, exit 2.
_ENVIRONMENT_ERRNOS = {errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES, errno.EPERM}


def _one_line(text: object) -> str:
    """One line, control characters escaped (audit.errors.escape_controls), at most _LINE_LIMIT long."""
    from audit.errors import escape_controls
    from audit.machinery.secrets import redact  # a URI's password never reaches the terminal or a CI log

    line = " ".join(escape_controls(redact(str(text)[: _LINE_LIMIT * 4])).split())
    return line if len(line) <= _LINE_LIMIT else line[: _LINE_LIMIT - 1] + "…"


def main(argv: list[str] | None = None) -> None:
    """Console-script entry point: maps every way a command can end to its exit code.

    Plain prints, not rich: one unwrapped line that scripts and CI logs can grep.
    """
    import signal

    args = list(sys.argv[1:] if argv is None else argv)
    previous_sigterm = signal.getsignal(signal.SIGTERM)
    previous_sigint = signal.getsignal(signal.SIGINT)
    from audit.machinery.crash_log import set_log_folder
    from audit.machinery.interrupts import interrupt_received, reset_interrupt_received

    reset_interrupt_received()

    # The crash-log folder belongs to one invocation: a previous command's --out (in the same process,
    # e.g. a test runner) must not receive this one's log. Commands set their own once they parse --out.
    set_log_folder(None)
    try:
        sigterm_as_interrupt()  # every command: SIGTERM ends it like Ctrl-C (130), workers killed
        code = app(args=args, standalone_mode=False)
        if code == EXIT_INTERRUPTED:  # typer turns Ctrl-C / SIGTERM into a silent 130: say what happened
            print("interrupted", file=sys.stderr)
    except AuditInputError as exc:  # SyntheticDataError included (a subclass; importing it here would load pandas)
        from audit.cli.parameter_flags import flag_error  # library errors name parameters: show the flag

        command = next((arg for arg in args if not arg.startswith("-")), None)
        print("error: " + _one_line(flag_error(exc, command)), file=sys.stderr)
        code = EXIT_BAD_INPUT
    except click_exceptions.UsageError as exc:
        where = f"{exc.ctx.command_path}: " if exc.ctx is not None else ""
        print("error: " + where + _one_line(exc.format_message()), file=sys.stderr)
        code = EXIT_BAD_INPUT
    except (KeyboardInterrupt, typer.Abort):  # typer's Abort: its vendored click has none
        print("interrupted", file=sys.stderr)
        code = EXIT_INTERRUPTED
    except click_exceptions.ClickException as exc:  # e.g. a file option that cannot be opened
        print("error: " + _one_line(exc.format_message()), file=sys.stderr)
        code = EXIT_BAD_INPUT
    except OSError as exc:
        if exc.errno not in _ENVIRONMENT_ERRNOS:
            code = _internal_error(exc, args)
        else:
            where = f"{exc.filename}: " if exc.filename else ""
            print(
                "error: " + _one_line(f"{where}{exc.strerror or exc} (free space or fix the folder's permissions)"),
                file=sys.stderr,
            )
            code = EXIT_BAD_INPUT
    except SystemExit as exc:  # our own sys.exit(n) calls; anything else is a bug
        code = exc.code if isinstance(exc.code, int) else EXIT_INTERNAL_ERROR
    except BaseException as exc:  # noqa: BLE001 - any other exception is a bug: exit 3, never 1
        if interrupt_received():  # Ctrl-C that a library re-raised as its own error: still an interrupt
            print("interrupted", file=sys.stderr)
            code = EXIT_INTERRUPTED
        else:
            code = _internal_error(exc, args)
    finally:
        for signum, previous in ((signal.SIGTERM, previous_sigterm), (signal.SIGINT, previous_sigint)):
            try:
                signal.signal(signum, previous)
            except (TypeError, ValueError):  # not the main thread, or a handler set from C
                pass
    sys.exit(EXIT_OK if code is None else int(code))


def _internal_error(exc: BaseException, args: list[str]) -> int:
    from audit.machinery.crash_log import write_crash_log

    log = write_crash_log(exc, ["privacy-audit", *args])
    print(
        f"internal error: {type(exc).__name__}: {_one_line(exc)[:200]} — this is a bug in privacy-audit; "
        f"traceback in {log} (please attach it to a bug report)",
        file=sys.stderr,
    )
    return EXIT_INTERNAL_ERROR
