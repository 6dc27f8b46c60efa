"""An ordinary Opacus training script, audited from inside: the three lines marked `# audit`.

    python examples/opacus_in_script.py --out runs
    privacy-audit gate --policy examples/policy-strict.yaml runs/<timestamp>-whitebox-audit/whitebox-audit.json

The training is written the way the Opacus tutorials write it: `make_private_with_epsilon`, large
logical batches through `BatchMemoryManager`, the user's own loop. `OpacusAudit` hooks the DP
optimizer for the duration of the `with` block: one-run gradient canaries (Steinke et al. 2023),
the count of noisy steps against the accountant, and every trainable parameter accounted for. On
exit it writes `<out>/<timestamp>-whitebox-audit/whitebox-audit.json`, the file `gate` and
`ledger record` read (docs/one-run-audits.md, "Auditing from inside your own script").
"""

from __future__ import annotations

import argparse
import warnings

import torch
from opacus import PrivacyEngine
from opacus.utils.batch_memory_manager import BatchMemoryManager
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from audit.one_run import OpacusAudit  # audit


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=2000)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--epsilon", type=float, default=1.0)
    parser.add_argument("--out", default="runs")
    args = parser.parse_args()
    warnings.simplefilter("ignore")  # Opacus's warning about its non-secure RNG
    torch.manual_seed(0)

    features = torch.randn(args.rows, 20)
    labels = (features[:, :3].sum(1) > 0).long()
    train_loader = DataLoader(TensorDataset(features, labels), batch_size=100)
    model = nn.Sequential(nn.Linear(20, 256), nn.ReLU(), nn.Linear(256, 128), nn.ReLU(), nn.Linear(128, 2))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.5)
    privacy_engine = PrivacyEngine(accountant="prv")
    model, optimizer, train_loader = privacy_engine.make_private_with_epsilon(
        module=model,
        optimizer=optimizer,
        data_loader=train_loader,
        target_epsilon=args.epsilon,
        target_delta=1e-5,
        epochs=args.epochs,
        max_grad_norm=1.0,
    )

    with OpacusAudit(privacy_engine, optimizer, model, data_loader=train_loader, out=args.out) as audit:  # audit
        for _ in range(args.epochs):
            with BatchMemoryManager(
                data_loader=train_loader, max_physical_batch_size=25, optimizer=optimizer
            ) as memory_safe_loader:
                for x, y in memory_safe_loader:
                    optimizer.zero_grad()
                    loss = nn.functional.cross_entropy(model(x), y)
                    loss.backward()
                    optimizer.step()

    print(f"ε = {privacy_engine.get_epsilon(1e-5):.3f}; audit: {audit.verdict['status']} -> {audit.path}")  # audit
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
