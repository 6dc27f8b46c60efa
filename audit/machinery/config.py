"""Audit configuration: pydantic models, the built-in presets and how they are merged.

Resolution order (later wins): preset → YAML file (`--config`) → CLI overrides. The resolved
config is what gets written to `config.yaml` and hashed into the MLflow parent run.
This module is over 600 lines since wave 4's formatting pass (ruff format puts long calls one argument a line): the pydantic config models and the preset merge; next split: one module per config section
(issue #37).
"""

from __future__ import annotations

import copy
import hashlib
import json
import math
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal, Optional

import yaml
from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    create_model,
    field_validator,
    model_validator,
)

from audit.errors import AuditInputError
from audit.machinery.input_files import SEED_LIMIT, clip, load_yaml_file, max_threads, shorten
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


class DataConfig(_Strict):
    source: Literal["synthetic", "file", "breast_cancer", "digits"] = "synthetic"
    path: str | None = Field(None, description="CSV or Parquet file when source = file")
    label: str | None = Field(None, description="label column name when source = file")
    n_rows: int = Field(6000, ge=100, le=10_000_000, description="rows generated when source = synthetic")

    @model_validator(mode="after")
    def _file_needs_path_and_label(self) -> DataConfig:
        if self.source == "file" and (not self.path or not self.label):
            raise ValueError("source 'file' needs both 'path' and 'label'")
        return self


class SplitConfig(_Strict):
    """Sizes of the three disjoint parts. Fractions of the dataset, each in (0, 1)."""

    test_fraction: float = Field(0.2, gt=0, lt=1, description="utility test set, never a candidate")
    candidate_fraction: float = Field(
        0.4, gt=0, lt=1, description="audit candidates; each is a member by a fair coin flip"
    )

    @model_validator(mode="after")
    def _leave_a_pool(self) -> SplitConfig:
        if self.test_fraction + self.candidate_fraction >= 1:
            raise ValueError("test_fraction + candidate_fraction must be < 1 (the rest is the shadow pool)")
        return self


class TrainingConfig(_Strict):
    architecture: Literal["mlp", "cnn"] = Field(
        "mlp", description="mlp, or cnn: a small CNN on square single-channel images given as flat rows (digits)"
    )
    hidden_sizes: list[int] = Field(default_factory=lambda: [256, 256], min_length=1, max_length=16)
    epochs: int = Field(30, ge=1, le=10_000)
    batch_size: int = Field(
        64, ge=1, le=1_000_000, description="expected batch size; DP-SGD samples each row with q = batch_size / n"
    )
    lr: float = Field(0.1, gt=0, le=10, description="learning rate; above 10 SGD diverges to NaN scores")
    momentum: float = Field(0.9, ge=0, lt=1)
    max_grad_norm: float = Field(1.0, gt=0, le=1e6, description="per-sample clipping norm C")

    @field_validator("hidden_sizes")
    @classmethod
    def _positive_widths(cls, value: list[int]) -> list[int]:
        if any(not 1 <= width <= 65_536 for width in value):
            raise ValueError("every hidden size must be in [1, 65536]")
        return value


class PrivacyConfig(_Strict):
    epsilons: list[EpsilonValue] = Field(
        default_factory=lambda: [0.5, 1.0, 2.0, 4.0, 8.0, math.inf],
        min_length=1,
        max_length=64,
        description="target ε per model; inf = ordinary (non-private) training",
    )
    delta: float = Field(1e-5, description="δ of the (ε, δ) guarantee, in (0, 1)")
    accountant: Literal["prv", "rdp", "gdp"] = "prv"
    secure_mode: bool = Field(
        False,
        description="Opacus secure_mode (cryptographically secure noise via torchcsprng): for a release "
        "audit; slower and not reproducible from the seed",
    )
    whitebox_one_run: bool = Field(
        True,
        description="train each DP target once more with white-box gradient canaries (one-run audit, "
        "Steinke et al. 2023): its claim becomes testable beyond what the membership attacks reach",
    )
    conformance: bool = Field(
        True,
        description="run the conformance checks (noise std, clipping, Poisson sampling, steps and q vs the "
        "accountant) on each DP target's own Opacus setup and on its accountant's history",
    )
    one_run_canaries: int | None = Field(
        None,
        ge=100,
        le=1_000_000,
        description="canaries m of the white-box one-run audit (default: from the model size)",
    )

    @field_validator("epsilons")
    @classmethod
    def _positive_epsilons(cls, value: list[float]) -> list[float]:
        for eps in value:
            if math.isnan(eps) or eps <= 0:
                raise ValueError(f"every ε must be > 0 (or inf), got {eps}")
            if eps < EPSILON_MIN:
                raise ValueError(
                    f"every ε must be ≥ {EPSILON_MIN:g}, got {eps:g} (smaller budgets need so much "
                    "noise that Opacus finds no noise multiplier)"
                )
            if EPSILON_MAX < eps < math.inf:
                raise ValueError(
                    f"every finite ε must be ≤ {EPSILON_MAX:g}, got {eps:g} (such an ε promises "
                    "nothing; write inf for non-private training)"
                )
        if len(set(value)) != len(value):
            raise ValueError("ε values must be distinct")
        return value

    @field_validator("delta")
    @classmethod
    def _delta_in_open_unit_interval(cls, value: float) -> float:
        if not DELTA_MIN <= value < 1:
            raise ValueError(
                f"δ must be in [{DELTA_MIN:g}, 1), got {value:g} (smaller δ is beyond the "
                "accountants' numerical precision)"
            )
        return value


DEFAULT_ATTACKS = ["loss", "shadow", "lira", "lira_offline", "rmia"]


class _AttackConfigBase(_Strict):
    """The `attacks:` section's own fields; every attack knob is added from its `Knob` (attack_config_model)."""

    names: list[str] = Field(default_factory=lambda: list(DEFAULT_ATTACKS), min_length=1, max_length=32)
    confidence: float = Field(0.95, gt=0.5, lt=1, description="confidence of every ε lower bound and CI")

    if TYPE_CHECKING:  # the knobs are fields added per registered attack

        def __getattr__(self, name: str) -> Any: ...

    @field_validator("names")
    @classmethod
    def _known_distinct_attacks(cls, value: list[str]) -> list[str]:
        from attacks import ATTACKS

        unknown = [name for name in value if name not in ATTACKS]
        if unknown:
            raise ValueError(f"unknown attack '{unknown[0]}'; available: {', '.join(ATTACKS)}")
        if len(set(value)) != len(value):
            raise ValueError("attack names must be distinct")
        return value


def _knob_field(knob) -> tuple[Any, Any]:
    """A pydantic (annotation, FieldInfo) for one attack `Knob` (attacks/registry.py)."""
    if knob.choices:
        annotation: Any = Literal[knob.choices]  # type: ignore[valid-type]
        field = Field(knob.default, description=knob.why)
    else:
        bounds: dict[str, Any] = {"gt" if knob.low_open else "ge": knob.low} if knob.low is not None else {}
        if knob.high is not None:
            bounds["le"] = knob.high
        annotation = knob.kind
        field = Field(knob.default, description=knob.why, **bounds)
    # a runtime-built annotation: Optional[] of a type object (the X | None form needs a type at parse time)
    return (Optional[annotation] if knob.optional else annotation), field  # noqa: UP045


_attack_config_built: tuple[int, type[_AttackConfigBase]] | None = None


def attack_config_model() -> type[_AttackConfigBase]:
    """The `attacks:` section as a pydantic model: its own fields plus every registered attack's knobs.
    Rebuilt (and AuditConfig with it) when an attack is registered, so a plug-in's knobs validate too."""
    global _attack_config_built, AttackConfig
    from attacks.registry import all_knobs, registry_version

    version = registry_version()
    if _attack_config_built is not None and _attack_config_built[0] == version:
        return _attack_config_built[1]
    model = create_model(
        "AttackConfig",
        __base__=_AttackConfigBase,  # type: ignore[call-overload]
        **{knob.name: _knob_field(knob) for knob in all_knobs()},
    )
    model.__doc__ = "The `attacks:` section: names, confidence and every registered attack's knobs."
    _attack_config_built = (version, model)
    AttackConfig = model
    if "AuditConfig" in globals():  # not on the first build, made before AuditConfig exists
        field = AuditConfig.model_fields["attacks"]
        field.annotation, field.default_factory = model, model
        AuditConfig.model_rebuild(force=True)
    return model


if TYPE_CHECKING:  # for mypy the section is its base: the knobs are read through its __getattr__
    AttackConfig = _AttackConfigBase
else:
    AttackConfig = attack_config_model()


class SyntheticConfig(_Strict):
    """The synthetic-data sweep of `run`: generators trained on the target's training rows (the
    coin-flip members), checked against the non-member candidates as holdout."""

    generators: list[Literal["noisy_copy", "gaussian_copula", "dp_vae"]] = Field(
        default_factory=lambda: ["noisy_copy", "gaussian_copula", "dp_vae"], min_length=1
    )
    epsilons: list[float] | None = Field(
        None, max_length=64, description="ε sweep of dp_vae; default: the finite privacy.epsilons"
    )
    dp_vae_epochs: int = Field(10, ge=1, le=10_000)

    @field_validator("epsilons")
    @classmethod
    def _finite_positive(cls, value: list[float] | None) -> list[float] | None:
        if value is not None and any(not (EPSILON_MIN <= e <= EPSILON_MAX) for e in value):
            raise ValueError(f"every dp_vae ε must be finite and in [{EPSILON_MIN:g}, {EPSILON_MAX:g}]")
        return value


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
    max_grad_norm: float = Field(1.0, gt=0, le=1e6)
    modes: list[Literal["full", "lora"]] = Field(default_factory=lambda: ["full", "lora"], min_length=1, max_length=2)
    designs: list[Literal["panda", "secret_sharer"]] = Field(
        default_factory=lambda: ["panda", "secret_sharer"], min_length=1, max_length=2
    )
    canaries_per_design: int = Field(200, ge=4, le=1_000_000, description="m: each inserted by a fair coin")
    canary_repetitions: int = Field(4, ge=1, le=1000, description="copies of an inserted canary (one person's)")
    secret_length: int = Field(4, ge=1, le=64, description="tokens per secret")
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


class AuditConfig(_Strict):
    name: str = Field("default", pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
    seed: int = Field(0, ge=0, lt=SEED_LIMIT, description="< 2³² (numpy and torch seeds)")
    device: Literal["auto", "cpu", "cuda"] = "auto"
    cpu_threads: int = Field(
        1,
        ge=1,
        description="torch intra-op threads on the CPU. 1 by default: the models are small, and on a "
        "shared 2-core machine a second spinning OpenMP thread made training up to 10x slower; raise it "
        "on a many-core machine (numbers may then differ in the last bits from a 1-thread run)",
    )
    data: DataConfig = Field(default_factory=DataConfig)
    split: SplitConfig = Field(default_factory=SplitConfig)
    training: TrainingConfig = Field(default_factory=TrainingConfig)
    privacy: PrivacyConfig = Field(default_factory=PrivacyConfig)
    attacks: AttackConfig = Field(default_factory=AttackConfig)
    synthetic: SyntheticConfig | None = Field(None, description="add the synthetic-data sweep to the run")
    model: ModelSourceConfig | None = Field(None, description="audit-model: the user's model, trainer and data files")
    federated: FederatedConfig | None = Field(None, description="audit federated targets instead of the central sweep")
    text: TextConfig | None = Field(None, description="audit language models on a generated text corpus (preset text)")
    llm: LLMConfig | None = Field(
        None, description="DP fine-tuning of a transformers LM, audited with canaries (preset llm)"
    )

    @model_validator(mode="after")
    def _federated_alone(self) -> AuditConfig:
        if self.federated is not None and self.synthetic is not None:
            raise ValueError("a federated run has no synthetic sweep; drop one of 'federated' and 'synthetic'")
        if self.text is not None and (self.federated is not None or self.synthetic is not None):
            raise ValueError("a text run is a job of its own; drop 'federated' / 'synthetic' or 'text'")
        if self.llm is not None and (self.federated is not None or self.synthetic is not None or self.text is not None):
            raise ValueError("an llm run is a job of its own; drop 'federated' / 'synthetic' / 'text' or 'llm'")
        return self

    @field_validator("cpu_threads")
    @classmethod
    def _threads_within_machine(cls, value: int) -> int:
        if value > max_threads():
            raise ValueError(f"must be ≤ {max_threads()} (4 per CPU core of this machine), got {value}")
        return value

    def to_plain(self) -> dict[str, Any]:
        """JSON/YAML-safe dict: inf ε written as the string 'inf' (JSON has no infinity)."""
        plain = self.model_dump(mode="python")
        plain["privacy"]["epsilons"] = [_eps_to_plain(e) for e in self.privacy.epsilons]
        return plain

    def config_hash(self) -> str:
        canonical = json.dumps(self.to_plain(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(canonical.encode()).hexdigest()[:12]


def _eps_to_plain(eps: float) -> float | str:
    return "inf" if math.isinf(eps) else eps


# The presets are plain data so `--config` files can be written as diffs against them.
PRESETS: dict[str, dict[str, Any]] = {
    # End to end in well under 2 minutes on 2 CPU cores: used by CI.
    "smoke": {
        "name": "smoke",
        "data": {"n_rows": 1500},
        "training": {"hidden_sizes": [64, 64], "epochs": 8},
        "privacy": {"epsilons": [1.0, 8.0, "inf"]},
        "attacks": {"n_shadow_models": 4, "n_reference_models": 8, "rmia_population": 300},
    },
    # The main job: a clear leakage gradient from ε = ∞ down to ε = 0.5.
    "default": {"name": "default"},
    # Paper-grade: more data and candidates, hence tighter bounds.
    "full": {
        "name": "full",
        "data": {"n_rows": 20000},
        "training": {"epochs": 60},
        "privacy": {"epsilons": [0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0, "inf"]},
        "attacks": {"n_shadow_models": 16, "n_reference_models": 256, "rmia_population": 5000},
    },
    # Document 1: three hospitals (sites by ranges of one feature), local DP-SGD, a few rounds of
    # FedAvg, membership inference per hospital. ≤ 10 min on 2 CPU cores.
    "hospitals": {
        "name": "hospitals",
        "data": {"n_rows": 3000},
        "split": {"test_fraction": 0.2, "candidate_fraction": 0.5},
        "training": {"hidden_sizes": [128, 128], "epochs": 4, "batch_size": 32, "lr": 0.1},
        "privacy": {"epsilons": [1.0, 4.0, 16.0, "inf"]},
        "attacks": {"names": ["loss"]},
        "federated": {
            "level": "record",
            "n_clients": 3,
            "partition": "feature_ranges",
            "rounds": 6,
            "n_reference_federations": 4,
        },
    },
    # Document 2: client-level DP-FedAvg, 20 clients (Dirichlet label skew), half sampled per round.
    "clients": {
        "name": "clients",
        "data": {"n_rows": 2400},
        "split": {"test_fraction": 0.2, "candidate_fraction": 0.5},
        "training": {"hidden_sizes": [64], "epochs": 2, "batch_size": 16, "lr": 0.1},
        "privacy": {"epsilons": [1.0, 8.0, "inf"]},
        "attacks": {"names": ["loss"]},
        "federated": {
            "level": "client",
            "n_clients": 20,
            "partition": "dirichlet",
            "dirichlet_alpha": 0.5,
            "rounds": 20,
            "client_sample_rate": 0.5,
            "client_clip": 1.0,
            "n_reference_federations": 0,
            "client_mia_runs": 6,
        },
    },
}


def _bundled_presets() -> dict[str, dict[str, Any]]:
    """Presets shipped as YAML files in audit/presets/ (one file per preset; its name is the file's stem)."""
    folder = Path(__file__).resolve().parents[1] / "presets"
    return {path.stem: yaml.safe_load(path.read_text()) for path in sorted(folder.glob("*.yaml"))}


PRESETS.update(_bundled_presets())


def _deep_merge(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    merged = copy.deepcopy(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = _deep_merge(merged[key], value)
        else:
            merged[key] = value
    return merged


def _format_validation_error(error: ValidationError, source: str) -> AuditInputError:
    # include_input=False: the input can be an alias bomb whose repr is gigabytes; quote it via shorten().
    errors = error.errors(include_url=False)
    first = errors[0]
    field = clip(".".join(str(part) for part in first["loc"]) or "(top level)", 80)
    message = clip(first["msg"].removeprefix("Value error, "))
    if first["type"] == "extra_forbidden":
        message = "unknown field (check the spelling against the README's config reference)"
    elif "input" in first and not isinstance(first["input"], dict):
        message = f"{message} (got {shorten(first['input'], 80)})"
    extra = f" (and {len(errors) - 1} more problem(s))" if len(errors) > 1 else ""
    return AuditInputError(f"{source}: field '{field}'", message + extra)


def read_config_file(path: str | Path) -> dict[str, Any]:
    """Parse a YAML config with `safe_load` (never constructs arbitrary Python objects)."""
    path = Path(path)
    content = load_yaml_file(path, f"config file '{path}'")  # duplicate keys and alias bombs refused
    if content is None:
        return {}
    if not isinstance(content, dict):
        raise AuditInputError(f"config file '{path}'", "must be a YAML mapping of fields")
    return content


def resolve_config(
    preset: str = "default",
    config_file: str | Path | None = None,
    overrides: dict[str, Any] | None = None,
) -> AuditConfig:
    """Preset → file → overrides, validated. Raises AuditInputError naming the bad field."""
    if preset not in PRESETS:
        raise AuditInputError("--preset", f"unknown preset '{preset}'; expected one of {', '.join(PRESETS)}")
    raw = PRESETS[preset]
    source = f"preset '{preset}'"
    if config_file is not None:
        from_file = read_config_file(config_file)
        data_path = (from_file.get("data") or {}).get("path") if isinstance(from_file.get("data"), dict) else None
        if isinstance(data_path, str) and not Path(data_path).is_absolute():
            # Paths in a config file are relative to that file, not to wherever the audit is started.
            from_file["data"]["path"] = str(Path(config_file).parent / data_path)
        model_section = from_file.get("model")
        if isinstance(model_section, dict):
            for key in MODEL_PATH_FIELDS:
                value = model_section.get(key)
                if isinstance(value, str) and value and not Path(value).is_absolute():
                    model_section[key] = str(Path(config_file).parent / value)
        raw = _deep_merge(raw, from_file)
        source = f"config file '{config_file}'"
    if overrides:
        raw = _deep_merge(raw, overrides)
    attack_config_model()  # a plug-in attack registered since the last call adds its knobs
    try:
        return AuditConfig.model_validate(raw)
    except ValidationError as exc:
        raise _format_validation_error(exc, source) from None


def parse_epsilon_list(text: str) -> list[float]:
    """'1,8,inf' → [1.0, 8.0, inf]; raises AuditInputError naming --epsilons."""
    values = []
    for item in text.split(","):
        item = item.strip().lower()
        if not item:
            continue
        try:
            values.append(math.inf if item in ("inf", "infinity", "∞") else float(item))
        except ValueError:
            raise AuditInputError("--epsilons", f"'{item}' is not a number or 'inf'") from None
    if not values:
        raise AuditInputError("--epsilons", "expected a comma-separated list such as 1,8,inf")
    return values


def config_to_yaml(config: AuditConfig) -> str:
    return yaml.safe_dump(config.to_plain(), sort_keys=False)
