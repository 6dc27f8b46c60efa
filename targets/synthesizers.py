"""Synthetic-data generators the audit trains and then attacks, behind one tiny interface.

Every synthesizer: `fit(train_df) -> self`, `sample(n, seed) -> pd.DataFrame` (same columns and
dtypes as the training frame), and an `epsilon` attribute (None = not differentially private).
User-supplied synthetic data needs no class: it is just a DataFrame.

- `NoisyCopySynthesizer`: resamples training rows and jitters numeric columns — an obviously
  leaky baseline that every check must flag.
- `GaussianCopulaSynthesizer`: a non-private Gaussian copula with empirical marginals; numeric
  values are interpolated between training values (mild memorisation).
- `DPVAESynthesizer`: a small VAE trained with DP-SGD (Opacus, PRV accountant, Poisson sampling)
  at a target (ε, δ).

Training frames must not contain missing values (SyntheticDataError names the column).
"""

from __future__ import annotations

import math
import warnings
from typing import Protocol

import numpy as np
import pandas as pd
import torch
from scipy import stats
from torch import nn

from targets.devices import torch_threads
from targets.tabular_encoding import ColumnKind, SyntheticDataError, column_kind

__all__ = [
    "Synthesizer",
    "NoisyCopySynthesizer",
    "GaussianCopulaSynthesizer",
    "DPVAESynthesizer",
    "SYNTHESIZERS",
]


class Synthesizer(Protocol):
    name: str
    epsilon: float | None  # None = non-private

    def fit(self, train_df: pd.DataFrame) -> Synthesizer: ...

    def sample(self, n: int, seed: int) -> pd.DataFrame: ...


class _Schema:
    """Column names, kinds and dtypes of the training frame, to give samples the same shape."""

    def __init__(self, train_df: pd.DataFrame):
        if not isinstance(train_df, pd.DataFrame) or train_df.shape[0] == 0 or train_df.shape[1] == 0:
            raise SyntheticDataError("train", "expected a non-empty DataFrame")
        self.columns = list(train_df.columns)
        self.dtypes = train_df.dtypes.to_dict()
        self.kinds: dict[str, ColumnKind] = {}
        for column in self.columns:
            kind = column_kind(train_df[column])
            if kind is None:
                raise SyntheticDataError(f"train, column '{column}'", f"unsupported dtype {train_df[column].dtype}")
            n_missing = int(train_df[column].isna().sum())
            if n_missing:
                raise SyntheticDataError(
                    f"train, column '{column}'", f"{n_missing} missing value(s); synthesizers need complete rows"
                )
            self.kinds[column] = kind

    def numeric(self) -> list:
        return [c for c in self.columns if self.kinds[c] == "numeric"]

    def categorical(self) -> list:
        return [c for c in self.columns if self.kinds[c] == "categorical"]

    def frame(self, columns: dict) -> pd.DataFrame:
        out = pd.DataFrame({c: columns[c] for c in self.columns})
        for column in self.columns:
            dtype = self.dtypes[column]
            if self.kinds[column] == "numeric" and pd.api.types.is_integer_dtype(dtype):
                out[column] = np.rint(out[column].to_numpy(dtype=float))
            out[column] = out[column].astype(dtype)
        return out


def _check_sample_args(n, seed) -> tuple[int, int]:
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
        raise ValueError(f"n: expected a positive integer, got {n!r}")
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
        raise ValueError(f"seed: expected an integer, got {seed!r}")
    return int(n), int(seed)


def _check_fitted(obj) -> None:
    if not hasattr(obj, "schema_"):
        raise RuntimeError(f"{type(obj).__name__}.sample called before fit")


# --------------------------------------------------------------------------------------------------
# Leaky baseline
# --------------------------------------------------------------------------------------------------


class NoisyCopySynthesizer:
    """Resample training rows with replacement; add N(0, (noise_scale · column std)²) to numerics.

    Categorical values are copied unchanged and integer columns are rounded back, so with a small
    `noise_scale` many rows are exact or near copies: the baseline every privacy check must flag.
    """

    name = "noisy_copy"
    epsilon = None

    def __init__(self, noise_scale: float = 0.01):
        if not (isinstance(noise_scale, (int, float)) and noise_scale >= 0 and math.isfinite(noise_scale)):
            raise ValueError(f"noise_scale: expected a finite number ≥ 0, got {noise_scale!r}")
        self.noise_scale = float(noise_scale)

    def fit(self, train_df: pd.DataFrame) -> NoisyCopySynthesizer:
        self.schema_ = _Schema(train_df)
        self.train_ = train_df.reset_index(drop=True).copy()
        self.std_ = {c: float(np.nanstd(train_df[c].to_numpy(dtype=float))) for c in self.schema_.numeric()}
        return self

    def sample(self, n: int, seed: int) -> pd.DataFrame:
        _check_fitted(self)
        n, seed = _check_sample_args(n, seed)
        rng = np.random.default_rng(seed)
        rows = self.train_.iloc[rng.integers(0, self.train_.shape[0], size=n)].reset_index(drop=True)
        columns = {c: rows[c].to_numpy() for c in self.schema_.columns}
        for column in self.schema_.numeric():
            noise = rng.normal(0.0, self.noise_scale * self.std_[column], size=n)
            columns[column] = rows[column].to_numpy(dtype=float) + noise
        return self.schema_.frame(columns)


# --------------------------------------------------------------------------------------------------
# Gaussian copula (non-private)
# --------------------------------------------------------------------------------------------------


class GaussianCopulaSynthesizer:
    """Gaussian copula over empirical marginals (non-private).

    Fit: each column is mapped to normal scores — numeric by mid-ranks, categorical by drawing
    uniformly inside the category's slice of [0, 1] (slices sized by frequency) — and the
    correlation of those scores is estimated. Sample: correlated normals → uniforms → numeric
    values by the empirical quantile function (linear interpolation between *training values*,
    hence mild memorisation), categories by their slices. `seed` seeds the categorical jitter of
    fit; `sample(n, seed)` is seeded by its own argument.
    """

    name = "gaussian_copula"
    epsilon = None

    def __init__(self, seed: int = 0):
        self.seed = seed

    def fit(self, train_df: pd.DataFrame) -> GaussianCopulaSynthesizer:
        self.schema_ = _Schema(train_df)
        rng = np.random.default_rng(self.seed)
        n = train_df.shape[0]
        scores = np.empty((n, len(self.schema_.columns)))
        self.sorted_values_: dict = {}
        self.categories_: dict = {}
        for j, column in enumerate(self.schema_.columns):
            if self.schema_.kinds[column] == "numeric":
                values = train_df[column].to_numpy(dtype=float)
                self.sorted_values_[column] = np.sort(values)
                u = (stats.rankdata(values) - 0.5) / n
            else:
                values = train_df[column].astype(object).to_numpy()
                categories, codes, counts = np.unique(values.astype(str), return_inverse=True, return_counts=True)
                # Keep the original objects (not their str) for output; one representative each.
                originals = pd.Series(values).groupby(codes).first().to_numpy()
                edges = np.concatenate([[0.0], np.cumsum(counts) / n])
                self.categories_[column] = (originals, edges)
                u = edges[codes] + rng.random(n) * (edges[codes + 1] - edges[codes])
            scores[:, j] = stats.norm.ppf(np.clip(u, 1e-6, 1 - 1e-6))
        with np.errstate(invalid="ignore", divide="ignore"):
            correlation = np.corrcoef(scores, rowvar=False) if scores.shape[1] > 1 else np.ones((1, 1))
        correlation = np.nan_to_num(np.atleast_2d(correlation), nan=0.0)
        np.fill_diagonal(correlation, 1.0)
        # Nearest positive-definite matrix by eigenvalue clipping, so Cholesky always works.
        eigenvalues, eigenvectors = np.linalg.eigh(correlation)
        correlation = (eigenvectors * np.clip(eigenvalues, 1e-6, None)) @ eigenvectors.T
        scale = np.sqrt(np.diag(correlation))
        self.correlation_ = correlation / np.outer(scale, scale)
        self.cholesky_ = np.linalg.cholesky(self.correlation_)
        return self

    def sample(self, n: int, seed: int) -> pd.DataFrame:
        _check_fitted(self)
        n, seed = _check_sample_args(n, seed)
        rng = np.random.default_rng(seed)
        u = stats.norm.cdf(rng.standard_normal((n, len(self.schema_.columns))) @ self.cholesky_.T)
        columns = {}
        for j, column in enumerate(self.schema_.columns):
            if self.schema_.kinds[column] == "numeric":
                columns[column] = np.quantile(self.sorted_values_[column], u[:, j])
            else:
                originals, edges = self.categories_[column]
                codes = np.clip(np.searchsorted(edges, u[:, j], side="right") - 1, 0, originals.size - 1)
                columns[column] = originals[codes]
        return self.schema_.frame(columns)


# --------------------------------------------------------------------------------------------------
# DP-SGD variational autoencoder
# --------------------------------------------------------------------------------------------------


_MIN_LOG_VAR, _MAX_LOG_VAR = -6.0, 2.0  # keeps the Gaussian likelihood finite early in training


class _TabularVAE(nn.Module):
    """Encoder → (μ, log σ²) → reparameterised z → decoder → numeric means ‖ log-variances ‖ logits."""

    def __init__(self, in_features: int, out_features: int, hidden: int, latent: int):
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(in_features, hidden), nn.ReLU(), nn.Linear(hidden, 2 * latent))
        self.decoder = nn.Sequential(nn.Linear(latent, hidden), nn.ReLU(), nn.Linear(hidden, out_features))
        self.latent = latent

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        mu, log_var = self.encoder(x).chunk(2, dim=1)
        z = mu + torch.randn_like(mu) * torch.exp(0.5 * log_var)
        return self.decoder(z), mu, log_var


class DPVAESynthesizer:
    """A small VAE over the encoded table, trained with DP-SGD at (epsilon, delta).

    Encoding: numeric columns standardised (and clipped to ±5 sd), categoricals one-hot; the
    decoder emits a Gaussian mean and log-variance per numeric column and category logits per
    categorical column (softmax, cross-entropy); loss = negative log-likelihood + KL. Training: Opacus
    `PrivacyEngine(accountant=...).make_private_with_epsilon(..., poisson_sampling=True)` (Abadi et
    al. 2016, arXiv 1607.00133), which picks the noise multiplier σ for the target ε over `epochs`
    at sample rate q = 1/len(loader). After `fit` the object records `noise_multiplier`,
    `sample_rate`, `steps`, `max_grad_norm` and `accountant_epsilon` (what the accountant reports
    for the steps actually taken).

    Sampling: z ~ N(0, I) → decoder; numeric drawn from the decoded Gaussian (de-standardised,
    clipped to the training range, integers rounded), categorical drawn from the softmax.

    Caveat: the column schema — means, standard deviations, [min, max], category lists — is read
    from the training data without noise, i.e. treated as public metadata outside the DP
    guarantee. With secret categories or ranges, fix them from public knowledge instead.
    """

    name = "dp_vae"

    def __init__(
        self,
        epsilon: float,
        delta: float = 1e-5,
        epochs: int = 10,
        batch_size: int = 128,
        max_grad_norm: float = 1.0,
        learning_rate: float = 3e-3,
        hidden_dim: int = 64,
        latent_dim: int = 8,
        accountant: str = "prv",
        seed: int = 0,
    ):
        if not (isinstance(epsilon, (int, float)) and epsilon > 0 and math.isfinite(epsilon)):
            raise ValueError(f"epsilon: expected a finite number > 0, got {epsilon!r}")
        if not (isinstance(delta, (int, float)) and 0 < delta < 1):
            raise ValueError(f"delta: expected a number in (0, 1), got {delta!r}")
        for name, value in (
            ("epochs", epochs),
            ("batch_size", batch_size),
            ("hidden_dim", hidden_dim),
            ("latent_dim", latent_dim),
        ):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name}: expected a positive integer, got {value!r}")
        self.epsilon = float(epsilon)
        self.delta = float(delta)
        self.epochs = epochs
        self.batch_size = batch_size
        self.max_grad_norm = float(max_grad_norm)
        self.learning_rate = float(learning_rate)
        self.hidden_dim = hidden_dim
        self.latent_dim = latent_dim
        self.accountant = accountant
        self.seed = seed
        self.noise_multiplier: float | None = None
        self.sample_rate: float | None = None
        self.steps: int | None = None
        self.accountant_epsilon: float | None = None

    # ------------------------------------------------------------------ encoding

    def _encode(self, df: pd.DataFrame) -> np.ndarray:
        parts = []
        for column in self.numeric_:
            values = df[column].to_numpy(dtype=float)
            parts.append(np.clip((values - self.mean_[column]) / self.std_[column], -5, 5)[:, None])
        for column in self.categorical_:
            categories = self.categories_[column]
            codes = pd.Categorical(df[column].astype(object), categories=categories).codes
            parts.append(np.eye(len(categories))[codes])
        return np.hstack(parts).astype(np.float32)

    def _loss_per_row(
        self, x: torch.Tensor, out: torch.Tensor, mu: torch.Tensor, log_var: torch.Tensor
    ) -> torch.Tensor:
        n_num = len(self.numeric_)
        mean, out_log_var = out[:, :n_num], out[:, n_num : 2 * n_num].clamp(_MIN_LOG_VAR, _MAX_LOG_VAR)
        # Gaussian negative log-likelihood (up to a constant) with a per-row, per-column variance.
        loss = 0.5 * (((mean - x[:, :n_num]) ** 2) * torch.exp(-out_log_var) + out_log_var).sum(dim=1)
        offset_in, offset_out = n_num, 2 * n_num
        for column in self.categorical_:
            width = len(self.categories_[column])
            target = x[:, offset_in : offset_in + width].argmax(dim=1)
            loss = loss + nn.functional.cross_entropy(out[:, offset_out : offset_out + width], target, reduction="none")
            offset_in += width
            offset_out += width
        kl = -0.5 * (1 + log_var - mu**2 - log_var.exp()).sum(dim=1)
        return loss + kl

    # ------------------------------------------------------------------ fit / sample

    def fit(self, train_df: pd.DataFrame) -> DPVAESynthesizer:
        from opacus import PrivacyEngine
        from torch.utils.data import DataLoader, TensorDataset

        self.schema_ = _Schema(train_df)
        self.numeric_ = self.schema_.numeric()
        self.categorical_ = self.schema_.categorical()
        self.mean_, self.std_, self.low_, self.high_ = {}, {}, {}, {}
        for column in self.numeric_:
            values = train_df[column].to_numpy(dtype=float)
            self.mean_[column] = float(values.mean())
            self.std_[column] = float(values.std()) or 1.0
            self.low_[column], self.high_[column] = float(values.min()), float(values.max())
        self.categories_ = {
            c: sorted(train_df[c].astype(object).unique().tolist(), key=lambda v: (type(v).__name__, str(v)))
            for c in self.categorical_
        }
        x = torch.from_numpy(self._encode(train_df))
        n_features = x.shape[1]

        with torch.random.fork_rng(devices=[]), torch_threads(1):
            # Model init, Poisson sampling, reparameterisation and Opacus noise all draw from the
            # global generator: seed it here, restore the caller's state afterwards.
            torch.manual_seed(self.seed)
            n_outputs = n_features + len(self.numeric_)  # a mean and a log-variance per numeric column
            model = _TabularVAE(n_features, n_outputs, self.hidden_dim, self.latent_dim)
            optimizer = torch.optim.Adam(model.parameters(), lr=self.learning_rate)
            batch_size = min(self.batch_size, x.shape[0])
            loader = DataLoader(TensorDataset(x), batch_size=batch_size)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # secure_mode and PRV discretisation notices
                engine = PrivacyEngine(accountant=self.accountant)
                model, optimizer, loader = engine.make_private_with_epsilon(
                    module=model,
                    optimizer=optimizer,
                    data_loader=loader,
                    target_epsilon=self.epsilon,
                    target_delta=self.delta,
                    epochs=self.epochs,
                    max_grad_norm=self.max_grad_norm,
                    poisson_sampling=True,
                )
            steps = 0
            model.train()
            for _ in range(self.epochs):
                for (batch,) in loader:
                    optimizer.zero_grad(set_to_none=True)
                    out, mu, log_var = model(batch)
                    # Sum / max(n, 1): a Poisson batch can be empty; the step (and its noise) still counts.
                    loss = self._loss_per_row(batch, out, mu, log_var).sum() / max(batch.shape[0], 1)
                    loss.backward()
                    optimizer.step()
                    steps += 1
            model.remove_hooks()
            self.model_ = model._module.eval()
        self.noise_multiplier = float(optimizer.noise_multiplier)
        self.sample_rate = 1.0 / len(loader)
        self.steps = steps
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            self.accountant_epsilon = float(engine.get_epsilon(self.delta))
        return self

    def sample(self, n: int, seed: int) -> pd.DataFrame:
        _check_fitted(self)
        n, seed = _check_sample_args(n, seed)
        generator = torch.Generator().manual_seed(seed)
        with torch.no_grad():
            z = torch.randn(n, self.latent_dim, generator=generator)
            out = self.model_.decoder(z)
        columns = {}
        n_num = len(self.numeric_)
        if n_num:
            sd = torch.exp(0.5 * out[:, n_num : 2 * n_num].clamp(_MIN_LOG_VAR, _MAX_LOG_VAR))
            standardised = (out[:, :n_num] + sd * torch.randn(n, n_num, generator=generator)).numpy()
        for j, column in enumerate(self.numeric_):
            values = standardised[:, j].astype(float) * self.std_[column] + self.mean_[column]
            columns[column] = np.clip(values, self.low_[column], self.high_[column])
        offset = 2 * n_num
        for column in self.categorical_:
            categories = self.categories_[column]
            logits = out[:, offset : offset + len(categories)]
            codes = torch.multinomial(torch.softmax(logits, dim=1), 1, generator=generator)[:, 0].numpy()
            columns[column] = np.asarray(categories, dtype=object)[codes]
            offset += len(categories)
        return self.schema_.frame(columns)

    def privacy_record(self) -> dict:
        """JSON-ready (σ, q, steps, C, accountant ε): what happened, to recompute ε from."""
        return {
            "epsilon_target": self.epsilon,
            "delta": self.delta,
            "noise_multiplier": self.noise_multiplier,
            "sample_rate": self.sample_rate,
            "steps": self.steps,
            "max_grad_norm": self.max_grad_norm,
            "accountant": self.accountant,
            "accountant_epsilon": self.accountant_epsilon,
            "poisson_sampling": True,
        }


SYNTHESIZERS: dict[str, type] = {
    NoisyCopySynthesizer.name: NoisyCopySynthesizer,
    GaussianCopulaSynthesizer.name: GaussianCopulaSynthesizer,
    DPVAESynthesizer.name: DPVAESynthesizer,
}
