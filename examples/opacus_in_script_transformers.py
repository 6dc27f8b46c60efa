"""A Hugging Face `transformers` causal LM fine-tuned with Opacus, audited from inside the training
loop: the lines marked `# audit` (issue #41).

    python examples/opacus_in_script_transformers.py --out runs

Nothing is downloaded: a small `GPT2LMHeadModel` is built from a `GPT2Config` (random weights) and
trained on random token sequences, standing in for your private text. GPT-2's `Conv1D` layers have
no Opacus hook rule, so Opacus computes per-sample gradients with `grad_sample_mode="functorch"`;
the positions are passed explicitly, one row per sequence (GPT-2's default broadcasts one row, and
the position embedding's per-sample gradient would then be one row for the whole batch).
`OpacusAudit` puts its gradient canaries into those per-sample gradients like into any other.
"""

from __future__ import annotations

import argparse
import os
import warnings

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import torch
from opacus import PrivacyEngine
from torch import nn
from torch.utils.data import DataLoader, TensorDataset
from transformers import GPT2Config, GPT2LMHeadModel

from audit.one_run import OpacusAudit  # audit


class CausalLM(nn.Module):
    """GPT-2 returning next-token logits, positions given per row (see the module docstring)."""

    def __init__(self, config: GPT2Config):
        super().__init__()
        self.gpt2 = GPT2LMHeadModel(config)

    def forward(self, token_ids: torch.Tensor) -> torch.Tensor:
        positions = torch.arange(token_ids.shape[1], device=token_ids.device).expand_as(token_ids)
        return self.gpt2(input_ids=token_ids, position_ids=positions).logits


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sequences", type=int, default=400)
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--epsilon", type=float, default=2.0)
    parser.add_argument("--out", default="runs")
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    torch.manual_seed(0)

    config = GPT2Config(
        vocab_size=64,
        n_positions=16,
        n_embd=32,
        n_layer=1,
        n_head=2,
        tie_word_embeddings=False,
        bos_token_id=0,
        eos_token_id=0,
    )
    tokens = torch.randint(0, config.vocab_size, (args.sequences, 16))
    loader = DataLoader(TensorDataset(tokens), batch_size=20)
    model = CausalLM(config)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    engine = PrivacyEngine(accountant="prv")
    model, optimizer, loader = engine.make_private_with_epsilon(
        module=model,
        optimizer=optimizer,
        data_loader=loader,
        target_epsilon=args.epsilon,
        target_delta=1e-5,
        epochs=args.epochs,
        max_grad_norm=1.0,
        grad_sample_mode="functorch",
    )

    with OpacusAudit(engine, optimizer, model, data_loader=loader, out=args.out) as audit:  # audit
        model.train()
        for _ in range(args.epochs):
            for (batch,) in loader:
                optimizer.zero_grad()
                logits = model(batch)
                loss = nn.functional.cross_entropy(
                    logits[:, :-1].reshape(-1, config.vocab_size), batch[:, 1:].reshape(-1)
                )
                loss.backward()
                optimizer.step()

    print(f"ε = {engine.get_epsilon(1e-5):.3f}; audit: {audit.verdict['status']} -> {audit.path}")  # audit
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
