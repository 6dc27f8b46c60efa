"""A DP target's claim decided by all its tests together: membership rows and the one-run canary rows
(white-box twin, federated canary clients), in one Holm family; and the run's conformance claim."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from audit.machinery.conformance_verdict import CLAIM as CONFORMANCE_CLAIM
from audit.machinery.verdict import verdict_for_results
from audit.statistics.epsilon_bounds import epsilon_lower_bound_one_run, one_run_ceiling
from audit.statistics.one_run_power import curve_ceilings, fdp_perfect_p_value, whitebox_power
from audit.statistics.tradeoff_curves import dpsgd_privacy_profile

# A small DP-SGD setting (σ, q, T) whose accountant-free ε at δ 1e-5 is a few units: cheap profiles.
SIGMA, Q, T, DELTA = 1.0, 0.1, 50, 1e-5


@pytest.fixture(scope="module")
def curves():
    profile = dpsgd_privacy_profile(SIGMA, Q, T)
    eps, deltas = profile.arrays()
    claim = float(eps[np.flatnonzero(deltas <= DELTA)[0]])
    return (
        claim,
        curve_ceilings(SIGMA, Q, T, 2000, DELTA, claim, factors=(1.0, 0.9, 0.7)),
        {str(k): fdp_perfect_p_value(profile, k) for k in (2000, 8000)},
    )


def _tests(claim, m, ceilings):  # as one_run_row chooses them: those a perfect attack passes alone at α
    able = [
        t
        for t, ok in (
            ("steinke", one_run_ceiling(m, DELTA, 0.05) > claim),
            ("fdp", ceilings[0]["fdp_perfect_p_value"] <= 0.05),
        )
        if ok
    ]
    return able or ["steinke", "fdp"]


def _row(claim, ceilings, by_m, p_value=0.5, m=2000):
    return {
        "family": "white-box one-run",
        "claim": claim,
        "delta": DELTA,
        "m": m,
        "kind": "dirac",
        "p_value": p_value,
        "tests": _tests(claim, m, ceilings),
        "refutable_alone": True,
        "ceiling": 0.0,
        "steinke_epsilon": 0.1,
        "fdp_refuted": False,
        "gaussian_sum_epsilon": 0.5,
        "andrew_epsilon": 0.7,
        "curve_ceilings": ceilings,
        "fdp_perfect_p_by_m": by_m,
        "test_accuracy_with_canaries": 0.8,
        "test_accuracy_target": 0.81,
        "train_seconds_with_canaries": 2.0,
        "train_seconds_target": 1.5,
    }


def _membership_row(rng, m=100):
    members = rng.random(m) < 0.5
    bound = epsilon_lower_bound_one_run(rng.normal(size=m), members, DELTA)
    return {
        "name": "loss",
        "epsilon_lb": {"one_run": bound.epsilon},
        "epsilon_lb_details": {"one_run": bound.details},
        "tpr_at_fpr": {},
    }


def _results(claim, attacks, row):
    target = {
        "epsilon_target": round(claim),
        "delta": DELTA,
        "epsilon": {},
        "epsilon_accountant": claim,
        "accountant": "prv",
        "test_accuracy": 0.81,
        "attacks": attacks,
        "whitebox_one_run": row,
    }
    return {"schema_version": 3, "config": {"attacks": {"confidence": 0.95}}, "targets": [target], "synthetic": []}


def test_the_ceiling_is_read_from_curves_computed_before_any_score(curves):
    claim, ceilings, by_m = curves
    assert ceilings[0]["factor"] == 1.0 and ceilings[0]["epsilon"] == claim
    # Less noise: a larger ε, harder to refute (the perfect attack's p-value never falls).
    assert all(a["epsilon"] <= b["epsilon"] for a, b in zip(ceilings, ceilings[1:]))
    assert all(a["fdp_perfect_p_value"] <= b["fdp_perfect_p_value"] + 1e-12 for a, b in zip(ceilings, ceilings[1:]))
    loose = whitebox_power(_row(claim, ceilings, by_m), 0.05)
    assert loose["powered"] and loose["ceiling"] > claim and loose["curve_ceiling"] == loose["ceiling"]
    # At a level below the perfect attack's p-value the row has no power and names the m that would give it.
    level = ceilings[0]["fdp_perfect_p_value"] / 2
    tight = whitebox_power(_row(claim, ceilings, by_m), level)
    assert not tight["powered"]
    assert tight["needed"] is None or by_m[str(tight["needed"])] <= level / 2


def test_a_claim_its_membership_rows_cannot_test_is_held_by_a_powered_twin_row(curves):
    claim, ceilings, by_m = curves
    rng = np.random.default_rng(5)
    membership = _membership_row(rng)
    assert one_run_ceiling(100, DELTA, 0.05) <= claim  # the membership row alone: no power
    verdict = verdict_for_results(_results(claim, [membership], _row(claim, ceilings, by_m)))[0]["verdict"]
    (dp,) = [c for c in verdict["claims"] if c["claim"].endswith("-DP")]
    assert dp["status"] == "held" and dp["ceiling"] > claim and "untestable alone" in dp["reason"]
    assert verdict["status"] == "pass" and verdict["family_wise_error"]["n_tests"] == 1
    # The twin's test rejects: the claim is refuted, whatever the membership rows say.
    refuted = verdict_for_results(_results(claim, [membership], _row(claim, ceilings, by_m, p_value=1e-6)))[0]
    assert refuted["verdict"]["status"] == "fail" and refuted["targets"][0]["violation"] is True


def test_without_power_anywhere_the_claim_is_untestable_and_says_which_canaries_would_do(curves):
    claim, ceilings, by_m = curves
    weak = [dict(c, fdp_perfect_p_value=1.0) for c in ceilings[:1]]
    by_m = {"100": 1.0, "8000": 0.001}
    assert one_run_ceiling(100, DELTA, 0.025) <= claim  # neither test has power with 100 canaries
    row = dict(_row(claim, weak, by_m, p_value=0.9, m=100), refutable_alone=False)
    verdict = verdict_for_results(_results(claim, [_membership_row(np.random.default_rng(6))], row))[0]["verdict"]
    (dp,) = [c for c in verdict["claims"] if c["claim"].endswith("-DP")]
    assert dp["status"] == "untestable" and "8,000 canaries" in dp["needed"]
    assert verdict["status"] == "inconclusive" and verdict["family_wise_error"]["n_tests"] == 0


def test_a_federated_canary_client_row_tests_the_client_level_claim(curves):
    claim, ceilings, by_m = curves
    row = dict(_row(claim, ceilings, by_m), family="canary clients (one-run)", level="client")
    client_mia = dict(
        _membership_row(np.random.default_rng(7)),
        name="client_mia",
        claim={"level": "client", "client": None, "epsilon": claim},
    )
    results = _results(claim, [client_mia], row)
    results["targets"][0]["epsilon_accountant"] = None  # federated targets: the rows' claims
    verdict = verdict_for_results(results)[0]["verdict"]
    (client,) = [c for c in verdict["claims"] if "client-level" in c["claim"]]
    # canary clients (random directions) have no proven or measured power: the claim is not refuted,
    # never held, and the line says what would decide (docs/verdict.md "Power")
    assert (
        client["status"] == "not_refuted"
        and client["power"]["decider"]
        and set(client["checks"])
        == {
            f"ε = {round(claim):g} · client_mia (client-level ε) · one_run",
            f"ε = {round(claim):g} · canary clients (one-run)",
        }
    )


def _conformance(p_values, failed=()):
    checks = [
        {"check": name, "passed": True, "p_value": p, "value": 1.0, "expected": 1.0, "detail": ""}
        for name, p in p_values.items()
    ]
    checks += [
        {
            "check": "trained_steps",
            "passed": "trained_steps" not in failed,
            "p_value": None,
            "value": 5,
            "expected": 6,
            "detail": "steps in the accountant's history",
        }
    ]
    return {"checks": checks, "statistical_p_values": dict(p_values), "rules_failed": list(failed)}


def test_the_runs_conformance_is_one_claim_one_test_in_the_family_and_exact_checks_are_rules(curves):
    claim, ceilings, by_m = curves
    results = _results(claim, [], _row(claim, ceilings, by_m))
    results["targets"][0]["conformance"] = _conformance({"noise_std": 0.4, "per_example_clipping": 0.3})
    verdict = verdict_for_results(results)[0]["verdict"]
    assert verdict["family_wise_error"]["n_tests"] == 2
    (conf,) = [c for c in verdict["claims"] if c["claim"] == CONFORMANCE_CLAIM]
    assert conf["status"] == "held"
    results["targets"][0]["conformance"] = _conformance({"noise_std": 1e-9, "per_example_clipping": 0.3})
    assert verdict_for_results(results)[0]["verdict"]["status"] == "fail"
    results["targets"][0]["conformance"] = _conformance({"noise_std": 0.4}, failed=("trained_steps",))
    failed = verdict_for_results(results)[0]["verdict"]
    (conf,) = [c for c in failed["claims"] if c["claim"] == CONFORMANCE_CLAIM]
    assert failed["status"] == "fail" and conf["status"] == "refuted" and "trained_steps" in conf["reason"]


@pytest.mark.slow  # a small federation trained with 200 canary clients (~12 s with the first torch import)
def test_canary_clients_in_a_client_level_federation_score_the_in_canaries_higher():
    from targets.canary_clients import CanaryClients
    from targets.federated import FederatedSpec, train_federation

    rng = np.random.default_rng(0)
    clients = [(rng.normal(size=(20, 4)).astype(np.float32), rng.integers(0, 2, 20)) for _ in range(4)]
    spec = FederatedSpec(
        hidden_sizes=[8],
        rounds=4,
        local_epochs=1,
        batch_size=10,
        lr=0.1,
        momentum=0.0,
        max_grad_norm=1.0,
        level="client",
        client_sample_rate=0.5,
        client_clip=1.0,
    )
    d = 4 * 8 + 8 + 8 * 2 + 2
    canaries = CanaryClients(d, 200, 0.5, seed=1)
    train_federation(
        clients,
        2,
        spec,
        epsilon=8.0,
        delta=1e-5,
        accountant="prv",
        seed=2,
        device=torch.device("cpu"),
        client_noise_multiplier=0.3,
        canary_clients=canaries,
    )
    scores, coins = canaries.scores("all"), canaries.coins
    assert canaries.rounds == 4 and canaries.joined > 0
    # σ = 0.3 over 4 rounds at q = 0.5: in-canaries sum to ≈ 2 (rounds joined), out-canaries to ≈ 0.
    assert scores[coins].mean() - scores[~coins].mean() > 1.0
    assert np.corrcoef(canaries.scores("final"), coins)[0, 1] > 0.3
    with pytest.raises(ValueError, match="client-level"):
        train_federation(
            clients,
            2,
            FederatedSpec(
                hidden_sizes=[8],
                rounds=1,
                local_epochs=1,
                batch_size=10,
                lr=0.1,
                momentum=0.0,
                max_grad_norm=1.0,
                level="record",
            ),
            epsilon=8.0,
            delta=1e-5,
            accountant="prv",
            seed=2,
            device=torch.device("cpu"),
            canary_clients=CanaryClients(d, 10, 0.5, seed=1),
        )


def test_the_trained_targets_accountant_history_must_match_the_training_it_recorded():
    from types import SimpleNamespace

    from audit.sweep.conformance_rows import trained_accountant_checks

    right = SimpleNamespace(
        accountant_history=((1.2, 0.05, 100), (1.2, 0.05, 20)), steps=120, noise_multiplier=1.2, sample_rate=0.05
    )
    assert all(c["passed"] for c in trained_accountant_checks(right))
    short = SimpleNamespace(**{**vars(right), "steps": 240})  # the accountant was told half the steps
    wrong_q = SimpleNamespace(**{**vars(right), "sample_rate": 0.1})  # …or another sampling rate
    assert [c["check"] for c in trained_accountant_checks(short) if not c["passed"]] == ["trained_steps"]
    assert [c["check"] for c in trained_accountant_checks(wrong_q) if not c["passed"]] == ["trained_sigma_q"]


@pytest.mark.slow  # trains a tiny DP target, then steps its setup ~300 times (the real Opacus objects)
def test_the_main_jobs_conformance_entry_passes_on_its_own_correct_setup():
    from audit.sweep.conformance_rows import conformance_entry
    from targets.training import TrainingSpec, train_target

    rng = np.random.default_rng(1)
    features, labels = rng.normal(size=(200, 5)).astype(np.float32), rng.integers(0, 2, 200)
    spec = TrainingSpec(hidden_sizes=[8], epochs=2, batch_size=20, lr=0.1, momentum=0.0, max_grad_norm=1.0)
    target = train_target(
        features, labels, 2, spec, epsilon=4.0, delta=1e-5, accountant="prv", seed=3, device=torch.device("cpu")
    )
    entry = conformance_entry(
        features, labels, 2, spec, target=target, accountant="prv", seed=3, device=torch.device("cpu")
    )
    assert entry["rules_failed"] == [] and {
        "noise_std",
        "per_example_clipping",
        "poisson_sampling",
        "independent_inclusion",
    } <= set(entry["statistical_p_values"])
    assert {c["check"] for c in entry["checks"]} >= {"trained_steps", "trained_sigma_q", "steps", "accountant_sigma"}
