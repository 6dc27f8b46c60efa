"""Audit configuration: pydantic models, the built-in presets and how they are merged.

Resolution order (later wins): preset → YAML file (`--config`) → CLI overrides. The resolved
config is what gets written to `config.yaml` and hashed into the MLflow parent run.
The building blocks and the job sections (model:, federated:, text:, llm:) are in
audit/machinery/config_sections.py; this module assembles `AuditConfig`, the presets and the merge.
"""

from __future__ import annotations

import copy
import hashlib
import json
import math
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Optional

import yaml
from pydantic import (
    Field,
    ValidationError,
    create_model,
    field_validator,
    model_validator,
)

from audit.errors import AuditInputError
from audit.machinery.config_sections import (  # noqa: F401 - re-exported: callers import them from here
    _INF_WORDS,
    ACCOUNTANTS,
    DELTA_MIN,
    EPSILON_MAX,
    EPSILON_MIN,
    MODEL_PATH_FIELDS,
    TEXT_ATTACK_NAMES,
    EpsilonValue,
    FederatedConfig,
    LLMConfig,
    ModelSourceConfig,
    TextConfig,
    _inf_word_to_float,
    _Strict,
)
from audit.machinery.input_files import SEED_LIMIT, clip, load_yaml_file, max_threads, shorten

if TYPE_CHECKING:
    from targets.datasets import TabularData
    from targets.splits import AuditSplits


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
        annotation: Any = Literal[knob.choices]
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


SyntheticGenerator = Literal["noisy_copy", "gaussian_copula", "dp_vae"]
SYNTHETIC_GENERATORS: tuple[SyntheticGenerator, ...] = ("noisy_copy", "gaussian_copula", "dp_vae")


class SyntheticConfig(_Strict):
    """The synthetic-data sweep of `run`: generators trained on the target's training rows (the
    coin-flip members), checked against the non-member candidates as holdout."""

    generators: list[SyntheticGenerator] = Field(default_factory=lambda: list(SYNTHETIC_GENERATORS), min_length=1)
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

    def load_data(self) -> TabularData:
        """The table `data:` names, drawn or read with this config's rows, seed, file and label column."""
        from targets.datasets import load_dataset

        d = self.data
        return load_dataset(d.source, n_rows=d.n_rows, seed=self.seed, path=d.path, label=d.label)

    def audit_splits(self, n_rows: int, seed: int | None = None) -> AuditSplits:
        """The train / candidate / pool / test split of `n_rows` rows at `split:`'s fractions (seed: the config's)."""
        from targets.splits import make_audit_splits

        return make_audit_splits(
            n_rows,
            test_fraction=self.split.test_fraction,
            candidate_fraction=self.split.candidate_fraction,
            seed=self.seed if seed is None else seed,
        )

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
