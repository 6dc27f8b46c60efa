"""The llm job's fine-tunings cut each batch's all-[PAD] trailing columns (`trim_padding`): the same
documents' losses and the same DP-SGD training, for less work (the canaries are short rows of 48)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from targets.hf_causal_lm import HFLMSpec, build_hf_lm
from targets.text_models import PAD, document_losses, trim_padding

SPEC = HFLMSpec(d_model=16, n_layers=1, n_heads=2, max_length=16, epochs=1, batch_size=4)


def _rows(n: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    rows = rng.integers(4, 40, size=(n, 16))
    for i, length in enumerate(rng.integers(3, 9, size=n)):  # every row ends before column 9
        rows[i, length:] = PAD
    return rows


def test_trim_cuts_only_columns_that_are_padding_in_every_row():
    batch = torch.as_tensor(_rows(5, 0))
    mask = torch.rand(5, 15) > 0.5
    trimmed, cut_mask = trim_padding(batch, mask)
    width = trimmed.shape[1]
    assert (batch[:, width:] == PAD).all() and (trimmed[:, -1] != PAD).any()
    assert torch.equal(trimmed, batch[:, :width]) and torch.equal(cut_mask, mask[:, : width - 1])
    full = torch.full((2, 16), 5)
    assert trim_padding(full, None)[0] is full  # nothing to cut: the batch itself


def test_a_trimmed_batch_gives_every_document_the_same_loss_and_gradient():
    batch = torch.as_tensor(_rows(6, 1))
    mask = torch.zeros(6, 15, dtype=torch.bool)
    mask[:, 1:4] = True  # a secret's targets
    grads = []
    for rows, rows_mask in ((batch, mask), trim_padding(batch, mask)):
        model = build_hf_lm(40, SPEC, seed=0)
        losses = document_losses(model(rows), rows, rows_mask)
        losses.sum().backward()
        grads.append((losses.detach(), [p.grad.clone() for p in model.parameters()]))
    assert torch.allclose(grads[0][0], grads[1][0], atol=1e-6)
    for whole, cut in zip(grads[0][1], grads[1][1], strict=True):
        assert torch.allclose(whole, cut, atol=1e-6)


@pytest.mark.slow  # two DP fine-tunings (Opacus's functorch path and its imports)
def test_a_dp_fine_tuning_with_trimmed_batches_trains_the_same_weights():
    # Person-level DP-SGD, full fine-tuning (functorch per-sample gradients): trimming changes no
    # clipped per-person gradient and no noise draw, so the weights match the untrimmed loop's.
    from targets.text_models import train_language_model

    rows = _rows(16, 2)
    states = []
    for trim in (False, True):
        model = build_hf_lm(40, SPEC, seed=0)
        trained = train_language_model(
            model,
            rows,
            SPEC,
            lr=SPEC.lr,
            epsilon=8.0,
            delta=1e-5,
            accountant="prv",
            seed=3,
            device=torch.device("cpu"),
            owners=np.arange(16) // 2,
            grad_sample_mode="functorch",
            quiet=True,
            trim=trim,
        )
        states.append(trained.model.state_dict())
    for name, value in states[0].items():
        assert torch.allclose(value, states[1][name], atol=1e-5), name
