"""Vectorised many-model DP-SGD does what Opacus's DPOptimizer does, model by model."""

from __future__ import annotations

import math
import warnings

import pytest
import torch
from opacus import GradSampleModule, PrivacyEngine
from opacus.accountants import create_accountant
from opacus.optimizers import DPOptimizer
from torch.utils.data import DataLoader, TensorDataset

from targets.models import build_mlp
from targets.training_benchmark import benchmark_training
from targets.vectorized_dpsgd import (
    DPSGDSpec,
    accountant_epsilon,
    clipped_noisy_gradient_sum,
    dpsgd_step,
    model_init_seed,
    train_many,
)

DEVICES = [
    "cpu",
    pytest.param(
        "cuda", marks=[pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")]
    ),
]
METHODS = ["vmap", "ghost"]
IN_FEATURES, HIDDEN, N_CLASSES = 5, (8, 6), 3


@pytest.fixture(autouse=True)
def _quiet_opacus():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        yield


def _data(n_rows: int, seed: int = 0, device: str = "cpu"):
    generator = torch.Generator().manual_seed(seed)
    X = 2 * torch.randn(n_rows, IN_FEATURES, generator=generator)
    y = torch.randint(0, N_CLASSES, (n_rows,), generator=generator)
    return X.to(device), y.to(device)


def _stack(models, device):
    return {
        n: torch.stack([dict(m.named_parameters())[n].detach() for m in models]).to(device)
        for n, _ in models[0].named_parameters()
    }


def _padded_batches(X, y, batch_rows, device):
    """Model k's batch = X[batch_rows[k]], padded to a common width with junk rows marked invalid."""
    width = max(len(r) for r in batch_rows)
    index = torch.zeros((len(batch_rows), width), dtype=torch.long)
    valid = torch.zeros((len(batch_rows), width), dtype=torch.bool)
    for k, rows in enumerate(batch_rows):
        index[k, : len(rows)] = torch.tensor(rows)
        index[k, len(rows) :] = len(X) - 1 - torch.arange(width - len(rows))  # real rows, must be ignored
        valid[k, : len(rows)] = True
    return X[index.to(device)], y[index.to(device)], valid.to(device)


def _opacus_dp_optimizer(model, X, y, *, max_grad_norm, expected_batch_size, lr, momentum=0.0):
    """Opacus's per-sample gradients and DPOptimizer (σ = 0) after one forward/backward."""
    gsm = GradSampleModule(model)
    optimizer = DPOptimizer(
        torch.optim.SGD(gsm.parameters(), lr=lr, momentum=momentum),
        noise_multiplier=0.0,
        max_grad_norm=max_grad_norm,
        expected_batch_size=expected_batch_size,
    )
    torch.nn.CrossEntropyLoss()(gsm(X), y).backward()
    return gsm, optimizer


BATCH_ROWS = [[0, 3, 4, 8, 11, 12, 17], [1, 2, 5, 6], [0, 1, 2, 7, 9, 10, 13, 14, 15]]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("max_grad_norm", [0.05, 1.0, 100.0])
def test_clipped_gradient_sum_equals_opacus_summed_grad(device, method, max_grad_norm):
    X, y = _data(20, device=device)
    models = [build_mlp(IN_FEATURES, HIDDEN, N_CLASSES, seed=s).to(device) for s in (1, 2, 3)]
    params = _stack(models, device)
    Xb, yb, valid = _padded_batches(X, y, BATCH_ROWS, device)

    ours = clipped_noisy_gradient_sum(models[0], params, Xb, yb, valid, max_grad_norm=max_grad_norm, method=method)

    for k, (model, rows) in enumerate(zip(models, BATCH_ROWS)):
        _, optimizer = _opacus_dp_optimizer(
            model, X[rows], y[rows], max_grad_norm=max_grad_norm, expected_batch_size=len(rows), lr=0.1
        )
        optimizer.pre_step()
        for name, p in model.named_parameters():
            torch.testing.assert_close(ours[name][k], p.summed_grad, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("method", METHODS)
def test_one_step_update_equals_opacus_dpoptimizer_step(device, method):
    X, y = _data(20, device=device)
    models = [build_mlp(IN_FEATURES, HIDDEN, N_CLASSES, seed=s).to(device) for s in (4, 5, 6)]
    params = _stack(models, device)
    Xb, yb, valid = _padded_batches(X, y, BATCH_ROWS, device)
    spec = DPSGDSpec(noise_multiplier=0.0, max_grad_norm=0.3, sample_rate=0.25, steps=1, lr=0.7, momentum=0.9)
    # Poisson batches differ from the expected size: the update divides by the expected one.
    expected = torch.tensor([5, 5, 4], device=device)
    buffers = {n: torch.zeros_like(p) for n, p in params.items()}

    dpsgd_step(models[0], params, buffers, Xb, yb, valid, spec, expected, method=method)

    for k, (model, rows) in enumerate(zip(models, BATCH_ROWS)):
        _, optimizer = _opacus_dp_optimizer(
            model,
            X[rows],
            y[rows],
            max_grad_norm=spec.max_grad_norm,
            expected_batch_size=int(expected[k]),
            lr=spec.lr,
            momentum=spec.momentum,
        )
        optimizer.step()
        for name, p in model.named_parameters():
            torch.testing.assert_close(params[name][k], p.detach(), atol=1e-5, rtol=1e-5)


def _opacus_full_batch_training(X, y, spec, epochs, seed, device):
    """make_private with batch_size = n: q = 1, so Poisson sampling keeps every row, every step."""
    model = build_mlp(IN_FEATURES, HIDDEN, N_CLASSES, seed=seed).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=spec.lr, momentum=spec.momentum)
    loader = DataLoader(TensorDataset(X, y), batch_size=len(X))
    model, optimizer, loader = PrivacyEngine().make_private(
        module=model,
        optimizer=optimizer,
        data_loader=loader,
        noise_multiplier=0.0,
        max_grad_norm=spec.max_grad_norm,
        poisson_sampling=True,
    )
    for _ in range(epochs):
        for xb, yb in loader:
            optimizer.zero_grad()
            torch.nn.CrossEntropyLoss()(model(xb), yb).backward()
            optimizer.step()
    return model._module


@pytest.mark.parametrize("device", DEVICES)
def test_training_with_full_batches_equals_opacus_make_private_per_model(device):
    X, y = _data(40, seed=1, device=device)
    in_masks = torch.zeros((3, 40), dtype=torch.bool)
    in_masks[0, :25] = True
    in_masks[1, 10:] = True
    in_masks[2, ::3] = True
    spec = DPSGDSpec(noise_multiplier=0.0, max_grad_norm=0.5, sample_rate=1.0, steps=4, lr=0.3, momentum=0.9)

    stacked = train_many(IN_FEATURES, HIDDEN, N_CLASSES, X, y, in_masks, spec, seed=11, device=device)

    for k in range(3):
        mask = in_masks[k].to(device)
        reference = _opacus_full_batch_training(X[mask], y[mask], spec, spec.steps, model_init_seed(11, k), device)
        ours = stacked.model(k).state_dict()
        for name, p in reference.state_dict().items():
            torch.testing.assert_close(ours[name], p.detach().cpu(), atol=1e-5, rtol=1e-5)
    assert stacked.batch_sizes.tolist() == [[int(n)] * 4 for n in in_masks.sum(1)]


@pytest.mark.parametrize("device", DEVICES)
def test_non_private_training_is_plain_minibatch_sgd(device):
    X, y = _data(30, seed=2, device=device)
    in_masks = torch.ones((2, 30), dtype=torch.bool)
    in_masks[1, :12] = False
    spec = DPSGDSpec(noise_multiplier=0.0, max_grad_norm=None, sample_rate=1.0, steps=3, lr=0.5, momentum=0.5)

    stacked = train_many(IN_FEATURES, HIDDEN, N_CLASSES, X, y, in_masks, spec, seed=3, device=device)

    for k in range(2):
        mask = in_masks[k].to(device)
        model = build_mlp(IN_FEATURES, HIDDEN, N_CLASSES, seed=model_init_seed(3, k)).to(device)
        optimizer = torch.optim.SGD(model.parameters(), lr=spec.lr, momentum=spec.momentum)
        for _ in range(spec.steps):
            optimizer.zero_grad()
            torch.nn.functional.cross_entropy(model(X[mask]), y[mask]).backward()
            optimizer.step()
        for name, p in model.state_dict().items():
            torch.testing.assert_close(stacked.params[name][k], p.cpu(), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("accountant", ["rdp", "prv"])
def test_accountant_epsilon_equals_opacus_accountant_after_T_steps(accountant):
    sigma, q, steps, delta = 1.1, 0.02, 300, 1e-5
    opacus_accountant = create_accountant(accountant)
    for _ in range(steps):
        opacus_accountant.step(noise_multiplier=sigma, sample_rate=q)
    spec = DPSGDSpec(noise_multiplier=sigma, max_grad_norm=1.0, sample_rate=q, steps=steps, lr=0.1)

    assert spec.accountant_inputs == (sigma, q, steps)
    assert accountant_epsilon(sigma, q, steps, delta, accountant) == pytest.approx(
        opacus_accountant.get_epsilon(delta=delta), rel=1e-9
    )
    assert spec.epsilon(delta, accountant) == accountant_epsilon(sigma, q, steps, delta, accountant)


def test_non_private_spec_has_infinite_epsilon():
    assert accountant_epsilon(0.0, 0.1, 10, 1e-5) == math.inf
    assert DPSGDSpec(0.0, None, 0.1, 10, 0.1).epsilon(1e-5, "rdp") == math.inf


@pytest.mark.parametrize("device", DEVICES)
def test_poisson_batches_have_mean_qn_and_are_independent_across_models(device):
    n_rows, q, steps = 1000, 0.1, 120
    X, y = _data(n_rows, seed=3)
    sizes = [200, 500, 1000, 1000]
    in_masks = torch.zeros((4, n_rows), dtype=torch.bool)
    for k, n in enumerate(sizes):
        in_masks[k, :n] = True  # models 2 and 3 share their whole training set
    spec = DPSGDSpec(noise_multiplier=1.0, max_grad_norm=1.0, sample_rate=q, steps=steps, lr=0.01)

    stacked = train_many(IN_FEATURES, (4,), N_CLASSES, X, y, in_masks, spec, seed=5, device=device)

    batch_sizes = stacked.batch_sizes.double()
    for k, n in enumerate(sizes):
        standard_error = math.sqrt(q * (1 - q) * n / steps)
        assert abs(batch_sizes[k].mean() - q * n) < 4 * standard_error
        assert batch_sizes[k].var() == pytest.approx(q * (1 - q) * n, rel=0.5)
    assert stacked.expected_batch_sizes.tolist() == [int(n * q) for n in sizes]
    assert not torch.equal(stacked.batch_sizes[2], stacked.batch_sizes[3])
    assert abs(torch.corrcoef(batch_sizes[2:])[0, 1]) < 0.3


@pytest.mark.parametrize("device", DEVICES)
def test_noise_std_per_coordinate_is_sigma_c_over_expected_batch_size(device):
    n_rows, q, sigma, clip, lr = 400, 0.05, 2.0, 0.7, 1.0
    X, y = _data(n_rows, seed=4)
    in_masks = torch.ones((2, n_rows), dtype=torch.bool)
    noisy = DPSGDSpec(noise_multiplier=sigma, max_grad_norm=clip, sample_rate=q, steps=1, lr=lr)
    quiet = DPSGDSpec(noise_multiplier=0.0, max_grad_norm=clip, sample_rate=q, steps=1, lr=lr)

    # Same seed → same init and same Poisson batch (drawn before the noise): the difference is
    # exactly lr · noise / expected batch size.
    a = train_many(IN_FEATURES, (300,), N_CLASSES, X, y, in_masks, noisy, seed=9, device=device)
    b = train_many(IN_FEATURES, (300,), N_CLASSES, X, y, in_masks, quiet, seed=9, device=device)

    for k in range(2):
        diff = torch.cat([(a.params[n][k] - b.params[n][k]).flatten() for n in a.params]).double() / lr
        expected_std = sigma * clip / (q * n_rows)
        assert diff.numel() > 2500
        assert diff.std().item() == pytest.approx(expected_std, rel=0.06)
        assert abs(diff.mean().item()) < 4 * expected_std / math.sqrt(diff.numel())


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("method", METHODS)
def test_chunking_and_reseeding_reproduce_the_same_models(device, method):
    X, y = _data(120, seed=5)
    generator = torch.Generator().manual_seed(0)
    in_masks = torch.rand((5, 120), generator=generator) < 0.6
    spec = DPSGDSpec(noise_multiplier=0.8, max_grad_norm=1.0, sample_rate=0.1, steps=6, lr=0.2, momentum=0.9)

    def train(chunk_size, seed=21, masks=in_masks, row_chunk_size=None):
        return train_many(
            IN_FEATURES,
            HIDDEN,
            N_CLASSES,
            X,
            y,
            masks,
            spec,
            seed=seed,
            device=device,
            chunk_size=chunk_size,
            row_chunk_size=row_chunk_size,
            method=method,
        )

    whole, chunked, again = train(5), train(2, row_chunk_size=3), train(5)
    alone = train(1, masks=in_masks[:1])
    other_seed = train(5, seed=22)
    for name in whole.params:
        torch.testing.assert_close(chunked.params[name], whole.params[name], atol=1e-6, rtol=1e-5)
        assert torch.equal(again.params[name], whole.params[name])
        # model 0 does not depend on the models trained beside it
        torch.testing.assert_close(alone.params[name][0], whole.params[name][0], atol=1e-6, rtol=1e-5)
        assert not torch.allclose(other_seed.params[name], whole.params[name])
    assert torch.equal(chunked.batch_sizes, whole.batch_sizes)


@pytest.mark.parametrize("device", DEVICES)
def test_vmap_and_ghost_methods_train_the_same_models(device):
    X, y = _data(100, seed=6)
    in_masks = torch.rand((3, 100), generator=torch.Generator().manual_seed(1)) < 0.5
    spec = DPSGDSpec(noise_multiplier=0.5, max_grad_norm=0.5, sample_rate=0.2, steps=5, lr=0.3)
    runs = [
        train_many(IN_FEATURES, HIDDEN, N_CLASSES, X, y, in_masks, spec, seed=1, device=device, method=m)
        for m in METHODS
    ]
    for name in runs[0].params:
        torch.testing.assert_close(runs[0].params[name], runs[1].params[name], atol=1e-5, rtol=1e-5)


def test_initial_weights_are_build_mlp_with_the_documented_seed():
    X, y = _data(30)
    spec = DPSGDSpec(noise_multiplier=0.0, max_grad_norm=None, sample_rate=0.5, steps=0, lr=0.1)
    stacked = train_many(
        IN_FEATURES, HIDDEN, N_CLASSES, X, y, torch.ones((2, 30), dtype=torch.bool), spec, seed=7, device="cpu"
    )
    for k in range(2):
        expected = build_mlp(IN_FEATURES, HIDDEN, N_CLASSES, seed=model_init_seed(7, k)).state_dict()
        for name, p in stacked.model(k).state_dict().items():
            assert torch.equal(p, expected[name])


def test_stacked_logits_are_each_models_own_outputs():
    X, y = _data(50, seed=8)
    spec = DPSGDSpec(noise_multiplier=1.0, max_grad_norm=1.0, sample_rate=0.2, steps=3, lr=0.1)
    stacked = train_many(
        IN_FEATURES, HIDDEN, N_CLASSES, X, y, torch.ones((3, 50), dtype=torch.bool), spec, seed=0, device="cpu"
    )
    logits = stacked.logits(X, batch_size=16, chunk_size=2, device="cpu")
    assert logits.shape == (3, 50, N_CLASSES)
    for k in range(3):
        with torch.no_grad():
            torch.testing.assert_close(logits[k], stacked.model(k)(X), atol=1e-6, rtol=1e-5)


def test_no_models_or_a_model_without_rows_is_rejected_naming_in_masks():
    X, y = _data(10)
    spec = DPSGDSpec(noise_multiplier=1.0, max_grad_norm=1.0, sample_rate=0.5, steps=1, lr=0.1)
    with pytest.raises(ValueError, match="in_masks"):
        train_many(IN_FEATURES, HIDDEN, N_CLASSES, X, y, torch.zeros((0, 10), dtype=torch.bool), spec, seed=0)
    masks = torch.ones((3, 10), dtype=torch.bool)
    masks[1] = False
    with pytest.raises(ValueError, match="in_masks"):
        train_many(IN_FEATURES, HIDDEN, N_CLASSES, X, y, masks, spec, seed=0)
    with pytest.raises(ValueError, match="in_masks"):
        train_many(IN_FEATURES, HIDDEN, N_CLASSES, X, y, torch.ones((2, 9), dtype=torch.bool), spec, seed=0)


def test_invalid_specs_are_rejected_naming_the_field():
    with pytest.raises(ValueError, match="sample_rate"):
        DPSGDSpec(noise_multiplier=1.0, max_grad_norm=1.0, sample_rate=0.0, steps=1, lr=0.1)
    with pytest.raises(ValueError, match="max_grad_norm"):
        DPSGDSpec(noise_multiplier=1.0, max_grad_norm=None, sample_rate=0.1, steps=1, lr=0.1)
    with pytest.raises(ValueError, match="momentum"):
        DPSGDSpec(noise_multiplier=1.0, max_grad_norm=1.0, sample_rate=0.1, steps=1, lr=0.1, momentum=1.0)


def test_spec_for_epochs_matches_make_private_sampling():
    spec = DPSGDSpec.for_epochs(
        train_size=1000, batch_size=64, epochs=2, noise_multiplier=1.0, max_grad_norm=1.0, lr=0.1
    )
    loader = DataLoader(TensorDataset(torch.zeros(1000, 1)), batch_size=64)
    assert spec.sample_rate == 1 / len(loader)
    assert spec.steps == 2 * len(loader)


def test_benchmark_reports_both_rates_side_by_side():
    result = benchmark_training(
        2,
        device="cpu",
        n_rows=40,
        in_features=4,
        hidden_sizes=(8,),
        epochs=1,
        batch_size=10,
        opacus_models=1,
        repeats=1,
    )
    assert result["device"] == "cpu"
    assert result["opacus_models_per_second"] > 0 and result["vectorized_models_per_second"] > 0
    assert result["speedup"] == pytest.approx(
        result["vectorized_models_per_second"] / result["opacus_models_per_second"]
    )


@pytest.mark.parametrize("max_grad_norm", [0.05, 1.0])
def test_cnn_clipped_gradient_sum_equals_opacus_summed_grad(max_grad_norm):
    """The vectorized trainer stays exact for Conv2d (the digits CNN): per-sample clipping as Opacus."""
    from targets.models import build_model

    generator = torch.Generator().manual_seed(0)
    X = torch.randn(20, 64, generator=generator)
    y = torch.randint(0, N_CLASSES, (20,), generator=generator)
    models = [build_model("cnn", 64, (16,), N_CLASSES, seed=s) for s in (1, 2, 3)]
    params = _stack(models, "cpu")
    Xb, yb, valid = _padded_batches(X, y, BATCH_ROWS, "cpu")

    ours = clipped_noisy_gradient_sum(models[0], params, Xb, yb, valid, max_grad_norm=max_grad_norm, method="vmap")

    for k, (model, rows) in enumerate(zip(models, BATCH_ROWS)):
        _, optimizer = _opacus_dp_optimizer(
            model, X[rows], y[rows], max_grad_norm=max_grad_norm, expected_batch_size=len(rows), lr=0.1
        )
        optimizer.pre_step()
        for name, p in model.named_parameters():
            torch.testing.assert_close(ours[name][k], p.summed_grad, atol=1e-5, rtol=1e-5)


def test_cnn_models_train_and_reload_as_image_cnns():
    from targets.models import ImageCNN

    generator = torch.Generator().manual_seed(1)
    X = torch.randn(30, 64, generator=generator)
    y = torch.randint(0, N_CLASSES, (30,), generator=generator)
    masks = torch.rand(2, 30, generator=generator) < 0.6
    spec = DPSGDSpec(noise_multiplier=1.0, max_grad_norm=1.0, sample_rate=0.3, steps=3, lr=0.1)
    models = train_many(64, (16,), N_CLASSES, X, y, masks, spec, seed=0, device="cpu", architecture="cnn")
    assert models.method == "vmap"
    one = models.model(1)
    assert isinstance(one, ImageCNN)
    torch.testing.assert_close(models.logits(X, device="cpu")[1], one(X).detach(), atol=1e-5, rtol=1e-5)


def test_a_user_builder_trains_the_same_models_as_the_named_architecture_and_batchnorm_is_refused():
    from targets.models import ImageCNN

    generator = torch.Generator().manual_seed(2)
    X = torch.randn(24, 64, generator=generator)
    y = torch.randint(0, N_CLASSES, (24,), generator=generator)
    masks = torch.rand(2, 24, generator=generator) < 0.6
    spec = DPSGDSpec(noise_multiplier=0.5, max_grad_norm=1.0, sample_rate=0.3, steps=2, lr=0.1)
    named = train_many(64, (16,), N_CLASSES, X, y, masks, spec, seed=3, device="cpu", architecture="cnn")
    built = train_many(
        64, (), N_CLASSES, X, y, masks, spec, seed=3, device="cpu", build=lambda seed: ImageCNN(64, (16,), N_CLASSES)
    )
    for name, p in named.params.items():
        torch.testing.assert_close(built.params[name], p)
    with pytest.raises(ValueError, match="BatchNorm1d"):
        train_many(
            64,
            (),
            N_CLASSES,
            X,
            y,
            masks,
            spec,
            seed=3,
            device="cpu",
            build=lambda seed: torch.nn.Sequential(
                torch.nn.Linear(64, 8), torch.nn.BatchNorm1d(8), torch.nn.Linear(8, N_CLASSES)
            ),
        )
