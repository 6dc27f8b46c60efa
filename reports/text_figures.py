"""The text job's figure: canary exposure against how often the canary was in the training set."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from reports.figures import _legend_below, _save, plt

RANDOM_BASELINE = 1.4427  # 1/ln 2: mean exposure of a secret the model never saw (rank uniform)


def plot_exposure_vs_repetitions(series: Sequence[tuple[str, list[dict]]], path: Path, ceiling: float) -> Path:
    """One line per target (label, exposure summary rows); x = repetitions (0 = control canaries,
    never inserted), y = mean exposure in bits; the chance level and the ceiling log2 |space| dashed."""
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    fig, ax = plt.subplots(figsize=(6.4, 4.2), layout="constrained")
    handles, labels = [], []
    for label, rows in series:
        xs = [max(r["repetitions"], 0.5) for r in rows]  # controls (0) drawn at 0.5 on the log axis
        ys = [r["exposure_mean"] for r in rows]
        (line,) = ax.plot(xs, ys, marker="o")
        handles.append(line)
        labels.append(label)
    base = ax.axhline(RANDOM_BASELINE, color="grey", linestyle="--")
    top = ax.axhline(ceiling, color="black", linestyle=":")
    handles += [base, top]
    labels += ["never-seen secret (mean 1.44 bits)", f"ceiling log2|space| = {ceiling:.1f} bits"]
    ax.set_xscale("log", base=2)
    ax.set_xlabel("times the canary was inserted (0.5 = control, never inserted)")
    ax.set_ylabel("exposure (bits)")
    ax.set_title("Canary exposure vs repetitions")
    ax.set_ylim(0, ceiling * 1.05)
    _legend_below(fig, handles, labels, columns=3)
    return _save(fig, Path(path))
