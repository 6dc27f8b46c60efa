"""The examples' audits from Python, with the public API only (`import audit`; docs/api.md).

    python make_inputs.py      # once: writes data/
    python python_api.py       # from examples/, like the CLI examples (docs/examples.md)

Each job returns an `AuditResult`: `print(result)` gives the verdict's top line and one line per
claim, `result.epsilon_lower_bound` the best sound ε lower bound, `result.to_dict()` every figure
as results.json holds it. Nothing here writes a run folder or logs to MLflow (only `audit.run` does).
"""

from __future__ import annotations

import sys
from pathlib import Path

import audit

DATA = Path(__file__).resolve().parent / "data"


def main() -> None:
    if not (DATA / "forest.skops").is_file():
        sys.exit(f"{DATA} is missing its inputs: run `python make_inputs.py` first")

    # Your own model, no DP claim: a leakage audit (LEAKS fails it, as in the CLI).
    forest = audit.audit_model(
        skops=DATA / "forest.skops", members=DATA / "members.csv", nonmembers=DATA / "nonmembers.csv", label="y"
    )
    print(forest)
    loss = forest.to_dict()["targets"][0]["attacks"][0]
    bound = forest.epsilon_lower_bound  # None: members were not coin flips, so no bound is proven here
    print(
        f"  {loss['name']} attack: AUC {loss['auc']:.3f}; "
        + ("no sound ε lower bound (membership not randomized)" if bound is None else f"ε ≥ {bound:.3f}")
    )

    # A synthetic release that copies its training rows, and one that does not.
    for release in ("release_copy.csv", "release_fresh.csv"):
        print(audit.synth_check(DATA / "train.csv", DATA / "holdout.csv", DATA / release))

    # An accountant that under-reports ε, checked against the tight PLD accountant on a small grid;
    # "module:function" runs isolated in a worker process, like the CLI's --accountant.
    here = Path(__file__).resolve().parent
    print(audit.accountant_check("accountant:sqrt_composition", here / "accountant_grid.yaml"))

    # An estimator on its own: the one-run ε lower bound (Steinke et al. 2023) of scores whose
    # membership was a fair coin flip, here simulated.
    import numpy as np

    rng = np.random.default_rng(0)
    members = rng.integers(0, 2, 2000).astype(bool)
    scores = rng.normal(2.0 * members, 1.0)
    bound = audit.epsilon_lower_bound_one_run(scores, members, delta=1e-5)
    print(f"one-run bound on simulated scores: ε ≥ {bound.epsilon:.3f} at {bound.confidence:.0%} confidence")


if __name__ == "__main__":
    main()
