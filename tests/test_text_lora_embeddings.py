"""LoRA with the token embedding trained beside the adapters and the output head (`llm.lora_train_embeddings`):
under person-level DP-SGD the embedding's private copy is clipped and noised with the adapters (Opacus's
hooks on `nn.Embedding`), the pretrained embedding stays frozen, and the rows of tokens only the private
documents use move."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from targets.hf_causal_lm import LORA_SAVED, HFLMSpec, build_hf_lm, finetune

SPEC = HFLMSpec(
    d_model=16, n_layers=1, n_heads=2, max_length=16, epochs=1, batch_size=4, lora_saved=LORA_SAVED + ("wte",)
)


@pytest.mark.slow  # a DP fine-tuning (Opacus, peft) and the imports of both
def test_lora_with_embeddings_keeps_the_pretrained_embedding_and_trains_a_private_copy():
    state = {k: v.clone() for k, v in build_hf_lm(48, SPEC, seed=0).state_dict().items()}
    rows = np.random.default_rng(0).integers(4, 40, size=(24, 12))
    rows[:, 6] = 44  # token 44: only the private documents use it
    trained, tuned = finetune(
        state,
        48,
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
    assert trained.privacy_unit == "person" and trained.noise_multiplier > 0
    tuned_state = tuned.state_dict()
    trainable = {n for n, p in tuned.named_parameters() if p.requires_grad}
    assert any("wte.modules_to_save" in n for n in trainable) and any("lm_head.modules_to_save" in n for n in trainable)
    assert all("lora_" in n or "modules_to_save" in n for n in trainable)
    (original,) = [v for k, v in tuned_state.items() if "wte.original_module" in k]
    assert torch.equal(original, state["inner.transformer.wte.weight"])  # the public embedding, frozen
    (copy,) = [v for k, v in tuned_state.items() if "wte.modules_to_save" in k]
    assert not torch.equal(copy[44], state["inner.transformer.wte.weight"][44])  # DP-SGD moved the private copy
