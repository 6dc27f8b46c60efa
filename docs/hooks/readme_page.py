"""mkdocs hook: the site's README page is the repository's README.md, read when the site is built.

The README links into docs/ (`docs/run.md`) and to repository files (`examples/policy-strict.yaml`);
on the site those become `run.md` and, for files outside docs/, the path as code (the site holds
only docs/). One source, so the README and its page cannot drift apart.
"""

from __future__ import annotations

import re
from pathlib import Path

_LINK = re.compile(r"\]\((?!https?://|mailto:|#)([^)\s]+)\)")


def _rewrite(match: re.Match) -> str:
    target = match.group(1)
    if target == "docs/" or target == "docs":
        return "](index.md)"
    if target.startswith("docs/"):
        return f"]({target[len('docs/') :]})"
    return match.group(0)


def readme_markdown(text: str) -> str:
    """README.md with its links made site links; a link to a repository file keeps its words and names
    the path."""

    def as_text(match: re.Match) -> str:
        label, path = match.group(1), match.group(2)
        return f"`{path}` (in the repository)" if label.strip("`") == path else f"{label} (`{path}` in the repository)"

    out = re.sub(r"\[([^\]]+)\]\((?!https?://|mailto:|#|docs/?)([^)\s]+)\)", as_text, text)
    return _LINK.sub(_rewrite, out)


def on_page_markdown(markdown, page, config, files):
    if page.file.src_uri != "readme.md":
        return markdown
    readme = Path(config.config_file_path).resolve().parent / "README.md"
    return readme_markdown(readme.read_text(encoding="utf-8"))
