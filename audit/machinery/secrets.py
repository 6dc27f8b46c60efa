"""The one redaction of secrets: every URI, flag, command line and environment value the tool
prints, logs, writes to a crash log, a results file or MLflow goes through `redact` first.

What counts as a secret (a ledger or tracking URI is the usual carrier):

- the password of a URI's user-info: `postgresql://alice:PW@host/db` → `postgresql://alice:***@host/db`;
- the value of any `name=value` pair (query parameter, libpq keyword, `--flag=value`) whose name
  says secret: password, passwd, pwd, sslpassword, secret, token, api_key, access_key, private_key,
  credential(s), auth, signature — `?password=PW&sslmode=require` → `?password=***&sslmode=require`;
- the value after such a flag given as two words (`--token PW`), in an argument list;
- bearer tokens and the common self-describing token shapes (GitHub `ghp_…`, Hugging Face `hf_…`,
  `sk-…`, AWS `AKIA…`), wherever they appear;
- an environment variable whose NAME says secret (`PGPASSWORD`, `MLFLOW_TRACKING_TOKEN`).

Over-redacting a harmless value costs a `***` in a message; under-redacting a password leaks it
to every CI log that keeps the output. So the patterns err on the side of hiding.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from urllib.parse import unquote

__all__ = ["MASK", "redact", "redact_argv", "redact_environment", "is_secret_name"]

MASK = "***"

# A name that says its value is a secret (query parameter, keyword, flag, environment variable). "pass" is one
# (PGPASS, pass=...), but not as the verb: "rule passed: ε = 1" is a verdict line, not a secret; "secret" is one,
# but not the Secret Sharer canary design (Carlini et al.): "canary_secret_sharer_full: AUC = 0.82" is a policy line;
# "token" is one (MLFLOW_TRACKING_TOKEN), but not the plural count of a language model's text: "new tokens: 512",
# "max_new_tokens=512" are sizes (a token-shaped value, hf_…, is still masked by its shape below).
_SECRET_WORD = (
    r"(?:pass(?:word|wd|phrase)?(?!(?:ed|es|ing)\b)|pwd|secret(?![_ -]?sharer)|token(?!s(?![A-Za-z]))|api[_-]?key|apikey|access[_-]?key|private[_-]?key|"
    r"credentials?|signature|"
    # "auth" and "sig" only as a whole part of a name (x-auth, auth_token, SIG): inside a word they are
    # "author", "design", "authority" — a console line "design: 20 runs" is not a secret.
    r"(?<![A-Za-z0-9])(?:auth(?:orization)?|sig)(?![A-Za-z0-9]))"
)
_NAME = rf"[-\w.]*{_SECRET_WORD}[-\w.]*"  # password, sslpassword, MLFLOW_TRACKING_TOKEN, x-api-key …
_SECRET_NAME = re.compile(rf"(?i)^{_NAME}$")
# name=value, name%3Dvalue (a URI quoted inside another), name: value (a header or YAML line).
_PAIR = re.compile(
    rf"(?i)(?P<name>(?<![\w-]){_NAME})(?P<sep>\s*=\s*|%3[dD]|:\s+)(?P<value>(?!\*\*\*)[^\s&;,'\"<>)\]}}]+)"
)
# scheme://user:password@host — the password runs to the last '@' before the host (it may hold '/');
# the loose form catches what is left when no host follows that '@' cleanly.
_HEAD = r"(?P<head>\b[a-z][a-z0-9+.\-]*://[^/\s:@'\"]*)"
_USERINFO = re.compile(rf"(?i){_HEAD}:(?P<password>[^\s'\"]*)@(?=[^\s@'\"]*(?:[\s'\"]|$))")
_USERINFO_LOOSE = re.compile(rf"(?i){_HEAD}:(?P<password>[^\s@'\"]+)@")
_TOKENS = re.compile(
    r"(?<![\w-])(?:gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,}|hf_[A-Za-z0-9]{20,}|"
    r"sk-[A-Za-z0-9_-]{20,}|xox[abprs]-[A-Za-z0-9-]{10,}|AKIA[0-9A-Z]{16})"
)
# `--token VALUE` written as two words inside a message (an argument list quoted in an error).
_FLAG_WORDS = re.compile(rf"(?i)(?P<flag>(?<![\w-])--{_NAME})(?P<space>\s+)(?P<value>(?!-|\*\*\*)[^\s'\"]+)")
_BEARER = re.compile(r"(?i)\b(?P<kind>bearer|basic)\s+(?P<value>[A-Za-z0-9._~+/=-]{8,})")


def is_secret_name(name: str) -> bool:
    """Whether a parameter, flag or environment variable name says its value is a secret."""
    return bool(_SECRET_NAME.match(name.strip().lstrip("-")))


def redact(text) -> str:
    """`text` (any object: str() of it) with every secret above replaced by `***`. A secret that shows
    only once percent-decoded (`?pass%77ord=PW`, `%70assword=PW`: the database driver decodes the
    name) is found in the decoded text, which is then what is shown."""
    out = _redact_plain(str(text))
    if "%" in out:
        decoded = unquote(out)
        hidden = _redact_plain(decoded)
        if hidden != decoded:
            return hidden
    return out


def _redact_plain(out: str) -> str:
    if not out:
        return out
    out = _USERINFO.sub(lambda m: f"{m['head']}:{MASK}@", out)
    out = _USERINFO_LOOSE.sub(lambda m: f"{m['head']}:{MASK}@", out)
    out = _BEARER.sub(lambda m: f"{m['kind']} {MASK}", out)
    out = _PAIR.sub(lambda m: f"{m['name']}{m['sep']}{MASK}", out)
    out = _FLAG_WORDS.sub(lambda m: f"{m['flag']}{m['space']}{MASK}", out)
    return _TOKENS.sub(MASK, out)


def redact_argv(argv: Iterable[str]) -> list[str]:
    """A command line with its secrets hidden: each word through `redact`, and the word after a
    flag whose name says secret (`--password PW`, `--token PW`) replaced whole."""
    words = [str(word) for word in argv]
    out: list[str] = []
    hide_next = False
    for word in words:
        if hide_next and not word.startswith("-"):
            out.append(MASK)
            hide_next = False
            continue
        hide_next = word.startswith("-") and "=" not in word and is_secret_name(word)
        out.append(redact(word))
    return out


def redact_environment(environment: Mapping[str, str]) -> dict[str, str]:
    """Environment variables as they may be shown: secret-named ones masked, the rest redacted."""
    return {name: (MASK if is_secret_name(name) and value else redact(value)) for name, value in environment.items()}
