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
optimizer's own code acts on the canary exactly as on a record. The canary's norm is `scale`·C
with scale ≫ 1 by default, so that a missing or too-loose clipping shows (a norm-C canary would pass
any clipping at ≥ C unchanged).

Cost: each row is as long as the model, so a row per canary costs what a real record's clipping
costs; with m ≫ the batch that dominates the step (5–18× measured at m = 10⁴ on a small MLP). So
on the first step and a random `WITNESS_STEP_SHARE` of the others, at most `ROW_SHARE` of the
expected batch (≥ `MIN_ROWS_PER_STEP`) go as rows — the *witnesses*, a uniformly random subset of
the step's canaries; the other canaries join
`p.summed_grad` (the clipped sum Opacus adds its rows to, before the noise) at C along their
direction — what a correct clipping makes of them. The noise, scaling and every iterate are the
optimizer's own for all canaries; the clipping is audited on the witnesses, deterministically for
Dirac canaries: in the step hook the clipped sum on each canary's coordinate must be exactly
C·[joined this step] (real rows have it zeroed), so a clipping that lets a witness through
unclipped or clips the wrong amount shows as `clip_deviation` > 0 from one step. `max_rows` large
sends every canary as a row (the previous, costlier behaviour). Random-direction canaries have
no exact clipping check (real gradients overlap their directions).

The observation is read in the optimizer's step hook (after noise and scaling, before the inner
optimizer's update: the privatised gradient, every iterate): per canary x_t = ⟨g̃_t, u_i⟩·B/C (B
the expected batch size for mean reduction, 1 for sum), so a correct implementation gives
x_t = [canary in batch] + σ·z_t for a Dirac canary. Dirac projections are a gather of m
coordinates per step; random ones one (m × d) matrix-vector product per step.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, TypeVar

import numpy as np
import torch

__all__ = ["DIRAC_SHARE", "GradientCanaries", "canary_count_for", "make_canaries"]

# Dirac canaries may take at most this share of the trainable coordinates (frozen for real records).
DIRAC_SHARE = 0.1
# Random-direction canaries keep an (m, d) matrix: at most this many floats.
RANDOM_DIRECTIONS_LIMIT = 50_000_000
DEFAULT_SCALE = 1000.0
# Canary rows per step through the optimizer's own per-sample clipping: at most this share of the
# expected batch (at least MIN_ROWS_PER_STEP); the step's other canaries join the clipped sum.
ROW_SHARE = 0.1
MIN_ROWS_PER_STEP = 4
# ... on the first step and a random share of the others (the rest: all canaries join the clipped sum).
WITNESS_STEP_SHARE = 0.1
MAX_DEFAULT_CANARIES = 10_000
MIN_DEFAULT_CANARIES = 1_000


_T = TypeVar("_T")


def _given(value: _T | None, what: str) -> _T:
    """`value`, which the canaries' kind or the training step guarantees is set (a ValueError if not)."""
    if value is None:
        raise ValueError(f"{what} is not set")
    return value


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
    max_rows: int | None = None  # canaries per step through the optimizer's clipping as rows (None: ROW_SHARE)
    # Dirac, steps without witness rows: the real rows are not zeroed on the canaries' coordinates before
    # clipping (a pass over every per-sample gradient); their clipped sum is overwritten there after it
    # (`attach` wraps the optimizer's clip_and_accumulate). Still a per-record map (clip, then zero some
    # coordinates: norm ≤ C), so privacy is unchanged and the coordinates stay the canaries' own.
    zero_after_clip: bool = False
    steps: int = field(init=False, default=0)
    inserted: int = field(init=False, default=0)
    as_rows: int = field(init=False, default=0)
    inserted_steps: int = field(init=False, default=0)
    clip_deviation: float = field(init=False, default=0.0)
    clip_checked_steps: int = field(init=False, default=0)
    clip_unchecked_steps: int = field(init=False, default=0)

    def __post_init__(self):
        m = self.coins.size
        self.sums = np.zeros(m)
        self.mixture = np.zeros(m)
        self._rng = np.random.default_rng(np.random.SeedSequence([int(self.seed), 31]))
        # Its own stream, so which canaries join a step does not depend on how many go as rows.
        self._pick_rng = np.random.default_rng(np.random.SeedSequence([int(self.seed), 32]))
        self._in = np.flatnonzero(self.coins)
        self._params: list[torch.Tensor] = []  # the optimizer's trainable parameters, from attach()
        self._buffer: torch.Tensor | None = None
        self._joined: np.ndarray | None = None
        self._norms: np.ndarray | None = None  # per-canary clipping norm under per-layer clipping (attach)
        self._overwrite = False  # zero_after_clip: this physical step's clipped sum is overwritten after clipping
        self._overwritten = False  # ... and the last one was (the clip check has nothing of the optimizer's to read)

    @property
    def m(self) -> int:
        return int(self.coins.size)

    # -- wiring ----------------------------------------------------------------------------------

    def attach(self, optimizer) -> None:
        """Bind to a DPOptimizer: its trainable parameters, and an observer in its step hook."""
        self._optimizer = optimizer
        self._params = [p for p in optimizer.params if p.requires_grad]
        sizes = [p.numel() for p in self._params]
        self._offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
        self._d = int(self._offsets[-1])
        if self.kind == "dirac":
            # Coordinates are sorted, so each parameter's canaries are one contiguous slice.
            self._coordinates = torch.as_tensor(self.coordinates, dtype=torch.long)
            self._slices = np.searchsorted(_given(self.coordinates, "Dirac canaries' coordinates"), self._offsets)
            self._local = [
                self._coordinates[self._slices[k] : self._slices[k + 1]] - int(self._offsets[k])
                for k in range(len(self._params))
            ]
            # 1 everywhere but on the canaries' coordinates: zeroing them in the real rows is one dense
            # multiply per step (an index_fill_ over m scattered columns costs several times more).
            self._keep = torch.ones(self._d)
            self._keep[self._coordinates] = 0.0
            self._keep_cache: dict = {}
            # The norm each canary is clipped to: C, or under Opacus's per-layer clipping
            # (`max_grad_norms`, one per tensor) its own tensor's C_k.
            norms = getattr(optimizer, "max_grad_norms", None)
            per_tensor = (
                np.repeat(np.asarray(norms, dtype=float), np.diff(self._slices[: len(self._params) + 1]))
                if isinstance(norms, (list, tuple)) and len(norms) == len(self._params)
                else None
            )
            self._norms = per_tensor
            # Only the canaries' own coordinates are kept from θ_0 (no copy of the model).
            self._start = self._gather(lambda p: p.detach()).copy()
        else:
            # ⟨θ_0, u_i⟩ for every canary, so the final score needs no copy of θ_0.
            self._start = self._project_random([p.detach() for p in self._params])
        if self.zero_after_clip and self.kind == "dirac":
            clip = optimizer.clip_and_accumulate

            def clip_then_overwrite(*args, **kwargs):
                clip(*args, **kwargs)
                self._after_clip()

            optimizer.clip_and_accumulate = clip_then_overwrite
        inner = optimizer.step_hook

        def hook(opt):
            self._observe(opt)
            if inner is not None:
                inner(opt)

        optimizer.step_hook = hook

    def _gather(self, tensor_of) -> np.ndarray:
        """Dirac: the canaries' coordinates of per-parameter tensors (a gather, never a flattened copy)."""
        out = np.empty(self.m)
        for k, p in enumerate(self._params):
            if self._local[k].numel():
                out[self._slices[k] : self._slices[k + 1]] = (
                    tensor_of(p).reshape(-1)[self._local[k]].double().cpu().numpy()
                )
        return out

    def _project_random(self, tensors) -> np.ndarray:
        """Random directions: one matrix-vector product of the (m, d) directions with the flat tensors."""
        directions = _given(self.directions, "random canaries' directions")
        flat = torch.cat([t.reshape(-1).to(directions.dtype).cpu() for t in tensors])
        return (directions @ flat).double().numpy()

    # -- every step ------------------------------------------------------------------------------

    def _joining(self, join: bool) -> np.ndarray:
        """This step's canaries: each in-coin canary by its own Bernoulli(q) draw (none when not `join`)."""
        if not join:
            return self._in[:0]
        if self.sample_rate >= 1:
            return self._in
        return self._in[self._rng.random(self._in.size) < self.sample_rate]

    def insert(self, join: bool = True) -> int:
        """After backward(), before optimizer.step(): zero Dirac coordinates in the real rows, append
        this step's witness canaries as rows and add the others to the clipped sum (module
        docstring). Returns how many canaries joined this step.

        On a witness step one buffer of (b + r) rows × d (kept across steps) holds every parameter's
        per-sample gradients as column slices (views: no further copy), the real rows copied in
        once; on other steps the real rows are only zeroed on the canaries' coordinates (one multiply).

        `join=False`: a physical step that the optimizer will skip (Opacus's BatchMemoryManager
        splits one logical batch into several): no canary joins (they are drawn once per LOGICAL
        step, at its last physical step), the real rows are still zeroed on the canaries' coordinates."""
        included = self._joining(join)
        k = int(included.size)
        C = float(self._optimizer.max_grad_norm)
        value = float(self.scale) * C
        budget = self._row_budget()
        if k > budget:
            # The witnesses: a uniformly random `budget` of this step's canaries go through the
            # optimizer's per-sample clipping as rows; the others join its clipped sum directly.
            pick = np.zeros(k, dtype=bool)
            pick[self._pick_rng.choice(k, size=budget, replace=False)] = True
            as_rows, direct = included[pick], included[~pick]
        else:
            as_rows, direct = included, included[:0]
        # Counts until the step hook reads them: a skipped step (virtual batches) keeps its clipped sum.
        if self._joined is None:
            self._joined = np.zeros(self.m)
        self._joined[included] += 1.0
        samples = []
        for p in self._params:
            grad_sample = p.grad_sample  # type: ignore[attr-defined]  # set by Opacus's GradSampleModule
            if isinstance(grad_sample, list):
                grad_sample = torch.cat(grad_sample)
            if not isinstance(grad_sample, torch.Tensor):
                raise ValueError(
                    "the model's parameters carry no per-sample gradients after backward(): "
                    "wrap it with PrivacyEngine.make_private (GradSampleModule)"
                )
            samples.append(grad_sample)
        b, r = samples[0].shape[0], int(as_rows.size)
        first = samples[0]
        device = first.device
        self._overwrite = self._overwritten = r == 0 and self.zero_after_clip and self.kind == "dirac"
        if r == 0:
            for index, (p, grad_sample) in enumerate(zip(self._params, samples)):
                if self.kind == "dirac" and self._local[index].numel() and not self._overwrite:
                    start, stop = int(self._offsets[index]), int(self._offsets[index + 1])
                    keep = self._keep_like(grad_sample)[start:stop]
                    # In place: Opacus made this tensor for this step alone (a list was joined above).
                    grad_sample = grad_sample.reshape(b, -1).mul_(keep).view(b, *p.shape)
                p.grad_sample = grad_sample  # type: ignore[attr-defined]  # read by Opacus's clipping
        else:
            buffer = self._rows(b + r, first)
            for index, grad_sample in enumerate(samples):
                start, stop = int(self._offsets[index]), int(self._offsets[index + 1])
                buffer[:b, start:stop].copy_(grad_sample.reshape(b, -1))
            if self.kind == "dirac":
                coordinates = self._coordinates.to(device)
                buffer[:b].mul_(self._keep_like(first))
                buffer[b:].zero_()
                buffer[torch.arange(b, b + r, device=device), coordinates[torch.as_tensor(as_rows, device=device)]] = (
                    value
                )
            else:
                rows = _given(self.directions, "random canaries' directions")[torch.as_tensor(as_rows)]
                torch.mul(rows.to(device, first.dtype), value, out=buffer[b:])
            for index, p in enumerate(self._params):
                start, stop = int(self._offsets[index]), int(self._offsets[index + 1])
                p.grad_sample = buffer[:, start:stop].view(b + r, *p.shape)  # type: ignore[attr-defined]
        if direct.size:
            # What a correct per-sample clipping makes of each: C along its direction. Opacus adds
            # the clipped rows' sum to `p.summed_grad` (`clip_and_accumulate`), then the noise.
            if self.kind == "dirac":
                added = torch.zeros(self._d, dtype=first.dtype, device=device)
                added[self._coordinates[torch.as_tensor(direct)].to(device)] = (
                    C if self._norms is None else torch.as_tensor(self._norms[direct], dtype=first.dtype, device=device)
                )
            else:
                rows = _given(self.directions, "random canaries' directions")[torch.as_tensor(direct)]
                added = (rows.sum(0) * C).to(device, first.dtype)
            for index, p in enumerate(self._params):
                start, stop = int(self._offsets[index]), int(self._offsets[index + 1])
                part = added[start:stop].view(p.shape)
                summed = getattr(p, "summed_grad", None)
                p.summed_grad = part if summed is None else summed + part  # type: ignore[attr-defined]  # Opacus's
        self.inserted += k
        self.as_rows += r
        self.inserted_steps += int(join)
        return k

    def _after_clip(self) -> None:
        """zero_after_clip: the clipped sum on each canary's coordinate set to what the canaries put
        there this logical step (C, or C_k, per joining), the real rows' clipped share there dropped."""
        if not self._overwrite:
            return
        self._overwrite = False
        joined = self._joined if self._joined is not None else np.zeros(self.m)
        own = float(self._optimizer.max_grad_norm) if self._norms is None else self._norms
        values = own * joined
        for k, p in enumerate(self._params):
            lo, hi = int(self._slices[k]), int(self._slices[k + 1])
            summed = getattr(p, "summed_grad", None)
            if hi == lo or summed is None:
                continue
            flat = summed.view(-1)
            flat[self._local[k].to(flat.device)] = torch.as_tensor(values[lo:hi], dtype=flat.dtype, device=flat.device)

    def insert_into_sum(self, join: bool = True) -> int:
        """Opacus's ghost clipping (`grad_sample_mode="ghost"`) keeps no per-sample gradients: after
        its second backward `p.grad` already holds the clipped sum of the real rows. Dirac canaries
        only: zero their coordinates in it and add each joining canary's C (its tensor's C_k under
        per-layer norms), what a correct clipping makes of a canary. The optimizer's clipping is not
        exercised on them (`clip_checked_steps` stays 0); its noise, scaling and accounting are."""
        if self.kind != "dirac":
            raise ValueError(
                "ghost clipping keeps no per-sample gradients: only Dirac canaries (a model of ≥ 10 "
                "coordinates per canary) can join its clipped sum"
            )
        included = self._joining(join)
        C = float(self._optimizer.max_grad_norm)
        values = np.full(self.m, C) if self._norms is None else self._norms
        for k, p in enumerate(self._params):
            lo, hi = int(self._slices[k]), int(self._slices[k + 1])
            if hi == lo or p.grad is None:
                continue
            flat = p.grad.view(-1)
            local = self._local[k].to(flat.device)
            flat[local] = 0.0
            mine = included[(included >= lo) & (included < hi)]
            if mine.size:
                flat[self._coordinates[torch.as_tensor(mine)].to(flat.device) - int(self._offsets[k])] = (
                    torch.as_tensor(values[mine], dtype=flat.dtype, device=flat.device)
                )
        self.inserted += int(included.size)
        self.inserted_steps += int(join)
        return int(included.size)

    def _keep_like(self, like: torch.Tensor) -> torch.Tensor:
        key = (like.dtype, like.device)
        if key not in self._keep_cache:
            self._keep_cache[key] = self._keep.to(device=like.device, dtype=like.dtype)
        return self._keep_cache[key]

    def _row_budget(self) -> int:
        if self.max_rows is not None:
            return int(self.max_rows)
        # Witness steps: the first, then a random WITNESS_STEP_SHARE of them (a clipping bug shows
        # exactly on any one of them; copying the real rows every step would cost a pass over them).
        if self.inserted_steps and self._pick_rng.random() >= WITNESS_STEP_SHARE:
            return 0
        expected = float(getattr(self._optimizer, "expected_batch_size", 0) or 0)
        return max(MIN_ROWS_PER_STEP, math.ceil(ROW_SHARE * expected))

    def _rows(self, n: int, like: torch.Tensor) -> torch.Tensor:
        """n rows of the step buffer, kept across steps: a fresh (n, d) tensor every step costs more
        in page faults than the copy itself (Poisson batches vary: it grows with 25 % headroom)."""
        buffer = self._buffer
        if buffer is None or buffer.shape[0] < n or buffer.dtype != like.dtype or buffer.device != like.device:
            buffer = self._buffer = torch.empty((int(n * 1.25) + 1, self._d), dtype=like.dtype, device=like.device)
        return buffer[:n]

    def _observe(self, optimizer) -> None:
        reduction = getattr(optimizer, "loss_reduction", "mean")
        factor = (
            float(optimizer.expected_batch_size or 1) * float(getattr(optimizer, "accumulated_iterations", 1))
            if reduction == "mean"
            else 1.0
        ) / float(optimizer.max_grad_norm)
        if self.kind == "dirac":
            x = self._gather(lambda p: p.grad.detach()) * factor
            self._check_clipping(optimizer)
        else:
            x = self._project_random([_given(p.grad, "a parameter's gradient").detach() for p in self._params]) * factor
        self.sums += x
        if self.noise_multiplier is not None and self.sample_rate < 1:
            a = (2 * x - 1) / (2 * float(self.noise_multiplier) ** 2)
            self.mixture += np.logaddexp(math.log1p(-self.sample_rate), math.log(self.sample_rate) + a)
        self.steps += 1

    def _check_clipping(self, optimizer) -> None:
        """Dirac: the clipped sum (`p.summed_grad`, before noise) on a canary's coordinate is exactly
        C if it joined this step and 0 otherwise (real rows have it zeroed): a deterministic check
        of the optimizer's clipping on the rows it clipped and of the sum the others joined."""
        if self._joined is None or any(getattr(p, "summed_grad", None) is None for p in self._params):
            self.clip_unchecked_steps += 1
            self._joined = None
            return
        if self._overwritten:  # set by `_after_clip`: no row of this step went through the optimizer's clipping
            self._joined = None
            return
        summed = self._gather(lambda p: p.summed_grad.detach())
        C = float(optimizer.max_grad_norm)
        own = C if self._norms is None else self._norms
        deviation = float(np.max(np.abs((summed - own * self._joined) / own))) if self.m else 0.0
        self.clip_deviation = max(self.clip_deviation, deviation)
        self.clip_checked_steps += 1
        self._joined = None

    # -- scores ----------------------------------------------------------------------------------

    def scores(self, observe: str) -> np.ndarray:
        """Higher = more likely in. "all": every iterate (the sum of x_t at q = 1; the log-likelihood
        ratio of the claimed Bernoulli(q) mixture, Σ_t ln((1 − q) + q·e^{(2x_t − 1)/(2σ²)}), at
        q < 1); "final": the final model's movement along the canary, ⟨θ_0 − θ_T, u_i⟩."""
        if observe == "final":
            if self.kind == "dirac":
                return self._start - self._gather(lambda p: p.detach())
            return self._start - self._project_random([p.detach() for p in self._params])
        if self.sample_rate < 1 and self.noise_multiplier is not None:
            return self.mixture.copy()
        return self.sums.copy()


def make_canaries(
    n_parameters: int,
    m: int,
    *,
    kind: str,
    sample_rate: float,
    seed: int,
    scale: float = DEFAULT_SCALE,
    noise_multiplier: float | None = None,
    max_rows: int | None = None,
) -> GradientCanaries:
    """m canaries with fair coins, Dirac coordinates or random unit directions ("auto": Dirac when
    m ≤ `DIRAC_SHARE`·d), all drawn from `seed`."""
    d, m = int(n_parameters), int(m)
    if kind == "auto":
        kind = "dirac" if m <= DIRAC_SHARE * d else "random"
    rng = np.random.default_rng(np.random.SeedSequence([int(seed), 30]))
    coins = rng.random(m) < 0.5

    def made(**where: Any) -> GradientCanaries:
        # Everything but where the canaries point (Dirac coordinates or random directions) is common to both kinds.
        return GradientCanaries(
            kind,
            coins,
            float(sample_rate),
            float(scale),
            int(seed),
            noise_multiplier=noise_multiplier,
            max_rows=max_rows,
            **where,
        )

    if kind == "dirac":
        if m > d:
            raise ValueError(f"{m} Dirac canaries need {m} coordinates; the model has {d}")
        coordinates = np.sort(rng.choice(d, size=m, replace=False))
        # Coins must not follow the coordinate order (ties in scores break by position).
        return made(coordinates=coordinates)
    if kind != "random":
        raise ValueError(f"canary kind must be auto, dirac or random, got {kind!r}")
    if m * d > RANDOM_DIRECTIONS_LIMIT:
        raise ValueError(f"{m} random directions of {d} coordinates exceed {RANDOM_DIRECTIONS_LIMIT} floats")
    generator = torch.Generator().manual_seed(int(rng.integers(2**62)))
    directions = torch.randn((m, d), generator=generator, dtype=torch.float32)
    directions /= directions.norm(dim=1, keepdim=True)
    return made(directions=directions)
