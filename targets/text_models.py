"""The text targets: a tokenizer trained on the corpus and a small causal transformer, trained
with DP-SGD through Opacus at a target ε, or without DP (ε = ∞).

Why a transformer of our own (torch.nn) rather than Hugging Face's GPT-2: GPT-2 computes its
projections with `Conv1D`, a layer Opacus has no per-sample-gradient rule for, and its fused
attention paths change between versions. This model is built only from layers Opacus supports
exactly (Embedding, Linear, LayerNorm); the attention itself has no parameters (a causal mask and
softmax over matmuls), so Opacus's per-sample gradients are exact, and the same module trains with
and without DP. Its interface is `logits(token_ids) -> (batch, length, vocab)`, the one the
attacks and the user-module audit use.

Tokenizer (Hugging Face `tokenizers`, BPE): trained on the pool records only — the attacker's
population, disjoint from the candidates — so the vocabulary itself carries no membership signal;
digits are split one per token (the canaries' secrets are then `secret_digits` tokens).

The unit of privacy (`privacy_unit`): DP-SGD's guarantee is about whatever one clipped gradient
is. Record level: one document. Person level (user-level DP; McMahan, Ramage, Talwar, Zhang 2018,
"Learning Differentially Private Recurrent Language Models", arXiv 1710.06963): Opacus's Poisson sampler
draws *persons* at rate q, every document of a drawn person is in the batch, Opacus computes the
per-document gradients, `sum_grad_samples_by_person` replaces them by each person's sum, and
Opacus's DPOptimizer clips each person's sum to C and adds N(0, σ²C²) — so the accountant's ε
(q over persons, σ, steps) is per person: all of one person's documents, including a secret
they typed k times, move the model by at most C per step. At record level the same secret is k
clipped gradients: group privacy only, about k·ε.

Loss: each document's mean token loss, averaged over the batch. A per-token mean over the whole
batch would make one document's gradient depend on the other documents' lengths, which breaks the
per-sample sensitivity DP-SGD's clipping assumes.
"""

from __future__ import annotations

import math
import time
import warnings
from collections.abc import Callable, Sequence
from contextlib import nullcontext
from dataclasses import dataclass, fields
from typing import Any, NotRequired, Self, TypedDict, Unpack, cast

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from targets.devices import torch_threads
from targets.training import DPTrainingRecord

warnings.filterwarnings("ignore", message="Full backward hook is firing")
SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[BOS]", "[EOS]")
PAD, UNK, BOS, EOS = range(4)


def train_tokenizer(texts: Sequence[str], vocab_size: int = 800):
    """A BPE tokenizer trained on `texts`: whitespace words, digits one per token, lower-case."""
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, trainers
    from tokenizers.processors import TemplateProcessing

    tokenizer = Tokenizer(models.BPE(unk_token="[UNK]"))
    tokenizer.normalizer = normalizers.Lowercase()
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence(
        [pre_tokenizers.Whitespace(), pre_tokenizers.Digits(individual_digits=True)]
    )
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=list("0123456789abcdefghijklmnopqrstuvwxyz.,:'-"),
        show_progress=False,
    )
    tokenizer.train_from_iterator(list(texts), trainer=trainer)
    tokenizer.post_processor = TemplateProcessing(
        single="[BOS] $A [EOS]", special_tokens=[("[BOS]", BOS), ("[EOS]", EOS)]
    )
    from tokenizers import decoders

    tokenizer.decoder = decoders.BPEDecoder()
    return tokenizer


def encode_texts(tokenizer, texts: Sequence[str], max_length: int, *, add_eos: bool = True) -> np.ndarray:
    """(n, max_length) int64 token ids, [BOS] first, right-padded with [PAD], truncated to max_length."""
    out = np.full((len(texts), max_length), PAD, dtype=np.int64)
    for i, encoding in enumerate(tokenizer.encode_batch(list(texts))):
        ids = encoding.ids if add_eos else encoding.ids[:-1]
        ids = ids[:max_length]
        out[i, : len(ids)] = ids
    return out


def encode_prefix(tokenizer, text: str) -> list[int]:
    """[BOS] + the tokens of `text`, no [EOS]: a prompt to continue."""
    return tokenizer.encode(text).ids[:-1]


class CausalSelfAttention(nn.Module):
    def __init__(self, d_model: int, n_heads: int):
        super().__init__()
        self.n_heads = n_heads
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.proj = nn.Linear(d_model, d_model)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, length, width = x.shape
        q, k, v = self.qkv(x).split(width, dim=2)
        heads = lambda t: t.view(batch, length, self.n_heads, width // self.n_heads).transpose(1, 2)  # noqa: E731
        q, k, v = heads(q), heads(k), heads(v)
        weights = (q @ k.transpose(-2, -1)) / math.sqrt(width // self.n_heads)
        causal = torch.ones(length, length, dtype=torch.bool, device=x.device).tril()
        weights = weights.masked_fill(~causal, float("-inf")).softmax(dim=-1)
        return self.proj((weights @ v).transpose(1, 2).reshape(batch, length, width))


class Block(nn.Module):
    def __init__(self, d_model: int, n_heads: int):
        super().__init__()
        self.norm1 = nn.LayerNorm(d_model)
        self.attention = CausalSelfAttention(d_model, n_heads)
        self.norm2 = nn.LayerNorm(d_model)
        self.up = nn.Linear(d_model, 4 * d_model)
        self.down = nn.Linear(4 * d_model, d_model)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attention(self.norm1(x))
        return x + self.down(F.gelu(self.up(self.norm2(x))))


class TinyCausalLM(nn.Module):
    """A pre-norm GPT-style decoder (learned positions, untied output head: Opacus needs each
    parameter used by one layer)."""

    def __init__(
        self, vocab_size: int, *, d_model: int = 64, n_layers: int = 2, n_heads: int = 4, max_length: int = 64
    ):
        super().__init__()
        if d_model % n_heads:
            raise ValueError(f"d_model {d_model} must be a multiple of n_heads {n_heads}")
        self.max_length = max_length
        self.tokens = nn.Embedding(vocab_size, d_model)
        self.positions = nn.Embedding(max_length, d_model)
        self.blocks = nn.ModuleList([Block(d_model, n_heads) for _ in range(n_layers)])
        self.norm = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, vocab_size)

    def hidden(self, token_ids: torch.Tensor) -> torch.Tensor:
        positions = torch.arange(token_ids.shape[1], device=token_ids.device).unsqueeze(0).expand_as(token_ids)
        x = self.tokens(token_ids) + self.positions(positions)
        for block in self.blocks:
            x = block(x)
        return self.norm(x)

    def forward(self, token_ids: torch.Tensor) -> torch.Tensor:
        return self.head(self.hidden(token_ids))

    def logits(self, token_ids: torch.Tensor) -> torch.Tensor:
        return self(token_ids)

    def next_token_logits(self, token_ids: torch.Tensor) -> torch.Tensor:
        """Logits of the token after each sequence: the head on the last position only."""
        return self.head(self.hidden(token_ids)[:, -1])


@dataclass(frozen=True)
class TextTrainingSpec:
    d_model: int = 64
    n_layers: int = 2
    n_heads: int = 4
    max_length: int = 64
    epochs: int = 20
    batch_size: int = 32
    lr: float = 3e-3
    max_grad_norm: float = 1.0

    @classmethod
    def from_section(cls, section: Any, **extra: Any) -> Self:
        """The spec from a config section's fields of the same names (the text job's `text:`, the llm
        job's `llm:`), plus `extra` for a subclass's own fields."""
        return cls(**{f.name: getattr(section, f.name) for f in fields(TextTrainingSpec)}, **extra)


class TrainingRun(TypedDict):
    """One training's privacy and run keywords: `train_text_target`'s and the fine-tunings'
    (targets/hf_causal_lm.py `finetune`), passed on to `train_language_model`."""

    epsilon: float
    delta: float
    accountant: str
    seed: int
    device: torch.device
    owners: NotRequired[np.ndarray | None]
    copies: NotRequired[np.ndarray | None]
    loss_mask: NotRequired[np.ndarray | None]
    on_epoch: NotRequired[Callable[[int, int], None] | None]


@dataclass
class TrainedTextTarget(DPTrainingRecord):
    model: nn.Module  # plain module (Opacus wrapper removed), on the CPU, eval mode
    train_seconds: float
    final_loss: float
    privacy_unit: str | None = None  # "person" | "record" (what one clipped gradient is); None without DP
    n_units: int | None = None  # persons (or documents) DP-SGD sampled from


def document_losses(logits: torch.Tensor, token_ids: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
    """Each document's mean next-token cross-entropy over its non-padding targets, shape (batch,);
    `mask` (batch, length - 1), optional: only the targets it marks count (a canary's secret)."""
    targets = token_ids[:, 1:]
    per_token = F.cross_entropy(logits[:, :-1].transpose(1, 2), targets, reduction="none")
    valid = (targets != PAD).float() if mask is None else ((targets != PAD) & mask).float()
    return (per_token * valid).sum(dim=1) / valid.sum(dim=1).clamp(min=1.0)


def trim_padding(batch: torch.Tensor, mask: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor | None]:
    """`batch` (and its loss `mask`) without the trailing columns that are [PAD] in every row: a causal
    model's outputs at a position depend on the positions before it only, and a [PAD] target never counts
    (`document_losses`), so every document's loss and gradient are the same (up to float rounding) for a
    fraction of the work — the llm job's canaries are ≈ 15 tokens in rows of 48."""
    used = (batch != PAD).any(dim=0).nonzero()
    width = max(int(used.max()) + 1 if len(used) else 0, 2)
    if width >= batch.shape[1]:
        return batch, mask
    return batch[:, :width], None if mask is None else mask[:, : width - 1]


def build_text_model(vocab_size: int, spec: TextTrainingSpec, seed: int) -> TinyCausalLM:
    torch.manual_seed(seed)
    return TinyCausalLM(
        vocab_size, d_model=spec.d_model, n_layers=spec.n_layers, n_heads=spec.n_heads, max_length=spec.max_length
    )


PRIVACY_UNITS = ("person", "record")


def sum_grad_samples_by_person(params, owner: torch.Tensor, n_persons: int) -> None:
    """Replace each parameter's per-document gradients (Opacus's `p.grad_sample`, one row per
    document of the batch) by per-person sums (`n_persons` rows; `owner[i]` = the row of document
    i's person), so the DPOptimizer's per-sample clipping then clips each person's whole gradient."""
    for p in params:
        per_document = getattr(p, "grad_sample", None)
        if per_document is None:
            continue
        if not isinstance(per_document, torch.Tensor):  # a layer used twice per forward: not this model
            raise TypeError("per-person sums need one per-sample gradient tensor per parameter")
        summed = torch.zeros((n_persons, *per_document.shape[1:]), dtype=per_document.dtype, device=per_document.device)
        p.grad_sample = summed.index_add_(0, owner.to(per_document.device), per_document)


class PersonBatches:
    """Documents grouped by person: `documents(people)` gives the token rows of the drawn persons'
    documents and, for each row, its person's position in `people`.

    `copies` (optional, one count per row): the row stands for that many identical documents of its
    person. A person's clipped gradient is the SUM of their documents' gradients, so k identical
    copies contribute exactly k times one copy's gradient: `weights(people)` gives that k per row and
    the training loop weights the row's loss by it — the same per-person gradient, at the cost of one
    document instead of k."""

    def __init__(
        self,
        token_ids: np.ndarray,
        owners: np.ndarray,
        copies: np.ndarray | None = None,
        loss_mask: np.ndarray | None = None,
    ):
        owners = np.asarray(owners, dtype=np.int64)
        if owners.shape != (len(token_ids),):
            raise ValueError("owners must give one person per document")
        self.n_persons = int(owners.max()) + 1 if len(owners) else 0
        if len(np.unique(owners)) != self.n_persons:
            raise ValueError("owners must number the persons 0 .. n_persons - 1")
        copies = np.ones(len(owners), dtype=np.int64) if copies is None else np.asarray(copies, dtype=np.int64)
        if copies.shape != owners.shape or (copies < 1).any():
            raise ValueError("copies must give a count ≥ 1 per document")
        order = np.argsort(owners, kind="stable")
        self.tokens = torch.as_tensor(token_ids[order])
        self.copies = torch.as_tensor(copies[order], dtype=torch.float32)
        self.loss_mask = None if loss_mask is None else torch.as_tensor(np.asarray(loss_mask, dtype=bool)[order])
        self.counts = torch.as_tensor(np.bincount(owners, minlength=self.n_persons))
        self.starts = torch.cumsum(self.counts, 0) - self.counts

    def _rows(self, people: torch.Tensor) -> torch.Tensor:
        counts = self.counts[people]
        return torch.cat([torch.arange(int(s), int(s) + int(c)) for s, c in zip(self.starts[people], counts)])

    def documents(self, people: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        counts = self.counts[people]
        return self.tokens[self._rows(people)], torch.repeat_interleave(torch.arange(len(people)), counts)

    def weights(self, people: torch.Tensor) -> torch.Tensor:
        """The copies each row of `documents(people)` stands for (1.0 where every row is one document)."""
        return self.copies[self._rows(people)]

    def masks(self, people: torch.Tensor) -> torch.Tensor | None:
        """Each row's loss mask (`document_losses`), None where every target counts."""
        return None if self.loss_mask is None else self.loss_mask[self._rows(people)]


def train_text_target(
    token_ids: np.ndarray, vocab_size: int, spec: TextTrainingSpec, **run: Unpack[TrainingRun]
) -> TrainedTextTarget:
    """Train one causal LM on `token_ids` (n, length); `epsilon = inf` = ordinary training (Adam,
    shuffled fixed batches of documents); finite ε = Opacus DP-SGD (Adam on clipped, noised
    gradients, Poisson sampling, σ calibrated by `make_private_with_epsilon` for the epochs).

    `owners` (one person index per document, 0 .. P - 1): user-level DP-SGD — persons are sampled
    and clipped, `spec.batch_size` is the expected number of persons per batch, and the ε is per
    person. None: record level, each document its own unit."""
    model = build_text_model(vocab_size, spec, run["seed"]).to(run["device"])
    return train_language_model(model, token_ids, spec, lr=spec.lr, **run)


def train_language_model(
    model: nn.Module,
    token_ids: np.ndarray,
    schedule: TextTrainingSpec,
    *,
    lr: float,
    epsilon: float,
    delta: float,
    accountant: str,
    seed: int,
    device: torch.device,
    owners: np.ndarray | None = None,
    copies: np.ndarray | None = None,
    loss_mask: np.ndarray | None = None,
    grad_sample_mode: str = "hooks",
    quiet: bool = False,
    on_epoch: Callable[[int, int], None] | None = None,
    trim: bool = False,
) -> TrainedTextTarget:
    """Train `model` (on `device`; its parameters that require a gradient) on `token_ids`, the loop of
    both causal LMs (`train_text_target`; targets.hf_causal_lm's GPT-2, full or LoRA): ε = ∞ =
    Adam on shuffled batches of documents (`schedule`: epochs, batch size, clipping norm; `lr` apart: LoRA
    has its own); finite ε = Opacus DP-SGD at that ε (persons when `owners`
    is given; `copies` as `PersonBatches`'s, repeated where the unit is the document; `loss_mask` one
    row per document, the targets its loss counts, as `document_losses`'s; `trim`: each batch without its
    all-[PAD] trailing columns, `trim_padding` — the llm job's; the text job keeps its rows whole). Returns the
    target with its plain model (Opacus wrapper removed) on the CPU in eval mode."""
    from torch.utils.data import DataLoader, TensorDataset

    from targets.opacus_setups import private_at_epsilon

    net: Any = model  # Opacus wraps it (GradSampleModule): typed loosely from here on
    optimizer: Any = torch.optim.Adam([p for p in model.parameters() if p.requires_grad], lr=lr)
    private = math.isfinite(epsilon)
    by_person = private and owners is not None
    if copies is not None and not by_person:  # each copy its own document (record level, or without DP)
        token_ids = np.repeat(token_ids, copies, axis=0)
        loss_mask = None if loss_mask is None else np.repeat(loss_mask, copies, axis=0)
    persons = PersonBatches(token_ids, owners, copies, loss_mask) if private and owners is not None else None
    # Record level (and without DP) the loader draws documents; at person level it draws persons.
    units = (
        TensorDataset(torch.arange(persons.n_persons))
        if persons is not None
        else TensorDataset(
            torch.as_tensor(token_ids), *([] if loss_mask is None else [torch.as_tensor(np.asarray(loss_mask, bool))])
        )
    )
    loader = DataLoader(
        units, batch_size=schedule.batch_size, shuffle=True, generator=torch.Generator().manual_seed(seed)
    )
    engine: Any = None
    torch.manual_seed(seed)
    if private:
        engine, net, optimizer, loader = private_at_epsilon(
            net,
            optimizer,
            loader,
            epsilon=epsilon,
            delta=delta,
            epochs=schedule.epochs,
            max_grad_norm=schedule.max_grad_norm,
            accountant=accountant,
            what="corpus",
            grad_sample_mode=grad_sample_mode,
        )
    sample_rate = 1.0 / len(loader)
    steps, last, seconds = train_on_documents(
        net,
        optimizer,
        loader,
        epochs=schedule.epochs,
        device=device,
        persons=persons,
        on_epoch=on_epoch,
        quiet=quiet,
        trim=trim,
    )
    plain = net._module if private else net
    noise, accountant_eps = None, None
    if private:
        net.remove_hooks()
        noise = float(optimizer.noise_multiplier)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            accountant_eps = float(engine.get_epsilon(delta))
    return TrainedTextTarget(
        model=plain.cpu().eval(),
        epsilon_target=epsilon if private else None,
        delta=delta,
        noise_multiplier=noise,
        sample_rate=sample_rate,
        steps=steps,
        max_grad_norm=schedule.max_grad_norm if private else None,
        accountant=accountant if private else None,
        accountant_epsilon=accountant_eps,
        train_seconds=seconds,
        final_loss=last,
        privacy_unit=("person" if by_person else "record") if private else None,
        n_units=(persons.n_persons if persons is not None else len(token_ids)) if private else None,
    )


def train_on_documents(
    model: nn.Module,
    optimizer,
    loader,
    *,
    epochs: int,
    device: torch.device,
    persons: PersonBatches | None,
    on_epoch: Callable[[int, int], None] | None = None,
    quiet: bool = False,
    trim: bool = False,
) -> tuple[int, float, float]:
    """The training loop of both causal LMs (this module's `TinyCausalLM`, `targets.hf_causal_lm`'s GPT-2):
    mean document loss, one optimizer step per non-empty batch; with `persons` (user-level DP) each drawn
    person's documents, their per-sample gradients summed per person before Opacus clips them.
    `quiet`: Opacus's warnings silenced; `trim`: each batch through `trim_padding`. Returns (steps, the last batch's loss, seconds)."""
    steps, last = 0, float("nan")
    started = time.perf_counter()
    with torch_threads(1 if device.type == "cpu" else None), warnings.catch_warnings() if quiet else nullcontext():
        if quiet:
            warnings.simplefilter("ignore")  # Opacus's "full backward hook" notes
        for epoch in range(epochs):
            model.train()
            for batch, *rest in loader:
                if len(batch) == 0:  # Poisson sampling may draw an empty batch (odds e^-batch_size)
                    continue
                owner, drawn, weights = None, len(batch), None
                mask = rest[0] if rest else None  # the rows' loss masks, where the loader carries them
                if persons is not None:
                    weights = persons.weights(batch).to(device)
                    mask = persons.masks(batch)
                    batch, owner = persons.documents(batch)
                if trim:
                    batch, mask = trim_padding(batch, mask)
                batch = batch.to(device)
                optimizer.zero_grad(set_to_none=True)
                losses = document_losses(model(batch), batch, None if mask is None else mask.to(device))
                # a row standing for k identical copies of a person's document counts k times (× 1.0: exact)
                loss = (losses if weights is None else losses * weights).mean()
                loss.backward()
                if owner is not None:
                    sum_grad_samples_by_person(optimizer.params, owner, drawn)
                optimizer.step()
                steps += 1
                last = float(loss.detach())
            if on_epoch is not None:
                on_epoch(epoch + 1, epochs)
    return steps, last, time.perf_counter() - started


@torch.no_grad()
def mean_token_loss(model: nn.Module, token_ids: np.ndarray, batch_size: int = 256) -> float:
    """Mean of the documents' mean next-token loss (utility: its exp is the per-token perplexity)."""
    model.eval()
    device = next(model.parameters()).device
    batches = [
        torch.as_tensor(token_ids[i : i + batch_size], device=device) for i in range(0, len(token_ids), batch_size)
    ]
    losses = [document_losses(cast(Any, model).logits(batch), batch).cpu() for batch in batches]
    return float(torch.cat(losses).mean())
