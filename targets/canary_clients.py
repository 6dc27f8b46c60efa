"""Canary clients inside one DP-FedAvg federation (client-level one-run audit).

Andrew et al. 2023, "One-shot Empirical Privacy Estimation for Federated Learning" (arXiv
2302.03098): m canary clients, canary i a random unit direction u_i of the flat model (in high
dimension nearly orthogonal to each other and to real updates). Each canary is put into the
federation by its own fair coin (so the one-run bounds of Steinke, Nasr, Jagielski 2023, arXiv
2305.08846, apply) and, once in, joins each round with the clients' Poisson rate q like a real
client; its update is C·u_i (norm C: the server's clipping leaves it as it is). The server's own
aggregation (`targets.federated.dp_fedavg_aggregate`: clip, sum, add N(0, σ²C²)) acts on it.

Observed at every round: the privatised sum S_t (before the division by qN) projected on each
u_i, x_{i,t} = ⟨S_t, u_i⟩ / C; for an in-canary x_{i,t} = [joined round t] + σ·z + a little from
the others (≈ ‖other updates‖/(C√d)). Scores: the sum over rounds (`scores("all")`), and Andrew
et al.'s final-model statistic, the cosine of the model's total change with u_i (`scores("final")`).
"""

from __future__ import annotations

import numpy as np
import torch

__all__ = ["CanaryClients"]


class CanaryClients:
    """The canary clients of one federation and the scores they collect (see the module docstring)."""

    def __init__(self, n_parameters: int, m: int, sample_rate: float, seed: int):
        if m < 4:
            raise ValueError(f"need at least 4 canary clients, got {m}")
        rng = np.random.default_rng(np.random.SeedSequence([int(seed), 53]))
        self.coins = rng.random(int(m)) < 0.5
        directions = torch.as_tensor(rng.standard_normal((int(m), int(n_parameters))), dtype=torch.float32)
        self.directions = directions / torch.linalg.vector_norm(directions, dim=1, keepdim=True)
        self.sample_rate = float(sample_rate)
        self.sums = np.zeros(int(m))
        self.rounds = 0
        self.joined = 0
        self._rng = np.random.default_rng(np.random.SeedSequence([int(seed), 59]))
        self._in = np.flatnonzero(self.coins)
        self._start: torch.Tensor | None = None
        self._final: torch.Tensor | None = None

    @property
    def m(self) -> int:
        return int(self.coins.size)

    def start(self, flat_model: torch.Tensor) -> None:
        self._start = flat_model.detach().double().clone()

    def round_updates(self, clip: float, like: torch.Tensor) -> list[torch.Tensor]:
        """The updates of the in-canaries joining this round (Poisson, rate q): C·u_i each."""
        joining = self._in[self._rng.random(self._in.size) < self.sample_rate] if self.sample_rate < 1 else self._in
        self.joined += int(joining.size)
        return [(float(clip) * self.directions[i]).to(dtype=like.dtype, device=like.device) for i in joining]

    def observe(self, noisy_sum: torch.Tensor, clip: float) -> None:
        """Project the round's privatised sum on every canary direction (in units of C)."""
        self.sums += (self.directions @ noisy_sum.detach().float().cpu()).double().numpy() / float(clip)
        self.rounds += 1

    def finish(self, flat_model: torch.Tensor) -> None:
        self._final = flat_model.detach().double().clone()

    def scores(self, observe: str = "all") -> np.ndarray:
        """ "all": the sum over rounds; "final": cos(θ_T − θ_0, u_i) (Andrew et al.'s statistic)."""
        if observe == "all":
            return self.sums.copy()
        if self._start is None or self._final is None:
            raise ValueError("the federation has not run")
        change = (self._final - self._start).float()
        norm = float(torch.linalg.vector_norm(change)) or 1.0
        return (self.directions @ change).double().numpy() / norm
