"""The LLM job's pieces: GPT-2's per-sample gradients through Opacus's functorch path are each
document's own gradient; LoRA trains and privatises only the adapters; the canaries of both designs;
a powerless pass reads "not refuted" (the claim rows' power: tests/test_llm_one_run.py)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from targets.hf_causal_lm import (
    HFLMSpec,
    build_hf_lm,
    finetune,
    trainable_share,
    with_lora,
)
from targets.text_models import PAD, document_losses

SPEC = HFLMSpec(d_model=16, n_layers=1, n_heads=2, max_length=16, epochs=1, batch_size=4)


def test_functorch_per_sample_gradients_of_gpt2_are_each_documents_own():
    from opacus import GradSampleModule

    model = build_hf_lm(40, SPEC, seed=0)
    batch = torch.randint(4, 40, (3, 12))
    batch[2, 9:] = PAD  # a shorter document
    wrapped = GradSampleModule(model, force_functorch=True)  # loss_reduction "mean", as make_private's default
    document_losses(wrapped(batch), batch).mean().backward()  # the trainer's loss (targets/hf_causal_lm.py)
    per_sample = {name: p.grad_sample for name, p in wrapped.named_parameters() if p.requires_grad}
    for i in range(3):
        model.zero_grad()
        plain = build_hf_lm(40, SPEC, seed=0)
        document_losses(plain(batch[i : i + 1]), batch[i : i + 1]).sum().backward()
        for name, p in plain.named_parameters():
            got = per_sample["_module." + name][i]
            assert torch.allclose(got, p.grad, atol=1e-5), name  # the position embedding included


@pytest.mark.slow  # a DP fine-tuning (Opacus, peft) and the imports of both
def test_lora_trains_only_the_adapters_and_keeps_the_pretrained_weights():
    model = build_hf_lm(40, SPEC, seed=0)
    state = {k: v.clone() for k, v in model.state_dict().items()}
    trainable, total = trainable_share(with_lora(build_hf_lm(40, SPEC, seed=0), SPEC))
    assert 0 < trainable < total / 2  # rank-8 adapters on a width-16 model: still a minority
    rows = np.random.default_rng(0).integers(4, 40, size=(24, 12))
    trained, tuned = finetune(
        state,
        40,
        rows,
        SPEC,
        mode="lora",
        epsilon=8.0,
        delta=1e-5,
        accountant="prv",
        seed=1,
        device=torch.device("cpu"),
        owners=np.arange(24) // 2,
    )
    assert trained.privacy_unit == "person" and trained.n_units == 12 and trained.noise_multiplier > 0
    tuned_state = tuned.state_dict()
    # the frozen pretrained weights (the output head's original among them) are unchanged
    base = {k: v for k, v in tuned_state.items() if "lora_" not in k and "modules_to_save" not in k}
    assert len(base) == len(state)
    for (_, before), (name, after) in zip(
        sorted(state.items()),
        sorted(
            (
                k.replace("inner.base_model.model.", "inner.")
                .replace(".base_layer", "")
                .replace(".original_module", ""),
                v,
            )
            for k, v in base.items()
        ),
    ):
        assert torch.equal(before, after), name
    assert any(not torch.all(v == 0) for k, v in tuned_state.items() if "lora_B" in k)  # adapters moved
    # the output head trains beside the adapters (a private copy: new tokens' rows can learn)
    (head,) = [v for k, v in tuned_state.items() if "lm_head.modules_to_save" in k]
    assert not torch.equal(head, state["inner.lm_head.weight"])
    trainable_names = {n for n, p in tuned.named_parameters() if p.requires_grad}
    assert trainable_names and all("lora_" in n or "modules_to_save" in n for n in trainable_names)


def test_canaries_of_both_designs():
    from targets.llm_canaries import make_canaries, secret_scores
    from targets.text_corpus import make_text_corpus
    from targets.text_models import train_tokenizer

    corpus = make_text_corpus(
        n_candidates=20, n_pool=40, n_test=10, repetitions=(1,), canaries_per_repetition=1, n_controls=1, seed=3
    )
    tokenizer = train_tokenizer([r.text for r in corpus.pool], 200)
    vocab = tokenizer.get_vocab_size()
    new = range(vocab, vocab + 8)
    names = [f"person {i}" for i in range(200)]
    panda = make_canaries(
        "panda", tokenizer, names, secret_length=3, repetitions=2, max_length=24, new_token_ids=new, seed=5
    )
    sharer = make_canaries(
        "secret_sharer", tokenizer, names, secret_length=3, repetitions=2, max_length=24, new_token_ids=new, seed=5
    )
    digits = {tokenizer.token_to_id(str(d)) for d in range(10)}
    for i in range(len(names)):
        s = int(panda.secret_start[i])
        assert set(panda.token_ids[i, s : s + 3]) <= set(new)  # Panda: only tokens no pretraining saw
        assert set(sharer.token_ids[i, s : s + 3]) <= digits
    assert 70 < panda.inserted.sum() < 130  # fair coins (binomial(200, ½): 5 SDs each side)
    assert len(panda.training_rows()) == 2 * panda.inserted.sum()
    # The score is minus the mean loss of the secret's tokens: checked against a hand computation.
    model = build_hf_lm(vocab + 8, SPEC.__class__(d_model=16, n_layers=1, n_heads=2, max_length=24), seed=0).eval()
    ids = torch.as_tensor(panda.token_ids[:1])
    logprob = model(ids)[0].log_softmax(-1)
    s = int(panda.secret_start[0])
    expected = np.mean([float(logprob[t - 1, ids[0, t]]) for t in range(s, s + 3)])
    assert secret_scores(model, panda)[0] == pytest.approx(expected, abs=1e-5)


def test_a_passing_canary_row_without_power_is_not_refuted():
    """Through the verdict every job uses: the same scores with power "none" read "not refuted", with a
    positive control "held"."""
    from audit.machinery.verdict import verdict_for_results
    from audit.statistics.attack_evaluation import evaluate_attack

    rng = np.random.default_rng(0)
    coins = rng.random(2000) < 0.5
    scores = rng.normal(size=2000)  # no signal: the claim ε = 1 is not refuted
    row = evaluate_attack(
        "canary_panda",
        scores,
        coins,
        np.zeros(2000, dtype=int),
        delta=1e-5,
        confidence=0.95,
        threshold_seed=0,
        accountant_epsilon=1.0,
    )
    statuses = {}
    for kind in ("none", "control"):
        row = {
            **row,
            "claim": {"epsilon": 1.0, "level": "full fine-tuning · person"},
            "power": {"kind": kind, "detail": "d", "figure": None, "decider": "x" if kind == "none" else None},
        }
        results = {
            "kind": "text",
            "targets": [{"epsilon_target": 1.0, "epsilon_accountant": 1.0, "delta": 1e-5, "attacks": [row]}],
            "synthetic": [],
        }
        decided, _ = verdict_for_results(results, None)
        statuses[kind] = decided["verdict"]["claims"][0]["status"]
    assert statuses == {"none": "not_refuted", "control": "held"}
