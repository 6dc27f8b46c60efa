"""The HTML report's figures: the run folder's PNGs inlined as base64, or redrawn from results.json.

Only regular files below the run folder are read (`audit.machinery.safe_files`), so a figure cannot pull in a
system file; without a run folder the figures results.json suffices for are redrawn with `reports.figures`.
"""

from __future__ import annotations

import base64
import math
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from reports.html_format import _text
from reports.results_access import is_number as _is_number


@dataclass(frozen=True)
class _Figure:
    title: str
    caption: str
    png: bytes
    source: str  # "run folder" or "redrawn from results.json"


_FIGURE_TEXT = {
    "empirical_vs_accountant": (
        "Empirical vs accountant ε",
        "Best sound empirical lower bound (y) against the accountant's ε (x) per private target. A point above "
        "a bound above the dashed line y = x would refute the claim.",
    ),
    "privacy_utility": (
        "Privacy-utility",
        "Test accuracy (top) and the best attack AUC (bottom, 0.5 = chance) per target ε; "
        "∞ is drawn at the right edge.",
    ),
    "roc_all": (
        "ROC of every target",
        "One panel per target, one colour per attack; log-log axes: the low false-positive corner is where "
        "membership inference matters (Carlini et al. 2022).",
    ),
}


def _figure_sort_key(path: Path) -> tuple[float, str]:
    tag = path.stem.removeprefix("roc_eps_")
    try:
        return (float(tag), path.name)
    except ValueError:
        return (math.inf, path.name)


def _collect_figures(
    results: dict[str, Any], run_dir: Path | None
) -> tuple[list[tuple[str, int, list[_Figure]]], list[str]]:
    """Figure groups (heading, columns, figures) and the names of figures this rendering lacks."""
    from audit.machinery.safe_files import PNG_MAGIC, read_run_file, run_folder_files

    # Regular files only, no symlink below the run folder, bounded: a figure cannot pull in a system file.
    available = run_folder_files(run_dir, run_dir / "figures", "*.png") if run_dir is not None else []

    def png(path: Path) -> bytes:
        """A figure listed in `available` (there is none without a run folder), read safely."""
        if run_dir is None:
            raise ValueError(f"no run folder to read {path.name} from")
        return read_run_file(run_dir, path, magic=PNG_MAGIC)

    by_stem = {p.stem: p for p in available}
    summary: list[_Figure] = []
    missing: list[str] = []
    used: set[str] = set()

    every_roc: list[_Figure] = []  # one panel per target: it needs the page's full width
    redrawn = None
    for stem in ("empirical_vs_accountant", "privacy_utility"):
        title, caption = _FIGURE_TEXT[stem]
        if stem in by_stem:
            summary.append(_Figure(title, caption, png(by_stem[stem]), "run folder"))
            used.add(stem)
            continue
        if redrawn is None:
            redrawn = _redraw_from_results(results)
        if stem in redrawn:
            summary.append(_Figure(title, caption, redrawn[stem], "redrawn from results.json"))
        elif results.get("targets"):
            missing.append(title)

    if "roc_all" in by_stem:
        title, caption = _FIGURE_TEXT["roc_all"]
        every_roc = [_Figure(title, caption, png(by_stem["roc_all"]), "run folder")]
        used.add("roc_all")
    elif results.get("targets"):
        missing.append("ROC curves (they need the run folder's figures/; results.json holds no ROC points)")
    per_target = []
    for path in sorted((p for p in available if p.stem.startswith("roc_eps_")), key=_figure_sort_key):
        tag = path.stem.removeprefix("roc_eps_")
        label = "∞" if tag == "inf" else tag
        per_target.append(
            _Figure(
                f"ROC, ε = {label}",
                "Every attack on this target.",
                png(path),
                "run folder",
            )
        )
        used.add(path.stem)
    synthetic = []
    for path in (p for p in available if p.stem.startswith("synthetic_")):
        title = path.stem.removeprefix("synthetic_").replace("_", " ")
        synthetic.append(_Figure(f"Synthetic data: {title}", "", png(path), "run folder"))
        used.add(path.stem)
    others = [_Figure(p.stem.replace("_", " "), "", png(p), "run folder") for p in available if p.stem not in used]
    groups = [
        ("Summary", 2, summary),
        ("ROC of every target", 1, every_roc),
        ("ROC per target (log-log axes)", 3, per_target),
        ("Synthetic data", 1, synthetic),
        ("Other figures", 2, others),
    ]
    return [g for g in groups if g[2]], missing


def _redraw_from_results(results: dict[str, Any]) -> dict[str, bytes]:
    """The figures results.json suffices for, drawn with reports.figures into a temporary folder."""
    targets = [t for t in results.get("targets") or [] if isinstance(t, dict)]
    if not targets:
        return {}
    from reports.figures import (
        epsilon_label,
        plot_empirical_vs_accountant,
        plot_privacy_utility,
    )

    out: dict[str, bytes] = {}
    with tempfile.TemporaryDirectory(prefix="privacy-audit-figures-") as tmp:
        private = [
            t
            for t in targets
            if t.get("epsilon_target") is not None
            and _is_number(t.get("epsilon_accountant"))
            and _is_number(t.get("epsilon_lb_best"))
        ]
        if private:
            path = plot_empirical_vs_accountant(
                [t["epsilon_accountant"] for t in private],
                [t["epsilon_lb_best"] for t in private],
                [epsilon_label(t["epsilon_target"]) for t in private],
                Path(tmp) / "empirical_vs_accountant.png",
            )
            out["empirical_vs_accountant"] = path.read_bytes()
        usable = [
            t
            for t in targets
            if _is_number(t.get("test_accuracy")) and any(_is_number(a.get("auc")) for a in t.get("attacks") or [])
        ]
        if usable:
            path = plot_privacy_utility(
                [t.get("epsilon_target") for t in usable],
                [t["test_accuracy"] for t in usable],
                [max(a["auc"] for a in t["attacks"] if _is_number(a.get("auc"))) for t in usable],
                Path(tmp) / "privacy_utility.png",
            )
            out["privacy_utility"] = path.read_bytes()
    return out


def _figure_layout(png: bytes) -> str | None:
    """Where the figure's legends and plots are (reports.figures records it in the PNG), for layout checks."""
    from io import BytesIO

    from PIL import Image

    from reports.figures import FIGURE_LAYOUT_KEY

    try:
        with Image.open(BytesIO(png)) as image:
            return getattr(image, "text", {}).get(FIGURE_LAYOUT_KEY)
    except Exception:  # noqa: BLE001 - a figure from elsewhere without the record is still shown
        return None


def _figures_section(results: dict[str, Any], run_dir: Path | None) -> str:
    groups, missing = _collect_figures(results, run_dir)
    if not groups and not missing:
        return ""
    out = ['<section id="figures"><h2>Figures</h2>']
    if missing:
        out.append('<p class="note">Not available in this rendering: ' + "; ".join(_text(m) for m in missing) + ".</p>")
    for heading, columns, figures in groups:
        items = []
        for figure in figures:
            data = base64.b64encode(figure.png).decode("ascii")
            source = "" if figure.source == "run folder" else f" <em>({_text(figure.source)})</em>"
            caption = f" {_text(figure.caption)}" if figure.caption else ""
            layout = _figure_layout(figure.png)
            layout_attribute = f' data-layout="{_text(layout)}"' if layout else ""
            items.append(
                f'<figure><img src="data:image/png;base64,{data}" alt="{_text(figure.title)}"{layout_attribute}>'
                f"<figcaption><strong>{_text(figure.title)}.</strong>{caption}{source}</figcaption></figure>"
            )
        out.append(f'<h3>{_text(heading)}</h3><div class="figures cols{columns}">{"".join(items)}</div>')
    out.append("</section>")
    return "".join(out)
