"""Each subject without a DP claim is named so that two of them never read the same: the llm run fine-tunes both
ways at ε = ∞, and its PASS line read "PASS covers the DP claims only: ε = ∞ (no DP claim), ε = ∞ (no DP claim) LEAKS"."""

from audit.machinery.leakage import finetuning_label
from audit.machinery.verdict import recompute_verdict
from audit.machinery.verdict_words import pass_caveat


def _leaking_target(finetuning: str | None) -> dict:
    attack = {"name": "canary_panda", "auc": 0.99, "auc_ci": [0.98, 1.0], "n_members": 500, "n_nonmembers": 500}
    target = {"kind": "text", "epsilon_target": float("inf"), "attacks": [attack]}
    if finetuning:
        target["llm"] = {"finetuning": finetuning}
    return target


def test_the_llm_runs_two_unclaimed_targets_are_named_apart():
    assert finetuning_label(_leaking_target("lora")) == "LoRA" and finetuning_label(_leaking_target(None)) == ""
    verdict = recompute_verdict({"targets": [_leaking_target("full"), _leaking_target("lora")]})
    labels = [entry["label"] for entry in verdict["leakage"]]
    assert labels == ["ε = ∞ · full fine-tuning (no DP claim)", "ε = ∞ · LoRA fine-tuning (no DP claim)"]
    assert len(set(labels)) == 2


def test_a_sweeps_baseline_keeps_its_name():
    verdict = recompute_verdict({"targets": [_leaking_target(None)]})
    assert [entry["label"] for entry in verdict["leakage"]] == ["ε = ∞ (no DP claim)"]
    caveat = pass_caveat({"leakage": [{"label": "ε = ∞ (no DP claim)", "status": "leaks"}]})
    assert caveat == "PASS covers the DP claims only: ε = ∞ (no DP claim) LEAKS"
