"""Audit the user's own trained PyTorch model: membership inference on their member/non-member files.

Inputs
------
* the config (`training.hidden_sizes` gives the architecture, an `MLP`; the rest of `training`
  says how the model was trained, so that reference and shadow models can be trained the same
  way; `privacy.epsilons` holds exactly ONE value, the model's claimed ε, `inf` = non-private);
* the weights: a `state_dict` saved with `torch.save(model.state_dict(), path)` and loaded with
  `torch.load(..., weights_only=True)` — a pickled model object is refused, never unpickled, since
  unpickling can run arbitrary code — or a `.safetensors` file;
* the members file (the model's whole training set), the non-members file (records from the same
  distribution the model never saw) and optionally a population file (more such records, for the
  reference/shadow models of `lira`, `lira_offline`, `rmia`, `shadow`). CSV or Parquet, the same
  columns in every file: the label column and the feature columns exactly as the model consumes
  them. NO transformation is applied (no standardisation, no one-hot encoding, no column
  reordering beyond matching names to the members file's order): the numbers in the files are
  fed to the model as they are. Labels are the model's output class indices 0..K-1.

Membership here is given by the files, not drawn by a fair coin per record, so the one-run bound
of Steinke et al. (2023) is not claimed (reported as None); the Clopper-Pearson bound (threshold
chosen on one random half of the candidates, bound computed on the other) is what may decide a
violation: the best sound lower bound strictly above the claimed ε.

The result is a results dict (schema_version 1) with one target, the shape of
`audit.model_audits.score_audit.audit_scores`'s, so `write_outputs`, the report and the policy gate apply.
"""
from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch

from attacks import AttackContext, AttackOptions, TargetTraining, get_attack
from audit.statistics.accountants import DPSGDEvent, epsilons_for_event
from audit.statistics.attack_evaluation import best_sound_lower_bound, evaluate_attack
from audit.machinery.config import AuditConfig
from audit.machinery.environment import describe_environment
from audit.errors import AuditInputError
from targets.table_checks import MAX_CLASSES
from audit.machinery.attack_setup import attack_options
from targets.datasets import read_table
from targets.devices import resolve_device
from targets.models import MLP
from targets.training import TrainingSpec, predict_logits

SCHEMA_VERSION = 1
# Attacks that need population data (reference or shadow models trained on it / drawn from it).
POPULATION_ATTACKS = ("shadow", "lira", "lira_offline", "rmia")
REFERENCE_ATTACKS = ("lira", "lira_offline", "rmia")
# Common wrappers of a state dict: Opacus's GradSampleModule and DataParallel/DDP prefixes.
_KEY_PREFIXES = ("_module.", "module.")
_CHECKPOINT_KEYS = ("state_dict", "model_state_dict", "model")
PLD_PRV_TOLERANCE = 0.05


# --------------------------------------------------------------------------------------------
# data files


@dataclass(frozen=True)
class _Table:
    path: Path
    role: str
    features: np.ndarray  # (n, d) float32, as given
    labels: np.ndarray  # (n,) int64 class indices
    frame: pd.DataFrame  # the feature columns + label, in the members file's column order


def _where(role: str, path: Path) -> str:
    return f"{role} '{path}'"


def _read_table(path: Path, role: str, label: str, columns: list[str] | None) -> _Table:
    frame = read_table(path, role=role)
    where = _where(role, path)
    frame.columns = [str(c) for c in frame.columns]
    if len(set(frame.columns)) != len(frame.columns):
        duplicate = next(c for c in frame.columns if list(frame.columns).count(c) > 1)
        raise AuditInputError(f"{where}: column '{duplicate}'", "appears more than once")
    if label not in frame.columns:
        shown = ", ".join(frame.columns[:10])
        raise AuditInputError(where, f"has no label column '{label}' (columns: {shown})")
    if columns is not None:  # every file must hold the members file's columns, no more, no fewer
        missing = [c for c in columns if c not in frame.columns]
        if missing:
            raise AuditInputError(
                f"{where}: column '{missing[0]}'",
                f"is missing: every file must hold the members file's columns ({len(missing)} missing)",
            )
        extra = [c for c in frame.columns if c not in columns]
        if extra:
            raise AuditInputError(
                f"{where}: column '{extra[0]}'",
                "is not in the members file: every file must hold the same columns (no transformation is applied, "
                "so the model sees exactly these columns)",
            )
        frame = frame[columns]
    feature_columns = [c for c in frame.columns if c != label]
    if not feature_columns:
        raise AuditInputError(where, f"has no feature columns besides the label '{label}'")
    for column in feature_columns:
        values = frame[column]
        if values.isna().any():
            rows = np.flatnonzero(values.isna().to_numpy())
            raise AuditInputError(
                f"{where}: column '{column}'",
                f"contains missing values (NaN) in {rows.size} row(s), first at row {int(rows[0]) + 2}; "
                "no imputation is applied: give the values the model was trained on",
            )
        if not pd.api.types.is_numeric_dtype(values):
            raise AuditInputError(
                f"{where}: column '{column}'",
                f"must be numeric, already preprocessed as the model expects (no encoding is applied), "
                f"got values such as {values.iloc[0]!r}",
            )
        numeric = values.to_numpy(dtype=np.float64)
        if not np.isfinite(numeric).all():
            raise AuditInputError(f"{where}: column '{column}'", "contains infinite values")
    labels = _class_indices(frame[label], f"{where}: label column '{label}'")
    features = frame[feature_columns].to_numpy(dtype=np.float32)
    return _Table(path=path, role=role, features=features, labels=labels, frame=frame)


def _class_indices(values: pd.Series, where: str) -> np.ndarray:
    """Labels as the model's output class indices: integers ≥ 0, used as they are (no re-encoding)."""
    if values.isna().any():
        raise AuditInputError(where, f"has {int(values.isna().sum())} missing label(s)")
    if pd.api.types.is_bool_dtype(values) or not pd.api.types.is_numeric_dtype(values):
        raise AuditInputError(where, f"must hold integer class indices of the model's output, got values such as {values.iloc[0]!r}")
    numeric = values.to_numpy(dtype=np.float64)
    if not np.all(np.isfinite(numeric)) or not np.all(numeric == np.round(numeric)):
        raise AuditInputError(where, "must hold integer class indices (found fractional or infinite values)")
    if numeric.min() < 0:
        raise AuditInputError(where, f"must hold class indices 0..K-1 of the model's output, found {numeric.min():g}")
    if numeric.max() >= MAX_CLASSES:  # checked before a K-class head is allocated
        raise AuditInputError(where, f"must hold class indices below {MAX_CLASSES}, found {numeric.max():g}")
    return numeric.astype(np.int64)


def _row_hashes(frame: pd.DataFrame) -> np.ndarray:
    return pd.util.hash_pandas_object(frame, index=False).to_numpy()


def _file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


# --------------------------------------------------------------------------------------------
# weights


def _load_state_dict(path: Path) -> tuple[dict[str, torch.Tensor], str, list[str]]:
    """(state dict, format, notes). Never unpickles anything but tensors and plain containers."""
    where = f"weights file '{path}'"
    if not path.is_file():
        raise AuditInputError(where, "does not exist or is not a file")
    notes: list[str] = []
    if path.suffix.lower() == ".safetensors":
        try:
            from safetensors import SafetensorError
            from safetensors.torch import load_file
        except ImportError:
            raise AuditInputError(where, "is a .safetensors file but the 'safetensors' package is not installed") from None
        try:
            state: Any = load_file(str(path), device="cpu")
        except (SafetensorError, OSError, ValueError) as exc:
            raise AuditInputError(where, f"could not be read as safetensors ({exc})") from None
        file_format = "safetensors"
    else:
        try:
            state = torch.load(path, map_location="cpu", weights_only=True)
        except Exception as exc:  # UnpicklingError, RuntimeError (not a torch file), EOFError, ...
            text = str(exc)
            found = re.search(r"Unsupported global: GLOBAL ([\w.]+)", text)
            if found:
                reason = f"it holds a pickled {found.group(1)} object"
            else:  # torch's own text suggests weights_only=False, which this tool never does
                detail = re.search(r"WeightsUnpickler error:\s*(.+)", text)
                reason = "it is not a PyTorch file of tensors" + (
                    f" ({detail.group(1).strip()[:120]})" if detail else f" ({type(exc).__name__})"
                )
            raise AuditInputError(
                where,
                f"could not be loaded as a state_dict with torch.load(weights_only=True): {reason}. Save the "
                "weights with torch.save(model.state_dict(), path) (or safetensors); a pickled model object is "
                "refused because unpickling it could run arbitrary code",
            ) from None
        file_format = "torch state_dict (weights_only)"
    if isinstance(state, Mapping):
        for key in _CHECKPOINT_KEYS:  # a training checkpoint {'state_dict': {...}, 'epoch': ...}
            inner = state.get(key)
            if isinstance(inner, Mapping) and inner and all(isinstance(v, torch.Tensor) for v in inner.values()):
                notes.append(f"weights taken from the checkpoint entry '{key}' of {path.name}")
                state = inner
                break
    if not isinstance(state, Mapping) or not state:
        raise AuditInputError(
            where, f"is not a state dict (a mapping of parameter names to tensors); found {type(state).__name__}"
        )
    for key, value in state.items():
        if not isinstance(key, str) or not isinstance(value, torch.Tensor):
            raise AuditInputError(
                where,
                f"is not a state dict: entry {key!r} holds {type(value).__name__}, expected parameter names → tensors",
            )
    state = dict(state)
    for prefix in _KEY_PREFIXES:
        if all(k.startswith(prefix) for k in state):
            state = {k[len(prefix):]: v for k, v in state.items()}
            notes.append(f"the prefix '{prefix}' of every key in {path.name} was removed (a wrapped module's state dict)")
            break
    return state, file_format, notes


def _shape(shape) -> str:
    return "(" + ", ".join(str(int(s)) for s in shape) + ")"


def _guess_hidden_sizes(state: Mapping[str, torch.Tensor]) -> list[int] | None:
    """Hidden sizes of an `MLP`-shaped state dict (keys 0.weight, 2.weight, ...), None if not one."""
    layers = sorted(
        (int(m.group(1)), v) for k, v in state.items() if (m := re.fullmatch(r"(\d+)\.weight", k)) and v.dim() == 2
    )
    if not layers or [i for i, _ in layers] != list(range(0, 2 * len(layers), 2)):
        return None
    for (_, a), (_, b) in zip(layers, layers[1:]):
        if b.shape[1] != a.shape[0]:
            return None
    return [int(w.shape[0]) for _, w in layers[:-1]]


def _build_model(
    state: dict[str, torch.Tensor], path: Path, in_features: int, hidden_sizes: list[int], n_classes: int
) -> MLP:
    where = f"weights file '{path}'"
    model = MLP(in_features, hidden_sizes, n_classes)
    expected = model.state_dict()
    guess = _guess_hidden_sizes(state)
    hint = ""
    if guess is not None and guess != list(hidden_sizes):
        hint = f"; the file looks like hidden_sizes {guess}: set training.hidden_sizes to match"
    head = f"expected hidden_sizes {list(hidden_sizes)}"
    context = f"the MLP for {in_features} feature column(s) and {n_classes} class(es)"
    for key, tensor in expected.items():
        if key not in state:
            raise AuditInputError(where, f"{head}: layer {key} is missing in the file{hint}")
        found = state[key]
        if tuple(found.shape) != tuple(tensor.shape):
            raise AuditInputError(
                where,
                f"{head}: layer {key} has shape {_shape(found.shape)} in the file, {context} needs "
                f"{_shape(tensor.shape)}{hint}",
            )
        if not found.is_floating_point():
            raise AuditInputError(where, f"layer {key} holds {found.dtype} values, expected floating point weights")
        if not torch.isfinite(found).all():
            raise AuditInputError(where, f"layer {key} holds NaN or infinite weights")
    unexpected = [k for k in state if k not in expected]
    if unexpected:
        raise AuditInputError(where, f"{head}: the file holds layer {unexpected[0]} that the MLP does not have{hint}")
    model.load_state_dict({k: v.to(torch.float32) for k, v in state.items()})
    return model.eval()


@dataclass(frozen=True)
class _UserModel:
    """The user's model as attacks see it: logits for features."""

    model: MLP

    def logits(self, features: np.ndarray) -> np.ndarray:
        return predict_logits(self.model, np.ascontiguousarray(features, dtype=np.float32))


# --------------------------------------------------------------------------------------------
# the audit


def _claimed_epsilon(config: AuditConfig) -> float:
    epsilons = config.privacy.epsilons
    if len(epsilons) != 1:
        shown = ", ".join("inf" if math.isinf(e) else f"{e:g}" for e in epsilons)
        raise AuditInputError(
            "privacy.epsilons",
            f"must hold exactly one value, the model's claimed ε (inf = non-private), got [{shown}]",
        )
    return float(epsilons[0])


def _attack_names(config: AuditConfig, attack_names: list[str] | None, has_population: bool) -> tuple[list[str], list[str]]:
    """(attacks to run, notes). `loss` always; population attacks only with a population file."""
    explicit = attack_names is not None
    names = list(attack_names) if explicit else list(config.attacks.names)
    for name in names:
        get_attack(name)  # unknown name → AuditInputError naming attacks.names
    names = ["loss"] + [n for n in dict.fromkeys(names) if n != "loss"]
    needing = [n for n in names if n in POPULATION_ATTACKS]
    notes = []
    if needing and not has_population:
        if explicit:
            raise AuditInputError(
                "--population", f"attack '{needing[0]}' trains reference/shadow models on population data: give a population file"
            )
        notes.append(
            f"attacks {', '.join(needing)} skipped: they need population data (--population); only the loss attack ran"
        )
        names = [n for n in names if n not in POPULATION_ATTACKS]
    return names, notes


def _check_population(names: list[str], population: _Table, n_members: int, options: AttackOptions) -> None:
    where = _where("population file", population.path)
    n_pool = len(population.labels)
    if any(n in REFERENCE_ATTACKS for n in names) and options.rmia_population > n_pool:
        raise AuditInputError(
            where,
            f"has {n_pool} rows but the reference-model attacks draw attacks.rmia_population = "
            f"{options.rmia_population} population samples from it: lower attacks.rmia_population or give more rows",
        )
    if "shadow" in names:
        needed = n_members + max(20, n_members // 10)
        if n_pool < needed:
            raise AuditInputError(
                where,
                f"has {n_pool} rows; each shadow model trains on as many rows as the target ({n_members} members) "
                f"and keeps some out, so the shadow attack needs ≥ {needed}: give more rows or drop 'shadow'",
            )


def _dpsgd_parameters(config: AuditConfig, n_members: int, claimed: float) -> tuple[float, float, int]:
    """(σ, q, T) as Opacus's make_private_with_epsilon would pick them for this training config."""
    n_batches = math.ceil(n_members / config.training.batch_size)
    sample_rate = 1.0 / n_batches
    steps = config.training.epochs * n_batches
    if math.isinf(claimed):
        return 0.0, sample_rate, steps
    import warnings

    from opacus.accountants.utils import get_noise_multiplier

    try:
        with warnings.catch_warnings():  # the accountants' warnings about their α grid / approximations
            warnings.simplefilter("ignore")
            sigma = get_noise_multiplier(
                target_epsilon=claimed, target_delta=config.privacy.delta, sample_rate=sample_rate,
                epochs=config.training.epochs, accountant=config.privacy.accountant,
            )
    except ValueError as exc:  # "The privacy budget is too low."
        raise AuditInputError("privacy.epsilons", f"no noise multiplier reaches ε = {claimed:g} ({exc})") from None
    return float(sigma), sample_rate, steps



def audit_user_model(
    config: AuditConfig,
    *,
    weights: Path,
    members: Path,
    nonmembers: Path,
    label: str,
    population: Path | None = None,
    attack_names: list[str] | None = None,
    device: str = "auto",
    scores_path: Path | None = None,
) -> dict[str, Any]:
    """Membership-inference audit of a user's trained MLP; a results dict (schema_version 1).

    `config`: `training` (architecture and how the model was trained), `privacy.epsilons` (exactly
    one value: the claimed ε, inf = non-private), `privacy.delta`/`accountant`, `attacks`, `seed`;
    its `data` and `split` sections are not used. `attack_names` (default: `config.attacks.names`)
    — `loss` always runs; `shadow`, `lira`, `lira_offline`, `rmia` need `population`. `device`:
    where reference/shadow models train ("auto": `config.device`, then CUDA when present); on the
    CPU torch uses `config.cpu_threads` threads (1 when the config has no such field) meanwhile.
    `scores_path`: if given, every candidate's membership, label and attack scores are written
    there as CSV (higher = member). All user mistakes raise AuditInputError before any training.
    """
    torch_device = resolve_device(device if device != "auto" else config.device)
    # Small models: on a shared CPU a second spinning OpenMP thread makes training many times slower
    # (the same reason `run` uses `config.cpu_threads`, default 1). Restored on return.
    threads = int(getattr(config, "cpu_threads", 1)) if torch_device.type == "cpu" else None
    previous = torch.get_num_threads()
    if threads is not None:
        torch.set_num_threads(threads)
    try:
        return _audit(config, weights=Path(weights), members=Path(members), nonmembers=Path(nonmembers), label=label,
                      population=Path(population) if population is not None else None, attack_names=attack_names,
                      torch_device=torch_device, scores_path=scores_path)
    finally:
        torch.set_num_threads(previous)


def _audit(
    config: AuditConfig,
    *,
    weights: Path,
    members: Path,
    nonmembers: Path,
    label: str,
    population: Path | None,
    attack_names: list[str] | None,
    torch_device: torch.device,
    scores_path: Path | None,
) -> dict[str, Any]:
    claimed = _claimed_epsilon(config)
    names, notes = _attack_names(config, attack_names, population is not None)
    options = attack_options(config)

    # Data: members first, its column order is the reference for the other files.
    member_table = _read_table(members, "members file", label, None)
    columns = list(member_table.frame.columns)
    nonmember_table = _read_table(nonmembers, "non-members file", label, columns)
    population_table = _read_table(population, "population file", label, columns) if population is not None else None
    tables = [t for t in (member_table, nonmember_table, population_table) if t is not None]
    n_features = member_table.features.shape[1]
    n_members, n_nonmembers = len(member_table.labels), len(nonmember_table.labels)
    if population_table is not None:
        _check_population(names, population_table, n_members, options)

    # Weights: the MLP for these features, the config's hidden sizes and the labels' classes.
    state, weights_format, weight_notes = _load_state_dict(weights)
    notes += weight_notes
    hidden_sizes = list(config.training.hidden_sizes)
    n_classes = max(int(t.labels.max()) for t in tables) + 1
    head = state.get(f"{2 * len(hidden_sizes)}.weight")
    if isinstance(head, torch.Tensor) and head.dim() == 2 and head.shape[0] > n_classes:
        notes.append(f"the model has {head.shape[0]} output classes; the data files use labels below {n_classes}")
        n_classes = int(head.shape[0])
    if n_classes < 2:
        raise AuditInputError(f"members file '{members}': label column '{label}'",
                              "the model needs ≥ 2 output classes (labels 0..K-1 with K ≥ 2)")
    model = _build_model(state, weights, n_features, hidden_sizes, n_classes)
    target = _UserModel(model)

    # Sanity notes on the inputs (not errors: duplicates happen in real data).
    member_hashes = set(_row_hashes(member_table.frame).tolist())
    shared = int(sum(h in member_hashes for h in _row_hashes(nonmember_table.frame).tolist()))
    if shared:
        notes.append(f"{shared} non-member row(s) are identical to a member row (features and label): an attack "
                     "cannot tell them apart, which makes the bounds conservative")
    if population_table is not None:
        candidate_hashes = member_hashes | set(_row_hashes(nonmember_table.frame).tolist())
        overlap = int(sum(h in candidate_hashes for h in _row_hashes(population_table.frame).tolist()))
        if overlap:
            notes.append(f"{overlap} population row(s) are identical to a candidate row; the population should be "
                         "disjoint from the members and non-members")
    if config.privacy.delta >= 1.0 / n_members:
        notes.append(f"δ = {config.privacy.delta:g} ≥ 1/n = {1 / n_members:.2g} (n = {n_members} members): "
                     "such a δ permits releasing a whole record; choose δ well below 1/n")

    # How the model was (claimed to be) trained: references and shadows are trained the same way.
    private = math.isfinite(claimed)
    sigma, sample_rate, steps = _dpsgd_parameters(config, n_members, claimed)
    spec = TrainingSpec(**config.training.model_dump())
    max_grad_norm = config.training.max_grad_norm if private else None
    seed = config.seed
    candidate_features = np.concatenate([member_table.features, nonmember_table.features])
    candidate_labels = np.concatenate([member_table.labels, nonmember_table.labels])
    membership = np.concatenate([np.ones(n_members, dtype=bool), np.zeros(n_nonmembers, dtype=bool)])
    if population_table is not None:
        pool_features, pool_labels = population_table.features, population_table.labels
    else:
        pool_features, pool_labels = np.empty((0, n_features), dtype=np.float32), np.empty(0, dtype=np.int64)
    context = AttackContext(
        candidate_features=candidate_features, candidate_labels=candidate_labels, n_classes=n_classes,
        pool_features=pool_features, pool_labels=pool_labels,
        training=TargetTraining(spec=spec, noise_multiplier=sigma, max_grad_norm=max_grad_norm,
                                sample_rate=sample_rate, steps=steps, train_size=n_members),
        epsilon=claimed, delta=config.privacy.delta, accountant=config.privacy.accountant, seed=seed,
        device=torch_device, options=options,
    )

    attack_records, score_columns = [], {}
    for name in names:
        scores = np.asarray(get_attack(name).scores(target, context), dtype=np.float64)
        score_columns[name] = scores
        attack_records.append(
            evaluate_attack(
                name, scores, membership, candidate_labels, delta=config.privacy.delta,
                confidence=config.attacks.confidence, threshold_seed=seed,
                accountant_epsilon=claimed if private else None, membership_randomized=False,
            )
        )

    epsilon: dict[str, float] = {}
    if private:
        epsilon = epsilons_for_event(DPSGDEvent(sigma, sample_rate, steps), config.privacy.delta, config.privacy.accountant)
        if epsilon["pld"] > epsilon["prv"] + PLD_PRV_TOLERANCE:
            notes.append(f"PRV ε {epsilon['prv']:.3f} is below the tight PLD ε {epsilon['pld']:.3f} by more than "
                         f"{PLD_PRV_TOLERANCE}")
    test_accuracy = float((target.logits(nonmember_table.features).argmax(axis=1) == nonmember_table.labels).mean())
    best, best_method = best_sound_lower_bound(attack_records)
    violation = private and best > claimed
    target_record = {
        "epsilon_target": claimed if private else None,
        "delta": config.privacy.delta,
        "noise_multiplier": sigma if private else None,
        "sample_rate": sample_rate,
        "steps": steps,
        "max_grad_norm": max_grad_norm,
        "poisson_sampling": True if private else None,
        "accountant": config.privacy.accountant if private else None,
        "epsilon": epsilon,
        "epsilon_accountant": epsilon.get(config.privacy.accountant) if private else None,
        "epsilon_engine": None,
        "test_accuracy": test_accuracy,
        "train_seconds": None,
        "attacks": attack_records,
        "epsilon_lb_best": best,
        "epsilon_lb_best_method": best_method,
        "epsilon_lb_ratio": best / claimed if private else None,
        "violation": bool(violation),
        "seed": seed,
    }
    reasons = ([f"ε target {claimed:g}: empirical lower bound {best:.3f} ({best_method}) exceeds the claimed ε {claimed:g}"]
               if violation else [])

    notes += [
        "membership is given by the members / non-members files, not drawn by a fair coin per record: the one-run "
        "bound (Steinke et al. 2023) is not computed; only the Clopper-Pearson bound can decide a violation. The "
        "bounds speak about membership only if the non-members come from the same distribution as the members "
        "(ideally a random hold-out of the same data); otherwise an attack may be telling the distributions apart",
        "test_accuracy is the model's accuracy on the non-members file",
        "the feature columns are fed to the model exactly as given in the files: no standardisation, encoding or "
        "other transformation is applied",
    ]
    if private:
        notes.append(
            f"claimed ε {claimed:g}: the audit assumes DP-SGD with Poisson sampling as Opacus's "
            f"make_private_with_epsilon would run it with the config's training section: q = 1/⌈{n_members}/"
            f"{config.training.batch_size}⌉ = {sample_rate:.4g}, T = {steps}, C = {max_grad_norm:g}, σ = {sigma:.4f} "
            f"({config.privacy.accountant} accountant); the accountant ε is for these (σ, q, T), the violation "
            "check compares with the claimed ε"
        )
    if any(n in POPULATION_ATTACKS for n in names):
        notes.append(
            "reference/shadow models are trained like the target is assumed to have been trained (the config's "
            "training section" + (", same σ, q, T, C" if private else ", non-private") + "); a model trained "
            "differently makes those attacks weaker, never the bounds unsound"
        )
    if any(n in REFERENCE_ATTACKS for n in names) and abs(n_members - n_nonmembers) > 0.1 * n_members:
        notes.append(
            f"reference models each train on half of the {n_members + n_nonmembers} candidates while the target "
            f"trained on {n_members} members: equal-sized member and non-member files mimic the target best"
        )

    if scores_path is not None:
        from audit.machinery.run_directory import write_text_atomic

        frame = pd.DataFrame({"member": membership.astype(int), "label": candidate_labels, **score_columns})
        write_text_atomic(Path(scores_path), frame.to_csv(index=False))

    files = {"members": str(members), "nonmembers": str(nonmembers), "population": str(population) if population else None}
    return {
        "schema_version": SCHEMA_VERSION,
        "config": config.to_plain(),
        "environment": describe_environment(str(torch_device), seed),
        "data": {
            "description": f"user model {weights.name} on {members.name} (members) / {nonmembers.name} (non-members)"
                           + (f", population {population.name}" if population else ""),
            "n_rows": int(sum(len(t.labels) for t in tables)),
            "n_features": int(n_features),
            "n_classes": int(n_classes),
            "n_train": int(n_members),
            "n_candidates": int(n_members + n_nonmembers),
            "n_members": int(n_members),
            "n_nonmembers": int(n_nonmembers),
            "n_pool": int(len(pool_labels)),
            "membership": "given by the user's files (members = the model's training set); not randomized",
            "label": label,
            "feature_columns": [c for c in columns if c != label],
            "files": files,
            "files_sha256": {k: _file_sha256(Path(v)) for k, v in files.items() if v is not None},
            "weights": {"path": str(weights), "format": weights_format, "sha256": _file_sha256(weights),
                        "architecture": f"MLP({n_features}, hidden_sizes={hidden_sizes}, n_classes={n_classes})"},
        },
        "attacks_run": names,
        "targets": [target_record],
        "synthetic": [],
        "notes": notes,
        "verdict": {"passed": not violation, "policy": None, "reasons": reasons},
    }
