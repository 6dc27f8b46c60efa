"""report.html as a reviewer sees it at 1280 px in headless Chromium: nothing wider than the page,
and every figure's legend inside its figure, covering no plot.

The figures are drawn by reports.figures at their widest (six targets × five attacks); each PNG
records where its legends and plotting areas are, the report passes that on (`data-layout`), and a
script in the real browser measures the rendered page. Skips where Chromium is not installed.
"""

from __future__ import annotations

import copy
import json
import re
import subprocess
from pathlib import Path

import numpy as np
import pytest

from reports.figures import (
    RocCurve,
    epsilon_label,
    plot_empirical_vs_accountant,
    plot_privacy_utility,
    plot_roc_curves,
    plot_roc_panels,
    plot_synthetic_summary,
)
from reports.html_report import write_html_report
from tests.conftest import REPO

CHROMIUM = next(
    (Path(p) for p in ("/usr/bin/chromium", "/usr/bin/chromium-browser", "/usr/bin/google-chrome") if Path(p).exists()),
    None,
)
ATTACKS = ("loss", "shadow", "lira_online", "lira_offline", "rmia")
WIDTH = 1280

# Runs in the page after load; writes what it measured into <pre id="layout-check">.
MEASURE = """
<script>
window.addEventListener("load", () => {
  const problems = [];
  const page = document.documentElement;
  if (page.scrollWidth > page.clientWidth) problems.push(`page scrolls sideways: ${page.scrollWidth} > ${page.clientWidth}`);
  const main = document.querySelector("main");
  const style = getComputedStyle(main);
  const right = main.getBoundingClientRect().right - parseFloat(style.paddingRight) + 0.5;
  for (const el of main.querySelectorAll("*")) {
    const box = el.getBoundingClientRect();
    if (box.width > 0 && box.right > right) {
      problems.push(`${el.tagName.toLowerCase()} in #${el.closest("section")?.id} ends at ${Math.round(box.right)} > ${Math.round(right)}`);
    }
  }
  let legends = 0;
  const figures = document.querySelectorAll("img[data-layout]");
  for (const img of figures) {
    const title = img.getAttribute("alt");
    const box = img.getBoundingClientRect();
    const frame = img.closest("figure").getBoundingClientRect();
    if (box.left < frame.left - 0.5 || box.right > frame.right + 0.5) problems.push(`${title}: image wider than its figure`);
    const layout = JSON.parse(img.dataset.layout);
    const place = (f) => [box.left + f[0] * box.width, box.top + f[1] * box.height,
                          box.left + f[2] * box.width, box.top + f[3] * box.height];
    for (const fractions of layout.legends) {
      legends += 1;
      const [x0, y0, x1, y1] = place(fractions);
      if (x0 < box.left - 0.5 || y0 < box.top - 0.5 || x1 > box.right + 0.5 || y1 > box.bottom + 0.5) {
        problems.push(`${title}: a legend leaves its figure`);
      }
      for (const axes of layout.axes) {
        const [a0, b0, a1, b1] = place(axes);
        if (x0 < a1 && a0 < x1 && y0 < b1 && b0 < y1) problems.push(`${title}: a legend covers a plot`);
      }
    }
  }
  const out = document.createElement("pre");
  out.id = "layout-check";
  out.textContent = JSON.stringify({problems, figures: figures.length, legends, width: page.clientWidth});
  document.body.appendChild(out);
});
</script>
"""


def _widest_results() -> dict:
    results = json.loads((REPO / "tests" / "data" / "results_default_example.json").read_text())
    results = copy.deepcopy(results)
    for target in results["targets"]:
        first = target["attacks"][0]
        target["attacks"] = [{**copy.deepcopy(first), "name": name} for name in ATTACKS]
    return results


def _run_folder(folder: Path, results: dict) -> Path:
    """figures/ as the runner draws them, for six targets and five attacks (the busiest default run)."""
    figures = folder / "figures"
    figures.mkdir(parents=True)
    fpr = np.logspace(-4, 0, 200)
    curves = {}
    for k, target in enumerate(results["targets"]):
        eps = target["epsilon_target"]
        curves[eps] = [RocCurve(name, fpr, fpr ** (0.55 + 0.08 * i + 0.04 * k)) for i, name in enumerate(ATTACKS)]
        tag = "inf" if eps is None else f"{eps:g}"
        plot_roc_curves(curves[eps], figures / f"roc_eps_{tag}.png", title=f"ROC, {epsilon_label(eps)}")
    plot_roc_panels([(epsilon_label(e), c) for e, c in curves.items()], figures / "roc_all.png", "ROC of every target")
    private = [t for t in results["targets"] if t["epsilon_target"] is not None]
    plot_empirical_vs_accountant(
        [t["epsilon_accountant"] for t in private],
        [t["epsilon_lb_best"] for t in private],
        [epsilon_label(t["epsilon_target"]) for t in private],
        figures / "empirical_vs_accountant.png",
    )
    plot_privacy_utility(
        [t["epsilon_target"] for t in results["targets"]],
        [t["test_accuracy"] for t in results["targets"]],
        [max(a["auc"] for a in t["attacks"]) for t in results["targets"]],
        figures / "privacy_utility.png",
    )
    entries = [
        {
            "generator": g,
            "epsilon_target": e,
            "dcr": {"dcr_share": 0.5 + 0.01 * i},
            "nndr": {"p10": 0.6},
            "mia": {"auc": 0.52},
        }
        for i, (g, e) in enumerate([("gaussian_copula", None), ("dp_vae", 1.0), ("dp_vae", 8.0), ("noisy_copy", None)])
    ]
    plot_synthetic_summary(entries, figures / "synthetic_summary.png")
    return folder


def _measure(report: Path, tmp_path: Path) -> dict:
    page = report.read_text(encoding="utf-8").replace("</body>", MEASURE + "</body>")
    probe = report.with_name("report-measured.html")
    probe.write_text(page, encoding="utf-8")
    completed = subprocess.run(
        [
            str(CHROMIUM),
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--hide-scrollbars",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            f"--user-data-dir={tmp_path / 'profile'}",
            f"--window-size={WIDTH},1600",
            "--virtual-time-budget=5000",
            "--dump-dom",
            probe.resolve().as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    found = re.search(r'<pre id="layout-check">(.*?)</pre>', completed.stdout, re.S)
    assert found, completed.stderr[-2000:]
    return json.loads(
        found.group(1).replace("&quot;", '"').replace("&gt;", ">").replace("&lt;", "<").replace("&amp;", "&")
    )


@pytest.mark.slow
@pytest.mark.browser
@pytest.mark.skipif(CHROMIUM is None, reason="needs Chromium (apt-get install chromium)")
def test_report_at_1280_px_has_no_sideways_overflow_and_every_legend_inside_its_figure(tmp_path):
    results = _widest_results()
    folder = _run_folder(tmp_path / "run", results)
    report = write_html_report(results, folder)
    measured = _measure(report, tmp_path)
    assert measured["width"] <= WIDTH
    assert measured["figures"] >= 10 and measured["legends"] >= 9  # every drawn figure was measured
    assert measured["problems"] == []


@pytest.mark.browser
@pytest.mark.skipif(CHROMIUM is None, reason="needs Chromium (apt-get install chromium)")
def test_the_check_sees_a_legend_drawn_over_the_plot(tmp_path):
    """The measurement is not vacuous: matplotlib's usual in-axes legend is caught."""
    import matplotlib.pyplot as plt

    from reports import figures as figure_module

    results = _widest_results()
    folder = tmp_path / "run"
    (folder / "figures").mkdir(parents=True)
    fig, ax = plt.subplots(figsize=(5, 4))
    for name in ATTACKS:
        ax.plot([0, 1], [0, 1], label=name)
    ax.legend(loc="center")
    figure_module._save(fig, folder / "figures" / "roc_eps_99.png")
    measured = _measure(write_html_report(results, folder), tmp_path)
    assert any("covers a plot" in problem for problem in measured["problems"])
