"""An ordinary PyTorch Lightning + Opacus script, audited from inside: the three lines marked `# audit`.

    python examples/opacus_lightning.py --out runs
    privacy-audit gate --policy examples/policy-strict.yaml runs/<timestamp>-whitebox-audit/whitebox-audit.json

The training follows Opacus's own Lightning example (examples/mnist_lightning.py in the Opacus
repository): the LightningModule holds a `PrivacyEngine`, its `configure_optimizers` calls
`make_private` on itself with the trainer's train loader, and the train loader is Opacus's Poisson
`DPDataLoader`. `OpacusAuditCallback` runs the in-script one-run audit (`OpacusAudit`) over
`trainer.fit` and writes `<out>/<timestamp>-whitebox-audit/whitebox-audit.json`, the file `gate`
and `ledger record` read (docs/one-run-audits.md, "A PyTorch Lightning callback").
"""

from __future__ import annotations

import argparse
import logging
import warnings

import lightning.pytorch as pl
import torch
from opacus import PrivacyEngine
from opacus.data_loader import DPDataLoader
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from audit.one_run import OpacusAuditCallback  # audit


class LitClassifier(pl.LightningModule):
    def __init__(self, rows: int = 2000, batch_size: int = 100, noise_multiplier: float = 1.0, lr: float = 0.5):
        super().__init__()
        self.rows, self.batch_size, self.noise_multiplier, self.lr = rows, batch_size, noise_multiplier, lr
        self.net = nn.Sequential(nn.Linear(20, 256), nn.ReLU(), nn.Linear(256, 64), nn.ReLU(), nn.Linear(64, 2))
        self.privacy_engine = PrivacyEngine(accountant="prv")

    def forward(self, x):
        return self.net(x)

    def train_dataloader(self):
        generator = torch.Generator().manual_seed(0)
        features = torch.randn(self.rows, 20, generator=generator)
        labels = (features[:, :3].sum(1) > 0).long()
        return DPDataLoader.from_data_loader(DataLoader(TensorDataset(features, labels), batch_size=self.batch_size))

    def training_step(self, batch, batch_idx):
        x, y = batch
        return nn.functional.cross_entropy(self(x), y)

    def configure_optimizers(self):
        optimizer = torch.optim.SGD(self.parameters(), lr=self.lr)
        self.trainer.fit_loop.setup_data()
        data_loader = self.trainer.train_dataloader
        _, optimizer, _ = self.privacy_engine.make_private(
            module=self,
            optimizer=optimizer,
            data_loader=data_loader,
            noise_multiplier=self.noise_multiplier,
            max_grad_norm=1.0,
            poisson_sampling=isinstance(data_loader, DPDataLoader),
        )
        return optimizer


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=2000)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--out", default="runs")
    args = parser.parse_args()
    warnings.simplefilter("ignore")  # Opacus's warning about its non-secure RNG, Lightning's about workers
    logging.getLogger("lightning.pytorch").setLevel(logging.ERROR)
    torch.manual_seed(0)

    model = LitClassifier(rows=args.rows)
    audit = OpacusAuditCallback(out=args.out)  # audit
    trainer = pl.Trainer(
        max_epochs=args.epochs,
        accelerator="cpu",
        callbacks=[audit],  # audit
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
    )
    trainer.fit(model)

    epsilon = model.privacy_engine.get_epsilon(1e-5)
    print(f"ε = {epsilon:.3f}; audit: {audit.verdict['status']} -> {audit.audit.path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
