"""Figures of an audit, drawn with matplotlib (Agg, no display needed).

Every legend sits outside the plotting area (below it, in the figure's constrained layout), so
it can neither cover a curve nor the title, and grows the figure instead of being cut off. Each
PNG records where its legends and plotting areas ended up (`FIGURE_LAYOUT_KEY`, fractions of the
image), which the report carries along and its layout test checks in a real browser.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

# PNG text chunk holding {"legends": [[x0, y0, x1, y1], ...], "axes": [...], "labels": [...]}
# (point labels): fractions of the image's width and height, origin top-left (as a browser measures).
FIGURE_LAYOUT_KEY = "privacy-audit:layout"
_DPI = 110
_FLOOR = 1e-4  # log-log ROC axes start here


@dataclass(frozen=True)
class RocCurve:
    label: str
    fpr: np.ndarray
    tpr: np.ndarray


def epsilon_label(epsilon: float | None) -> str:
    return "ε = ∞" if epsilon is None or math.isinf(epsilon) else f"ε = {epsilon:g}"


def _save(fig: plt.Figure, path: Path) -> Path:
    """Save at a fixed size (no tight bbox: the recorded boxes must match the pixels).

    The figure is drawn once, at the PNG's resolution, and that drawing is both measured and written:
    `savefig` would draw it a second time (half of a figure's CPU; a run draws one per target and three
    summaries), and boxes measured on a drawing at another resolution are off by a pixel or two.
    """
    fig.set_dpi(_DPI)
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()  # type: ignore[attr-defined]  # the Agg canvas (forced above) has one
    width, height = fig.bbox.width, fig.bbox.height

    def fractions(box) -> list[float]:
        return [
            round(box.x0 / width, 4),
            round(1 - box.y1 / height, 4),
            round(box.x1 / width, 4),
            round(1 - box.y0 / height, 4),
        ]

    legends = list(fig.legends) + [legend for ax in fig.axes if (legend := ax.get_legend()) is not None]
    layout = {
        "legends": [fractions(legend.get_window_extent(renderer)) for legend in legends],
        "axes": [fractions(ax.get_window_extent(renderer)) for ax in fig.axes if ax.get_visible()],
        "labels": [fractions(text.get_window_extent(renderer)) for ax in fig.axes for text in ax.texts],
    }
    pixels = np.asarray(fig.canvas.buffer_rgba())  # type: ignore[attr-defined]  # the Agg canvas has one
    plt.imsave(path, pixels, format="png", dpi=_DPI, metadata={FIGURE_LAYOUT_KEY: json.dumps(layout)})
    plt.close(fig)
    return Path(path)


def _legend_below(fig: plt.Figure, handles, labels, columns: int) -> None:
    fig.legend(handles, labels, loc="outside lower center", ncols=max(1, columns), fontsize=8, frameon=False)


def _legend_right(fig: plt.Figure, handles, labels) -> None:
    fig.legend(handles, labels, loc="outside right upper", fontsize=8, frameon=False)


def _roc_axes(ax, title: str) -> None:
    grid = np.logspace(-4, 0, 50)
    ax.plot(grid, grid, ls="--", color="grey", lw=1, label="chance")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(_FLOOR, 1)
    ax.set_ylim(_FLOOR, 1)
    ax.set_title(title, fontsize=10)


def plot_roc_curves(curves: Sequence[RocCurve], path: Path, title: str) -> Path:
    """ROC on log-log axes: the low-FPR corner is where attacks matter (Carlini et al. 2022)."""
    fig, ax = plt.subplots(figsize=(5.2, 5.0), layout="constrained")
    for curve in curves:
        ax.plot(np.clip(curve.fpr, _FLOOR, 1), np.clip(curve.tpr, _FLOOR, 1), label=curve.label, lw=1.4)
    _roc_axes(ax, title)
    ax.set_xlabel("false positive rate")
    ax.set_ylabel("true positive rate")
    handles, labels = ax.get_legend_handles_labels()
    _legend_below(fig, handles, labels, columns=3)
    return _save(fig, path)


def plot_roc_panels(panels: Sequence[tuple[str, Sequence[RocCurve]]], path: Path, title: str) -> Path:
    """One log-log ROC panel per target (title = the target), one colour per attack across panels.

    A single axes with every target × attack curve (30 lines, 10 colours) could not be read; the
    panels share axes so a curve's height compares across targets.
    """
    n = max(1, len(panels))
    columns = min(3, n)
    rows = math.ceil(n / columns)
    fig, axes = plt.subplots(
        rows,
        columns,
        figsize=(3.4 * columns + 1.2, 3.0 * rows + 0.6),
        layout="constrained",
        sharex=True,
        sharey=True,
        squeeze=False,
    )
    names = list(dict.fromkeys(curve.label for _, curves in panels for curve in curves))
    colours = {name: plt.cm.tab10(i % 10) for i, name in enumerate(names)}
    for ax, (panel_title, curves) in zip(axes.flat, panels):
        for curve in curves:
            ax.plot(
                np.clip(curve.fpr, _FLOOR, 1),
                np.clip(curve.tpr, _FLOOR, 1),
                lw=1.3,
                color=colours[curve.label],
                label=curve.label,
            )
        _roc_axes(ax, panel_title)
    for ax in list(axes.flat)[len(panels) :]:
        ax.set_visible(False)
    fig.supxlabel("false positive rate", fontsize=10)
    fig.supylabel("true positive rate", fontsize=10)
    fig.suptitle(title, fontsize=11)
    handles = [plt.Line2D([], [], color=colours[name], lw=1.6) for name in names]
    handles.append(plt.Line2D([], [], color="grey", ls="--", lw=1))
    _legend_right(fig, handles, [*names, "chance"])
    return _save(fig, path)


def _label_offsets(xs: Sequence[float], ys: Sequence[float], span: float) -> list[tuple[float, float]]:
    """Text offsets (points) that keep labels of nearby points apart: above each point, one line
    higher for each neighbour to its left that is closer than a label's width (ε 0.5 and 1 overlapped)."""
    order = np.argsort(xs)
    offsets: list[tuple[float, float]] = [(0.0, 0.0)] * len(xs)
    previous: tuple[float, float] | None = None
    level = 0
    for index in order:
        x, y = xs[index], ys[index]
        close = previous is not None and abs(x - previous[0]) < 0.12 * span and abs(y - previous[1]) < 0.12 * span
        level = level + 1 if close else 0
        offsets[index] = (4.0, 5.0 + 10.0 * level)
        previous = (x, y)
    return offsets


def plot_empirical_vs_accountant(
    accountant_eps: Sequence[float], empirical_lb: Sequence[float], labels: Sequence[str], path: Path
) -> Path:
    """Empirical ε lower bound against the accountant's ε; a point above y = x is a violation."""
    fig, ax = plt.subplots(figsize=(5.2, 5.0), layout="constrained")
    finite = [e for e in accountant_eps if math.isfinite(e)] or [1.0]
    top = max(max(finite), max(empirical_lb, default=0.0)) * 1.1 + 0.1
    line = ax.plot([0, top], [0, top], ls="--", color="grey", lw=1)[0]
    points = ax.scatter(accountant_eps, empirical_lb, zorder=3, color="tab:red")
    for (x, y, text), offset in zip(
        zip(accountant_eps, empirical_lb, labels), _label_offsets(list(accountant_eps), list(empirical_lb), top)
    ):
        ax.annotate(text, (x, y), textcoords="offset points", xytext=offset, fontsize=8)
    ax.set_xlim(0, top)
    ax.set_ylim(0, top)
    ax.set_xlabel("accountant ε (theoretical upper bound)")
    ax.set_ylabel("empirical ε lower bound")
    ax.set_title("Empirical vs accountant ε")
    _legend_below(
        fig, [line, points], ["y = x (lower bound = accountant ε)", "target (above the line = violation)"], columns=1
    )
    return _save(fig, path)


def plot_privacy_utility(
    epsilons: Sequence[float | None], accuracies: Sequence[float], aucs: Sequence[float], path: Path
) -> Path:
    """Test accuracy (top panel) and best attack AUC (bottom panel) per target ε; ∞ at the right edge.

    Two quantities, two labelled y-axes: one unlabelled axis mixed a utility with an attack score.
    """
    finite = [e for e in epsilons if e is not None and math.isfinite(e)]
    inf_x = (max(finite) * 2) if finite else 1.0
    xs = np.array([inf_x if e is None or math.isinf(e) else e for e in epsilons], dtype=float)
    order = np.argsort(xs)
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(5.2, 5.0), layout="constrained", sharex=True)
    top.plot(xs[order], np.array(accuracies)[order], marker="o", color="tab:blue")
    top.set_ylabel("test accuracy")
    top.set_title("Privacy-utility")
    bottom.plot(xs[order], np.array(aucs)[order], marker="s", color="tab:red")
    bottom.axhline(0.5, ls=":", color="grey", lw=1)
    bottom.set_ylabel("best attack AUC\n(0.5 = chance)")
    bottom.set_xscale("log")
    bottom.set_xticks(xs[order])
    bottom.set_xticklabels([epsilon_label(epsilons[i]).replace("ε = ", "") for i in order])
    bottom.minorticks_off()
    bottom.set_xlabel("target ε (∞ = non-private, right edge)")
    return _save(fig, path)


def plot_synthetic_summary(entries: Sequence[dict], path: Path) -> Path:
    """DCR share, NNDR p10 and distance-MIA AUC per generator against its ε (∞ at the right)."""
    finite = [e["epsilon_target"] for e in entries if e.get("epsilon_target") is not None]
    inf_x = max(finite) * 2 if finite else 1.0
    panels = (
        ("DCR share (0.5 ideal)", lambda e: e["dcr"]["dcr_share"], 0.5),
        ("NNDR p10 (0 = copies)", lambda e: e["nndr"]["p10"], None),
        ("distance-MIA AUC (0.5 ideal)", lambda e: e["mia"]["auc"], 0.5),
    )
    fig, axes = plt.subplots(1, 3, figsize=(12, 4.0), layout="constrained")
    generators = list(dict.fromkeys(e["generator"] for e in entries))
    for ax, (title, value, ideal) in zip(axes, panels):
        for generator in generators:
            rows = sorted(
                (inf_x if e.get("epsilon_target") is None else e["epsilon_target"], value(e))
                for e in entries
                if e["generator"] == generator
            )
            ax.plot([x for x, _ in rows], [y for _, y in rows], marker="o", label=generator)
        if ideal is not None:
            ax.axhline(ideal, ls=":", color="grey", lw=1)
        ax.set_xscale("log")
        ax.set_xlabel("generator ε (∞ = non-private, right edge)")
        ax.set_title(title)
    handles, labels = axes[0].get_legend_handles_labels()
    _legend_below(fig, handles, labels, columns=min(len(labels), 5))
    return _save(fig, path)
