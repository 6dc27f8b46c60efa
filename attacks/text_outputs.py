"""What a causal language model says about a document, token by token: the inputs of every text
membership attack.

For each document x and position t ≥ 1 the model's next-token distribution p(· | x_<t) gives
* `logprob[t]`: log p(x_t | x_<t), the token's log-likelihood (loss / perplexity, min-k %);
* `mean[t]`, `std[t]`: E and SD of log p(z | x_<t) for z drawn from p itself — the calibration of
  min-k %++ (Zhang et al. 2024, arXiv 2404.02936, eq. 3).
Arrays are (n_documents, max_length − 1), NaN after each document's end, so a (n, L, V) logits
tensor never has to leave the process that computed it (a user's model is scored in a worker).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import numpy as np
import torch

PAD_ID = 0


class CausalLanguageModel(Protocol):
    def logits(self, token_ids: torch.Tensor) -> torch.Tensor: ...  # (batch, length) → (batch, length, vocab)


@dataclass(frozen=True)
class TokenStatistics:
    logprob: np.ndarray  # (n, L-1) log p(x_t | x_<t), NaN where there is no token
    mean: np.ndarray  # (n, L-1) E_{z~p} log p(z | x_<t)
    std: np.ndarray  # (n, L-1) SD_{z~p} log p(z | x_<t)

    def __len__(self) -> int:
        return len(self.logprob)

    def select(self, rows: np.ndarray) -> TokenStatistics:
        return TokenStatistics(self.logprob[rows], self.mean[rows], self.std[rows])

    @staticmethod
    def concat(parts: list[TokenStatistics]) -> TokenStatistics:
        width = max(p.logprob.shape[1] for p in parts)
        pad = lambda a: np.pad(a, ((0, 0), (0, width - a.shape[1])), constant_values=np.nan)  # noqa: E731
        return TokenStatistics(
            *(np.concatenate([pad(getattr(p, k)) for p in parts]) for k in ("logprob", "mean", "std"))
        )

    def as_arrays(self) -> dict[str, np.ndarray]:
        return {"logprob": self.logprob, "mean": self.mean, "std": self.std}


def statistics_from_logits(
    logits: torch.Tensor, token_ids: torch.Tensor, pad_id: int = PAD_ID, mask: torch.Tensor | None = None
) -> TokenStatistics:
    """Per-token statistics of one batch: `logits` (B, L, V) for `token_ids` (B, L), right-padded;
    `mask` (B, L) marks real tokens (default: every id but `pad_id`)."""
    log_p = torch.log_softmax(logits[:, :-1].double(), dim=-1)
    targets = token_ids[:, 1:]
    token = log_p.gather(2, targets.unsqueeze(-1)).squeeze(-1)
    p = log_p.exp()
    mean = (p * log_p).sum(-1)
    var = (p * (log_p - mean.unsqueeze(-1)) ** 2).sum(-1)
    valid = (targets != pad_id) if mask is None else mask[:, 1:].bool()
    nan = torch.tensor(float("nan"), dtype=torch.float64, device=token.device)
    pick = lambda t: torch.where(valid, t, nan).cpu().numpy()  # noqa: E731
    return TokenStatistics(pick(token), pick(mean), pick(var.clamp(min=0).sqrt()))


@torch.no_grad()
def token_statistics(
    model: CausalLanguageModel,
    token_ids: np.ndarray,
    batch_size: int = 64,
    device: torch.device | str | None = None,
    on_batch=None,
) -> TokenStatistics:
    """`statistics_from_logits` over `token_ids` (n, L) in batches; each batch is cut to its longest document."""
    device = model_device(model) if device is None else device
    parts = []
    for start in range(0, len(token_ids), batch_size):
        batch = torch.as_tensor(token_ids[start : start + batch_size])
        width = max(int((batch != PAD_ID).sum(1).max()), 2)
        batch = batch[:, :width].to(device)
        part = statistics_from_logits(model.logits(batch), batch)
        parts.append(part)
        if on_batch is not None:
            on_batch(min(start + batch_size, len(token_ids)), len(token_ids))
    full = TokenStatistics.concat(parts)
    if full.logprob.shape[1] < token_ids.shape[1] - 1:
        full = TokenStatistics.concat([full, TokenStatistics(*(np.full((0, token_ids.shape[1] - 1), np.nan),) * 3)])
    return full


def model_device(model: CausalLanguageModel) -> torch.device:
    """Where a torch model's parameters live (queries are built there); the CPU for anything else."""
    parameters = getattr(model, "parameters", None)
    if callable(parameters):
        for parameter in parameters():
            return parameter.device
    return torch.device("cpu")


def next_token_logits(model: CausalLanguageModel, token_ids: torch.Tensor) -> torch.Tensor:
    """(batch, vocab) logits of the token after each sequence; a model may offer `next_token_logits`
    to skip the output head on every other position (the harness's TinyCausalLM does)."""
    own = getattr(model, "next_token_logits", None)
    return own(token_ids) if callable(own) else model.logits(token_ids)[:, -1]


def document_log_likelihood(stats: TokenStatistics) -> np.ndarray:
    """Σ_t log p(x_t | x_<t) per document."""
    return np.nansum(stats.logprob, axis=1)


def document_mean_log_likelihood(stats: TokenStatistics) -> np.ndarray:
    """Mean token log-likelihood per document (− the log-perplexity)."""
    counts = np.sum(~np.isnan(stats.logprob), axis=1)
    return np.nansum(stats.logprob, axis=1) / np.maximum(counts, 1)
