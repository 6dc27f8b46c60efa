"""`targets.dpsgd_step`'s "ghost" clipped sum and its non-private mean gradient for K stacked MLPs, against
per-sample gradients computed row by row (`vmap(grad)` of one row's loss) and clipped by hand, in float64:
padding rows add nothing, a model whose Poisson batch is empty gets a zero sum."""

import torch
import torch.nn.functional as F
from torch.func import functional_call, grad, stack_module_state, vmap

from targets.dpsgd_step import clipped_noisy_gradient_sum, mean_gradient
from targets.models import build_model

K, B, D = 3, 7, 5


def _stacked(hidden=(8, 6), n_classes=3):
    models = [build_model("mlp", D, hidden, n_classes, seed=k) for k in range(K)]
    stacked, _ = stack_module_state(models)
    template = build_model("mlp", D, hidden, n_classes, seed=0).to("meta")
    return template, {n: p.detach().double() for n, p in stacked.items()}


def _batch(seed=0, n_classes=3):
    g = torch.Generator().manual_seed(seed)
    X = torch.randn(K, B, D, generator=g, dtype=torch.float64)
    y = torch.randint(0, n_classes, (K, B), generator=g)
    valid = torch.rand(K, B, generator=g) < 0.7
    valid[0, 0] = True
    valid[2] = False  # model 2 drew an empty batch
    return X, y, valid


def _per_sample_reference(template, params, X, y):
    def loss(p, x, t):
        return F.cross_entropy(functional_call(template, p, (x.unsqueeze(0),)), t.unsqueeze(0))

    return vmap(vmap(grad(loss), in_dims=(None, 0, 0)), in_dims=(0, 0, 0))(params, X, y)


def test_clipped_sum_equals_per_row_vmap_grad_clipped_by_hand():
    template, params = _stacked()
    X, y, valid = _batch()
    C = 0.5
    per_sample = _per_sample_reference(template, params, X, y)
    norms = torch.stack([g.reshape(K, B, -1).norm(dim=-1) for g in per_sample.values()], -1).norm(dim=-1)
    factor = (C / (norms + 1e-6)).clamp(max=1.0) * valid
    expected = {n: torch.einsum("kb,kb...->k...", factor, g) for n, g in per_sample.items()}
    got = clipped_noisy_gradient_sum(template, params, X, y, valid, max_grad_norm=C, method="ghost")
    assert factor.min() < 1  # some rows were clipped, so the test reaches the clipping
    for n in expected:
        torch.testing.assert_close(got[n], expected[n], rtol=1e-10, atol=1e-12)
    assert all(bool((got[n][2] == 0).all()) for n in got)  # the empty batch adds nothing


def test_mean_gradient_equals_the_mean_of_per_row_gradients_over_valid_rows():
    template, params = _stacked()
    X, y, valid = _batch(seed=1)
    per_sample = _per_sample_reference(template, params, X, y)
    weight = valid.double() / valid.sum(dim=1, keepdim=True).clamp(min=1)
    got = mean_gradient(template, params, X, y, valid)
    for n, g in per_sample.items():
        torch.testing.assert_close(got[n], torch.einsum("kb,kb...->k...", weight, g), rtol=1e-10, atol=1e-12)
    assert all(bool((got[n][2] == 0).all()) for n in got)
