"""Loading user functions named as `module:function`.

This runs the user's code, exactly like `python -m module` or pytest would: only the module the
user names is imported (from the current directory or the installed packages), nothing is read
from data files, and nothing is unpickled.
"""

from __future__ import annotations

import importlib
import re
import sys
from collections.abc import Callable
from pathlib import Path

from audit.errors import AuditInputError

_SPEC = re.compile(r"^(?P<module>[A-Za-z_][\w.]*):(?P<function>[A-Za-z_]\w*)$")


def check_spec(spec: str, flag: str) -> str:
    """Validate the form `module:function` without importing anything (the parent process never
    imports the user's module: its import-time code runs only in an isolated worker)."""
    if not isinstance(spec, str) or len(spec) > 200 or _SPEC.match(spec) is None:
        shown = spec if not isinstance(spec, str) or len(spec) <= 80 else spec[:79] + "…"
        raise AuditInputError(flag, f"expected 'module:function' (e.g. my_pkg.dp:epsilon), got {shown!r}")
    return spec


def load_user_function(spec: str, flag: str, *, require_callable: bool = True) -> Callable:
    """The object `module:name` names; `require_callable=False` for protocols that are objects
    (a conformance step-function trainer: CLAIM plus methods), which check their own shape."""
    match = _SPEC.match(check_spec(spec, flag))
    if match is None:  # check_spec refuses what _SPEC does not match: never reached
        raise AuditInputError(flag, f"expected module:function, got {spec[:80]!r}")
    cwd = str(Path.cwd())
    if cwd not in sys.path:  # like `python -m`: modules beside the user are importable
        sys.path.insert(0, cwd)
    try:
        module = importlib.import_module(match["module"])
    except ModuleNotFoundError as exc:
        raise AuditInputError(flag, f"cannot import module '{match['module']}' ({str(exc)[:160]})") from None
    except SystemExit as exc:  # a module that exits on import must not end the audit (exit 0 = pass)
        raise AuditInputError(flag, f"importing '{match['module']}' called sys.exit({exc.code!r})") from None
    except Exception as exc:  # the user's module raised while importing
        raise AuditInputError(
            flag, f"importing '{match['module']}' raised {type(exc).__name__}: {str(exc)[:200]}"
        ) from None
    function = getattr(module, match["function"], None)
    if function is None:
        raise AuditInputError(flag, f"module '{match['module']}' has no attribute '{match['function']}'")
    if require_callable and not callable(function):
        raise AuditInputError(flag, f"'{spec}' is not callable")
    return function
