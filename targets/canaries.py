"""Gradient canaries inside one Opacus DP-SGD training run (the one-run white-box audit's probes).

m canaries, each put into the run by its own fair coin (Steinke, Nasr, Jagielski 2023, arXiv
2305.08846) and, once in, sampled at every step with the claimed rate q like any record of the
Poisson-sampled data set. A canary is a *per-sample gradient* chosen by the auditor:

* **Dirac** (default where the model has room: m ≤ `DIRAC_SHARE` of its trainable coordinates):
  canary i owns one coordinate j_i of its own; every real per-sample gradient has j_i zeroed
  (a per-record map before clipping, so privacy is unchanged), and the canary's gradient is
  `scale`·C·e_{j_i}. Its coordinate of the privatised update is then exactly
  C·[canary in batch] + noise (Nasr et al. 2023, arXiv 2302.07956);
* **random** (Andrew et al. 2023, arXiv 2302.03098): canary i's gradient is `scale`·C·u_i for a
  random unit direction u_i of the whole parameter vector; real gradients are left alone, so they
  add a little to every canary's projection (≈ ‖gradient‖/√d).

How the canary goes in: as extra rows of every parameter's `p.grad_sample` after `backward()`
and before `optimizer.step()`. Opacus's `DPOptimizer.step` then clips each row to C
(`clip_and_accumulate`), sums, adds N(0, σ²C²) (`add_noise`) and scales (`scale_grad`): the
optimizer's own code acts on the canary exactly as on a record, which is what is audited. The
canary's norm is `scale`·C with scale ≫ 1 by default, so that a missing or too-loose clipping shows
(a norm-C canary would pass any clipping at ≥ C unchanged). Adding to `p.summed_grad` instead would
skip the user's clipping. The observation is read in the optimizer's step hook (after noise and
scaling, before the inner optimizer's update: the privatised gradient, every iterate): per canary
x_t = ⟨g̃_t, u_i⟩·B/C (B the expected batch size for mean reduction, 1 for sum), so a correct
implementation gives x_t = [canary in batch] + σ·z_t for a Dirac canary.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import torch

__all__ = ["DIRAC_SHARE", "GradientCanaries", "canary_count_for", "make_canaries"]

# Dirac canaries may take at most this share of the trainable coordinates (frozen for real records).
DIRAC_SHARE = 0.1
# Random-direction canaries keep an (m, d) matrix: at most this many floats.
RANDOM_DIRECTIONS_LIMIT = 50_000_000
DEFAULT_SCALE = 1000.0
MAX_DEFAULT_CANARIES = 10_000
MIN_DEFAULT_CANARIES = 1_000


def canary_count_for(n_parameters: int) -> int:
    """Default m: as many Dirac canaries as `DIRAC_SHARE` of the coordinates allows, within
    [1000, 10 000] (fewer coordinates than that: random directions)."""
    return int(min(MAX_DEFAULT_CANARIES, max(MIN_DEFAULT_CANARIES, math.floor(DIRAC_SHARE * n_parameters))))


@dataclass
class GradientCanaries:
    """The canaries of one run and the scores they collect (see the module docstring)."""

    kind: str
    coins: np.ndarray  # (m,) bool: in this run at all
    sample_rate: float
    scale: float
    seed: int
    coordinates: np.ndarray | None = None  # Dirac: (m,) flat indices into the trainable parameters
    directions: torch.Tensor | None = None  # random: (m, d) unit rows
    noise_multiplier: float | None = None  # the claimed σ: the per-step mixture score at q < 1
    sums: np.ndarray = field(init=False)
    mixture: np.ndarray = field(init=False)
    steps: int = field(init=False, default=0)
    inserted: int = field(init=False, default=0)

    def __post_init__(self):
        m = self.coins.size
        self.sums = np.zeros(m)
        self.mixture = np.zeros(m)
        self._rng = np.random.default_rng(np.random.SeedSequence([int(self.seed), 31]))
        self._in = np.flatnonzero(self.coins)
        self._params: list[torch.Tensor] | None = None

    @property
    def m(self) -> int:
        return int(self.coins.size)

    # -- wiring ----------------------------------------------------------------------------------

    def attach(self, optimizer) -> None:
        """Bind to a DPOptimizer: its trainable parameters, and an observer in its step hook."""
        self._optimizer = optimizer
        self._params = [p for p in optimizer.params if p.requires_grad]
        sizes = [p.numel() for p in self._params]
        self._offsets = np.concatenate([[0], np.cumsum(sizes)])
        if self.kind == "dirac":
            owner = np.searchsorted(self._offsets, self.coordinates, side="right") - 1
            self._owner = owner
            self._local_of = self.coordinates - self._offsets[owner]  # canary i's index inside its parameter
            self._local = [torch.as_tensor(self.coordinates[owner == k] - self._offsets[k])
                           for k in range(len(self._params))]
        self._start = self._flat_parameters().clone()
        inner = optimizer.step_hook

        def hook(opt):
            self._observe(opt)
            if inner is not None:
                inner(opt)

        optimizer.step_hook = hook

    def _flat_parameters(self) -> torch.Tensor:
        return torch.cat([p.detach().reshape(-1).double().cpu() for p in self._params])

    # -- every step ------------------------------------------------------------------------------

    def insert(self) -> int:
        """After backward(), before optimizer.step(): zero Dirac coordinates in the real rows and
        append the included canaries' rows. Returns how many canaries joined this step."""
        if self.sample_rate >= 1:
            included = self._in
        else:
            included = self._in[self._rng.random(self._in.size) < self.sample_rate]
        k = int(included.size)
        value = float(self.scale) * float(self._optimizer.max_grad_norm)
        for index, p in enumerate(self._params):
            samples = p.grad_sample
            if isinstance(samples, list):
                samples = torch.cat(samples)
            if not isinstance(samples, torch.Tensor):
                raise ValueError("the model's parameters carry no per-sample gradients after backward(): "
                                 "wrap it with PrivacyEngine.make_private (GradSampleModule)")
            b = samples.shape[0]
            flat = samples.reshape(b, -1)
            if self.kind == "dirac":
                local = self._local[index]
                if local.numel():
                    flat = flat.clone()
                    flat[:, local] = 0.0
                rows = torch.zeros((k, flat.shape[1]), dtype=flat.dtype, device=flat.device)
                mine = np.flatnonzero(self._owner[included] == index)
                if mine.size:
                    rows[torch.as_tensor(mine), torch.as_tensor(self._local_of[included[mine]])] = value
            else:
                start, stop = int(self._offsets[index]), int(self._offsets[index + 1])
                rows = (self.directions[torch.as_tensor(included), start:stop] * value).to(flat.dtype).to(flat.device)
            p.grad_sample = torch.cat([flat, rows]).reshape(b + k, *p.shape)
        self.inserted += k
        return k

    def _observe(self, optimizer) -> None:
        dtype = torch.float64 if self.kind == "dirac" else torch.float32  # random: one float32 matmul per step
        grad = torch.cat([p.grad.detach().reshape(-1).to(dtype).cpu() for p in self._params])
        reduction = getattr(optimizer, "loss_reduction", "mean")
        factor = (float(optimizer.expected_batch_size or 1) * float(getattr(optimizer, "accumulated_iterations", 1))
                  if reduction == "mean" else 1.0) / float(optimizer.max_grad_norm)
        x = self._project(grad) * factor
        self.sums += x
        if self.noise_multiplier is not None and self.sample_rate < 1:
            a = (2 * x - 1) / (2 * float(self.noise_multiplier) ** 2)
            self.mixture += np.logaddexp(math.log1p(-self.sample_rate), math.log(self.sample_rate) + a)
        self.steps += 1

    def _project(self, flat: torch.Tensor) -> np.ndarray:
        if self.kind == "dirac":
            return flat[torch.as_tensor(self.coordinates)].numpy()
        return (self.directions @ flat.to(self.directions.dtype)).double().numpy()

    # -- scores ----------------------------------------------------------------------------------

    def scores(self, observe: str) -> np.ndarray:
        """Higher = more likely in. "all": every iterate (the sum of x_t at q = 1; the log-likelihood
        ratio of the claimed Bernoulli(q) mixture, Σ_t ln((1 − q) + q·e^{(2x_t − 1)/(2σ²)}), at
        q < 1); "final": the final model's movement along the canary, ⟨θ_0 − θ_T, u_i⟩."""
        if observe == "final":
            return self._project(self._start - self._flat_parameters())
        if self.sample_rate < 1 and self.noise_multiplier is not None:
            return self.mixture.copy()
        return self.sums.copy()


def make_canaries(n_parameters: int, m: int, *, kind: str, sample_rate: float, seed: int,
                  scale: float = DEFAULT_SCALE, noise_multiplier: float | None = None) -> GradientCanaries:
    """m canaries with fair coins, Dirac coordinates or random unit directions ("auto": Dirac when
    m ≤ `DIRAC_SHARE`·d), all drawn from `seed`."""
    d, m = int(n_parameters), int(m)
    if kind == "auto":
        kind = "dirac" if m <= DIRAC_SHARE * d else "random"
    rng = np.random.default_rng(np.random.SeedSequence([int(seed), 30]))
    coins = rng.random(m) < 0.5
    if kind == "dirac":
        if m > d:
            raise ValueError(f"{m} Dirac canaries need {m} coordinates; the model has {d}")
        coordinates = np.sort(rng.choice(d, size=m, replace=False))
        # Coins must not follow the coordinate order (ties in scores break by position).
        return GradientCanaries("dirac", coins, float(sample_rate), float(scale), int(seed), coordinates=coordinates,
                                noise_multiplier=noise_multiplier)
    if kind != "random":
        raise ValueError(f"canary kind must be auto, dirac or random, got {kind!r}")
    if m * d > RANDOM_DIRECTIONS_LIMIT:
        raise ValueError(f"{m} random directions of {d} coordinates exceed {RANDOM_DIRECTIONS_LIMIT} floats")
    generator = torch.Generator().manual_seed(int(rng.integers(2**62)))
    directions = torch.randn((m, d), generator=generator, dtype=torch.float32)
    directions /= directions.norm(dim=1, keepdim=True)
    return GradientCanaries("random", coins, float(sample_rate), float(scale), int(seed), directions=directions,
                            noise_multiplier=noise_multiplier)
