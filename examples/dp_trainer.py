"""A DP-SGD trainer, written the way a user writes one, and the same trainer with a one-line bug.

    privacy-audit canary-audit --trainer dp_trainer:correct      # black box: train() many times
    privacy-audit conformance  --trainer dp_trainer:broken       # step by step: sampling, clipping, noise

One object serves both commands:

* `canary-audit` calls it: `train(features, labels, seed) -> model` (a model with `logits(X)`), in
  isolated worker processes, and reads its `CLAIM` (what its accountant was told);
* `conformance` drives its two pieces: `sample_batches(n, rng)` (the whole training's batches) and
  `privatize_gradients(per-example grads, rng, step)` (the noisy clipped sum), plus `max_grad_norm`.

The model is softmax regression trained from zero weights with Poisson sampling, per-example
clipping to C and Gaussian noise of std σ·C on the sum (Abadi et al. 2016, arXiv 1607.00133).
`broken` clips the batch's *mean* gradient instead of each example's, a bug seen in the wild: one
record can then move the sum by far more than C, whatever the accountant says.
"""

from __future__ import annotations

import numpy as np
from scipy import special

# σ 4.5, q 0.25, T 20, δ 1e-5: ε ≈ 1.0 by the PLD accountant.
CLAIM = {"noise_multiplier": 4.5, "sample_rate": 0.25, "steps": 20, "delta": 1e-5}


class SoftmaxRegression:
    def __init__(self, weights: np.ndarray):
        self.weights = weights

    def logits(self, features: np.ndarray) -> np.ndarray:
        X = np.asarray(features, dtype=np.float64)
        return np.hstack([X, np.ones((len(X), 1))]) @ self.weights


class NumpyDPSGD:
    max_grad_norm = 1.0
    learning_rate = 2.0

    def __init__(self, clip_each_example: bool = True):
        self.clip_each_example = clip_each_example
        self.CLAIM = dict(CLAIM)

    def sample_batches(self, n: int, rng: np.random.Generator) -> list[np.ndarray]:
        q, steps = self.CLAIM["sample_rate"], self.CLAIM["steps"]
        return [np.flatnonzero(rng.random(n) < q) for _ in range(steps)]  # Poisson: each record by its own coin

    def privatize_gradients(
        self, grads: dict[str, np.ndarray], rng: np.random.Generator, step: int
    ) -> dict[str, np.ndarray]:
        names = list(grads)
        b = int(np.asarray(grads[names[0]]).shape[0])
        shapes = {k: np.asarray(v).shape[1:] for k, v in grads.items()}
        sizes = [int(np.prod(shapes[k])) for k in names]
        flat = np.hstack([np.asarray(grads[k], dtype=np.float64).reshape(b, s) for k, s in zip(names, sizes)])
        C = self.max_grad_norm
        if self.clip_each_example:
            norms = np.linalg.norm(flat, axis=1, keepdims=True)
            total = (flat * np.minimum(1.0, C / np.maximum(norms, 1e-12))).sum(axis=0)
        else:  # the bug: clip the batch mean, then scale back up to a sum
            mean = flat.mean(axis=0) if b else np.zeros(flat.shape[1])
            total = mean * min(1.0, C / max(np.linalg.norm(mean), 1e-12)) * b
        total = total + rng.normal(0.0, self.CLAIM["noise_multiplier"] * C, total.shape)
        out, start = {}, 0
        for name, size in zip(names, sizes):
            out[name] = total[start : start + size].reshape(shapes[name])
            start += size
        return out

    def __call__(self, features: np.ndarray, labels: np.ndarray, seed: int) -> SoftmaxRegression:
        X, y = np.asarray(features, dtype=np.float64), np.asarray(labels, dtype=np.int64)
        n, d = X.shape
        k = max(int(y.max()) + 1, 2)
        onehot = np.eye(k)[y]
        expected_batch = float(max(1, round(self.CLAIM["sample_rate"] * n)))  # the same for both neighbours
        rng = np.random.default_rng([int(seed), 0])
        noise_rng = np.random.default_rng([int(seed), 1])
        W = np.zeros((d + 1, k))
        for step, batch in enumerate(self.sample_batches(n, rng)):
            residual = special.softmax(X[batch] @ W[:d] + W[d], axis=1) - onehot[batch]
            grads = {"weight": X[batch][:, :, None] * residual[:, None, :], "bias": residual}
            update = self.privatize_gradients(grads, noise_rng, step)
            W[:d] -= self.learning_rate * update["weight"] / expected_batch
            W[d] -= self.learning_rate * update["bias"] / expected_batch
        return SoftmaxRegression(W)


correct = NumpyDPSGD()
broken = NumpyDPSGD(clip_each_example=False)
