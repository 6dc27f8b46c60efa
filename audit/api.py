"""The public API's jobs: each runs one audit in this process and returns an `AuditResult`.

These are the CLI's jobs without the CLI: no console output, no exit codes, and nothing written
unless the job's documentation says so (`run` writes its run folder; the others write nothing and
log nothing to MLflow). Each is a thin layer over the library function the CLI calls, so the
numbers are the CLI's. Bad input raises `audit.errors.AuditInputError` (its `where` names the field
or file); user code given as "module:function" runs in isolated worker processes with a timeout.

`import audit` exposes these names lazily (`audit.__all__` is the one list of the public surface, see
`audit/__init__.py`); docs/api.md renders this page.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from copy import deepcopy
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the heavy modules are imported by the jobs, when called
    import pandas as pd

    from audit.dp_validation.accountant_check import AccountantGrid
    from audit.machinery.config import AuditConfig
    from audit.machinery.verdict_rows import Verdict


@dataclass(frozen=True)
class AuditResult:
    """What an audit found: its verdict in the figures a reader needs, and the full results.

    Attributes:
        kind: the job that produced it (`run`, `audit-scores`, `audit-model`, `synth-check`,
            `canary-audit`, `whitebox-audit`, `accountant-check`).
        status: the verdict's top line: `pass` (every DP claim held), `fail` (a claim was refuted, a
            policy rule failed, or the user's own subject LEAKS), `inconclusive` (a claim was
            untestable here or not refuted by a check without power against it) or `no_claim` (no
            DP claim: `headline` then says LEAKS or NO SIGNIFICANT LEAKAGE FOUND).
        passed: True only for `pass`.
        headline: the top line in words, as the console prints it (PASS, FAIL, INCONCLUSIVE,
            LEAKS, NO SIGNIFICANT LEAKAGE FOUND).
        leakage: the leakage statement on the subjects without a DP claim: LEAKS, NO SIGNIFICANT
            LEAKAGE FOUND, or NO CLAIM TESTED where no leakage test ran (a FAIL on the user's own
            release that leaks says LEAKS here).
        claims: one line per claim tested, in the words of report.html (held / not refuted /
            refuted / untestable here, with the ceiling and what would decide it).
        reasons: why the top line is not PASS, one sentence each.
        epsilon_lower_bound: the best sound ε lower bound on the audited subject; None where the
            audit has several subjects (`run`: one per target, in `to_dict()["targets"]`) or none
            (`accountant-check`).
        run_dir: the run folder written (`run` only), else None.
        results: the full results dict, as results.json holds it (read-only; `to_dict()` copies).
    """

    kind: str
    status: str
    passed: bool
    headline: str
    leakage: str
    claims: tuple[str, ...]
    reasons: tuple[str, ...]
    epsilon_lower_bound: float | None
    run_dir: Path | None = None
    results: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @property
    def verdict(self) -> dict[str, Any]:
        """The verdict dict of results.json (claims, checks, power, family-wise error), a copy."""
        return deepcopy(dict(self.results.get("verdict") or {}))

    @property
    def typed_verdict(self) -> Verdict:
        """The verdict as a typed, frozen `Verdict` (its `claims` `ClaimRow`s, `checks` `CheckRow`s, `rules`
        `RuleRow`s), read once from the results with `Verdict.from_json`."""
        from audit.machinery.verdict_rows import Verdict

        return Verdict.from_json(self.results.get("verdict") or {})

    @property
    def typed_results(self) -> Any:
        """The results as the kind's typed, frozen result (`AuditKind.result_type`: `AccountantCheckResult` for
        `accountant-check`, `ConformanceResult` for `conformance`, `CanaryAuditResult`, `MechanismAuditResult`
        and `WhiteboxAuditResult`, built on the shared `EpsilonBoundTest` block, for the bound audits), read once
        with its `from_json`; None for a kind not typed yet (`run`, `audit-model`, `audit-scores`, `synth-check`)."""
        from audit.machinery.audit_kinds import AUDIT_KINDS, load

        kind = AUDIT_KINDS.get(self.kind)
        if kind is None or kind.result_type is None:
            return None
        result_type: Any = load(kind.result_type)  # a class with `from_json` (audit/machinery/audit_results.py)
        return result_type.from_json(self.results)

    def to_dict(self) -> dict[str, Any]:
        """The full results, a deep copy: the schema of results.json (docs/verdict.md reads it)."""
        return deepcopy(dict(self.results))

    def __str__(self) -> str:
        leak = f" ({self.leakage})" if self.leakage not in (self.headline, "NO CLAIM TESTED") else ""
        lines = [
            f"{self.kind}: {self.headline}{leak}",
            *(f"  {c}" for c in self.claims),
            *(f"  {r}" for r in self.reasons),
        ]
        return "\n".join(lines)

    @classmethod
    def from_results(cls, kind: str, results: Mapping[str, Any], run_dir: Path | None = None) -> AuditResult:
        """Wrap a results dict that already carries its verdict (as every job below returns it).

        Args:
            kind: the job's name.
            results: the results dict with a decided `verdict`.
            run_dir: the run folder, where one was written.

        Returns:
            The `AuditResult`; `results` is kept as given (not copied).
        """
        from audit.machinery.verdict_words import claim_sentence, extra_reasons, leakage_word, status_word

        verdict = found if isinstance(found := results.get("verdict"), dict) else {}
        status = str(verdict.get("status", "inconclusive"))
        return cls(
            kind=kind,
            status=status,
            passed=bool(verdict.get("passed")) and status == "pass",
            headline=status_word(status, verdict),
            leakage=leakage_word(verdict),
            claims=tuple(claim_sentence(c) for c in verdict.get("claims") or [] if isinstance(c, dict)),
            reasons=tuple(extra_reasons(verdict)),
            epsilon_lower_bound=_single_bound(results),
            run_dir=run_dir,
            results=results,
        )


def _single_bound(results: Mapping[str, Any]) -> float | None:
    """The best sound ε lower bound where the results have one subject; None otherwise."""
    targets, synthetic = results.get("targets") or [], results.get("synthetic") or []
    if len(targets) == 1 and not synthetic:
        value = targets[0].get("epsilon_lb_best")
    elif len(synthetic) == 1 and not targets:
        value = ((synthetic[0].get("mia") or {}).get("epsilon_lb") or {}).get("clopper_pearson")
    else:
        value = results.get("epsilon_lower_bound")
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def load_config(
    preset: str = "default", config_file: str | Path | None = None, overrides: dict[str, Any] | None = None
) -> AuditConfig:
    """The validated configuration of the main job: preset, then file, then overrides.

    Args:
        preset: `smoke`, `default` or `full` (docs/configuration.md).
        config_file: a YAML file whose keys override the preset's; relative paths in it are
            relative to the file.
        overrides: a nested dict applied last, e.g. `{"privacy": {"epsilons": [1.0, float("inf")]}}`.

    Returns:
        The `AuditConfig` (a pydantic model; `config_to_yaml` writes it back).

    Raises:
        AuditInputError: naming the bad field.
    """
    from audit.machinery.config import resolve_config

    return resolve_config(preset, config_file, overrides)


def run(
    config: AuditConfig | None = None,
    *,
    preset: str = "default",
    out_dir: str | Path = "runs",
    tracking: bool = True,
    tracking_uri: str | None = None,
    progress: Callable[[dict[str, Any]], None] | None = None,
) -> AuditResult:
    """The main job (`privacy-audit run`): train targets over the ε sweep, attack them, bound ε.

    Writes the run folder (`<out_dir>/<UTC timestamp>-<name>/`: results.json, report.html, figures,
    splits) and, unless `tracking=False`, logs to MLflow — as the CLI does.

    Args:
        config: from `load_config`; None means `load_config(preset)`.
        preset: the preset used when `config` is None.
        out_dir: the folder that receives the run folder.
        tracking: False logs nothing to MLflow.
        tracking_uri: the MLflow store; default `sqlite:///mlflow.db` in the working directory.
        progress: silent by default; a callable receiving one dict per step (docs/configuration.md).

    Returns:
        An `AuditResult` of kind `run` with `run_dir` set; one target row per ε in
        `to_dict()["targets"]` (accountant ε, attacks, ε lower bounds).
    """
    from audit.sweep.runner import run_audit

    outcome = run_audit(
        config if config is not None else load_config(preset),
        out_dir=out_dir,
        tracking_uri=tracking_uri,
        preset=preset if config is None else None,
        progress=progress,
        tracking=tracking,
    )
    return AuditResult.from_results("run", outcome.results, outcome.run_dir)


def audit_scores(
    path: str | Path,
    *,
    claimed_epsilon: float | None = None,
    delta: float = 1e-5,
    confidence: float = 0.95,
    membership_randomized: bool = False,
    seed: int = 0,
    fail_on_leak: bool = True,
) -> AuditResult:
    """Audit membership scores you computed (`privacy-audit audit-scores`): every metric and ε bound.

    Args:
        path: CSV or Parquet with a `member` column (0/1) and `score` (higher = more likely member)
            or `loss` (lower = more likely member); an optional `label` column gives per-class figures.
        claimed_epsilon: the ε the training claims; None audits leakage only.
        delta: δ of the bounds.
        confidence: confidence of every bound and test.
        membership_randomized: True only if each record's membership was an independent fair coin
            flip: it enables the one-run bound (Steinke et al. 2023).
        seed: seed of the held-out threshold choice.
        fail_on_leak: a LEAKS statement (no claim) fails the verdict, as the CLI does without
            `--allow-leak`.

    Returns:
        An `AuditResult` of kind `audit-scores`.
    """
    from audit.machinery.verdict import verdict_for_results
    from audit.model_audits.score_audit import audit_scores as _audit_scores

    results = _audit_scores(
        path,
        delta=delta,
        confidence=confidence,
        claimed_epsilon=claimed_epsilon,
        membership_randomized=membership_randomized,
        seed=seed,
    )
    return AuditResult.from_results("audit-scores", verdict_for_results(results, fail_on_leak=fail_on_leak)[0])


def audit_model(
    config: AuditConfig | None = None,
    *,
    claimed_epsilon: float | None = None,
    fail_on_leak: bool = True,
    **sources: Any,
) -> AuditResult:
    """Membership-inference audit of your own trained model (`privacy-audit audit-model`).

    Args:
        config: from `load_config` (its `model:`, `attacks:` and `training:` sections, and
            `privacy.epsilons` holding exactly one value, the claimed ε); None means the default
            configuration with `claimed_epsilon`.
        claimed_epsilon: the ε the model's training claims (`inf` or None: no claim, a leakage
            audit); only with `config=None` (otherwise the config's `privacy.epsilons` says it).
        fail_on_leak: a LEAKS statement (no claim) fails the verdict, as the CLI does without
            `--allow-leak`.
        **sources: the model and data, as `audit.model_audits.model_audit.audit_user_model` takes
            them: `model` (a live `nn.Module`, fitted estimator or prediction callable; runs in
            this process), or `weights` + `factory`, `skops`, `onnx`, `function` (files and
            "module:function" specs, run isolated); `members`, `nonmembers`, `population` (CSV,
            Parquet, `.npz` or (features, labels) pairs); `label`, `output`, `attack_names`, `trainer`.

    Returns:
        An `AuditResult` of kind `audit-model`.

    Raises:
        AuditInputError: naming the bad field, file or argument.
    """
    from audit.errors import AuditInputError
    from audit.machinery.verdict import verdict_for_results
    from audit.model_audits.model_audit import audit_user_model

    if config is not None and claimed_epsilon is not None:
        raise AuditInputError("claimed_epsilon", "give the claim in config.privacy.epsilons or here, not both")
    if config is None:
        claim = float("inf") if claimed_epsilon is None else claimed_epsilon
        config = load_config(overrides={"privacy": {"epsilons": [claim]}})
    results = audit_user_model(config, **sources)
    return AuditResult.from_results("audit-model", verdict_for_results(results, fail_on_leak=fail_on_leak)[0])


def synth_check(
    train: str | Path | pd.DataFrame,
    holdout: str | Path | pd.DataFrame,
    synthetic: str | Path | pd.DataFrame,
    *,
    claimed_epsilon: float | None = None,
    delta: float = 1e-5,
    target_column: str | None = None,
    nan_policy: str = "error",
    membership_randomized: bool = False,
    subsample_train: bool = False,
    seed: int = 0,
    fail_on_leak: bool = True,
) -> AuditResult:
    """Is a synthetic release a disguised copy of its training data? (`privacy-audit synth-check`)

    Distance to closest record (DCR), nearest-neighbour distance ratio (NNDR), a distance
    membership attack with its ε lower bound, fidelity and re-identification risks.

    Args:
        train: the generator's training table (CSV / Parquet path, or a DataFrame).
        holdout: rows of the same population the generator never saw, about as many as train.
        synthetic: the release.
        claimed_epsilon: the generator's DP ε; None audits leakage only.
        delta: δ of the ε lower bound.
        target_column: the label column, for the train-on-synthetic-test-on-real utility figure.
        nan_policy: `error`, `drop_rows` or `indicator`.
        membership_randomized: rows went to train / holdout by fair coin (enables the one-run bound).
        subsample_train: accept a smaller holdout by subsampling train.
        seed: seed of subsampling and the distance attack.
        fail_on_leak: a LEAKS statement on the release fails the verdict (the CLI's default).

    Returns:
        An `AuditResult` of kind `synth-check`; `epsilon_lower_bound` is the distance attack's
        Clopper-Pearson bound.
    """
    import pandas as pd

    from audit.errors import AuditInputError
    from audit.machinery.verdict import verdict_for_results
    from audit.synthetic.synthetic_check import read_table, synthetic_check_results

    if nan_policy not in ("error", "drop_rows", "indicator"):
        raise AuditInputError("nan_policy", f"expected error, drop_rows or indicator, got {nan_policy[:40]!r}")
    tables = {"train": train, "holdout": holdout, "synthetic": synthetic}
    frames = [table if isinstance(table, pd.DataFrame) else read_table(table, role) for role, table in tables.items()]
    sources = tuple(
        f"<DataFrame {role}>" if isinstance(table, pd.DataFrame) else str(table) for role, table in tables.items()
    )
    results = synthetic_check_results(
        *frames,
        sources=(sources[0], sources[1], sources[2]),
        generator=f"user-supplied ({Path(sources[2]).name})",
        nan_policy=nan_policy,  # type: ignore[arg-type]  # one of NanPolicy's three values: checked above
        target_column=target_column,
        claimed_epsilon=claimed_epsilon,
        delta=delta,
        membership_randomized=membership_randomized,
        subsample_train=subsample_train,
        seed=seed,
        fail_on_leak=fail_on_leak,
    )
    return AuditResult.from_results("synth-check", verdict_for_results(results)[0])


def _single_audit(kind: str, result: dict[str, Any]) -> AuditResult:
    from audit.machinery.single_audit_verdicts import single_audit_verdict

    return AuditResult.from_results(kind, {**result, "verdict": single_audit_verdict(kind, result)})


def canary_audit(
    trainer: str | Callable[..., Any],
    *,
    mode: str = "profile",
    kind: str = "out_of_distribution",
    n_models: int | None = None,
    n_canaries: int | None = None,
    claimed_epsilon: float | None = None,
    delta: float | None = None,
    confidence: float = 0.95,
    seed: int = 0,
    workers: int | None = None,
    **options: Any,
) -> AuditResult:
    """Black-box canary audit of your training code (`privacy-audit canary-audit`).

    Args:
        trainer: "module:function" (or a picklable callable) `train(features, labels, seed) -> model`
            with `logits(X)`; called only in isolated worker processes, its `CLAIM` read there.
        mode: `profile` (many runs, the claim's whole trade-off curve), `multi-canary`, `multi` or
            `one-run` (docs/canary-audit.md says what each can detect).
        kind: the canary, `out_of_distribution` or `mislabeled`.
        n_models: training runs (per side for `multi`); None takes the mode's default.
        n_canaries: canaries per run (`multi-canary`, `one-run`); None takes the mode's default.
        claimed_epsilon: overrides the trainer's CLAIM.
        delta: δ of the claim; None takes the CLAIM's.
        confidence: confidence of the test.
        seed: seed of canaries and runs.
        workers: worker processes; None means the cores.
        **options: passed on to `audit.dp_validation.canary_audit.run_canary_audit` (`features`,
            `labels`, `n_rows`, `timeout`).

    Returns:
        An `AuditResult` of kind `canary-audit`.
    """
    from audit.dp_validation.canary_audit import run_canary_audit

    result = run_canary_audit(
        trainer,
        kind=kind,
        mode=mode,
        n_models=n_models,
        n_canaries=n_canaries,
        claimed_epsilon=claimed_epsilon,
        delta=delta,
        confidence=confidence,
        seed=seed,
        workers=workers,
        **options,
    )
    return _single_audit("canary-audit", result)


def whitebox_audit(factory: str | None = None, **options: Any) -> AuditResult:
    """White-box Dirac-canary audit of an Opacus training set-up (`privacy-audit whitebox-audit`).

    Nasr et al. 2023, "Tight Auditing of Differentially Private Machine Learning", arXiv 2302.07956.

    Args:
        factory: "module:function" returning (model, optimizer, data_loader, privacy_engine[, epochs])
            made private by Opacus; run in isolated workers. None needs `builtin=True` (the
            harness's own DP-SGD with `noise_multiplier`, `sample_rate`, `steps`, `max_grad_norm`).
        **options: as `audit.dp_validation.whitebox_audit.run_whitebox_audit` takes them: `n_runs`
            (per side), `observe` (`all` iterates or `final`), `claimed_epsilon`, `delta`,
            `confidence`, `seed`, `workers`, `device`.

    Returns:
        An `AuditResult` of kind `whitebox-audit`.
    """
    from audit.dp_validation.whitebox_audit import run_whitebox_audit

    return _single_audit("whitebox-audit", run_whitebox_audit(factory=factory, **options))


def one_run_whitebox_audit(factory: str | None = None, **options: Any) -> AuditResult:
    """One training run with gradient canaries (`privacy-audit whitebox-audit --one-run`).

    Steinke, Nasr, Jagielski 2023, "Privacy Auditing with One (1) Training Run", arXiv 2305.08846,
    with the f-DP test of Mahloujifar, Melis, Chaudhuri 2024 (arXiv 2410.22235).

    Args:
        factory: as for `whitebox_audit`; None needs `builtin=True`.
        **options: as `audit.dp_validation.one_run_whitebox.run_one_run_whitebox_audit` takes them:
            `n_canaries`, `canary_kind`, `observe`, `claimed_epsilon`, `delta`, `confidence`, `seed`,
            `device`.

    Returns:
        An `AuditResult` of kind `whitebox-audit` (as the CLI records it).
    """
    from audit.dp_validation.one_run_whitebox import run_one_run_whitebox_audit

    return _single_audit("whitebox-audit", run_one_run_whitebox_audit(factory=factory, **options))


def accountant_check(
    accountant: str | Callable[[float, float, int, float], float],
    grid: AccountantGrid | str | Path | None = None,
    *,
    margin: float = 0.1,
    timeout: float = 30.0,
) -> AuditResult:
    """Check an accountant against the tight PLD reference on a grid (`privacy-audit accountant-check`).

    Args:
        accountant: "module:function" (imported and called only in an isolated worker, each call
            with `timeout`) or a callable `(noise_multiplier, sample_rate, steps, delta) -> ε`
            (called in this process).
        grid: an `AccountantGrid`, a YAML grid file, or None for the default grid.
        margin: above the PLD upper value by more than this fraction is `loose` (sound, wasteful).
        timeout: seconds one call of a "module:function" accountant may take.

    Returns:
        An `AuditResult` of kind `accountant-check`: `passed` False when a
        point is unsound (ε below the PLD lower value) or invalid; points in `to_dict()["points"]`.
    """
    from audit.dp_validation.accountant_check import (
        AccountantGrid,
        IsolatedAccountant,
        check_accountant,
        load_grid,
    )
    from audit.machinery.audit_results import AccountantCheckResult

    loaded = grid if isinstance(grid, AccountantGrid) else load_grid(None if grid is None else str(grid))
    if isinstance(accountant, str):
        with IsolatedAccountant(accountant, timeout) as function:
            points = check_accountant(function, loaded, margin)
        name = accountant
    else:
        points = check_accountant(accountant, loaded, margin)
        name = getattr(accountant, "__qualname__", repr(accountant))
    return _single_audit("accountant-check", AccountantCheckResult(name, margin, tuple(points)).to_json())
