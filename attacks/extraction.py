"""Training-data extraction by completion (Carlini, Tramèr, Wallace, Jagielski, Herbert-Voss, Lee,
Roberts, Brown, Song, Erlingsson, Oprea, Raffel 2021, "Extracting Training Data from Large
Language Models", arXiv 2012.07805).

Threat model: black-box generation from a prompt the attacker knows — a canary's prefix ("the pin
code of <name> is"), or a record's text up to a personal field ("patient <name> lives at …
phone"). The model's greedy (or beam-search) continuation is compared with the true value; an
exact match of every token is a recovery. Greedy decoding is the paper's baseline; beam search
finds the most likely continuation more reliably on small models.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

import numpy as np
import torch

from attacks.text_outputs import CausalLanguageModel, model_device, next_token_logits


@torch.no_grad()
def greedy_continuations(
    model: CausalLanguageModel, prompts: Sequence[Sequence[int]], n_tokens: int, batch_size: int = 256
) -> list[list[int]]:
    """The `n_tokens` most likely next tokens, one at a time, after each prompt (token ids)."""
    out: list[list[int] | None] = [None] * len(prompts)
    by_length = defaultdict(list)
    for i, prompt in enumerate(prompts):
        by_length[len(prompt)].append(i)
    for indices in by_length.values():  # equal lengths: no padding, positions stay exact
        for start in range(0, len(indices), batch_size):
            chunk = indices[start : start + batch_size]
            seqs = torch.as_tensor([list(prompts[i]) for i in chunk], device=model_device(model))
            for _ in range(n_tokens):
                seqs = torch.cat([seqs, next_token_logits(model, seqs).argmax(-1, keepdim=True)], dim=1)
            for row, i in enumerate(chunk):
                out[i] = seqs[row, -n_tokens:].tolist()
    return out  # type: ignore[return-value]


@torch.no_grad()
def beam_continuation(model: CausalLanguageModel, prompt: Sequence[int], n_tokens: int, beams: int = 5) -> list[int]:
    """The most likely `n_tokens`-token continuation found by beam search of width `beams`."""
    device = model_device(model)
    seqs = torch.as_tensor([list(prompt)], device=device)
    scores = torch.zeros(1, dtype=torch.float64, device=device)
    for _ in range(n_tokens):
        log_p = torch.log_softmax(next_token_logits(model, seqs).double(), dim=-1)
        total = (scores[:, None] + log_p).reshape(-1)
        top = total.topk(min(beams, total.numel()))
        vocab = log_p.shape[1]
        seqs = torch.cat([seqs[top.indices // vocab], (top.indices % vocab).unsqueeze(1)], dim=1)
        scores = top.values
    return seqs[0, -n_tokens:].tolist()


def exact_recoveries(continuations: Sequence[Sequence[int]], truths: Sequence[Sequence[int]]) -> np.ndarray:
    """Per prompt, whether the continuation starts with every token of the true value."""
    return np.array([list(c[: len(t)]) == list(t) for c, t in zip(continuations, truths)], dtype=bool)
