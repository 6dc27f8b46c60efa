"""A Hugging Face `transformers` causal LM as a target: built offline from a config, "pretrained"
on public text, then fine-tuned with Opacus DP-SGD on private text — full fine-tuning or LoRA.

What people certify is a pretrained LLM fine-tuned on private data; this module is that pipeline
at a size that trains on two CPU cores. Nothing is downloaded: the model is `GPT2LMHeadModel`
built from a `GPT2Config` (random weights, a few layers), the tokenizer is the text job's BPE
tokenizer trained locally (targets/text_models.py), and `HF_HUB_OFFLINE` / `TRANSFORMERS_OFFLINE`
are set before `transformers` is imported.

Per-sample gradients (what DP-SGD clips):

* full fine-tuning: every weight is private. GPT-2 computes its projections with
  `transformers.pytorch_utils.Conv1D`, a layer Opacus has no hook rule for; we use Opacus's
  functorch path (`grad_sample_mode="functorch"`: per-sample gradients of each layer by
  `torch.func.vmap(grad)`), which is exact for any layer. The positions are passed explicitly,
  one row per document (`position_ids` expanded to the batch): GPT-2's default broadcasts a single
  row, and the position embedding's per-sample gradient would then be one row for the whole batch.
* LoRA (Hu et al. 2021, arXiv 2106.09685) through `peft`: low-rank adapters on every attention and
  MLP projection (`c_attn`, `c_proj`, `c_fc`; `fan_in_fan_out` for Conv1D); the pretrained weights
  are frozen, so only the adapters are trained and only they are private (Opacus's hooks on the
  adapters' `nn.Linear`; frozen layers have no gradient to clip and need none: they are a function of
  the public pretraining only).

User-level DP where the corpus has persons: as the text job (targets/text_models.py,
`PersonBatches` and `sum_grad_samples_by_person`): persons are Poisson-sampled, each person's
documents' per-sample gradients are summed before Opacus clips them, so the ε is per person.
"""

from __future__ import annotations

import math
import os
import warnings
from dataclasses import dataclass, replace
from typing import Unpack, cast

import numpy as np
import torch
from torch import nn

from targets.devices import torch_threads
from targets.text_models import (
    BOS,
    EOS,
    PAD,
    TextTrainingSpec,
    TrainedTextTarget,
    TrainingRun,
    document_losses,
    train_language_model,
)

FINETUNE_MODES = ("full", "lora")
LORA_TARGETS = ("c_attn", "c_proj", "c_fc")  # GPT-2's attention and MLP projections (Conv1D)
LORA_SAVED = ("lm_head",)  # trained in full beside the adapters (an nn.Linear: Opacus's hooks)


def offline() -> None:
    """Tell `transformers` and the Hub client never to reach the network (before they are imported)."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


@dataclass(frozen=True)
class HFLMSpec(TextTrainingSpec):
    """The text job's training spec (width, layers, schedule) with the fine-tuning's own: a shorter
    context, fewer epochs, public pretraining and LoRA."""

    max_length: int = 48
    epochs: int = 4
    pretrain_epochs: int = 4
    pretrain_lr: float = 3e-3
    lora_rank: int = 8
    lora_alpha: int = 16
    lora_lr: float = 1e-2
    lora_epochs: int | None = None  # None: `epochs`, as full fine-tuning
    lora_targets: tuple[str, ...] = LORA_TARGETS
    lora_saved: tuple[str, ...] = LORA_SAVED


class HFCausalLM(nn.Module):
    """A `transformers` causal LM (or its `peft` wrapper) behind the harness's interface:
    `logits(token_ids) -> (batch, length, vocab)`, positions one row per document."""

    def __init__(self, inner: nn.Module):
        super().__init__()
        self.inner = inner

    def forward(self, token_ids: torch.Tensor) -> torch.Tensor:
        positions = torch.arange(token_ids.shape[1], device=token_ids.device).unsqueeze(0).expand_as(token_ids)
        return self.inner(input_ids=token_ids, position_ids=positions).logits

    def logits(self, token_ids: torch.Tensor) -> torch.Tensor:
        return self(token_ids)


def build_hf_lm(vocab_size: int, spec: HFLMSpec, seed: int) -> HFCausalLM:
    """A GPT-2-architecture model from a config: random weights, nothing downloaded. The output head
    is untied from the token embedding (one parameter, one layer: what per-sample clipping assumes)."""
    offline()
    from transformers import GPT2Config, GPT2LMHeadModel

    from targets.library_output import route_library_output

    route_library_output()  # its warnings to the run's library.log, never the console
    config = GPT2Config(
        vocab_size=vocab_size,
        n_positions=spec.max_length,
        n_embd=spec.d_model,
        n_layer=spec.n_layers,
        n_head=spec.n_heads,
        bos_token_id=BOS,
        eos_token_id=EOS,
        pad_token_id=PAD,
        tie_word_embeddings=False,
        resid_pdrop=0.0,
        embd_pdrop=0.0,
        attn_pdrop=0.0,
    )
    config._attn_implementation = "eager"  # the plain matmul path: the same on every install
    torch.manual_seed(seed)
    return HFCausalLM(GPT2LMHeadModel(config))


def _batches(token_ids: np.ndarray, batch_size: int, seed: int):
    order = np.random.default_rng(seed).permutation(len(token_ids))
    for start in range(0, len(order), batch_size):
        yield torch.as_tensor(token_ids[order[start : start + batch_size]])


def pretrain(
    model: HFCausalLM, token_ids: np.ndarray, spec: HFLMSpec, *, seed: int, device: torch.device
) -> HFCausalLM:
    """Ordinary (non-private) training on public text: the "pretrained" model every fine-tuning starts from."""
    model = model.to(device).train()
    optimizer = torch.optim.Adam(model.parameters(), lr=spec.pretrain_lr)
    with torch_threads(1 if device.type == "cpu" else None):
        for epoch in range(spec.pretrain_epochs):
            for batch in _batches(token_ids, spec.batch_size, seed + epoch):
                batch = batch.to(device)
                optimizer.zero_grad(set_to_none=True)
                document_losses(model(batch), batch).mean().backward()
                optimizer.step()
    return model.cpu().eval()


def with_lora(model: HFCausalLM, spec: HFLMSpec) -> HFCausalLM:
    """The pretrained model with `peft` LoRA adapters; every other weight frozen."""
    from peft import LoraConfig, get_peft_model

    config = LoraConfig(
        r=spec.lora_rank,
        lora_alpha=spec.lora_alpha,
        lora_dropout=0.0,
        target_modules=list(spec.lora_targets),
        fan_in_fan_out=True,
        bias="none",
        # The output head trains too (a full copy, private like the adapters): the rows of tokens added
        # after pretraining (Panda et al.'s secrets) are random, and adapters on the blocks alone can
        # hardly raise a random row's logit — what people do when they add tokens before LoRA.
        modules_to_save=list(spec.lora_saved),
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return HFCausalLM(get_peft_model(model.inner, config))


def trainable_share(model: nn.Module) -> tuple[int, int]:
    """(trainable, total) parameter counts: what is private under LoRA."""
    params = list(model.parameters())
    return sum(p.numel() for p in params if p.requires_grad), sum(p.numel() for p in params)


def finetune(
    pretrained_state: dict[str, torch.Tensor],
    vocab_size: int,
    token_ids: np.ndarray,
    spec: HFLMSpec,
    *,
    mode: str,
    **run: Unpack[TrainingRun],
) -> tuple[TrainedTextTarget, HFCausalLM]:
    """Fine-tune a copy of the pretrained model on `token_ids` (full or LoRA); finite ε = Opacus
    DP-SGD (Poisson sampling, σ calibrated for the epochs; persons when `owners` is given), ε = ∞
    = ordinary training with the same optimizer and schedule. `copies` (one count per row): the row
    stands for that many identical documents — person-level DP-SGD weights the row (`PersonBatches`:
    the same per-person gradient), everywhere else the row is repeated. Returns the target's record
    and the model (eval mode, on the CPU)."""
    if mode not in FINETUNE_MODES:
        raise ValueError(f"fine-tuning mode must be one of {FINETUNE_MODES}, got {mode!r}")
    model = build_hf_lm(vocab_size, spec, seed=0)
    model.load_state_dict(pretrained_state)
    if mode == "lora":
        model = with_lora(model, spec)
        if spec.lora_epochs is not None:
            spec = replace(spec, epochs=spec.lora_epochs)
    trained = train_language_model(
        model.to(run["device"]),
        token_ids,
        spec,
        lr=spec.lora_lr if mode == "lora" else spec.lr,
        # GPT-2's Conv1D has no Opacus hook rule: functorch's vmap(grad); LoRA's adapters are nn.Linear
        grad_sample_mode="functorch" if mode == "full" else "hooks",
        quiet=True,
        trim=True,  # the canaries are ≈ 15 tokens in rows of 48: the padding columns cost most of the work
        **run,
    )
    return trained, cast(HFCausalLM, trained.model)  # the record keeps its model, as the text job's


@torch.no_grad()
def sample_texts(
    model: HFCausalLM, n: int, *, max_length: int, temperature: float, seed: int, batch_size: int = 64
) -> np.ndarray:
    """`n` documents sampled from `model` (ancestral sampling at `temperature`, from [BOS], [PAD]
    never drawn), each stopped at its first [EOS] or at `max_length` tokens; right-padded with [PAD]."""
    generator = torch.Generator().manual_seed(seed)
    out = np.full((n, max_length), PAD, dtype=np.int64)
    for start in range(0, n, batch_size):
        ids = torch.full((min(batch_size, n - start), 1), BOS, dtype=torch.long)
        done = torch.zeros(len(ids), dtype=torch.bool)
        while ids.shape[1] < max_length and not bool(done.all()):
            logits = model.logits(ids)[:, -1] / temperature
            logits[:, PAD] = -math.inf
            token = torch.multinomial(logits.softmax(-1), 1, generator=generator).squeeze(1)
            token = torch.where(done, torch.full_like(token, PAD), token)
            ids = torch.cat([ids, token.unsqueeze(1)], dim=1)
            done |= token == EOS
        out[start : start + len(ids), : ids.shape[1]] = ids.numpy()
    return out
