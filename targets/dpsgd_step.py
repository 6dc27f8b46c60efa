"""One DP-SGD step of K stacked models at once (`torch.func`): per-sample gradients by `vmap` or by ghost
norms, Opacus's flat clipping, the noise, the mean gradient of a non-private step.

The semantics (Poisson batches as masks, clipping factor, noise, the expected-batch-size divisor) are those
described in `targets.vectorized_dpsgd`, which trains many models with these steps.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import nn
from torch.func import functional_call, grad, vmap

from targets.dpsgd_spec import OPACUS_CLIP_EPSILON, DPSGDSpec


def _per_sample_loss(template: nn.Module, params: dict[str, torch.Tensor], x: torch.Tensor, y: torch.Tensor):
    logits = functional_call(template, params, (x.unsqueeze(0),))
    return F.cross_entropy(logits, y.unsqueeze(0))


def _masked_mean_loss(template, params, x, y, weight):
    losses = F.cross_entropy(functional_call(template, params, (x,)), y, reduction="none")
    return (losses * weight).sum()


def _per_sample_gradients(template: nn.Module):
    # inner vmap: rows share the model's parameters; outer vmap: models and their own rows.
    per_row = vmap(grad(lambda p, x, y: _per_sample_loss(template, p, x, y)), in_dims=(None, 0, 0))
    return vmap(per_row, in_dims=(0, 0, 0))


# Parameter-free modules that act on each sample alone: allowed between Linear layers for "ghost".
_SAMPLEWISE_ACTIVATIONS = (nn.ReLU, nn.LeakyReLU, nn.Tanh, nn.Sigmoid, nn.GELU, nn.ELU, nn.Identity)


def supports_ghost_norms(template: nn.Module) -> bool:
    """True when `template` is a Sequential of biased Linear layers and sample-wise activations."""
    if not isinstance(template, nn.Sequential):
        return False
    for layer in template:
        if isinstance(layer, nn.Linear):
            if layer.bias is None:
                return False
        elif not isinstance(layer, _SAMPLEWISE_ACTIVATIONS) or any(True for _ in layer.parameters()):
            return False
    return any(isinstance(layer, nn.Linear) for layer in template)


def _linear_names(template: nn.Sequential) -> list[str]:
    return [name for name, layer in template.named_children() if isinstance(layer, nn.Linear)]


def _per_sample_bias_gradients(template: nn.Sequential):
    """vmap(grad) of each row's loss w.r.t. the biases only, returning every Linear's input too.

    A Linear layer's per-sample bias gradient is ∂ℓ_i/∂z_i (z its output) and its per-sample
    weight gradient is the rank-one ∂ℓ_i/∂z_i ⊗ a_i (a its input), so these two give every
    per-sample gradient without materialising the weight ones.
    """
    children = list(template.named_children())

    def loss_and_inputs(biases, weights, x, y):
        h = x.unsqueeze(0)
        inputs = []
        for name, layer in children:
            if isinstance(layer, nn.Linear):
                inputs.append(h)
                h = functional_call(layer, {"weight": weights[name], "bias": biases[name]}, (h,))
            else:
                h = layer(h)
        return F.cross_entropy(h, y.unsqueeze(0)), inputs

    per_row = vmap(grad(loss_and_inputs, has_aux=True), in_dims=(None, None, 0, 0))
    return vmap(per_row, in_dims=(0, 0, 0, 0))


def _clip_factors(norms: torch.Tensor, max_grad_norm: float, valid: torch.Tensor) -> torch.Tensor:
    factor = (max_grad_norm / (norms + OPACUS_CLIP_EPSILON)).clamp(max=1.0)
    return factor * valid.to(factor.dtype)


def _accumulate_clipped_vmap(template, params, X, y, valid, max_grad_norm, summed):
    names = list(params)
    n_models, n_rows = valid.shape
    grads = _per_sample_gradients(template)(params, X, y)
    per_param_norms = [grads[n].reshape(n_models, n_rows, -1).norm(2, dim=-1) for n in names]
    norms = torch.stack(per_param_norms, dim=-1).norm(2, dim=-1)
    factor = _clip_factors(norms, max_grad_norm, valid)
    for n in names:
        summed[n] += torch.einsum("kb,kb...->k...", factor, grads[n])


def _accumulate_clipped_ghost(template, params, X, y, valid, max_grad_norm, summed):
    linear = _linear_names(template)
    weights = {n: params[f"{n}.weight"] for n in linear}
    biases = {n: params[f"{n}.bias"] for n in linear}
    bias_grads, inputs = _per_sample_bias_gradients(template)(biases, weights, X, y)
    gs = [bias_grads[n] for n in linear]  # (K, B, out)
    acts = [a.squeeze(2) for a in inputs]  # (K, B, in)
    # Opacus's per-sample norm: the 2-norm of the per-parameter norms, with
    # ‖g ⊗ a‖_F = ‖g‖·‖a‖ for the weights (Goodfellow 2015, arXiv:1510.01799).
    per_param_norms = []
    for g, a in zip(gs, acts):
        g_norm = g.norm(2, dim=-1)
        per_param_norms += [g_norm * a.norm(2, dim=-1), g_norm]
    norms = torch.stack(per_param_norms, dim=-1).norm(2, dim=-1)
    factor = _clip_factors(norms, max_grad_norm, valid)
    for n, g, a in zip(linear, gs, acts):
        scaled = g * factor.unsqueeze(-1)
        # Σ_i c_i g_i a_iᵀ as one batched matmul: "ghost clipping" (Li et al. 2021, arXiv:2110.05679).
        summed[f"{n}.weight"] += torch.bmm(scaled.transpose(1, 2), a)
        summed[f"{n}.bias"] += scaled.sum(dim=1)


def clipped_noisy_gradient_sum(
    template: nn.Module,
    params: dict[str, torch.Tensor],
    X: torch.Tensor,
    y: torch.Tensor,
    valid: torch.Tensor,
    *,
    max_grad_norm: float,
    noise_multiplier: float = 0.0,
    generators: Sequence[torch.Generator] | None = None,
    row_chunk_size: int | None = None,
    method: str = "auto",
    extra_gradients: dict[str, torch.Tensor] | None = None,
) -> dict[str, torch.Tensor]:
    """Σ_i min(1, C/(‖∇ℓ_i‖+1e-6)) ∇ℓ_i + N(0, σ²C² I) for each of K stacked models.

    `extra_gradients` (name -> (K, *shape), optional): one more per-sample gradient row per model,
    clipped like every data row (its own flat norm) and summed before the noise: how a white-box
    audit inserts a gradient canary (`audit.dp_validation.whitebox_audit`); an all-zero row adds nothing.

    This is Opacus's `p.summed_grad` after `clip_and_accumulate` plus the noise of `add_noise`
    (before `scale_grad`). `params` maps parameter names of `template` (only its structure is
    used; it may live on the meta device) to tensors of shape (K, *shape); `X` is
    (K, B, features), `y` (K, B) class indices, `valid` (K, B) bool: False rows are padding and
    contribute nothing. ℓ_i is the cross-entropy of row i alone. Noise for model k is one flat
    standard normal vector drawn from `generators[k]`, laid out in `params` order; it is skipped
    (and `generators` may be None) when σ = 0. Rows are processed `row_chunk_size` at a time to
    bound memory (same result up to float summation order).

    `method` picks how per-sample gradients are obtained, both with `vmap(grad(...))` over rows
    inside a `vmap` over models:
    "vmap" materialises every per-sample gradient (any template; memory K·B·params);
    "ghost" takes per-sample gradients w.r.t. the biases only and uses that a Linear layer's
    per-sample weight gradient is the outer product of that bias gradient and the layer input,
    so norms are products of vector norms and the clipped sum is one matmul per layer (only
    Sequentials of Linear layers and sample-wise activations, such as `MLP`; same numbers up to
    float rounding, far less memory and time). "auto" = "ghost" when the template allows it.
    """
    if max_grad_norm is None or max_grad_norm <= 0:
        raise ValueError(f"max_grad_norm must be > 0, got {max_grad_norm!r}")
    method = _resolve_method(method, template)
    accumulate = _accumulate_clipped_ghost if method == "ghost" else _accumulate_clipped_vmap
    summed = {name: torch.zeros_like(p) for name, p in params.items()}
    for start, stop in _row_blocks(valid.shape[1], row_chunk_size):
        accumulate(template, params, X[:, start:stop], y[:, start:stop], valid[:, start:stop], max_grad_norm, summed)
    if extra_gradients is not None:
        norms = torch.stack(
            [extra_gradients[n].reshape(valid.shape[0], -1).norm(2, dim=-1) for n in summed], dim=-1
        ).norm(2, dim=-1)
        factor = _clip_factors(norms, max_grad_norm, torch.ones_like(norms, dtype=torch.bool))
        for n in summed:
            summed[n] += factor.reshape((-1,) + (1,) * (summed[n].dim() - 1)) * extra_gradients[n]
    if noise_multiplier > 0:
        noise = _flat_standard_normal(params, generators)
        std = noise_multiplier * max_grad_norm
        for n in summed:
            summed[n] += std * noise[n]
    return summed


def _row_blocks(n_rows: int, row_chunk_size: int | None) -> list[tuple[int, int]]:
    step = max(row_chunk_size or n_rows, 1)
    return [(start, min(start + step, n_rows)) for start in range(0, n_rows, step)]


def _resolve_method(method: str, template: nn.Module) -> str:
    if method == "auto":
        return "ghost" if supports_ghost_norms(template) else "vmap"
    if method == "vmap":
        return method
    if method == "ghost":
        if not supports_ghost_norms(template):
            raise ValueError("method='ghost' needs a Sequential of biased Linear layers and sample-wise activations")
        return method
    raise ValueError(f"method must be 'auto', 'vmap' or 'ghost', got {method!r}")


def mean_gradient(
    template: nn.Module,
    params: dict[str, torch.Tensor],
    X: torch.Tensor,
    y: torch.Tensor,
    valid: torch.Tensor,
) -> dict[str, torch.Tensor]:
    """Ordinary (non-private) gradient of the mean cross-entropy over each model's valid rows.

    A model with no valid row gets a zero gradient.
    """
    weight = valid.to(X.dtype)
    weight = weight / weight.sum(dim=1, keepdim=True).clamp(min=1.0)
    batched = vmap(grad(lambda p, x, t, w: _masked_mean_loss(template, p, x, t, w)), in_dims=(0, 0, 0, 0))
    return batched(params, X, y, weight)


def _flat_standard_normal(params: dict[str, torch.Tensor], generators) -> dict[str, torch.Tensor]:
    first = next(iter(params.values()))
    n_models = first.shape[0]
    if generators is None or len(generators) != n_models:
        raise ValueError(f"generators: need one torch.Generator per model ({n_models}) when noise_multiplier > 0")
    sizes = [p[0].numel() for p in params.values()]
    flat = torch.empty((n_models, sum(sizes)), device=first.device, dtype=first.dtype)
    for row, generator in zip(flat.unbind(0), generators):
        row.normal_(generator=generator)
    pieces = flat.split(sizes, dim=1)
    return {name: piece.reshape(p.shape) for (name, p), piece in zip(params.items(), pieces)}


def dpsgd_step(
    template: nn.Module,
    params: dict[str, torch.Tensor],
    momentum_buffers: dict[str, torch.Tensor] | None,
    X: torch.Tensor,
    y: torch.Tensor,
    valid: torch.Tensor,
    spec: DPSGDSpec,
    expected_batch_sizes: torch.Tensor,
    generators: Sequence[torch.Generator] | None = None,
    *,
    row_chunk_size: int | None = None,
    method: str = "auto",
    extra_gradients: dict[str, torch.Tensor] | None = None,
) -> None:
    """One DP-SGD (or, for a non-private spec, SGD) step of K stacked models, in place.

    Private / clip-only: grad_k = (clipped sum + noise) / expected_batch_sizes[k] as Opacus's
    DPOptimizer with loss_reduction="mean"; non-private: the mean gradient over the batch.
    Then torch.optim.SGD's update: buf = momentum·buf + grad (buf starts at zero, which equals
    SGD's first-step copy), p -= lr·buf. `momentum_buffers` must be given when momentum > 0.
    `method` and `extra_gradients` are `clipped_noisy_gradient_sum`'s (private specs only).
    """
    if spec.max_grad_norm is None:
        grads = mean_gradient(template, params, X, y, valid)
    else:
        grads = clipped_noisy_gradient_sum(
            template,
            params,
            X,
            y,
            valid,
            max_grad_norm=spec.max_grad_norm,
            noise_multiplier=spec.noise_multiplier,
            generators=generators,
            row_chunk_size=row_chunk_size,
            method=method,
            extra_gradients=extra_gradients,
        )
        for g in grads.values():
            g /= expected_batch_sizes.to(g.dtype).reshape((-1,) + (1,) * (g.dim() - 1))
    for name, g in grads.items():
        if spec.momentum > 0:
            if momentum_buffers is None:
                raise ValueError("momentum_buffers: required when momentum > 0")
            buf = momentum_buffers[name]
            buf.mul_(spec.momentum).add_(g)
            g = buf
        params[name].add_(g, alpha=-spec.lr)
