"""How likely a language model finds each possible secret after a canary's prefix: the model
queries behind exposure (Carlini, Liu, Erlingsson, Kos, Song 2019, "The Secret Sharer", arXiv
1802.08232). The exposure itself is computed from these numbers in `audit.statistics.exposure`.

Threat model: black-box token probabilities, the canary's prefix and the format of its secret
(`digits` decimal digits, one token each); the attacker ranks every candidate secret by the
model's log-likelihood of it after the prefix.

`all_secret_log_likelihoods` enumerates the space as a digit tree — one forward pass per prefix
of length < digits, (10^digits − 1)/9 sequences instead of 10^digits — and returns log p(secret |
prefix) for every secret in numeric order ("0042" is index 42). `secret_log_likelihoods` scores
given secrets directly (the brute force the tree is tested against, and the samples of the
extrapolated estimate).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from attacks.text_outputs import CausalLanguageModel, model_device, next_token_logits

DEFAULT_BATCH = 2048


def secret_index(secret: str) -> int:
    return int(secret)


@torch.no_grad()
def all_secret_log_likelihoods(
    model: CausalLanguageModel,
    prefix_ids: Sequence[int],
    digit_ids: Sequence[int],
    digits: int,
    batch_size: int = DEFAULT_BATCH,
) -> np.ndarray:
    """log p(d_1 … d_k | prefix) for all 10^digits secrets, in numeric order (float64)."""
    if len(digit_ids) != 10:
        raise ValueError("digit_ids must hold the token ids of '0' … '9'")
    device = model_device(model)
    digit_tensor = torch.as_tensor(list(digit_ids), device=device)
    prefix = torch.as_tensor(list(prefix_ids), device=device).unsqueeze(0)
    totals = np.zeros(1)
    for depth in range(digits):
        # Every secret prefix of `depth` digits, numeric order: row r's digits are r written in base 10.
        codes = np.arange(10**depth)
        tails = (
            np.stack([(codes // 10 ** (depth - 1 - j)) % 10 for j in range(depth)], axis=1)
            if depth
            else np.zeros((1, 0), dtype=np.int64)
        )
        next_lp = []
        for start in range(0, len(codes), batch_size):
            tail_ids = digit_tensor[torch.as_tensor(tails[start : start + batch_size], device=device)]
            seqs = torch.cat([prefix.expand(len(tail_ids), -1), tail_ids], dim=1)
            log_p = torch.log_softmax(next_token_logits(model, seqs).double(), dim=-1)
            next_lp.append(log_p[:, digit_tensor].cpu().numpy())
        totals = (totals[:, None] + np.concatenate(next_lp)).reshape(-1)
    return totals


@torch.no_grad()
def secret_log_likelihoods(
    model: CausalLanguageModel,
    prefix_ids: Sequence[int],
    digit_ids: Sequence[int],
    secrets: Sequence[str],
    batch_size: int = DEFAULT_BATCH,
) -> np.ndarray:
    """log p(secret | prefix) of each given secret, scored as one full sequence each."""
    device = model_device(model)
    digit_tensor = torch.as_tensor(list(digit_ids), device=device)
    prefix = torch.as_tensor(list(prefix_ids), device=device).unsqueeze(0)
    out = []
    for start in range(0, len(secrets), batch_size):
        chunk = secrets[start : start + batch_size]
        tail = digit_tensor[torch.as_tensor([[int(c) for c in s] for s in chunk], device=device)]
        seqs = torch.cat([prefix.expand(len(chunk), -1), tail], dim=1)
        log_p = torch.log_softmax(model.logits(seqs)[:, :-1].double(), dim=-1)
        n = prefix.shape[1]
        picked = log_p[:, n - 1 :, :].gather(2, tail.unsqueeze(-1)).squeeze(-1)
        out.append(picked.sum(1).cpu().numpy())
    return np.concatenate(out) if out else np.zeros(0)


def random_secrets(digits: int, n: int, rng: np.random.Generator) -> list[str]:
    return ["".join(map(str, row)) for row in rng.integers(0, 10, size=(n, digits))]
