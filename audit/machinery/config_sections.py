"""The config's building blocks and its job sections: the strict base model, ε values and ranges, and the
sections of `audit-model` (model:), the federated job (federated:), the text job (text:) and the LLM job (llm:).

audit/machinery/config.py assembles them into `AuditConfig` (and re-exports these names); split from it so
that neither is over 600 lines.
"""

from __future__ import annotations

import math
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, field_validator, model_validator

from audit.machinery.limits import COUNT_LIMITS as _LIM  # the one range table
from audit.machinery.limits import FEDERATED_RANGES as _FED

ACCOUNTANTS = ("prv", "rdp", "gdp")


class _Strict(BaseModel):
    # Unknown keys are almost always typos of real keys; refuse them rather than ignore them.
    # strict: `epochs: true` is not 1 epoch and `lr: "0.1"` is not 0.1 (no silent coercion);
    # allow_inf_nan=False: every number is finite unless a field says otherwise (ε may be inf).
    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)


_INF_WORDS = ("inf", "+inf", ".inf", "infinity", "∞")


def _inf_word_to_float(value: Any) -> Any:
    """The written forms of ∞ (the presets and results.json write 'inf') and nothing else: '1' stays text."""
    if isinstance(value, str) and value.strip().lower() in _INF_WORDS:
        return math.inf
    return value


# An ε: a number, or inf written as a word; strings that merely look like numbers are refused.
EpsilonValue = Annotated[float, Field(allow_inf_nan=True), BeforeValidator(_inf_word_to_float)]

# Ranges, with the reason each bound exists (quoted in the error message).
EPSILON_MIN = 0.01  # below this Opacus cannot find a noise multiplier ("privacy budget too low")
EPSILON_MAX = 50.0  # above this a finite ε promises nothing, and PRV calibration takes minutes or fails
DELTA_MIN = 1e-10  # below this the accountants lose numerical precision (Opacus: "floating point errors will dominate")


class ModelSourceConfig(_Strict):
    """`audit-model`'s inputs: the user's model (exactly one of weights / skops / onnx / function),
    the trainer of reference/shadow models, and the data files. Paths are relative to the config file."""

    weights: str | None = Field(None, description="torch state_dict (.pt, loaded weights_only) or .safetensors")
    factory: str | None = Field(
        None,
        description="module:function returning the nn.Module the weights fit; "
        "default: the harness's MLP with training.hidden_sizes",
    )
    skops: str | None = Field(None, description="a scikit-learn estimator saved with skops.io.dump")
    onnx: str | None = Field(None, description="an ONNX file, run with onnxruntime")
    function: str | None = Field(
        None, description="module:function, a black-box prediction function (features → outputs)"
    )
    output: Literal["logits", "probabilities", "labels"] | None = Field(
        None, description="what the model returns; default logits (torch, onnx), probabilities (skops, function)"
    )
    trainer: str | None = Field(
        None,
        description="module:function train(features, labels, seed) -> model: trains "
        "reference and shadow models like the audited model",
    )
    members: str | None = Field(None, description="CSV / Parquet / .npz of the model's training rows")
    nonmembers: str | None = Field(None, description="CSV / Parquet / .npz of rows it never saw")
    population: str | None = Field(None, description="more rows from the same distribution (reference/shadow models)")
    label: str | None = Field(None, description="label column of CSV / Parquet files")
    timeout: float = Field(600.0, gt=0, description="seconds one call of the user's code may take")

    @model_validator(mode="after")
    def _one_model(self) -> ModelSourceConfig:
        given = [k for k in ("weights", "skops", "onnx", "function") if getattr(self, k)]
        if len(given) > 1:
            raise ValueError(f"give exactly one of weights, skops, onnx, function (got {', '.join(given)})")
        if self.factory and not self.weights:
            raise ValueError("factory needs weights (the state_dict the factory's module loads)")
        return self


MODEL_PATH_FIELDS = ("weights", "skops", "onnx", "members", "nonmembers", "population")


class FederatedConfig(_Strict):
    """The federated job of `run` (audit/federated/): FedAvg over non-IID clients, DP per record
    (local DP-SGD) or per client (DP-FedAvg). `training.epochs` is the local epochs per round."""

    level: Literal["record", "client"] = Field("record", description="what DP protects: a record or a whole client")
    n_clients: int = Field(3, ge=_LIM["federated.n_clients"].low, le=_LIM["federated.n_clients"].high)
    partition: Literal["feature_ranges", "dirichlet"] = Field(
        "feature_ranges", description="non-IID split: quantile ranges of one feature (sites), or Dirichlet label skew"
    )
    partition_feature: int = Field(0, ge=0, le=100_000, description="feature column whose ranges define the sites")
    dirichlet_alpha: float = Field(
        0.5, ge=_FED["federated.dirichlet_alpha"][0], le=_FED["federated.dirichlet_alpha"][1]
    )
    rounds: int = Field(10, ge=_LIM["federated.rounds"].low, le=_LIM["federated.rounds"].high)
    client_sample_rate: float = Field(
        1.0,
        ge=_FED["federated.client_sample_rate"][0],
        le=1,
        description="client level: Poisson rate q of a client per round",
    )
    client_clip: float = Field(
        1.0,
        ge=_FED["federated.client_clip"][0],
        le=_FED["federated.client_clip"][1],
        description="client level: clipping norm C of a client's update",
    )
    server_lr: float = Field(
        1.0,
        ge=_FED["federated.server_lr"][0],
        le=_FED["federated.server_lr"][1],
        description="server step on the averaged update; larger diverges to NaN scores",
    )
    n_reference_federations: int = Field(
        4,
        ge=0,
        le=_LIM["federated.n_reference_federations"].high,
        description="LiRA offline references, each a federation trained on the pool split like the target (0: off)",
    )
    client_mia_runs: int = Field(
        0,
        ge=0,
        le=_LIM["federated.client_mia_runs"].high,
        description="client-level MIA: federations trained with each client's participation a coin flip (0: off)",
    )
    watch_client: int | None = Field(
        None, ge=0, description="the client whose update the honest-but-curious server attacks (default: the largest)"
    )

    @model_validator(mode="after")
    def _clients_exist(self) -> FederatedConfig:
        if self.watch_client is not None and self.watch_client >= self.n_clients:
            raise ValueError(f"watch_client must be < n_clients = {self.n_clients}")
        return self


TEXT_ATTACK_NAMES = ["lm_loss", "zlib_ratio", "min_k", "min_k_plus_plus", "reference_ratio"]


class TextConfig(_Strict):
    """The text job of `run` (audit/text/, preset `text`): a faker corpus with canaries, a small
    causal LM per ε, language-model membership attacks, secret exposure and extraction."""

    n_candidates: int = Field(400, ge=20, le=1_000_000, description="candidate records, each a member by a fair coin")
    n_pool: int = Field(300, ge=20, le=1_000_000, description="population records: tokenizer and reference model")
    n_test: int = Field(100, ge=10, le=1_000_000, description="held-out records: utility (perplexity)")
    repetitions: list[int] = Field(
        default_factory=lambda: [1, 4, 16, 64],
        min_length=1,
        max_length=16,
        description="how many times each canary group is inserted",
    )
    canaries_per_repetition: int = Field(2, ge=1, le=100)
    control_canaries: int = Field(4, ge=1, le=1000, description="canaries drawn like the others, never inserted")
    secret_digits: int = Field(4, ge=1, le=12, description="the secret space is 10^digits")
    exact_exposure_limit: int = Field(
        1_000_000,
        ge=10,
        le=100_000_000,
        description="enumerate the secret space up to this size; above it, Carlini et al.'s skew-normal estimate",
    )
    exposure_samples: int = Field(5000, ge=20, le=10_000_000, description="sampled secrets of the estimate")
    vocab_size: int = Field(800, ge=50, le=100_000)
    d_model: int = Field(64, ge=8, le=4096)
    n_layers: int = Field(2, ge=1, le=48)
    n_heads: int = Field(4, ge=1, le=64)
    max_length: int = Field(64, ge=16, le=4096, description="tokens per document (longer ones are cut)")
    epochs: int = Field(20, ge=1, le=10_000)
    batch_size: int = Field(32, ge=1, le=1_000_000)
    lr: float = Field(3e-3, gt=0, le=1)
    max_grad_norm: float = Field(1.0, gt=0, le=1e6)
    privacy_unit: Literal["person", "record"] = Field(
        "person",
        description="what the DP targets' ε is about: a person (all their documents, a canary's copies "
        "included; user-level DP-SGD) or one document (record level: a secret repeated k times gets about k·ε)",
    )
    attacks: list[str] = Field(default_factory=lambda: list(TEXT_ATTACK_NAMES), min_length=1)
    min_k_fraction: float = Field(0.2, gt=0, le=1)
    beams: int = Field(5, ge=1, le=64, description="beam width of the extraction's beam search")
    extraction_records: int = Field(100, ge=0, le=1_000_000, description="candidate records prompted for their fields")

    @field_validator("attacks")
    @classmethod
    def _known_text_attacks(cls, value: list[str]) -> list[str]:
        unknown = [name for name in value if name not in TEXT_ATTACK_NAMES]
        if unknown:
            raise ValueError(f"unknown text attack '{unknown[0]}'; available: {', '.join(TEXT_ATTACK_NAMES)}")
        if len(set(value)) != len(value):
            raise ValueError("text attack names must be distinct")
        return value

    @field_validator("repetitions")
    @classmethod
    def _positive_repetitions(cls, value: list[int]) -> list[int]:
        if any(not 1 <= r <= 10_000 for r in value) or len(set(value)) != len(value):
            raise ValueError("repetitions must be distinct integers in [1, 10000]")
        return value

    @model_validator(mode="after")
    def _heads_divide_width(self) -> TextConfig:
        if self.d_model % self.n_heads:
            raise ValueError(f"d_model ({self.d_model}) must be a multiple of n_heads ({self.n_heads})")
        return self


_LLM_MODES: list[Literal["full", "lora"]] = ["full", "lora"]
_LLM_DESIGNS: list[Literal["panda", "secret_sharer"]] = ["panda", "secret_sharer"]


class LLMConfig(_Strict):
    """The LLM job of `run` (audit/text/llm_runner.py, preset `llm`): a `transformers` GPT-2-style
    model pretrained on public records, DP fine-tuned (full and LoRA) on private ones, audited in
    one run with canaries of two designs (docs/language-models.md)."""

    n_candidates: int = Field(
        400, ge=20, le=1_000_000, description="candidate records: members (fair coins) are the private fine-tuning set"
    )
    n_pool: int = Field(300, ge=20, le=1_000_000, description="public records: tokenizer and pretraining")
    n_test: int = Field(100, ge=10, le=1_000_000, description="held-out records: utility (perplexity)")
    vocab_size: int = Field(800, ge=50, le=100_000)
    new_tokens: int = Field(64, ge=2, le=10_000, description="ids added after pretraining: Panda et al.'s secrets")
    d_model: int = Field(64, ge=8, le=4096)
    n_layers: int = Field(2, ge=1, le=48)
    n_heads: int = Field(4, ge=1, le=64)
    max_length: int = Field(48, ge=16, le=4096)
    pretrain_epochs: int = Field(4, ge=0, le=10_000)
    epochs: int = Field(4, ge=1, le=10_000, description="fine-tuning epochs")
    batch_size: int = Field(32, ge=1, le=1_000_000, description="expected persons (or documents) per step")
    lr: float = Field(3e-3, gt=0, le=1)
    lora_lr: float = Field(1e-2, gt=0, le=1)
    lora_rank: int = Field(8, ge=1, le=1024)
    lora_train_embeddings: bool = Field(
        False,
        description="LoRA: train the token embedding in full beside the adapters and the output head (the "
        "new tokens' input rows), as people do when they add tokens before LoRA",
    )
    max_grad_norm: float = Field(1.0, gt=0, le=1e6)
    modes: list[Literal["full", "lora"]] = Field(default_factory=lambda: list(_LLM_MODES), min_length=1, max_length=2)
    designs: list[Literal["panda", "secret_sharer"]] = Field(
        default_factory=lambda: list(_LLM_DESIGNS), min_length=1, max_length=2
    )
    canaries_per_design: int = Field(200, ge=4, le=1_000_000, description="m: each inserted by a fair coin")
    canary_repetitions: int = Field(4, ge=1, le=1000, description="copies of an inserted canary (one person's)")
    secret_length: int = Field(4, ge=1, le=64, description="tokens per secret")
    panda_secret_length: int | None = Field(
        None, ge=1, le=64, description="tokens per Panda et al. secret (None: secret_length)"
    )
    canary_loss: Literal["document", "secret"] = Field(
        "document",
        description="what a canary's training loss covers: the whole document, or its secret's tokens only "
        "(Panda et al.'s SFT-style canaries); real records always the whole document",
    )
    canary_score_reference: bool = Field(
        False,
        description="score each canary against the public pretrained model (its log-probability minus the pretrained one's)",
    )
    privacy_unit: Literal["person", "record"] = "person"
    synthetic_samples: int = Field(
        0,
        ge=0,
        le=1_000_000,
        description="texts sampled per target for the auxiliary-model audit of synthetic text (0: off)",
    )
    synthetic_temperature: float = Field(1.0, gt=0, le=10)
    synthetic_epochs: int = Field(4, ge=1, le=10_000)

    @field_validator("modes", "designs")
    @classmethod
    def _distinct(cls, value: list[str]) -> list[str]:
        if len(set(value)) != len(value):
            raise ValueError("must be distinct")
        return value

    @model_validator(mode="after")
    def _heads_divide_width(self) -> LLMConfig:
        if self.d_model % self.n_heads:
            raise ValueError(f"d_model ({self.d_model}) must be a multiple of n_heads ({self.n_heads})")
        return self
