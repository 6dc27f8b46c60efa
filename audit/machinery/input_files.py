"""Reading what users hand us — YAML and JSON files, numbers from flags — strictly and safely.

Hostile or careless input must end in one short line naming the problem (exit 2), never a
crash, a hang or a silently different value:

- duplicate keys in a mapping are refused (YAML and JSON would otherwise keep the last one);
- YAML anchors/aliases that expand to more than `MAX_NODES` values are refused before anything
  walks the expansion (a 1.3 KB "billion laughs" file expands to ~10⁹ values);
- nesting deeper than the parser's recursion limit is refused (`RecursionError` → input error);
- JSON's non-standard `NaN`/`Infinity` constants are refused: results.json never contains them;
- every error message quotes at most `MESSAGE_LIMIT` characters of the input (`shorten`).
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any

import yaml

from audit.errors import AuditInputError

__all__ = [
    "MAX_FILE_BYTES",
    "MAX_NODES",
    "MESSAGE_LIMIT",
    "check_finite",
    "check_number",
    "check_seed",
    "clip",
    "load_json_file",
    "load_yaml_file",
    "max_threads",
    "parse_yaml_text",
    "shorten",
]

MESSAGE_LIMIT = 200
MAX_NODES = 100_000  # a config or policy has a few dozen values; a results.json a few thousand
MAX_FILE_BYTES = 64 * 2**20
SEED_LIMIT = 2**32  # numpy's SeedSequence and torch accept more, but the CLI promises a 32-bit seed


def shorten(value: Any, limit: int = MESSAGE_LIMIT) -> str:
    """`repr(value)` cut to `limit` characters, without building the whole repr of a huge value."""
    if isinstance(value, (dict, list, tuple, set)) and len(value) > 20:
        text = f"<{type(value).__name__} of {len(value)} items>"
    else:
        try:
            text = repr(value) if not isinstance(value, str) else repr(value[: limit + 1])
        except RecursionError:
            text = f"<deeply nested {type(value).__name__}>"
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def clip(text: str, limit: int = MESSAGE_LIMIT) -> str:
    """Plain text (not a repr) on one line, cut to `limit` characters."""
    text = " ".join(str(text)[: limit * 4].split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def max_threads() -> int:
    """The most CPU threads a command may ask for: 4 per core this process may use."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        cores = os.cpu_count() or 1
    return 4 * max(1, cores)


# --------------------------------------------------------------------------------------------------
# Numbers
# --------------------------------------------------------------------------------------------------


def check_finite(value: Any, where: str) -> float:
    """`value` as a finite float, else AuditInputError (bools are not numbers here)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        try:
            import numpy as np

            if isinstance(value, np.generic) and np.issubdtype(type(value), np.number):
                value = value.item()
            else:
                raise TypeError
        except (ImportError, TypeError):
            raise AuditInputError(where, f"expected a number, got {shorten(value)}") from None
    try:
        number = float(value)
    except OverflowError:
        raise AuditInputError(where, f"is too large to be a float ({shorten(value, 40)})") from None
    if not math.isfinite(number):
        raise AuditInputError(where, f"must be a finite number, got {number}")
    return number


def check_number(
    value: Any,
    where: str,
    *,
    low: float | None = None,
    high: float | None = None,
    low_open: bool = False,
    high_open: bool = False,
    why: str = "",
) -> float:
    """A finite number in [low, high] (open ends when `*_open`); the message gives `why` the range exists."""
    number = check_finite(value, where)
    too_low = low is not None and (number <= low if low_open else number < low)
    too_high = high is not None and (number >= high if high_open else number > high)
    if too_low or too_high:
        left = "(" if low_open else "["
        right = ")" if high_open else "]"
        lo = "-∞" if low is None else f"{low:g}"
        hi = "∞" if high is None else f"{high:g}"
        reason = f"; {why}" if why else ""
        raise AuditInputError(where, f"must be in {left}{lo}, {hi}{right}, got {number:g}{reason}")
    return number


def check_seed(value: Any, where: str = "--seed") -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < SEED_LIMIT:
        raise AuditInputError(where, f"expected an integer in [0, 2³²), got {shorten(value, 40)}")
    return value


# --------------------------------------------------------------------------------------------------
# YAML
# --------------------------------------------------------------------------------------------------


class _StrictLoader(yaml.SafeLoader):
    """`yaml.SafeLoader` that refuses duplicate keys and alias bombs."""

    def __init__(self, stream):
        super().__init__(stream)
        self._sizes: dict[int, int] = {}

    def _expanded_size(self, node: yaml.Node) -> int:
        # Size of the value a node expands to, memoised per node: aliases share the node object,
        # so a bomb is measured in linear time without ever being expanded.
        key = id(node)
        if key in self._sizes:
            return self._sizes[key]
        if isinstance(node, yaml.SequenceNode):
            size = 1 + sum(self._expanded_size(child) for child in node.value)
        elif isinstance(node, yaml.MappingNode):
            size = 1 + sum(self._expanded_size(k) + self._expanded_size(v) for k, v in node.value)
        else:
            size = 1
        self._sizes[key] = size
        return size

    def construct_document(self, node):
        if self._expanded_size(node) > MAX_NODES:
            raise _TooLarge(f"expands to more than {MAX_NODES:,} values (anchors and aliases nested too deep?)")
        return super().construct_document(node)

    def construct_mapping(self, node, deep=False):
        if isinstance(node, yaml.MappingNode):
            self.flatten_mapping(node)
            seen: set = set()
            for key_node, _ in node.value:
                key = self.construct_object(key_node, deep=True)
                try:
                    duplicate = key in seen
                    seen.add(key)
                except TypeError:  # an unhashable key: let SafeLoader report it
                    continue
                if duplicate:
                    raise _Duplicate(key, key_node.start_mark)
        return super().construct_mapping(node, deep=deep)


class _Duplicate(Exception):
    def __init__(self, key, mark):
        self.key, self.mark = key, mark


class _TooLarge(Exception):
    pass


def parse_yaml_text(text: str, where: str) -> Any:
    """Parse YAML text with the strict safe loader; AuditInputError naming `where` on any problem."""
    try:
        return yaml.load(text, Loader=_StrictLoader)  # noqa: S506 - a SafeLoader subclass
    except _Duplicate as exc:
        line = f" (line {exc.mark.line + 1})" if exc.mark is not None else ""
        raise AuditInputError(
            where, f"key {shorten(exc.key, 60)} appears twice{line}; each key may appear once"
        ) from None
    except _TooLarge as exc:
        raise AuditInputError(where, str(exc)) from None
    except RecursionError:
        raise AuditInputError(where, "is nested too deeply") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise AuditInputError(where, f"is not valid YAML ({at}{clip(problem, 120)})") from None


def _read_text(path: Path, where: str, follow: bool = True) -> str:
    """A regular file's text (a FIFO or device is refused without blocking: safe_files)."""
    from audit.machinery.safe_files import read_regular_file

    data = read_regular_file(path, where, limit=MAX_FILE_BYTES, follow=follow)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise AuditInputError(where, "is not UTF-8 text") from None


def load_yaml_file(path: str | Path, where: str) -> Any:
    return parse_yaml_text(_read_text(Path(path), where), where)


# --------------------------------------------------------------------------------------------------
# JSON
# --------------------------------------------------------------------------------------------------


def _refuse_constant(name: str):
    raise ValueError(f"{name} is not valid JSON")


def _pairs_without_duplicates(pairs):
    out = {}
    for key, value in pairs:
        if key in out:
            raise ValueError(f"key {shorten(key, 60)} appears twice")
        out[key] = value
    return out


# The depth count lives in targets/ (which model-folder readers import): one definition for both.
from targets.json_depth import JSON_DEPTH_LIMIT, json_depth  # noqa: E402


def check_json_depth(text: str | bytes, where: str, limit: int = JSON_DEPTH_LIMIT) -> None:
    if json_depth(text) > limit:
        raise AuditInputError(
            where, f"nests arrays/objects more than {limit} deep (not a file this tool writes or reads)"
        )


def load_json_file(path: str | Path, where: str, *, follow: bool = True) -> Any:
    """Parse a JSON file strictly: no NaN/Infinity, no duplicate keys, bounded depth. `follow=False`
    for a file found inside a run folder (a symlink there is refused)."""
    text = _read_text(Path(path), where, follow)
    check_json_depth(text, where)
    try:
        return json.loads(text, parse_constant=_refuse_constant, object_pairs_hook=_pairs_without_duplicates)
    except RecursionError:
        raise AuditInputError(where, "is nested too deeply to be a results file") from None
    except json.JSONDecodeError as exc:
        raise AuditInputError(
            where, f"is not valid JSON ({clip(exc.msg, 80)} at line {exc.lineno}, column {exc.colno})"
        ) from None
    except ValueError as exc:
        raise AuditInputError(where, f"is not valid JSON ({clip(str(exc), 120)})") from None
