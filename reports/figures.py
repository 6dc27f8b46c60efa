"""Figures of an audit, drawn with matplotlib (Agg, no display needed)."""
from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402


@dataclass(frozen=True)
class RocCurve:
    label: str
    fpr: np.ndarray
    tpr: np.ndarray


def epsilon_label(epsilon: float | None) -> str:
    return "ε = ∞" if epsilon is None or math.isinf(epsilon) else f"ε = {epsilon:g}"


def plot_roc_curves(curves: Sequence[RocCurve], path: Path, title: str) -> Path:
    """ROC on log-log axes: the low-FPR corner is where attacks matter (Carlini et al. 2022)."""
    fig, ax = plt.subplots(figsize=(5.2, 4.6))
    floor = 1e-4
    for curve in curves:
        ax.plot(np.clip(curve.fpr, floor, 1), np.clip(curve.tpr, floor, 1), label=curve.label, lw=1.4)
    grid = np.logspace(-4, 0, 50)
    ax.plot(grid, grid, ls="--", color="grey", lw=1, label="chance")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(floor, 1)
    ax.set_ylim(floor, 1)
    ax.set_xlabel("false positive rate")
    ax.set_ylabel("true positive rate")
    ax.set_title(title)
    ax.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def plot_empirical_vs_accountant(
    accountant_eps: Sequence[float], empirical_lb: Sequence[float], labels: Sequence[str], path: Path
) -> Path:
    """Empirical ε lower bound against the accountant's ε; a point above y = x is a violation."""
    fig, ax = plt.subplots(figsize=(5.2, 4.6))
    finite = [e for e in accountant_eps if math.isfinite(e)] or [1.0]
    top = max(max(finite), max(empirical_lb, default=0.0)) * 1.1 + 0.1
    ax.plot([0, top], [0, top], ls="--", color="grey", lw=1, label="y = x (lower bound = accountant ε)")
    ax.scatter(accountant_eps, empirical_lb, zorder=3, color="tab:red")
    for x, y, text in zip(accountant_eps, empirical_lb, labels):
        ax.annotate(text, (x, y), textcoords="offset points", xytext=(4, 4), fontsize=8)
    ax.set_xlim(0, top)
    ax.set_ylim(0, top)
    ax.set_xlabel("accountant ε (theoretical upper bound)")
    ax.set_ylabel("empirical ε lower bound")
    ax.set_title("Empirical vs accountant ε")
    ax.legend(fontsize=8, loc="upper left")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def plot_privacy_utility(
    epsilons: Sequence[float | None], accuracies: Sequence[float], aucs: Sequence[float], path: Path
) -> Path:
    """Test accuracy and attack AUC per target ε; ∞ is drawn at the right edge."""
    finite = [e for e in epsilons if e is not None and math.isfinite(e)]
    inf_x = (max(finite) * 2) if finite else 1.0
    xs = [inf_x if e is None or math.isinf(e) else e for e in epsilons]
    order = np.argsort(xs)
    fig, ax = plt.subplots(figsize=(5.2, 4.0))
    ax.plot(np.array(xs)[order], np.array(accuracies)[order], marker="o", label="test accuracy")
    ax.plot(np.array(xs)[order], np.array(aucs)[order], marker="s", label="best attack AUC")
    ax.axhline(0.5, ls=":", color="grey", lw=1)
    ax.set_xscale("log")
    ax.set_xticks(sorted(xs))
    ax.set_xticklabels([epsilon_label(epsilons[i]).replace("ε = ", "") for i in np.argsort(xs)])
    ax.set_xlabel("target ε")
    ax.set_title("Privacy-utility")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def plot_synthetic_summary(entries: Sequence[dict], path: Path) -> Path:
    """DCR share, NNDR p10 and distance-MIA AUC per generator against its ε (∞ at the right)."""
    finite = [e["epsilon_target"] for e in entries if e.get("epsilon_target") is not None]
    inf_x = max(finite) * 2 if finite else 1.0
    panels = (("DCR share (0.5 ideal)", lambda e: e["dcr"]["dcr_share"], 0.5),
              ("NNDR p10 (0 = copies)", lambda e: e["nndr"]["p10"], None),
              ("distance-MIA AUC (0.5 ideal)", lambda e: e["mia"]["auc"], 0.5))
    fig, axes = plt.subplots(1, 3, figsize=(12, 3.6))
    for ax, (title, value, ideal) in zip(axes, panels):
        for generator in dict.fromkeys(e["generator"] for e in entries):
            rows = sorted((inf_x if e.get("epsilon_target") is None else e["epsilon_target"], value(e))
                          for e in entries if e["generator"] == generator)
            ax.plot([x for x, _ in rows], [y for _, y in rows], marker="o", label=generator)
        if ideal is not None:
            ax.axhline(ideal, ls=":", color="grey", lw=1)
        ax.set_xscale("log")
        ax.set_xlabel("generator ε (∞ = non-private, right edge)")
        ax.set_title(title)
    axes[0].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
