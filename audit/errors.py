"""The one exception type for user mistakes.

Everything the user can get wrong (config fields, data files, columns, CLI flags) is raised as an
`AuditInputError` naming *where* the problem is; the CLI turns it into one line and exit code 2.
Anything else is a bug and keeps its traceback.
"""

from __future__ import annotations


class AuditInputError(ValueError):
    """Bad user input. `where` names the field, file or column; the message says what was expected.

    Args:
        where: the field, file, column or parameter at fault (the CLI maps library parameters to flags).
        message: what was expected, in one line.
    """

    def __init__(self, where: str, message: str):
        self.where = where
        self.message = message
        super().__init__(f"{where}: {message}")


def escape_controls(text: str) -> str:
    """`text` with every control character shown as an escape (`\\x1b`, `\\u202e`): a file name
    holding terminal escape sequences must not clear the screen or retitle the terminal when an
    error message quotes it. Spaces stay; newlines and tabs are for the caller to fold."""
    import unicodedata

    out = []
    for char in str(text):
        if char in "\n\t" or char == " ":
            out.append(char)
        elif unicodedata.category(char) in ("Cc", "Cf", "Cs", "Co", "Zl", "Zp"):
            code = ord(char)
            out.append(f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}")
        else:
            out.append(char)
    return "".join(out)
