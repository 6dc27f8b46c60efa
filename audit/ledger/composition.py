"""Composing a dataset's releases: the tight figure from dp_accounting, basic and advanced beside it.

The tight figure composes every mechanism as a dp_accounting privacy event:

- **PLD** (privacy loss distributions, Koskela et al. / Doroshenko et al. 2022, arXiv:2207.04380)
  when every mechanism has one: DP-SGD (Poisson-sampled Gaussian), Gaussian, Laplace, and (ε, δ)
  pairs, which enter as the worst mechanism with that guarantee (dp_accounting's
  `from_privacy_parameters`: loss ε, −ε, and ∞ with probability δ). Pessimistic discretisation:
  the ε reported is an upper bound on the true composed ε.
- **RDP** (Mironov 2017, arXiv:1702.07476) otherwise (a ρ-zCDP release has no PLD here). RDP
  cannot hold an (ε, δ) pair with δ > 0, so pairs are then added by basic composition: the RDP
  mechanisms get δ − Σδ_pairs and the pairs' ε are summed on top (sound, looser).

Basic composition (Dwork & Roth 2014, Thm 3.16): Σ ε_i at Σ δ_i. Advanced composition (Dwork,
Rothblum & Vadhan 2010; Dwork & Roth Thm 3.20, in its heterogeneous form, which Kairouz, Oh &
Viswanath 2015, arXiv:1311.0776, Thm 3.5 tightens): ε' = √(2 ln(1/δ') Σ ε_i²) + Σ ε_i (e^{ε_i} − 1)
at δ' + Σ δ_i. How the dataset's δ is split (the issue left it open; written here once):
pairs keep their own δ; of what is left, advanced composition keeps half as its slack δ' (all of it
when no mechanism needs a δ) and the mechanisms that trade ε for δ (Gaussian, DP-SGD, zCDP) share
the rest equally, each then taking its own tight ε at that δ (Gaussian: Balle & Wang 2018,
arXiv:1805.06530; DP-SGD: PLD of that one training; zCDP: ρ + 2√(ρ ln(1/δ_i)), Bun & Steinke 2016).
One DP-SGD training is one mechanism here, as the textbooks treat a trained model.

`compose_mechanisms` is a pure function of the multiset of mechanisms: identical mechanisms are
grouped into one self-composition and groups compose in a canonical order, so the figure never
depends on the order in which concurrent writers recorded them. Composing in another order moves
the PLD figure in its 8th significant digit (floating-point FFT rounding), so the tight ε is rounded
UP to 7 significant digits: never below dp_accounting fed the same events one by one.
"""

from __future__ import annotations

import functools
import math
from collections import Counter
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from audit.ledger.mechanisms import canonical_key

if TYPE_CHECKING:
    import dp_accounting

# dp_accounting (and the SciPy it loads) is imported by the functions that compose, not with the
# module: ~1–2 s of CPU that a ledger command or writer recording without a budget
# (`compute_spent=False`), listing, or setting a budget on an empty dataset never needs.

__all__ = [
    "Composition",
    "compose_mechanisms",
    "dp_event_of",
    "PLD_DISCRETIZATION",
    "PLD_EPSILON_LIMIT",
    "check_dpsgd_computable",
    "composed_epsilon_bound",
    "pld_grid_bytes",
]

# dp_accounting's default; the ε reported is pessimistic (an upper bound) at this resolution.
PLD_DISCRETIZATION = 1e-4
# The PLD grid spans the composed privacy loss: about 2·ε/discretisation points (ε = 10⁴ from
# 10⁸ DP-SGD steps, or 10⁷ Laplace queries, asked for 34–750 GiB and crashed). Above this composed-ε
# bound (an RDP figure on integer orders, ~0.05 s) the PLD is not built: the RDP figure — an
# upper bound too, looser — is reported instead, with the memory the grid would have needed.
PLD_EPSILON_LIMIT = 200.0
_PROXY_ORDERS = (2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 128, 256, 512, 1024)
_GRID_COPIES = 6  # arrays of the grid's size alive at once while dp_accounting composes by FFT


@dataclass(frozen=True)
class Composition:
    """A dataset's spent budget at its δ: the tight figure, which accountant gave it, and the textbook bounds."""

    delta: float
    epsilon: float
    method: str  # "pld" | "rdp" | "rdp + basic composition of (ε, δ) pairs" | "none"
    method_note: str
    basic_epsilon: float
    # Reported: min(advanced formula, basic). Both bound the same δ, so the smaller is the better
    # textbook bound; the formula alone (e^ε term) is far looser than basic for a few large releases.
    advanced_epsilon: float
    n_mechanisms: int  # after expanding counts (a DP-SGD training counts once)
    has_pairs: bool
    advanced_formula_epsilon: float = 0.0  # Dwork–Rothblum–Vadhan's ε' itself, before the min

    @property
    def advanced_note(self) -> str:
        """Why the advanced figure equals basic, when the formula gave more (empty otherwise)."""
        if self.advanced_formula_epsilon > self.advanced_epsilon:
            formula = "∞" if math.isinf(self.advanced_formula_epsilon) else f"{self.advanced_formula_epsilon:.4g}"
            return (
                f"the advanced-composition formula gives {formula}, looser than basic composition: the smaller is shown"
            )
        return ""

    def as_dict(self) -> dict[str, Any]:
        # JSON has no infinity: an unbounded figure is written as null with the reason in method_note.
        return {k: (None if isinstance(v, float) and math.isinf(v) else v) for k, v in asdict(self).items()}


def dp_event_of(spec: dict[str, Any]) -> dp_accounting.DpEvent | None:
    """The dp_accounting event of one mechanism (count included); None for an (ε, δ) pair, which has none."""
    import dp_accounting

    kind = spec["kind"]
    if kind == "dpsgd":
        step = dp_accounting.PoissonSampledDpEvent(
            spec["sample_rate"], dp_accounting.GaussianDpEvent(spec["noise_multiplier"])
        )
        return dp_accounting.SelfComposedDpEvent(step, spec["steps"])
    if kind == "gaussian":  # dp_accounting's Gaussian has sensitivity 1: the noise in units of Δ
        event = dp_accounting.GaussianDpEvent(spec["scale"] / spec["sensitivity"])
    elif kind == "laplace":
        event = dp_accounting.LaplaceDpEvent(spec["scale"] / spec["sensitivity"])
    elif kind == "zcdp":
        event = dp_accounting.ZCDpEvent(spec["rho"])
    else:
        return None
    return event if spec.get("count", 1) == 1 else dp_accounting.SelfComposedDpEvent(event, spec["count"])


@functools.cache
def _pld_accountant_with_pairs() -> type:
    """dp_accounting's PLD accountant class, extended as below (defined on first use: see the imports)."""
    from dp_accounting import pld
    from dp_accounting.pld import common as pld_common
    from dp_accounting.pld import privacy_loss_distribution as pld_library

    class PLDAccountantWithPairs(pld.PLDAccountant):
        """dp_accounting's PLD accountant, plus (ε, δ) pairs composed as their worst-case PLD.

        dp_accounting has no event for a bare (ε, δ) guarantee; its PLD library does
        (`from_privacy_parameters`). The accountant's composed PLD is `_pld` (its documented state in
        this version); we compose the pair's PLD onto it exactly as the accountant composes its own.
        """

        _pld: Any  # set by pld.PLDAccountant.__init__ (dp_accounting is untyped)

        def compose_pair(self, epsilon: float, delta: float, count: int) -> None:
            pair = pld_library.from_privacy_parameters(
                pld_common.DifferentialPrivacyParameters(epsilon, delta),
                value_discretization_interval=self._value_discretization_interval,
            )
            self._pld = self._pld.compose(pair.self_compose(count) if count > 1 else pair)

    return PLDAccountantWithPairs


def _grouped(mechanisms: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Identical mechanisms (up to count) merged, summing counts; DP-SGD trainings count in `count` too."""
    counts: Counter = Counter()
    first: dict[tuple, dict[str, Any]] = {}
    for spec in mechanisms:
        key = canonical_key(spec)
        counts[key] += spec.get("count", 1)
        first.setdefault(key, spec)
    return [{**first[key], "count": counts[key]} for key in sorted(counts)]


def _training_event(spec: dict[str, Any]) -> dp_accounting.DpEvent:
    """One DP-SGD group: `count` trainings of T steps each."""
    import dp_accounting

    one = dp_event_of({k: v for k, v in spec.items() if k != "count"})
    return one if spec["count"] == 1 else dp_accounting.SelfComposedDpEvent(one, spec["count"])


def _quiet_absl() -> None:
    # dp_accounting's RDP logs a warning per fractional order it cannot converge on (q ≥ 0.1): noise
    # on the console, not a problem (those orders are skipped; the bound stays valid).
    import logging

    logging.getLogger("absl").setLevel(logging.ERROR)


def composed_epsilon_bound(groups: list[dict[str, Any]], delta: float) -> float:
    """A fast upper bound on the composed ε (RDP on integer orders, plus the pairs' Σε): what sizes the PLD grid."""
    import dp_accounting

    _quiet_absl()
    events = [
        _training_event(g) if g["kind"] == "dpsgd" else dp_event_of(g) for g in groups if g["kind"] != "epsilon_delta"
    ]
    bound = sum(g["epsilon"] * g["count"] for g in groups if g["kind"] == "epsilon_delta")
    if events:
        rdp = dp_accounting.rdp.RdpAccountant(list(_PROXY_ORDERS))
        rdp.compose(dp_accounting.ComposedDpEvent(events))
        bound += float(rdp.get_epsilon(delta if delta > 0 else 1e-12))
    return bound


def pld_grid_bytes(epsilon_bound: float) -> float:
    """Memory the PLD composition would take for a composed-ε bound (see PLD_EPSILON_LIMIT)."""
    return 2 * epsilon_bound / PLD_DISCRETIZATION * 8 * _GRID_COPIES


def _size(n: float) -> str:
    for unit, scale in (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20)):
        if n >= scale:
            return f"{n / scale:,.1f} {unit}"
    return f"{n / 1024:,.1f} KiB"


def _tight(groups: list[dict[str, Any]], delta: float) -> tuple[float, str, str]:
    import dp_accounting

    _quiet_absl()
    pairs = [g for g in groups if g["kind"] == "epsilon_delta"]
    events = [_training_event(g) if g["kind"] == "dpsgd" else dp_event_of(g) for g in groups if g not in pairs]
    composed = dp_accounting.ComposedDpEvent(events)
    pld = _pld_accountant_with_pairs()(value_discretization_interval=PLD_DISCRETIZATION)
    bound = composed_epsilon_bound(groups, delta)
    too_large = not bound <= PLD_EPSILON_LIMIT
    skipped = (
        (
            f"PLD not computed: the composed ε exceeds {PLD_EPSILON_LIMIT:g} (RDP bound "
            f"{bound:.4g}), its grid would need about {_size(pld_grid_bytes(bound))}; "
        )
        if too_large
        else ""
    )
    if not too_large and pld.supports(composed):
        pld.compose(composed)
        for pair in pairs:
            pld.compose_pair(pair["epsilon"], pair["delta"], pair["count"])
        if delta <= 0 and any(
            g["kind"] not in ("laplace",) and not (g["kind"] == "epsilon_delta" and g["delta"] == 0) for g in groups
        ):
            return (
                math.inf,
                "pld",
                "PLD: δ = 0 leaves ε unbounded for mechanisms that need a δ (Gaussian, DP-SGD, pairs with δ > 0)",
            )
        return (
            float(pld.get_epsilon(delta)),
            "pld",
            (
                f"dp_accounting PLD accountant (pessimistic, discretisation {PLD_DISCRETIZATION:g})"
                + ("; (ε, δ) pairs as their worst-case PLD" if pairs else "")
            ),
        )
    rdp = dp_accounting.rdp.RdpAccountant()
    if not rdp.supports(composed):  # every kind we validate is supported by one of the two
        raise ValueError("a mechanism is supported by neither the PLD nor the RDP accountant")
    rdp.compose(composed)
    pair_delta = sum(p["delta"] * p["count"] for p in pairs)
    pair_epsilon = sum(p["epsilon"] * p["count"] for p in pairs)
    left = delta - pair_delta
    why = skipped or "a mechanism has no PLD: ρ-zCDP"
    if not pairs:
        if delta <= 0 and events:
            return math.inf, "rdp", f"{skipped}RDP: δ = 0 leaves ε unbounded for mechanisms that need a δ"
        return float(rdp.get_epsilon(delta)), "rdp", f"dp_accounting RDP accountant ({why.rstrip('; ')})"
    method = "rdp + basic composition of (ε, δ) pairs"
    if left <= 0 and events:
        return math.inf, method, f"{skipped}the (ε, δ) pairs alone spend δ {pair_delta:g} ≥ the dataset's δ {delta:g}"
    if left < 0:
        return math.inf, method, f"{skipped}the (ε, δ) pairs alone spend δ {pair_delta:g} > the dataset's δ {delta:g}"
    eps = float(rdp.get_epsilon(left)) + pair_epsilon if events else pair_epsilon
    return (
        eps,
        method,
        (
            f"RDP for the mechanisms at δ {left:g} ({why.rstrip('; ')}), plus the "
            f"(ε, δ) pairs' Σε = {pair_epsilon:g} at Σδ = {pair_delta:g} (basic composition)"
        ),
    )


def _unit_epsilon(group: dict[str, Any], delta_each: float) -> float:
    """ε of ONE invocation of the group's mechanism at δ = `delta_each` (curve mechanisms only)."""
    import dp_accounting
    from dp_accounting.gaussian_mechanism import get_epsilon_gaussian

    if delta_each <= 0:
        return math.inf
    kind = group["kind"]
    if kind == "gaussian":
        return float(get_epsilon_gaussian(group["scale"] / group["sensitivity"], delta_each))
    if kind == "zcdp":
        rho = group["rho"]
        return rho + 2 * math.sqrt(rho * math.log(1 / delta_each))
    one = {k: v for k, v in group.items() if k != "count"}
    bound = composed_epsilon_bound([{**one, "count": 1}], delta_each)
    if not bound <= PLD_EPSILON_LIMIT:  # one training beyond any budget: its RDP bound (see PLD_EPSILON_LIMIT)
        rdp = dp_accounting.rdp.RdpAccountant()
        rdp.compose(dp_event_of(one))
        return float(rdp.get_epsilon(delta_each))
    accountant = dp_accounting.pld.PLDAccountant(value_discretization_interval=PLD_DISCRETIZATION)
    accountant.compose(dp_event_of(one))
    return float(accountant.get_epsilon(delta_each))


def _textbook(groups: list[dict[str, Any]], delta: float) -> tuple[float, float]:
    """(basic, advanced) ε at the dataset's δ, splitting δ as the module docstring says."""
    pure = [(g["sensitivity"] / g["scale"], 0.0, g["count"]) for g in groups if g["kind"] == "laplace"]
    pairs = [(g["epsilon"], g["delta"], g["count"]) for g in groups if g["kind"] == "epsilon_delta"]
    curves = [g for g in groups if g["kind"] in ("gaussian", "dpsgd", "zcdp")]
    n_curves = sum(g["count"] for g in curves)
    free = delta - sum(d * n for _, d, n in pairs)

    def units(delta_each: float) -> list[tuple[float, int]]:
        return [(e, n) for e, _, n in pure + pairs] + [(_unit_epsilon(g, delta_each), g["count"]) for g in curves]

    if free < 0 or (n_curves and free <= 0):
        basic = math.inf
    else:
        basic = sum(e * n for e, n in units(free / n_curves if n_curves else 0.0))
    slack = free / 2 if n_curves else free
    if slack <= 0:
        advanced = math.inf
    else:
        listed = units(slack / n_curves if n_curves else 0.0)
        if any(math.isinf(e) for e, _ in listed):
            advanced = math.inf
        else:
            # e^ε overflows a float above ε ≈ 709: the bound is then unbounded, not an OverflowError.
            advanced = (
                math.inf
                if any(e > 700 for e, _ in listed)
                else (
                    math.sqrt(2 * math.log(1 / slack) * sum(n * e * e for e, n in listed))
                    + sum(n * e * math.expm1(e) for e, n in listed)
                )
            )
    return basic, advanced


def _round_up(epsilon: float) -> float:
    if not math.isfinite(epsilon) or epsilon <= 0:
        return epsilon
    unit = 10.0 ** (math.floor(math.log10(epsilon)) - 6)
    return math.ceil(epsilon / unit) * unit


def compose_mechanisms(mechanisms: list[dict[str, Any]], delta: float) -> Composition:
    """The composed ε at `delta` of validated mechanisms (audit.ledger.mechanisms): tight, basic, advanced."""
    groups = _grouped(mechanisms)
    n = sum(g["count"] for g in groups)
    if not groups:
        return Composition(delta, 0.0, "none", "no releases recorded", 0.0, 0.0, 0, False)
    epsilon, method, note = _tight(groups, delta)
    epsilon = _round_up(epsilon)
    basic, advanced = _textbook(groups, delta)
    return Composition(
        delta,
        epsilon,
        method,
        note,
        basic,
        min(advanced, basic),
        n,
        any(g["kind"] == "epsilon_delta" for g in groups),
        advanced,
    )


def check_dpsgd_computable(noise_multiplier: float, sample_rate: float, steps: int, delta: float, where: str) -> float:
    """Refuse (exit 2, with the estimate) a DP-SGD (σ, q, T) whose PLD would not fit here: its composed-ε
    bound above PLD_EPSILON_LIMIT means a grid of gigabytes or more, and a claim that weak needs no audit."""
    from audit.errors import AuditInputError

    spec = {"kind": "dpsgd", "noise_multiplier": noise_multiplier, "sample_rate": sample_rate, "steps": steps}
    bound = composed_epsilon_bound(_grouped([spec]), delta)
    if not bound <= PLD_EPSILON_LIMIT:
        raise AuditInputError(
            where,
            f"σ {noise_multiplier:g}, q {sample_rate:g}, T {steps}: the claim's ε is about "
            f"{bound:.4g} (RDP bound); its PLD would need about {_size(pld_grid_bytes(bound))} of "
            f"memory — a claim above ε = {PLD_EPSILON_LIMIT:g} is not one this audit can compute; "
            "raise σ or lower q or T",
        )
    return bound
