"""The figures read as the issue asked: one ROC panel per target, labels apart, two labelled axes.

Each PNG records where its legends, plots and point labels landed (reports.figures.FIGURE_LAYOUT_KEY).
"""

from __future__ import annotations

import json
from itertools import combinations

import numpy as np
from PIL import Image

from reports.figures import (
    FIGURE_LAYOUT_KEY,
    RocCurve,
    epsilon_label,
    plot_empirical_vs_accountant,
    plot_privacy_utility,
    plot_roc_panels,
)

EPSILONS = [0.5, 1.0, 2.0, 4.0, 8.0, None]


def _layout(path) -> dict:
    with Image.open(path) as image:
        return json.loads(image.text[FIGURE_LAYOUT_KEY])


def _overlap(a, b) -> bool:
    return a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]


def test_every_target_gets_its_own_roc_panel_and_the_legend_covers_none(tmp_path):
    fpr = np.logspace(-4, 0, 50)
    panels = [
        (epsilon_label(e), [RocCurve(name, fpr, np.sqrt(fpr)) for name in ("loss", "shadow", "lira", "rmia")])
        for e in EPSILONS
    ]
    layout = _layout(plot_roc_panels(panels, tmp_path / "roc_all.png", "ROC of every target"))
    assert len(layout["axes"]) == len(EPSILONS)
    (legend,) = layout["legends"]  # one shared legend: 4 attacks + chance, not 6 × 4 entries
    assert all(0 <= v <= 1 for v in legend)
    assert not any(_overlap(legend, axes) for axes in layout["axes"])


def test_labels_of_nearby_epsilons_do_not_overlap(tmp_path):
    # The default run: bounds all near 0, accountant ε 0.49 and 0.99 a label's width apart.
    layout = _layout(
        plot_empirical_vs_accountant(
            [0.493, 0.992, 1.999, 3.99, 7.999],
            [0.0, 0.0, 0.04, 0.0, 0.0],
            [epsilon_label(e) for e in EPSILONS[:5]],
            tmp_path / "eps.png",
        )
    )
    assert len(layout["labels"]) == 5
    assert not any(_overlap(a, b) for a, b in combinations(layout["labels"], 2))


def test_privacy_utility_has_one_axis_per_quantity(tmp_path):
    layout = _layout(
        plot_privacy_utility(
            EPSILONS, [0.6, 0.65, 0.68, 0.71, 0.73, 0.74], [0.5, 0.52, 0.52, 0.52, 0.53, 0.7], tmp_path / "pu.png"
        )
    )
    top, bottom = sorted(layout["axes"], key=lambda box: box[1])
    assert not _overlap(top, bottom)
