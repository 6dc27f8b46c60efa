"""Planted-bug suite: hand-written DP-SGD trainers, one correct recipe and the bugs seen in the wild.

Every trainer here is a `DPSGDRecipe`: a callable `train(features, labels, seed) -> model` (the
`canary-audit` protocol) that is also a *step-function* trainer (the `conformance` protocol):

* `sample_batches(n, rng) -> list of index arrays`, one per step: the whole training's batches;
* `privatize_gradients(per_example_grads (b, p), rng, step) -> (p,)`: the noisy clipped sum that
  the step adds (times −lr / expected batch) to the parameters;
* `CLAIM` = what its accountant was told: {noise_multiplier, sample_rate, steps, delta}, and
  `max_grad_norm` (C).

`train` is built from exactly these two pieces, so a bug in them is a bug of the trainer and the
black-box canary audit and the conformance checks look at the same code. The model is softmax
regression (with a bias) trained from zero weights: DP-SGD's guarantee holds for any fixed
initialisation, and the auditor may know it (Nasr et al. 2021, arXiv 2101.04535). numpy only:
one training takes about a millisecond, so an audit can afford thousands.

The claim of every trainer is σ = 4.5, q = 0.25, T = 20, δ = 1e-5 (ε ≈ 1.0 by the PLD accountant)
unless stated. The bugs (`PLANTED_BUGS`), each a one-line slip:

| name | class | what the code does |
|---|---|---|
| batch_clip | clipping wrong | clips the batch-mean gradient instead of each example's |
| clip_after_noise | clipping wrong | adds noise to the unclipped sum, then clips the noisy update |
| per_layer_clip | clipping wrong | clips weights and bias each to C: total norm √2·C, noise σ·C |
| sigma_not_sigma_c | noise scale wrong | C = 4 but noise std σ instead of σ·C (true ε ≈ 6.6) |
| noise_divided_twice | noise scale wrong | noise std σ·C / expected batch (meant for the mean) |
| noise_missing_steps | noise scale wrong | noise only on the first step of each epoch |
| shuffled_batches | sampling | fixed-size shuffled batches while the accountant assumes Poisson |
| batch_reused | sampling | one Poisson batch drawn before the loop and reused at every step |
| wrong_steps | accountant | trains 4× the steps the accountant was told |
| fixed_noise_seed | reused seed | noise generator seeded with a constant: the same noise every run |

`CORRECT` holds correct recipes at ε ∈ {0.5, 1, 2, 4, 8} (σ calibrated with the PLD accountant).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import special

__all__ = ["CORRECT", "DPSGDRecipe", "PLANTED_BUGS", "SoftmaxRegression"]

NOISE_MULTIPLIER = 4.5
SAMPLE_RATE = 0.25
STEPS = 20
DELTA = 1e-5
MAX_GRAD_NORM = 1.0
LEARNING_RATE = 2.0
# σ for a few target ε at q = 0.25, T = 20, δ = 1e-5 (PLD accountant; tests check them).
CALIBRATED_SIGMA = {0.5: 8.15, 1.0: 4.5, 2.0: 2.6, 4.0: 1.6, 8.0: 1.05}


class SoftmaxRegression:
    """The trained model: logits = [x, 1] @ W."""

    def __init__(self, weights: np.ndarray):
        self.weights = weights

    def logits(self, features: np.ndarray) -> np.ndarray:
        X = np.asarray(features, dtype=np.float64)
        return np.hstack([X, np.ones((X.shape[0], 1))]) @ self.weights


def _clip_rows(grads: np.ndarray, bound: float) -> np.ndarray:
    norms = np.linalg.norm(grads, axis=1, keepdims=True)
    return grads * np.minimum(1.0, bound / np.maximum(norms, 1e-12))


@dataclass(frozen=True)
class DPSGDRecipe:
    """One DP-SGD implementation (`bug` None = correct); see the module docstring."""

    name: str
    bug: str | None = None
    noise_multiplier: float = NOISE_MULTIPLIER
    max_grad_norm: float = MAX_GRAD_NORM
    sample_rate: float = SAMPLE_RATE
    steps: int = STEPS
    delta: float = DELTA
    claim: dict | None = None

    def __post_init__(self) -> None:
        if self.claim is None:
            object.__setattr__(
                self,
                "claim",
                {
                    "noise_multiplier": self.noise_multiplier,
                    "sample_rate": self.sample_rate,
                    "steps": self.steps,
                    "delta": self.delta,
                },
            )

    @property
    def CLAIM(self) -> dict:  # noqa: N802 - the attribute name of the trainer protocol
        return dict(self.claim or {})  # never None after __post_init__

    # -- the step-function protocol ------------------------------------------------------------

    def sample_batches(self, n: int, rng: np.random.Generator) -> list[np.ndarray]:
        steps = self.steps * (4 if self.bug == "wrong_steps" else 1)
        if self.bug == "shuffled_batches":
            per_epoch = round(1 / self.sample_rate)
            size = int(np.ceil(n / per_epoch))
            batches: list[np.ndarray] = []
            while len(batches) < steps:
                order = rng.permutation(n)
                batches += [order[i * size : (i + 1) * size] for i in range(per_epoch)]
            return batches[:steps]
        if self.bug == "batch_reused":
            batch = np.flatnonzero(rng.random(n) < self.sample_rate)  # drawn once, outside the step loop
            return [batch] * steps
        return [np.flatnonzero(rng.random(n) < self.sample_rate) for _ in range(steps)]

    def privatize_gradients(
        self, grads: dict[str, np.ndarray], rng: np.random.Generator, step: int
    ) -> dict[str, np.ndarray]:
        """Noisy clipped sum of per-example gradients {parameter name: (b, *shape)} (Opacus-style
        layout: one tensor per parameter), as {name: shape}. Correct: each example's gradient,
        all parameters together, clipped to norm C; Gaussian noise of std σ·C added to the sum."""
        names = list(grads)
        b = int(next(iter(grads.values())).shape[0])
        shapes = {k: np.asarray(v).shape[1:] for k, v in grads.items()}
        sizes = [int(np.prod(shapes[k])) for k in names]
        # reshape(b, size), not (b, -1): an empty Poisson batch (b = 0) is a legal step.
        flat = np.hstack([np.asarray(grads[k], dtype=np.float64).reshape(b, size) for k, size in zip(names, sizes)])
        C, sigma, p = self.max_grad_norm, self.noise_multiplier, flat.shape[1]
        noise_std = sigma * C
        if self.bug == "sigma_not_sigma_c":
            noise_std = sigma  # σ instead of σ·C (C = 4 for this recipe)
        elif self.bug == "noise_divided_twice":
            noise_std = sigma * C / max(1, b)  # noise meant for the mean, then the mean taken again
        elif self.bug == "noise_missing_steps" and step % round(1 / self.sample_rate) != 0:
            noise_std = 0.0  # noise only on the first step of each epoch
        noise_source = np.random.default_rng(1234 + step) if self.bug == "fixed_noise_seed" else rng
        noise = noise_source.normal(0.0, 1.0, p) * noise_std
        if self.bug == "batch_clip":
            mean = flat.mean(axis=0) if b else np.zeros(p)
            total = _clip_rows(mean[None], C)[0] * b + noise
        elif self.bug == "clip_after_noise":
            total = _clip_rows((flat.sum(axis=0) + noise)[None], C * max(1, b))[0]
        elif self.bug == "per_layer_clip":
            # Each parameter tensor clipped to C: the total norm is up to C·√(tensors), the noise σ·C.
            parts, start = [], 0
            for size in sizes:
                parts.append(_clip_rows(flat[:, start : start + size], C))
                start += size
            total = np.hstack(parts).sum(axis=0) + noise
        else:
            total = _clip_rows(flat, C).sum(axis=0) + noise
        out, start = {}, 0
        for name, size in zip(names, sizes):
            out[name] = total[start : start + size].reshape(shapes[name])
            start += size
        return out

    # -- the canary-audit protocol -------------------------------------------------------------

    def __call__(self, features: np.ndarray, labels: np.ndarray, seed: int) -> SoftmaxRegression:
        X = np.asarray(features, dtype=np.float64)
        y = np.asarray(labels, dtype=np.int64)
        n, d = X.shape
        k = max(int(y.max()) + 1, 2)
        onehot = np.eye(k)[y]
        # A data-independent normaliser: the expected batch ⌊qn⌉ (equal for both neighbours).
        expected_batch = float(max(1, round(self.sample_rate * n)))
        rng = np.random.default_rng(np.random.SeedSequence([int(seed), 0]))
        noise_rng = np.random.default_rng(np.random.SeedSequence([int(seed), 1]))
        W = np.zeros((d + 1, k))
        for step, batch in enumerate(self.sample_batches(n, rng)):
            xb = X[batch]
            residual = special.softmax(xb @ W[:d] + W[d], axis=1) - onehot[batch]
            grads = {"weight": xb[:, :, None] * residual[:, None, :], "bias": residual}
            update = self.privatize_gradients(grads, noise_rng, step)
            W[:d] -= LEARNING_RATE * update["weight"] / expected_batch
            W[d] -= LEARNING_RATE * update["bias"] / expected_batch
        return SoftmaxRegression(W)


def _bug(name: str, **kwargs) -> DPSGDRecipe:
    return DPSGDRecipe(name, bug=name, **kwargs)


# The claim of `sigma_not_sigma_c` and `wrong_steps` is the usual one (σ 4.5, q 0.25, T 20).
batch_clip = _bug("batch_clip")
clip_after_noise = _bug("clip_after_noise")
per_layer_clip = _bug("per_layer_clip")
sigma_not_sigma_c = _bug("sigma_not_sigma_c", max_grad_norm=4.0)
noise_divided_twice = _bug("noise_divided_twice")
noise_missing_steps = _bug("noise_missing_steps")
shuffled_batches = _bug("shuffled_batches")
batch_reused = _bug("batch_reused")
wrong_steps = _bug("wrong_steps")
fixed_noise_seed = _bug("fixed_noise_seed")

PLANTED_BUGS = {
    r.name: r
    for r in (
        batch_clip,
        clip_after_noise,
        per_layer_clip,
        sigma_not_sigma_c,
        noise_divided_twice,
        noise_missing_steps,
        shuffled_batches,
        batch_reused,
        wrong_steps,
        fixed_noise_seed,
    )
}

correct_eps_0_5 = DPSGDRecipe("correct_eps_0_5", noise_multiplier=CALIBRATED_SIGMA[0.5])
correct_eps_1 = DPSGDRecipe("correct_eps_1", noise_multiplier=CALIBRATED_SIGMA[1.0])
correct_eps_2 = DPSGDRecipe("correct_eps_2", noise_multiplier=CALIBRATED_SIGMA[2.0])
correct_eps_4 = DPSGDRecipe("correct_eps_4", noise_multiplier=CALIBRATED_SIGMA[4.0])
correct_eps_8 = DPSGDRecipe("correct_eps_8", noise_multiplier=CALIBRATED_SIGMA[8.0])
correct_clip_4 = DPSGDRecipe("correct_clip_4", max_grad_norm=4.0)

CORRECT = {
    r.name: r for r in (correct_eps_0_5, correct_eps_1, correct_eps_2, correct_eps_4, correct_eps_8, correct_clip_4)
}
