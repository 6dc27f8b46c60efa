"""Family-wise error control for the tests that decide a verdict.

Pure functions of p-values. The verdict of an audit is "fail" as soon as one of its tests rejects,
so the stated confidence holds for the verdict only if the probability that ANY true null is
rejected is ≤ α — Holm's step-down procedure guarantees that under any dependence between tests.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

__all__ = ["holm_rejections"]


def holm_rejections(p_values: Sequence[float], alpha: float) -> list[bool]:
    """Which hypotheses Holm's step-down procedure rejects at family-wise error rate `alpha`.

    Holm 1979, "A Simple Sequentially Rejective Multiple Test Procedure", Scand. J. Statist. 6:65-70.
    Sort the K p-values ascending; reject p_(1), …, p_(j) while p_(i) ≤ α / (K − i + 1) and stop at
    the first that is not. Valid under arbitrary dependence (the attacks on one target share a
    model, so their tests are dependent). At least one rejection happens exactly when
    min p ≤ α / K, i.e. the pass/fail outcome equals Bonferroni's; Holm can only name more of the
    failing tests. NaN p-values are refused (ValueError).
    """
    if not 0 < alpha < 1:
        raise ValueError(f"alpha: expected a number in (0, 1), got {alpha!r}")
    values = [float(p) for p in p_values]
    if any(math.isnan(p) or p < 0 for p in values):
        raise ValueError(f"p_values: expected numbers ≥ 0, got {values!r}")
    order = sorted(range(len(values)), key=lambda i: values[i])
    rejected = [False] * len(values)
    k = len(values)
    for rank, index in enumerate(order):
        if values[index] <= alpha / (k - rank):
            rejected[index] = True
        else:
            break
    return rejected
