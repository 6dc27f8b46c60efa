"""The ledger composes like dp_accounting, never below it, and its textbook figures match the formulas.

"Directly" below means: dp_accounting's accountants (or its PLD library, for (ε, δ) pairs, which have
no DpEvent) fed the same mechanisms one by one in the order they were recorded — not the ledger's
grouped, canonically ordered composition.
"""

from __future__ import annotations

import math
import random

import dp_accounting
import pytest
from dp_accounting.pld import common as pld_common
from dp_accounting.pld import privacy_loss_distribution as pld
from scipy import optimize, stats

from audit.errors import AuditInputError
from audit.ledger.composition import PLD_DISCRETIZATION, compose_mechanisms
from audit.ledger.mechanisms import validate_mechanism

DELTA = 1e-5


def _mechanisms(*specs):
    return [validate_mechanism(spec) for spec in specs]


def _events_one_by_one(mechanisms):
    """Each mechanism as dp_accounting's event, every repetition listed separately, in recorded order."""
    events = []
    for m in mechanisms:
        if m["kind"] == "dpsgd":
            step = dp_accounting.PoissonSampledDpEvent(
                m["sample_rate"], dp_accounting.GaussianDpEvent(m["noise_multiplier"])
            )
            events.append(dp_accounting.SelfComposedDpEvent(step, m["steps"]))
        elif m["kind"] == "gaussian":
            events += [dp_accounting.GaussianDpEvent(m["scale"] / m["sensitivity"])] * m["count"]
        elif m["kind"] == "laplace":
            events += [dp_accounting.LaplaceDpEvent(m["scale"] / m["sensitivity"])] * m["count"]
        elif m["kind"] == "zcdp":
            events += [dp_accounting.ZCDpEvent(m["rho"])] * m["count"]
    return dp_accounting.ComposedDpEvent(events)


def _pld_direct(mechanisms, delta=DELTA):
    accountant = dp_accounting.pld.PLDAccountant(value_discretization_interval=PLD_DISCRETIZATION)
    accountant.compose(_events_one_by_one(mechanisms))
    return accountant.get_epsilon(delta)


HETEROGENEOUS = [
    {"kind": "dpsgd", "noise_multiplier": 1.1, "sample_rate": 0.01, "steps": 500},
    {"kind": "laplace", "scale": 20.0, "sensitivity": 2.0, "count": 3},
    {"kind": "gaussian", "scale": 8.0, "count": 2},
    {"kind": "dpsgd", "noise_multiplier": 2.0, "sample_rate": 0.05, "steps": 200},
    {"kind": "laplace", "scale": 10.0},
    {"kind": "gaussian", "scale": 8.0},
    {"kind": "dpsgd", "noise_multiplier": 1.1, "sample_rate": 0.01, "steps": 500},
]


def test_pld_composition_equals_dp_accounting_on_the_same_events_and_is_never_below_it():
    mechanisms = _mechanisms(*HETEROGENEOUS)
    ours = compose_mechanisms(mechanisms, DELTA)
    direct = _pld_direct(mechanisms)
    assert ours.method == "pld"
    assert ours.epsilon == pytest.approx(direct, rel=1e-6)
    assert ours.epsilon >= direct
    # and dp_accounting's own RDP bound is above the tight figure, as it must be
    rdp = dp_accounting.rdp.RdpAccountant()
    rdp.compose(_events_one_by_one(mechanisms))
    assert rdp.get_epsilon(DELTA) >= ours.epsilon


@pytest.mark.parametrize("seed", range(4))
def test_random_release_sequences_compose_at_or_above_dp_accounting(seed):
    rng = random.Random(seed)
    specs = []
    for _ in range(rng.randint(1, 6)):
        kind = rng.choice(["dpsgd", "gaussian", "laplace"])
        if kind == "dpsgd":
            specs.append(
                {
                    "kind": kind,
                    "noise_multiplier": rng.choice([0.8, 1.5, 3.0]),
                    "sample_rate": rng.choice([0.01, 0.1]),
                    "steps": rng.choice([50, 300]),
                }
            )
        else:
            specs.append(
                {
                    "kind": kind,
                    "scale": rng.choice([5.0, 20.0, 50.0]),
                    "sensitivity": rng.choice([1.0, 2.0]),
                    "count": rng.randint(1, 4),
                }
            )
    mechanisms = _mechanisms(*specs)
    ours, direct = compose_mechanisms(mechanisms, DELTA).epsilon, _pld_direct(mechanisms)
    assert ours == pytest.approx(direct, rel=1e-6) and ours >= direct


def test_the_figure_does_not_depend_on_the_order_releases_arrived():
    mechanisms = _mechanisms(*HETEROGENEOUS)
    shuffled = mechanisms[:]
    random.Random(1).shuffle(shuffled)
    assert compose_mechanisms(shuffled, DELTA) == compose_mechanisms(mechanisms, DELTA)


def test_epsilon_delta_pairs_compose_as_their_worst_case_pld():
    mechanisms = _mechanisms(
        {"kind": "laplace", "scale": 4.0},
        {"kind": "epsilon_delta", "epsilon": 1.0, "delta": 1e-6},
        {"kind": "epsilon_delta", "epsilon": 0.5, "delta": 0.0, "count": 2},
    )
    ours = compose_mechanisms(mechanisms, DELTA)
    direct = pld.from_laplace_mechanism(4.0, value_discretization_interval=PLD_DISCRETIZATION)
    for eps, delta in ((1.0, 1e-6), (0.5, 0.0), (0.5, 0.0)):
        direct = direct.compose(
            pld.from_privacy_parameters(
                pld_common.DifferentialPrivacyParameters(eps, delta), value_discretization_interval=PLD_DISCRETIZATION
            )
        )
    assert ours.method == "pld" and ours.has_pairs
    assert ours.epsilon == pytest.approx(direct.get_epsilon_for_delta(DELTA), rel=1e-6)
    assert ours.epsilon >= direct.get_epsilon_for_delta(DELTA)


def test_a_pair_whose_delta_exceeds_the_datasets_leaves_epsilon_unbounded():
    ours = compose_mechanisms(_mechanisms({"kind": "epsilon_delta", "epsilon": 1.0, "delta": 1e-4}), DELTA)
    assert math.isinf(ours.epsilon) and math.isinf(ours.basic_epsilon) and math.isinf(ours.advanced_epsilon)
    assert ours.as_dict()["epsilon"] is None  # JSON has no infinity


def test_without_a_pld_the_rdp_accountant_composes_and_says_so():
    mechanisms = _mechanisms(
        {"kind": "zcdp", "rho": 0.05, "count": 2},
        {"kind": "gaussian", "scale": 10.0},
        {"kind": "dpsgd", "noise_multiplier": 1.0, "sample_rate": 0.02, "steps": 100},
    )
    ours = compose_mechanisms(mechanisms, DELTA)
    rdp = dp_accounting.rdp.RdpAccountant()
    rdp.compose(_events_one_by_one(mechanisms))
    assert ours.method == "rdp" and "zCDP" in ours.method_note
    assert ours.epsilon == pytest.approx(rdp.get_epsilon(DELTA), rel=1e-6) and ours.epsilon >= rdp.get_epsilon(DELTA)


def test_rdp_with_pairs_adds_the_pairs_by_basic_composition():
    pair = {"kind": "epsilon_delta", "epsilon": 0.7, "delta": 2e-6}
    mechanisms = _mechanisms({"kind": "zcdp", "rho": 0.1}, pair)
    ours = compose_mechanisms(mechanisms, DELTA)
    rdp = dp_accounting.rdp.RdpAccountant()
    rdp.compose(dp_accounting.ZCDpEvent(0.1))
    assert ours.method == "rdp + basic composition of (ε, δ) pairs"
    by_hand = rdp.get_epsilon(DELTA - 2e-6) + 0.7
    assert ours.epsilon == pytest.approx(by_hand, rel=1e-6) and ours.epsilon >= by_hand


# ---------------------------------------------------------------------------------------------
# The worked example (docs/ledger.md): textbook formulas computed here by hand, PLD beside them.


def _gaussian_epsilon(sigma_over_sensitivity: float, delta: float) -> float:
    """Exact (ε, δ) of the Gaussian mechanism (Balle & Wang 2018, Thm 8), solved for ε."""
    s = sigma_over_sensitivity

    def gap(eps):
        return stats.norm.cdf(1 / (2 * s) - eps * s) - math.exp(eps) * stats.norm.cdf(-1 / (2 * s) - eps * s) - delta

    return optimize.brentq(gap, 0, 100, xtol=1e-12)


def _advanced(epsilons: list[float], slack: float) -> float:
    """Dwork, Rothblum & Vadhan 2010 (Dwork & Roth 2014, Thm 3.20), heterogeneous form."""
    return math.sqrt(2 * math.log(1 / slack) * sum(e * e for e in epsilons)) + sum(e * math.expm1(e) for e in epsilons)


def test_textbook_example_a_thousand_laplace_queries():
    # 1000 counting queries, each ε = 0.01 (Laplace scale 100): basic Σε = 10; advanced at δ' = 1e-5
    # = √(2·1000·ln 1e5)·0.01 + 1000·0.01·(e^0.01 − 1) ≈ 1.618; the tight PLD figure is below both.
    ours = compose_mechanisms(_mechanisms({"kind": "laplace", "scale": 100.0, "count": 1000}), DELTA)
    by_hand_advanced = math.sqrt(2 * 1000 * math.log(1e5)) * 0.01 + 1000 * 0.01 * math.expm1(0.01)
    assert ours.basic_epsilon == pytest.approx(10.0)
    assert ours.advanced_epsilon == pytest.approx(by_hand_advanced, rel=1e-12)
    assert by_hand_advanced == pytest.approx(1.618, abs=1e-3)
    assert ours.epsilon < ours.advanced_epsilon < ours.basic_epsilon
    assert ours.epsilon == pytest.approx(_pld_direct(_mechanisms({"kind": "laplace", "scale": 100.0, "count": 1000})))


WORKED_EXAMPLE = [
    {"kind": "laplace", "scale": 10.0, "count": 10},  # 10 counting queries, ε = 0.1 each
    {"kind": "gaussian", "scale": 20.0, "count": 5},  # 5 sums of sensitivity 1, σ = 20
    {"kind": "dpsgd", "noise_multiplier": 1.1, "sample_rate": 0.01, "steps": 1000},  # one model
    {"kind": "dpsgd", "noise_multiplier": 2.0, "sample_rate": 0.02, "steps": 500},  # another model
]


def test_worked_example_reproduces_basic_and_advanced_by_hand_with_the_tight_pld_beside_them():
    mechanisms = _mechanisms(*WORKED_EXAMPLE)
    ours = compose_mechanisms(mechanisms, DELTA)
    n_curves = 5 + 2  # mechanisms that trade ε for δ: 5 Gaussian queries, 2 trainings

    def training(sigma, q, steps, delta):  # no closed form for DP-SGD: its own PLD, one training at a time
        return _pld_direct(
            _mechanisms({"kind": "dpsgd", "noise_multiplier": sigma, "sample_rate": q, "steps": steps}), delta
        )

    def units(delta_each):
        return (
            [0.1] * 10
            + [_gaussian_epsilon(20.0, delta_each)] * 5
            + [training(1.1, 0.01, 1000, delta_each), training(2.0, 0.02, 500, delta_each)]
        )

    basic = sum(units(DELTA / n_curves))
    advanced = _advanced(units(DELTA / 2 / n_curves), DELTA / 2)
    assert ours.basic_epsilon == pytest.approx(basic, rel=1e-6)
    assert ours.advanced_formula_epsilon == pytest.approx(advanced, rel=1e-6)
    assert ours.advanced_epsilon == min(
        ours.advanced_formula_epsilon, ours.basic_epsilon
    )  # reported: never above basic
    assert ours.epsilon == pytest.approx(_pld_direct(mechanisms), rel=1e-6)
    assert ours.method == "pld" and ours.epsilon < min(basic, advanced)


def test_mechanisms_are_validated_with_the_field_named():
    for bad, field in (
        ({"kind": "dpsgd", "noise_multiplier": -1.0, "sample_rate": 0.1, "steps": 10}, "noise_multiplier"),
        ({"kind": "dpsgd", "noise_multiplier": float("nan"), "sample_rate": 0.1, "steps": 10}, "noise_multiplier"),
        ({"kind": "gaussian", "scale": 1.0, "sensitivity": 0.0}, "sensitivity"),
        ({"kind": "laplace", "scale": float("inf")}, "scale"),
        ({"kind": "epsilon_delta", "epsilon": 1.0, "delta": 1.0}, "delta"),
        ({"kind": "dpsgd", "noise_multiplier": 1.0, "sample_rate": 0.1, "steps": 2.5}, "steps"),
        ({"kind": "laplace", "scale": 1.0, "shape": 3}, "shape"),
        ({"kind": "exponential"}, "kind"),
    ):
        with pytest.raises(AuditInputError, match=field):
            validate_mechanism(bad)


def test_the_worked_example_in_the_docs_shows_the_ledgers_own_figures():
    from tests.conftest import REPO

    text = (REPO / "docs" / "ledger.md").read_text(encoding="utf-8")
    table = text.split("<!-- worked-example")[1].split("\n\n")[0]
    rows = [
        [cell.strip() for cell in line.strip("|").split("|")]
        for line in table.splitlines()
        if line.startswith("| ") and line[2].isdigit()
    ]
    sequence = WORKED_EXAMPLE + [{"kind": "epsilon_delta", "epsilon": 1.0, "delta": 1e-6}]
    assert len(rows) == len(sequence)
    for n, row in enumerate(rows, start=1):
        c = compose_mechanisms(_mechanisms(*sequence[:n]), DELTA)
        advanced = f"{c.advanced_epsilon:.4g}" + (
            f" (formula {c.advanced_formula_epsilon:.4g})" if c.advanced_formula_epsilon > c.advanced_epsilon else ""
        )
        assert row[1:] == [f"{c.epsilon:.4g}", f"{c.basic_epsilon:.4g}", advanced], row
