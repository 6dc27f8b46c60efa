"""Train many MLPs at once with DP-SGD, vectorised over models with `torch.func`.

Shadow models and LiRA reference models (dozens to hundreds of them) dominate the cost of strong
membership-inference attacks. Training them one at a time spends most of the time in Python and
in small kernels; here the parameters of `chunk_size` models are stacked
(`torch.func.stack_module_state`) and one step of all of them is a single `vmap` over models of
`vmap(grad(per-sample loss))` over rows, run through `torch.func.functional_call`.

Two ways to clip (`method`), same numbers up to float rounding:
"vmap" materialises every per-sample gradient (models × rows × parameters floats) and works for
any module; "ghost" (the default for `MLP`) takes the per-sample gradients w.r.t. the biases only
and uses that a Linear layer's per-sample weight gradient is the outer product of its bias
gradient and its input, so the norms are products of vector norms and the clipped sum is one
matmul per layer (Goodfellow 2015, arXiv:1510.01799; "ghost clipping", Li et al. 2021,
arXiv:2110.05679). Materialising per-sample gradients is memory-bound and costs what Opacus's
hooks cost per model, so "vmap" is barely faster than Opacus on a CPU; "ghost" is what makes
vectorised training pay off there.

DP-SGD semantics are those of Opacus's `DPOptimizer` behind `PrivacyEngine.make_private(...,
poisson_sampling=True)` with `loss_reduction="mean"` (opacus 1.6, `optimizers/optimizer.py`,
`data_loader.py`, `utils/uniform_sampler.py`), applied to every model independently:

* Poisson sampling: at every step each of model k's own training rows (`in_masks[k]`) joins the
  batch independently with probability q = `sample_rate` (`UniformWithReplacementSampler`).
  Models have training sets of different sizes, so a step's batches are masks over the shared
  rows, gathered into a (models, max batch) block whose padding rows get weight zero.
* per-sample clipping over all parameters at once ("flat" clipping): factor
  `min(1, C / (‖g_i‖ + 1e-6))` where ‖g_i‖ is the 2-norm of the per-parameter 2-norms, exactly
  as `DPOptimizer.clip_and_accumulate`.
* Gaussian noise N(0, σ²C²) per coordinate added to the clipped sum (`add_noise`), then division
  by the *expected* batch size (`scale_grad`). Opacus computes it as
  `int(len(dataset) * sample_rate)` (a floor, `PrivacyEngine.make_private`); the same floor of
  q·n_k is used here with n_k = `in_masks[k].sum()`.
* plain SGD (`lr`, optional `momentum`, no dampening / Nesterov / weight decay), per model.
* non-private mode (σ = 0 and C = None, for ε = ∞ references): the ordinary mean gradient over
  the Poisson-sampled batch, no clipping (an empty batch gives a zero gradient).

Seeding: one `seed` drives everything. Model k uses two 63-bit seeds derived from
`numpy.random.SeedSequence([seed, k])` (`model_seeds`): the first initialises it exactly as
`build_mlp(..., seed=model_init_seed(seed, k))`, the second seeds a `torch.Generator` on the
training device that draws, at every step, first the model's Poisson uniforms (one per shared
row) and then, when σ > 0, its flat noise vector. Because every model owns its generator, model
k's weights depend only on (seed, k, its data, the spec, the device type): not on K, not on
`chunk_size`, not on the other models. CPU and CUDA generators differ, so the same seed gives
different (equally valid) models on the two devices.

The spec and the accountant's ε: `targets.dpsgd_spec`; one step of K stacked models (clipping, noise):
`targets.dpsgd_step`; both re-exported here.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
import torch
from torch import nn
from torch.func import functional_call, stack_module_state, vmap

from targets.devices import resolve_device
from targets.dpsgd_spec import DPSGDSpec, accountant_epsilon
from targets.dpsgd_step import (
    _resolve_method,
    clipped_noisy_gradient_sum,
    dpsgd_step,
    mean_gradient,
    supports_ghost_norms,
)
from targets.models import build_model

__all__ = [
    "DPSGDSpec",
    "StackedModels",
    "accountant_epsilon",
    "clipped_noisy_gradient_sum",
    "default_chunk_size",
    "dpsgd_step",
    "mean_gradient",
    "model_init_seed",
    "model_seeds",
    "supports_ghost_norms",
    "train_many",
]


# Bytes that one chunk of models may use at once for a step (see `default_chunk_size`).
_CPU_WORKING_SET_BUDGET = 512 * 2**20
_CUDA_FREE_MEMORY_FRACTION = 0.25


# --------------------------------------------------------------------------------------------
# seeding and devices


def model_seeds(seed: int, k: int) -> tuple[int, int]:
    """(init seed, training-generator seed) of model k, from `SeedSequence([seed, k])`.

    Hashing (seed, k) instead of e.g. `seed + k` keeps the models of different seeds disjoint
    (seed 0's model 1 is not seed 1's model 0).
    """
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"seed must be an integer >= 0, got {seed!r}")
    words = np.random.SeedSequence([int(seed), int(k)]).generate_state(2, dtype=np.uint64)
    mask = (1 << 63) - 1
    return int(words[0]) & mask, int(words[1]) & mask


def model_init_seed(seed: int, k: int) -> int:
    """The `build_mlp` seed that gives model k of `train_many(seed=seed)` its initial weights."""
    return model_seeds(seed, k)[0]


def default_chunk_size(
    template: nn.Module,
    expected_batch_size: float,
    device: torch.device,
    *,
    method: str = "auto",
    n_rows: int = 0,
) -> int:
    """How many models to step at once so that one step's working set fits a memory budget.

    Per model, one step holds its parameters, momentum and noise (a few copies of P floats),
    its Poisson uniforms over the N shared rows, and the per-row tensors: with "vmap" the
    per-sample gradients (batch × P floats, plus ~2x autograd intermediates), with "ghost" only
    activations and their gradients (batch × Σ layer widths). The batch is taken as q·n plus
    four standard deviations of its Poisson size. Budget: 512 MiB on CPU (larger chunks stop
    paying off on a few cores), a quarter of the free memory on CUDA.
    """
    method = _resolve_method(method, template)
    n_params = sum(p.numel() for p in template.parameters())
    rows = expected_batch_size + 4 * math.sqrt(max(expected_batch_size, 1.0)) + 1
    if method == "vmap":
        per_row = 3 * n_params
    else:
        widths = [m.in_features + m.out_features for m in template.modules() if isinstance(m, nn.Linear)]
        per_row = 4 * sum(widths)
    per_model = 4 * (rows * per_row + 5 * n_params + 2 * n_rows)
    if device.type == "cuda":
        free, _ = torch.cuda.mem_get_info(device)
        budget = _CUDA_FREE_MEMORY_FRACTION * free
    else:
        budget = _CPU_WORKING_SET_BUDGET
    return max(1, int(budget // per_model))


# --------------------------------------------------------------------------------------------
# training many models


@dataclass(frozen=True, eq=False)
class StackedModels:
    """K trained MLPs as stacked parameters (on CPU), with what is needed to audit them.

    `params[name]` has shape (K, *shape of MLP parameter `name`). `batch_sizes[k, t]` is model
    k's Poisson batch size at step t; `expected_batch_sizes[k]` = floor(q·n_k) as Opacus.
    `trained_on`, `method` and `chunk_size` record how `train_many` ran.
    """

    in_features: int
    hidden_sizes: tuple[int, ...]
    n_classes: int
    params: dict[str, torch.Tensor]
    spec: DPSGDSpec
    seed: int
    train_sizes: torch.Tensor
    expected_batch_sizes: torch.Tensor
    batch_sizes: torch.Tensor
    trained_on: str
    method: str
    chunk_size: int
    architecture: str = "mlp"
    # For a user's architecture: seed -> module (see `train_many`); None = `architecture`.
    build: Callable[[int], nn.Module] | None = field(default=None, compare=False, repr=False)

    def _module(self, seed: int) -> nn.Module:
        if self.build is not None:
            return _seeded(self.build, seed)
        return build_model(self.architecture, self.in_features, self.hidden_sizes, self.n_classes, seed=seed)

    def __len__(self) -> int:
        return int(self.train_sizes.shape[0])

    @property
    def accountant_inputs(self) -> tuple[float, float, int]:
        """(σ, q, T) for the accountant; the same for every model."""
        return self.spec.accountant_inputs

    def epsilon(self, delta: float, accountant: str = "prv") -> float:
        return self.spec.epsilon(delta, accountant)

    def model(self, k: int) -> nn.Module:
        """Model k as an ordinary module (an `MLP` unless `architecture`/`build` says otherwise; a fresh one on CPU)."""
        if not (-len(self) <= k < len(self)):
            raise IndexError(f"model index {k} out of range for {len(self)} models")
        module = self._module(0)
        module.load_state_dict({name: p[k].clone() for name, p in self.params.items()})
        return module

    def logits(
        self,
        X: torch.Tensor | np.ndarray,
        *,
        batch_size: int = 8192,
        chunk_size: int | None = None,
        device: str | torch.device = "auto",
    ) -> torch.Tensor:
        """Logits of every model on every row: a CPU float32 tensor of shape (K, N, n_classes).

        Computed on `device` (auto = CUDA when present), `chunk_size` models (default: all) and
        `batch_size` rows at a time.
        """
        dev = resolve_device(device)
        X = _as_float_matrix(X, "X", self.in_features)
        n_models = len(self)
        chunk = n_models if chunk_size is None else _positive_int(chunk_size, "chunk_size")
        batch_size = _positive_int(batch_size, "batch_size")
        template = self._module(0).to("meta")
        forward = vmap(lambda p, x: functional_call(template, p, (x,)), in_dims=(0, None))
        out = torch.empty((n_models, X.shape[0], self.n_classes), dtype=torch.float32)
        with torch.no_grad():
            for k0 in range(0, n_models, chunk):
                k1 = min(k0 + chunk, n_models)
                params = {n: p[k0:k1].to(dev) for n, p in self.params.items()}
                for r0 in range(0, X.shape[0], batch_size):
                    xb = X[r0 : r0 + batch_size].to(dev)
                    out[k0:k1, r0 : r0 + xb.shape[0]] = forward(params, xb).float().cpu()
        return out


def _seeded(build: Callable[[int], nn.Module], seed: int) -> nn.Module:
    """`build(seed)` with the global RNG seeded and restored, like `build_model`."""
    generator_state = torch.random.get_rng_state()
    torch.manual_seed(seed)
    try:
        return build(seed)
    finally:
        torch.random.set_rng_state(generator_state)


def check_vectorizable(module: nn.Module) -> str | None:
    """Why `module` cannot be trained by `train_many` with Opacus's semantics, or None when it can:
    no buffers (BatchNorm statistics mix samples and are not parameters) and only per-sample layers."""
    for name, sub in module.named_modules():
        if isinstance(sub, nn.modules.batchnorm._BatchNorm):
            return f"layer '{name}' is {type(sub).__name__}, which mixes the samples of a batch"
    buffers = [n for n, _ in module.named_buffers()]
    if buffers:
        return f"the module has buffers ({', '.join(buffers[:3])}), which DP-SGD's per-sample gradients do not cover"
    if not any(p.requires_grad for p in module.parameters()):
        return "the module has no trainable parameters"
    return None


def _meta_template(
    in_features: int, hidden_sizes: Sequence[int], n_classes: int, architecture: str = "mlp"
) -> nn.Module:
    # Only the structure is used by functional_call; build_model keeps the global RNG untouched.
    return build_model(architecture, in_features, hidden_sizes, n_classes, seed=0).to("meta")


def _positive_int(value, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value <= 0:
        raise ValueError(f"{name} must be a positive integer, got {value!r}")
    return int(value)


def _as_float_matrix(X, name: str, in_features: int) -> torch.Tensor:
    X = torch.as_tensor(np.asarray(X) if not isinstance(X, torch.Tensor) else X)
    if X.dim() != 2 or X.shape[1] != in_features:
        raise ValueError(f"{name} must have shape (rows, {in_features}), got {tuple(X.shape)}")
    if not X.is_floating_point():
        X = X.float()
    X = X.to(torch.float32).cpu()
    if not torch.isfinite(X).all():
        raise ValueError(f"{name} contains NaN or infinite values")
    return X


def _validate_inputs(
    in_features, hidden_sizes, n_classes, X, y, in_masks, spec
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    _positive_int(in_features, "in_features")
    if isinstance(hidden_sizes, (str, bytes)) or not all(
        isinstance(h, (int, np.integer)) and not isinstance(h, bool) and h > 0 for h in hidden_sizes
    ):
        raise ValueError(f"hidden_sizes must be a sequence of positive integers, got {hidden_sizes!r}")
    if n_classes is None or int(n_classes) < 2:
        raise ValueError(f"n_classes must be >= 2, got {n_classes!r}")
    if not isinstance(spec, DPSGDSpec):
        raise ValueError(f"spec must be a DPSGDSpec, got {type(spec).__name__}")
    X = _as_float_matrix(X, "X", in_features)
    y = torch.as_tensor(np.asarray(y) if not isinstance(y, torch.Tensor) else y).cpu()
    if y.shape != (X.shape[0],):
        raise ValueError(f"y must have shape ({X.shape[0]},) to match X, got {tuple(y.shape)}")
    if y.is_floating_point():
        if not torch.equal(y, y.round()):
            raise ValueError("y must hold integer class indices")
    y = y.long()
    if X.shape[0] and (int(y.min()) < 0 or int(y.max()) >= n_classes):
        raise ValueError(f"y must hold class indices in [0, {n_classes}), got range [{int(y.min())}, {int(y.max())}]")
    masks = in_masks if isinstance(in_masks, torch.Tensor) else torch.as_tensor(np.asarray(in_masks))
    masks = masks.cpu()
    if masks.dim() != 2 or masks.shape[1] != X.shape[0]:
        raise ValueError(f"in_masks must have shape (n_models, {X.shape[0]}) to match X, got {tuple(masks.shape)}")
    if masks.dtype != torch.bool:
        if not ((masks == 0) | (masks == 1)).all():
            raise ValueError("in_masks must be boolean (or 0/1)")
        masks = masks.bool()
    if masks.shape[0] == 0:
        raise ValueError("in_masks has no rows: need at least one model (K >= 1)")
    sizes = masks.sum(dim=1)
    empty = torch.nonzero(sizes == 0).flatten()
    if len(empty):
        raise ValueError(f"in_masks rows {empty.tolist()[:10]} select no training rows; every model needs data")
    expected = _expected_batch_sizes(sizes, spec.sample_rate)
    if spec.max_grad_norm is not None and bool((expected == 0).any()):
        k = int(torch.nonzero(expected == 0).flatten()[0])
        raise ValueError(
            f"sample_rate={spec.sample_rate} gives model {k} (training size {int(sizes[k])}) an expected "
            "batch size floor(q*n) of 0; Opacus divides by it"
        )
    return X, y, masks, sizes, expected


def _expected_batch_sizes(train_sizes: torch.Tensor, sample_rate: float) -> torch.Tensor:
    # Opacus: expected_batch_size = int(len(dataset) * sample_rate), a float product then floor.
    return torch.tensor([int(int(n) * sample_rate) for n in train_sizes], dtype=torch.long)


def train_many(
    in_features: int,
    hidden_sizes: Sequence[int],
    n_classes: int,
    X: torch.Tensor | np.ndarray,
    y: torch.Tensor | np.ndarray,
    in_masks: torch.Tensor | np.ndarray,
    spec: DPSGDSpec,
    *,
    seed: int,
    device: str | torch.device = "auto",
    chunk_size: int | None = None,
    row_chunk_size: int | None = None,
    method: str = "auto",
    architecture: str = "mlp",
    build: Callable[[int], nn.Module] | None = None,
    first_model: int = 0,
    on_progress: Callable[[float, int], None] | None = None,
    step_hook: Callable[[int, int, dict[str, torch.Tensor]], dict[str, torch.Tensor] | None] | None = None,
) -> StackedModels:
    """Train K = len(in_masks) MLPs with DP-SGD (see the module docstring for the semantics).

    Model k trains on the rows of the shared `X` (N, in_features) / `y` (N,) where
    `in_masks[k]` (bool, (K, N)) is True. Models are trained `chunk_size` at a time (default from
    `default_chunk_size`), each chunk for all `spec.steps` steps; `row_chunk_size` further bounds
    memory by splitting each batch's rows. Neither changes the result beyond float summation
    order, and model k's result does not depend on the other models. `method` ("auto", "ghost",
    "vmap") is how per-sample gradients are clipped, see `clipped_noisy_gradient_sum`.
    `architecture` "cnn" trains `targets.models.ImageCNN`s instead (per-sample gradients by
    "vmap"; the same Opacus semantics, checked against Opacus in tests/test_vectorized_dpsgd.py).
    `build(seed) -> nn.Module` trains any module taking flat rows (n, in_features) instead (the
    global RNG is seeded with each model's init seed around the call; `hidden_sizes` is then only
    recorded); it must pass `check_vectorizable`.

    `first_model` numbers the models from there (seeds of models first_model, first_model + 1, …):
    models 8–15 of a bank trained as one slice get the seeds they would have in the whole bank,
    which is how the bank is split into tasks (their weights agree to float rounding; the vmap
    width changes the summation order).
    `on_progress(models_done, n_models)` is called after every step (models_done counts the
    current chunk's models in proportion to the steps done).
    `step_hook(t, k0, params)` (white-box audits) is called before step t = 0..T−1 of the chunk
    whose first model is k0, with its stacked parameters (read-only), and may return
    `extra_gradients` for that step (see `clipped_noisy_gradient_sum`); it is called once more
    with t = T after the last step (its return value is then ignored).
    """
    X, y, masks, train_sizes, expected = _validate_inputs(in_features, hidden_sizes, n_classes, X, y, in_masks, spec)
    hidden_sizes = tuple(int(h) for h in hidden_sizes)
    n_classes = int(n_classes)
    first_model = int(first_model)
    if first_model < 0:
        raise ValueError(f"first_model must be >= 0, got {first_model!r}")
    seed_pairs = [model_seeds(seed, first_model + k) for k in range(masks.shape[0])]
    dev = resolve_device(device)
    if row_chunk_size is not None:
        row_chunk_size = _positive_int(row_chunk_size, "row_chunk_size")

    if build is not None:
        reason = check_vectorizable(_seeded(build, 0))
        if reason is not None:
            raise ValueError(f"build: {reason}")
        template = _seeded(build, 0).to("meta")
    else:
        template = _meta_template(in_features, hidden_sizes, n_classes, architecture)
    method = _resolve_method(method, template)
    if chunk_size is None:
        chunk_size = default_chunk_size(
            template, spec.sample_rate * float(train_sizes.max()), dev, method=method, n_rows=X.shape[0]
        )
    chunk_size = _positive_int(chunk_size, "chunk_size")

    n_models, n_rows = masks.shape
    X_dev, y_dev = X.to(dev), y.to(dev)
    out_params: dict[str, list[torch.Tensor]] = {}
    batch_sizes = torch.zeros((n_models, spec.steps), dtype=torch.long)
    for k0 in range(0, n_models, chunk_size):
        k1 = min(k0 + chunk_size, n_models)
        params, sizes = _train_chunk(
            template,
            [
                _seeded(build, s[0])
                if build is not None
                else build_model(architecture, in_features, hidden_sizes, n_classes, seed=s[0])
                for s in seed_pairs[k0:k1]
            ],
            [torch.Generator(device=dev).manual_seed(s[1]) for s in seed_pairs[k0:k1]],
            X_dev,
            y_dev,
            masks[k0:k1].to(dev),
            expected[k0:k1].to(dev),
            spec,
            row_chunk_size,
            method,
            None
            if on_progress is None
            else (lambda t, k0=k0, k1=k1: on_progress(k0 + (k1 - k0) * t / spec.steps, n_models)),
            None if step_hook is None else (lambda t, params, k0=k0: step_hook(t, k0, params)),
        )
        for name, p in params.items():
            out_params.setdefault(name, []).append(p.cpu())
        batch_sizes[k0:k1] = sizes.cpu()
    return StackedModels(
        in_features=in_features,
        hidden_sizes=hidden_sizes,
        n_classes=n_classes,
        params={name: torch.cat(chunks) for name, chunks in out_params.items()},
        spec=spec,
        seed=int(seed),
        train_sizes=train_sizes,
        expected_batch_sizes=expected,
        batch_sizes=batch_sizes,
        trained_on=dev.type,
        method=method,
        chunk_size=chunk_size,
        architecture=architecture if build is None else "user",
        build=build,
    )


def _train_chunk(
    template, models, generators, X, y, masks, expected, spec, row_chunk_size, method, on_step=None, step_hook=None
):
    dev = X.device
    stacked, _ = stack_module_state(models)
    params = {name: p.detach().to(dev).contiguous() for name, p in stacked.items()}
    buffers = {name: torch.zeros_like(p) for name, p in params.items()} if spec.momentum > 0 else None
    n_models, n_rows = masks.shape
    uniforms = torch.empty((n_models, n_rows), device=dev)
    uniform_rows = uniforms.unbind(0)  # views made once: the per-model loop below runs every step
    sizes = torch.zeros((n_models, spec.steps), dtype=torch.long, device=dev)
    for t in range(spec.steps):
        if on_step is not None:
            on_step(t)  # steps done so far (at the top: a step with an empty batch skips the rest)
        extra = None if step_hook is None else step_hook(t, params)
        # Poisson sampling as UniformWithReplacementSampler: rand(n) < q, per model, own stream.
        for row, generator in zip(uniform_rows, generators):
            row.uniform_(generator=generator)
        batch = (uniforms < spec.sample_rate) & masks
        counts = batch.sum(dim=1)
        sizes[:, t] = counts
        width = int(counts.max())
        if width == 0:
            # Every batch is empty: the gradient is pure noise (or zero when non-private).
            valid = torch.zeros((n_models, 1), dtype=torch.bool, device=dev)
            index = torch.zeros((n_models, 1), dtype=torch.long, device=dev)
        else:
            # Gather each model's sampled rows to the front of a (models, width) block.
            rows, cols = batch.nonzero(as_tuple=True)
            slot = (batch.cumsum(dim=1) - 1)[rows, cols]
            index = torch.zeros((n_models, width), dtype=torch.long, device=dev)
            index[rows, slot] = cols
            valid = torch.arange(width, device=dev).unsqueeze(0) < counts.unsqueeze(1)
        with torch.no_grad():
            dpsgd_step(
                template,
                params,
                buffers,
                X[index],
                y[index],
                valid,
                spec,
                expected,
                generators,
                row_chunk_size=row_chunk_size,
                method=method,
                extra_gradients=extra,
            )
    if step_hook is not None:
        step_hook(spec.steps, params)
    if on_step is not None:
        on_step(spec.steps)
    return params, sizes
