"""The documentation site builds with `mkdocs build --strict` (broken links, pages missing from the nav,
unknown anchors all fail), into a temporary folder: nothing is written to the checkout."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_mkdocs_site_builds_strictly(tmp_path):
    pytest.importorskip("mkdocs", reason="mkdocs-material is in the [dev] extra")
    pytest.importorskip("material", reason="mkdocs-material is in the [dev] extra")
    site = tmp_path / "site"
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "mkdocs",
            "build",
            "--strict",
            "--config-file",
            str(ROOT / "mkdocs.yml"),
            "--site-dir",
            str(site),
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-4000:]
    assert (site / "index.html").is_file() and (site / "run" / "index.html").is_file()
    assert not (ROOT / "site").exists()


def test_every_docs_page_is_in_the_nav():
    import yaml

    nav = yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))["nav"]

    def pages(entry):
        if isinstance(entry, str):
            yield entry
        elif isinstance(entry, list):
            for item in entry:
                yield from pages(item)
        elif isinstance(entry, dict):
            for value in entry.values():
                yield from pages(value)

    assert {p.name for p in (ROOT / "docs").glob("*.md")} == set(pages(nav))


def test_the_home_page_links_the_readme_page_which_is_readme_md():
    """The site's README page is README.md itself (docs/hooks/readme_page.py), its docs/ links made site links."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("readme_page", ROOT / "docs" / "hooks" / "readme_page.py")
    hook = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hook)
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    page = hook.readme_markdown(readme)
    assert "](docs/" not in page and "](run.md)" in page
    assert "](examples/" not in page and "`examples/policy-strict.yaml` (in the repository)" in page
    assert "](readme.md)" in (ROOT / "docs" / "index.md").read_text(encoding="utf-8")
