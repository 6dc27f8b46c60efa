"""The llm job's set-up, before any fine-tuning: the corpus, the tokenizer, the canaries of each
design (each inserted by a fair coin), the public pretraining and the private fine-tuning set.

Apart from the sweep (audit/text/llm_runner.py) so that a pilot can build exactly what the preset
builds (benchmarks/pilot_llm_control.py: the ε = ∞ controls alone, on seeds other than the preset's)
without copying it. Deterministic in the config's seed.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from audit.machinery.config import AuditConfig
from targets.hf_causal_lm import HFCausalLM, HFLMSpec, build_hf_lm, finetune, pretrain
from targets.llm_canaries import LLMCanaries, first_names, make_canaries, secret_scores
from targets.text_corpus import TextCorpus, make_text_corpus
from targets.text_models import TrainedTextTarget, encode_texts, train_tokenizer


def derived_seed(config_seed: int, *parts: int) -> int:
    """One seed per piece of the job (41: the issue), from the config's seed."""
    return int(np.random.SeedSequence([config_seed, 41, *parts]).generate_state(1)[0])


@dataclass(frozen=True)
class LLMSetup:
    corpus: TextCorpus
    tokenizer: Any
    vocab: int  # the tokenizer's vocabulary plus the new tokens
    canaries: dict[str, LLMCanaries]
    pretrained_state: dict[str, torch.Tensor]
    private_rows: np.ndarray  # one row per person: each member record, each inserted canary
    private_copies: np.ndarray  # the copies each row stands for
    private_owners: np.ndarray
    test_rows: np.ndarray
    private_loss_mask: np.ndarray | None = None  # per row, the targets its loss counts (None: all)
    reference_scores: dict[str, np.ndarray] | None = None  # per design, the pretrained model's scores

    def scores(self, model: HFCausalLM) -> dict[str, np.ndarray]:
        """Each design's canary scores on `model` (black-box), minus the public pretrained model's where
        the config asks for the reference (`llm.canary_score_reference`)."""
        raw = {d: secret_scores(model, c) for d, c in self.canaries.items()}
        if self.reference_scores is None:
            return raw
        return {d: raw[d] - self.reference_scores[d] for d in raw}


def prepare_llm(config: AuditConfig, spec: HFLMSpec, device: torch.device) -> LLMSetup:
    """Everything the fine-tunings share: built from `config.llm` and `config.seed` alone."""
    llm = config.llm
    if llm is None:
        raise ValueError("the config has no 'llm' section")
    corpus = make_text_corpus(
        n_candidates=llm.n_candidates,
        n_pool=llm.n_pool,
        n_test=llm.n_test,
        repetitions=(1,),
        canaries_per_repetition=1,
        n_controls=1,
        secret_digits=1,
        seed=config.seed,
    )
    tokenizer = train_tokenizer([r.text for r in corpus.pool], llm.vocab_size)
    base_vocab = tokenizer.get_vocab_size()
    new_tokens = range(base_vocab, base_vocab + llm.new_tokens)  # Panda et al.'s new tokens: never pretrained
    vocab = base_vocab + llm.new_tokens
    taken = {r.name for r in corpus.candidates + corpus.pool + corpus.test}
    names = first_names(derived_seed(config.seed, 1), llm.canaries_per_design * len(llm.designs), taken)
    canaries: dict[str, LLMCanaries] = {
        design: make_canaries(
            design,
            tokenizer,
            names[i * llm.canaries_per_design : (i + 1) * llm.canaries_per_design],
            secret_length=(llm.panda_secret_length or llm.secret_length) if design == "panda" else llm.secret_length,
            repetitions=llm.canary_repetitions,
            max_length=llm.max_length,
            new_token_ids=new_tokens,
            seed=derived_seed(config.seed, 2),
        )
        for i, design in enumerate(llm.designs)
    }
    public = encode_texts(tokenizer, [r.text for r in corpus.pool], llm.max_length)
    base = pretrain(
        build_hf_lm(vocab, spec, seed=derived_seed(config.seed, 3)),
        public,
        spec,
        seed=derived_seed(config.seed, 4),
        device=device,
    )
    members = encode_texts(tokenizer, [r.text for r in corpus.member_records], llm.max_length)
    # One row per person: each member record, and each inserted canary standing for its copies (`finetune`
    # repeats it, or at person level weights it: the same per-person gradient at the cost of one row).
    rows, copies = [members], [np.ones(len(members), dtype=np.int64)]
    masks = [np.ones((len(members), members.shape[1] - 1), dtype=bool)]  # a record: its whole document
    for design in llm.designs:
        block = canaries[design].token_ids[canaries[design].inserted]
        rows.append(block)
        copies.append(np.full(len(block), llm.canary_repetitions, dtype=np.int64))
        masks.append(canaries[design].secret_targets()[canaries[design].inserted])
    private_rows = np.concatenate(rows)
    reference = None
    if llm.canary_score_reference:
        reference = {d: secret_scores(base, c) for d, c in canaries.items()}
    return LLMSetup(
        corpus=corpus,
        tokenizer=tokenizer,
        vocab=vocab,
        canaries=canaries,
        pretrained_state={k: v.detach().clone() for k, v in base.state_dict().items()},
        private_rows=private_rows,
        private_copies=np.concatenate(copies),
        private_owners=np.arange(len(private_rows)),
        private_loss_mask=np.concatenate(masks) if llm.canary_loss == "secret" else None,
        reference_scores=reference,
        test_rows=encode_texts(tokenizer, [r.text for r in corpus.test], llm.max_length),
    )


def finetune_target(
    setup: LLMSetup,
    config: AuditConfig,
    spec: HFLMSpec,
    *,
    mode: str,
    epsilon: float,
    seed: int,
    device: torch.device,
    on_epoch: Callable[[int, int], None] | None = None,
) -> tuple[TrainedTextTarget, HFCausalLM]:
    """One fine-tuning of the job (`mode` at `epsilon`) on the private set, as the sweep and the pilot run it."""
    llm = config.llm
    person = llm is not None and llm.privacy_unit == "person"
    return finetune(
        setup.pretrained_state,
        setup.vocab,
        setup.private_rows,
        spec,
        mode=mode,
        epsilon=epsilon,
        delta=config.privacy.delta,
        accountant=config.privacy.accountant,
        seed=seed,
        device=device,
        owners=setup.private_owners if person else None,
        copies=setup.private_copies,
        loss_mask=setup.private_loss_mask,
        on_epoch=on_epoch,
    )
