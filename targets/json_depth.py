"""How deep a JSON text nests, counted before it is parsed: a bounded depth for every JSON file the
tool reads (configs, results, tokenizer configs, text rows), in targets/ so that the model-folder
readers there and audit.machinery.input_files share one definition."""

from __future__ import annotations

__all__ = ["JSON_DEPTH_LIMIT", "json_depth"]

JSON_DEPTH_LIMIT = 64  # configs, tokenizer configs, results and text rows nest a handful of levels


def json_depth(text: str | bytes) -> int:
    """The deepest nesting of arrays/objects in a JSON text, counted without parsing it (strings
    skipped): checked BEFORE json.loads, whose recursion on a 100,000-deep text is a RecursionError
    (exit 3) or worse, a C-stack overflow."""
    import re

    if isinstance(text, bytes):
        text = text.decode("utf-8", errors="replace")
    depth = deepest = 0
    # Strings (with their escapes) are skipped whole; only brackets outside them count.
    for match in re.finditer(r'"(?:[^"\\]|\\.)*"|[\[\]{}]', text):
        token = match.group()
        if token in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif token in "]}":
            depth -= 1
    return deepest
