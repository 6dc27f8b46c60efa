"""The llm job's test of each claim (audit/text/llm_one_run.py): one pre-declared canary row per DP
fine-tuning, tested against the claim's DP-SGD curve, its power read from the positive control; and
the person-level weighting of repeated canaries (one row standing for k copies) is exact."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from audit.text.llm_one_run import canary_claim_row, claim_power, control_p_value, deciding_design

# A DP-SGD at ε ≈ 1 per person (σ, q, T as a small fine-tuning's), and m canaries, half of them in.
MECHANISM = {"noise_multiplier": 3.3, "sample_rate": 0.16, "steps": 25}
M = 200


def _coins(seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).random(M) < 0.5


def _row(scores: np.ndarray, coins: np.ndarray, claim: float = 1.0) -> dict:
    return canary_claim_row(
        scores,
        coins,
        design="panda",
        mode="full",
        unit="person",
        claim=claim,
        delta=1e-5,
        confidence=0.95,
        **MECHANISM,
    )


def test_the_deciding_design_is_fixed_by_the_config():
    assert deciding_design(["panda", "secret_sharer"]) == "panda"
    assert deciding_design(["secret_sharer", "panda"]) == "panda"
    assert deciding_design(["secret_sharer"]) == "secret_sharer"


@pytest.mark.slow  # the claim's PLD curve and the f-DP tests at several m: a few seconds
def test_power_comes_from_the_control_and_the_verdict_holds_only_with_it():
    from audit.machinery.verdict import verdict_for_results

    coins = _coins()
    null = np.random.default_rng(1).normal(size=M)  # a DP target's scores: no signal
    row = _row(null, coins)
    assert row["family"].startswith("black-box") and row["level"] == "full fine-tuning · person"
    assert row["refutable_alone"] and row["p_value"] > 0.05  # testable here, and not refuted by noise
    assert row["canaries_setting"] == "llm.canaries_per_design"
    # A control that memorised every canary refutes the claim's curve; one at chance does not.
    perfect = coins.astype(float) + np.random.default_rng(2).normal(scale=0.01, size=M)
    p_perfect = control_p_value(perfect, coins, row, 0.95)
    p_chance = control_p_value(np.random.default_rng(3).normal(size=M), coins, row, 0.95)
    assert p_perfect < 1e-4 and p_chance > 0.05
    statuses = {}
    for name, p in (("control", p_perfect), ("chance", p_chance), ("absent", None)):
        judged = dict(row)
        level = claim_power([judged], [p], 0.05)
        assert level == pytest.approx(0.05)  # one row that could refute alone: K = 1
        results = {
            "kind": "text",
            "targets": [
                {
                    "epsilon_target": 1.0,
                    "epsilon_accountant": 1.0,
                    "delta": 1e-5,
                    "attacks": [],
                    "whitebox_one_run": judged,
                }
            ],
            "synthetic": [],
        }
        decided, _ = verdict_for_results(results, None)
        (claim,) = decided["verdict"]["claims"]
        statuses[name] = (judged["power"]["kind"], claim["status"])
        assert "full fine-tuning · person-level" in claim["claim"]
    assert statuses == {
        "control": ("control", "held"),
        "chance": ("none", "not_refuted"),
        "absent": ("none", "not_refuted"),
    }


def test_claim_power_counts_the_rows_that_could_refute_alone():
    rows = [
        {"claim": 1.0, "kind": "panda", "mode": "full", "refutable_alone": True},
        {"claim": 8.0, "kind": "panda", "mode": "full", "refutable_alone": True},
        {"claim": 8.0, "kind": "panda", "mode": "lora", "refutable_alone": False},
    ]
    level = claim_power(rows, [0.01, 0.03, 1e-9], 0.05)
    assert level == pytest.approx(0.025)
    assert [r["power"]["kind"] for r in rows] == ["control", "none", "control"]
    assert rows[1]["power"]["decider"]


def test_one_row_standing_for_k_copies_gives_the_persons_gradient_exactly():
    """Person-level DP-SGD clips each person's SUM of document gradients: k identical copies sum to k
    times one copy's. The weighted row (PersonBatches `copies`) gives the same per-person gradient."""
    from opacus import GradSampleModule

    from targets.text_models import (
        PersonBatches,
        TextTrainingSpec,
        build_text_model,
        document_losses,
        sum_grad_samples_by_person,
    )

    spec = TextTrainingSpec(d_model=16, n_layers=1, n_heads=2, max_length=12)
    docs = torch.randint(4, 30, (3, 12)).numpy()

    def per_person(rows: np.ndarray, owners: np.ndarray, copies: np.ndarray | None) -> dict[str, torch.Tensor]:
        model = GradSampleModule(build_text_model(30, spec, seed=0))
        persons = PersonBatches(rows, owners, copies)
        people = torch.arange(persons.n_persons)
        batch, owner = persons.documents(people)
        (document_losses(model(batch), batch) * persons.weights(people)).mean().backward()
        params = [p for p in model.parameters() if p.requires_grad]
        sum_grad_samples_by_person(params, owner, persons.n_persons)
        return {n: p.grad_sample.clone() for n, p in model.named_parameters() if p.requires_grad}

    # person 0: one record; person 1: a canary typed 4 times; person 2: another record
    repeated = per_person(docs[[0, 1, 1, 1, 1, 2]], np.array([0, 1, 1, 1, 1, 2]), None)
    weighted = per_person(docs, np.array([0, 1, 2]), np.array([1, 4, 1]))
    for name, grad in repeated.items():
        assert torch.allclose(grad, weighted[name], atol=1e-5), name
