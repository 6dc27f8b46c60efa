"""Write the small, real inputs the examples audit into examples/data/ (seeded; about 10 s on 2 cores).

    python examples/make_inputs.py

* `forest.skops` — a scikit-learn random forest fitted on `members.csv` (skops format, not pickle);
  `nonmembers.csv` are rows of the same distribution it never saw (label column `y`);
* `mlp.pt` — the weights of the PyTorch model built by `examples/torch_model.py:build`, trained
  (no DP) on the same `members.csv`;
* `train.csv`, `holdout.csv` — a generator's training rows and rows it never saw, and two releases:
  `release_copy.csv` (training rows with 1 % noise: a disguised copy) and `release_fresh.csv`
  (an independent sample of the same population: what an honest generator approaches).

Nothing is downloaded: the tables are drawn from a seeded mixture of Gaussians with a noisy,
non-linear label (and 10 % flipped labels, which a model can only fit by memorising them).
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pandas as pd

OUT = Path(__file__).resolve().parent / "data"
N_FEATURES = 8


def population(n: int, rng: np.random.Generator) -> pd.DataFrame:
    centres = np.array([[2.0] * N_FEATURES, [-2.0] * N_FEATURES, [0.0, 3.0] * (N_FEATURES // 2)])
    cluster = rng.integers(0, 3, n)
    x = centres[cluster] + rng.normal(0.0, 1.5, size=(n, N_FEATURES))
    y = (np.sin(x[:, 0]) + 0.5 * x[:, 1] * x[:, 2] / 4 + rng.normal(0, 0.5, n) > 0).astype(int)
    flip = rng.random(n) < 0.1
    y[flip] = 1 - y[flip]
    frame = pd.DataFrame(x.round(4), columns=[f"x{i}" for i in range(N_FEATURES)])
    frame["y"] = y
    return frame


def main() -> None:
    rng = np.random.default_rng(0)
    OUT.mkdir(exist_ok=True)
    members, nonmembers = population(400, rng), population(400, rng)
    members.to_csv(OUT / "members.csv", index=False)
    nonmembers.to_csv(OUT / "nonmembers.csv", index=False)
    X, y = members.drop(columns="y").to_numpy(), members["y"].to_numpy()

    # A scikit-learn model, saved with skops (pickle files are refused by audit-model).
    import skops.io
    from sklearn.ensemble import RandomForestClassifier

    forest = RandomForestClassifier(n_estimators=50, random_state=0).fit(X, y)
    skops.io.dump(forest, OUT / "forest.skops")

    # A PyTorch model: its architecture lives in examples/torch_model.py, its weights in mlp.pt.
    import torch

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from torch_model import build

    torch.manual_seed(0)
    model = build()
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
    features, labels = torch.tensor(X, dtype=torch.float32), torch.tensor(y)
    for _ in range(300):  # full batch, no DP: the model memorises some flipped labels
        optimizer.zero_grad()
        torch.nn.functional.cross_entropy(model(features), labels).backward()
        optimizer.step()
    torch.save(model.state_dict(), OUT / "mlp.pt")

    # A synthetic release with its generator's train / holdout rows (a categorical column too).
    train, holdout = population(1000, rng), population(1000, rng)
    for frame in (train, holdout):
        frame["site"] = np.where(frame["x0"] > 0, "north", "south")
    copy = train.sample(frac=1.0, random_state=1).reset_index(drop=True)
    numeric = [f"x{i}" for i in range(N_FEATURES)]
    copy[numeric] = (copy[numeric] * rng.normal(1.0, 0.01, size=copy[numeric].shape)).round(4)
    fresh = population(1000, rng)
    fresh["site"] = np.where(fresh["x0"] > 0, "north", "south")
    train.to_csv(OUT / "train.csv", index=False)
    holdout.to_csv(OUT / "holdout.csv", index=False)
    copy.to_csv(OUT / "release_copy.csv", index=False)
    fresh.to_csv(OUT / "release_fresh.csv", index=False)
    print(f"wrote {len(list(OUT.iterdir()))} files to {OUT}")


if __name__ == "__main__":
    main()
