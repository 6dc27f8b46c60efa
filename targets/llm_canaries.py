"""One-run canaries for language-model fine-tuning, two designs side by side, and their black-box score.

Every canary is one person's document "<prefix> <secret>": the prefix names a fresh person
("the access code of <name> is"), the secret is drawn at random, and the canary goes into the
private fine-tuning set by an independent fair coin (Steinke, Nasr, Jagielski 2023, arXiv
2305.08846: what makes the one-run bound valid), `repetitions` copies when it does (one person's
copies: covered by a person-level ε).

* `secret_sharer` (the baseline; Carlini, Liu, Erlingsson, Kos, Song 2019, "The Secret Sharer",
  arXiv 1802.08232): the secret is `secret_length` random digits, tokens the model has seen in
  pretraining (phones, addresses), so a member's secret competes with a strong prior.
* `panda` (Panda, Tang, Nasr, Choquette-Choo, Mittal, ICLR 2025, "Privacy Auditing of Large
  Language Models", arXiv 2503.06808, "new token" canaries): the secret is `secret_length` tokens
  drawn from `new_tokens` ids added to the vocabulary after pretraining — rows of the embedding and
  the output head that no public text ever trained, so the model's loss on them before
  fine-tuning is flat across canaries and any drop is the canary's own gradient.

Where `new_tokens` ≥ canaries × secret length, each Panda canary's secret is its own new ids (drawn
without replacement). Score (black-box, the final model only): minus the mean loss of the secret's
tokens given the prefix — higher = more likely inserted; `audit.text.llm_setup` can subtract the same
under the public pretrained model (a per-canary reference, Carlini et al. 2021's calibration). The auditor's threshold is chosen by the one-run
procedure (guesses on the top and bottom scores), never by looking at membership.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from targets.text_models import BOS, EOS, PAD, encode_prefix

CANARY_DESIGNS = ("panda", "secret_sharer")
PREFIX_TEMPLATE = "the access code of {name} is"


@dataclass(frozen=True)
class LLMCanaries:
    design: str
    names: list[str]
    token_ids: np.ndarray  # (m, max_length): [BOS] prefix secret [EOS], [PAD]-padded
    secret_start: np.ndarray  # (m,) index of the secret's first token in each row
    secret_length: int
    inserted: np.ndarray  # (m,) bool, a fair coin per canary
    repetitions: int

    @property
    def m(self) -> int:
        return len(self.names)

    def training_rows(self) -> np.ndarray:
        """The inserted canaries' rows, each `repetitions` times (in canary order)."""
        return np.repeat(self.token_ids[self.inserted], self.repetitions, axis=0)

    def secret_targets(self) -> np.ndarray:
        """(m, max_length - 1) bool: the next-token targets that are the secret's tokens (target t is
        token t + 1), the loss of Panda et al.'s SFT-style canaries (the prefix is the prompt)."""
        position = np.arange(self.token_ids.shape[1] - 1)
        first = (self.secret_start - 1)[:, None]
        return (position >= first) & (position < first + self.secret_length)


def make_canaries(
    design: str,
    tokenizer,
    names: list[str],
    *,
    secret_length: int,
    repetitions: int,
    max_length: int,
    new_token_ids: range | None,
    seed: int,
) -> LLMCanaries:
    """`len(names)` canaries of one design, each inserted by a fair coin (seeded by `seed`)."""
    if design not in CANARY_DESIGNS:
        raise ValueError(f"canary design must be one of {CANARY_DESIGNS}, got {design!r}")
    rng = np.random.default_rng(np.random.SeedSequence([seed, 41, CANARY_DESIGNS.index(design)]))
    digits = [tokenizer.token_to_id(str(d)) for d in range(10)]
    if design == "secret_sharer" and any(d is None for d in digits):
        raise ValueError("the tokenizer has no single-digit tokens for Secret Sharer canaries")
    if design == "panda" and (new_token_ids is None or len(new_token_ids) < 2):
        raise ValueError("Panda canaries need at least two new token ids")
    alphabet = np.asarray(digits if design == "secret_sharer" else list(new_token_ids or ()))
    # Where there are enough new ids, each Panda canary gets its own (drawn without replacement): a shared
    # id is trained by every member canary that holds it, so a non-member's secret would be raised by other
    # canaries' training and the signal DP lets through most easily (a new row pulled up) would not be the
    # canary's own.
    own = design == "panda" and len(alphabet) >= len(names) * secret_length
    distinct = rng.permutation(alphabet)[: len(names) * secret_length].reshape(-1, secret_length) if own else None
    rows = np.full((len(names), max_length), PAD, dtype=np.int64)
    starts = np.zeros(len(names), dtype=np.int64)
    for i, name in enumerate(names):
        prefix = encode_prefix(tokenizer, PREFIX_TEMPLATE.format(name=name))
        secret = distinct[i].tolist() if distinct is not None else rng.choice(alphabet, size=secret_length).tolist()
        row = prefix + secret + [EOS]
        if len(row) > max_length:
            raise ValueError(f"a canary needs {len(row)} tokens; raise max_length above {max_length}")
        rows[i, : len(row)] = row
        starts[i] = len(prefix)
    inserted = rng.random(len(names)) < 0.5
    return LLMCanaries(design, list(names), rows, starts, secret_length, inserted, int(repetitions))


@torch.no_grad()
def secret_scores(model, canaries: LLMCanaries, batch_size: int = 128) -> np.ndarray:
    """Minus the mean next-token loss of each canary's secret given its prefix (black-box: the
    model's token probabilities only)."""
    out = []
    device = next(model.parameters()).device
    for start in range(0, canaries.m, batch_size):
        ids = torch.as_tensor(canaries.token_ids[start : start + batch_size], device=device)
        logprob = model.logits(ids)[:, :-1].log_softmax(-1).gather(2, ids[:, 1:].unsqueeze(2)).squeeze(2)
        for j, row in enumerate(logprob.cpu().numpy()):
            first = int(canaries.secret_start[start + j]) - 1  # position predicting the secret's first token
            out.append(float(row[first : first + canaries.secret_length].mean()))
    return np.asarray(out)


def first_names(faker_seed: int, n: int, taken: set[str]) -> list[str]:
    """`n` distinct fresh person names (faker, seeded), none in `taken`: each canary is its own person."""
    from faker import Faker

    faker = Faker("en_US")
    faker.seed_instance(int(np.random.SeedSequence([faker_seed, 43]).generate_state(1)[0]))
    names: list[str] = []
    seen = set(taken)
    while len(names) < n:
        name = faker.name().lower().replace(".", "")
        if name not in seen:
            seen.add(name)
            names.append(name)
    return names


__all__ = ["BOS", "CANARY_DESIGNS", "LLMCanaries", "first_names", "make_canaries", "secret_scores"]
