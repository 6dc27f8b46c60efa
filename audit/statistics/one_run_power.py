"""What a perfect attack could show with the main job's white-box one-run row at a Holm level.

The row (audit.sweep.whitebox_one_run) carries, computed before any score was read, the f-DP
one-run test's perfect-attack p-values (Mahloujifar, Melis, Chaudhuri 2024, arXiv 2410.22235)
against the claim's DP-SGD curve and the same DP-SGD with less noise, and at larger m; the
Steinke et al. ceiling (arXiv 2305.08846) follows from m and δ. The verdict asks at its family's
first Holm level α/K whether the row could have refuted its claim. Pure.
"""
from __future__ import annotations

from typing import Any

from audit.statistics.epsilon_bounds import one_run_ceiling

__all__ = ["whitebox_power"]


def whitebox_power(row: dict[str, Any], level: float) -> dict[str, Any]:
    """What a perfect attack could show with the white-box one-run row at Holm level `level` (the
    sound tests its p-value combines, `row["tests"]`, at `level`/len each, Bonferroni):
    {powered, ceiling, steinke_ceiling, curve_ceiling, needed}. Pure; reads only what the row computed before any score (m, δ, the curves' perfect-attack
    p-values), so the family stays pre-declared. Rows of older results (without `curve_ceilings`)
    fall back to `refutable_alone`."""
    claim, m, delta = float(row["claim"]), int(row["m"]), float(row.get("delta") or 0.0)
    tests = [t for t in row.get("tests") or ["steinke", "fdp"] if t in ("steinke", "fdp")] or ["steinke", "fdp"]
    half = level / len(tests)  # each test of the row's Bonferroni pair (or the one test alone)
    steinke = one_run_ceiling(m, delta, half) if "steinke" in tests else 0.0
    curves = [c for c in row.get("curve_ceilings") or [] if isinstance(c, dict)]
    if not curves:
        return {"powered": bool(row.get("refutable_alone")), "ceiling": row.get("ceiling"), "steinke_ceiling": steinke,
                "curve_ceiling": None, "needed": row.get("canaries_needed")}
    if "fdp" not in tests:
        curves = []
    refutable = [float(c["epsilon"]) for c in curves if float(c["fdp_perfect_p_value"]) <= half]
    curve_ceiling = max(refutable) if refutable else None
    powered = steinke > claim or any(float(c["factor"]) == 1.0 and float(c["fdp_perfect_p_value"]) <= half
                                     for c in curves)
    needed = None
    if not powered:
        needed = next((int(k) for k, p in sorted((row.get("fdp_perfect_p_by_m") or {}).items(), key=lambda kv: int(kv[0]))
                       if float(p) <= level / 2 or one_run_ceiling(int(k), delta, level / 2) > claim), None)
    return {"powered": bool(powered), "ceiling": max([steinke] + refutable), "steinke_ceiling": steinke,
            "curve_ceiling": curve_ceiling, "needed": needed}
