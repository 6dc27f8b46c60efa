"""All MLflow calls of the harness, in one place.

Layout (DESIGN.md): one experiment per command (and audit name), one parent run per invocation,
one child run per target ε. Runs are created through `MlflowClient` with explicit terminal
statuses so a crashed audit leaves its runs FAILED rather than dangling RUNNING.

Conventions (what an MLflow user expects to find):
- experiment names carry a prefix per command, `privacy-audit/run/<name>`,
  `privacy-audit/synth-check`, … (`experiment_name`), never `default` beside MLflow's `Default`;
- every run carries MLflow's system tags `mlflow.source.name` (the command), `mlflow.source.type`,
  `mlflow.source.git.commit` (when the working directory is a git checkout) and `mlflow.user`;
- the parent run carries the verdict as tag `verdict` (its status: pass / fail / inconclusive);
- a parameter whose value is None is not logged (MLflow would store the string "None");
- input tables are logged as MLflow datasets (`log_input`, with a digest and schema);
- on request (`run --log-models`), each target model in MLflow's PyTorch flavour (`log_torch_model`);
- the SQLite schema lock lives in the temporary directory, not beside the user's database;
- `NullTracker` is the same interface doing nothing: tracking off (`run_audit(..., tracking=False)`).
"""

from __future__ import annotations

import logging
import math
import os
import re
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from audit.errors import AuditInputError

DEFAULT_TRACKING_URI = "sqlite:///mlflow.db"

# No telemetry from an audit tool, and nothing that reaches out of the machine.
os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
os.environ.setdefault("DO_NOT_TRACK", "true")


def _quiet_mlflow_logs() -> None:
    for name in ("alembic", "mlflow", "sqlalchemy"):
        logging.getLogger(name).setLevel(logging.WARNING)


def _sqlite_artifact_root(tracking_uri: str) -> str | None:
    """Artifacts of a SQLite store go beside the database file, in `mlartifacts/`."""
    prefix = "sqlite:///"
    if not tracking_uri.startswith(prefix):
        return None
    db_path = Path(tracking_uri[len(prefix) :])
    return (db_path.resolve().parent / "mlartifacts").as_uri()


def absolute_tracking_uri(tracking_uri: str) -> str:
    """`sqlite:///mlflow.db` → `sqlite:////abs/dir/mlflow.db`: a relative URI in a report or results.json
    means nothing to a reader who does not know the directory the audit ran in."""
    prefix = "sqlite:///"
    if not tracking_uri.startswith(prefix) or tracking_uri[len(prefix) :] in ("", ":memory:"):
        return tracking_uri
    path = Path(tracking_uri[len(prefix) :])
    return tracking_uri if path.is_absolute() else prefix + str(path.resolve())


LOCK_RETRIES = 6
# Errors of two processes touching one SQLite store at once: a held write lock, or both creating
# the schema of a new store (the loser's migration step finds the winner's column or table).
_CONTENTION = ("database is locked", "duplicate column name", "already exists")
# A store that cannot be written: one line, exit 2 (it was a 90-line traceback and exit 3).
_READ_ONLY = ("readonly database", "read-only file system", "attempt to write a readonly", "permission denied")


def _with_lock_retries(call, *args, **kwargs):
    """SQLite lets one writer at a time: retry a contended call with backoff, then say what to do."""
    import time

    for attempt in range(LOCK_RETRIES):
        try:
            return call(*args, **kwargs)
        except Exception as exc:  # sqlalchemy's OperationalError arrives wrapped in MlflowException
            if any(text in str(exc).lower() for text in _READ_ONLY):
                raise AuditInputError(
                    "--tracking-uri",
                    "the MLflow tracking store is read-only (a file or folder "
                    "without write permission, or a read-only disk): give a writable store",
                ) from None
            if not any(text in str(exc) for text in _CONTENTION):
                raise
            if attempt == LOCK_RETRIES - 1:
                raise AuditInputError(
                    "--tracking-uri",
                    "the SQLite tracking store stayed locked by another writer; for concurrent runs use an "
                    "MLflow tracking server (README: 'Where results land')",
                ) from None
            time.sleep(0.2 * 2**attempt)


def check_tracking_uri(tracking_uri: str | None) -> str:
    """The URI to use; for a SQLite store, its folder must already exist (we never create folders
    outside --out and the store's own folder: a typo must not silently mkdir `/nonexistent/dir`)."""
    uri = tracking_uri or DEFAULT_TRACKING_URI
    if not isinstance(uri, str) or not uri.strip():
        raise AuditInputError("--tracking-uri", "expected a URI such as sqlite:///mlflow.db or http://host:5000")
    if uri.startswith("sqlite:///"):
        db_path = Path(uri[len("sqlite:///") :])
        if not db_path.name or db_path.is_dir():
            raise AuditInputError(
                f"--tracking-uri '{uri[:120]}'", "names a folder; expected a database file such as sqlite:///mlflow.db"
            )
        folder = db_path.parent if str(db_path.parent) else Path(".")
        if not folder.is_dir():
            raise AuditInputError(
                f"--tracking-uri '{uri[:120]}'", f"folder '{str(folder)[:120]}' does not exist; create it first"
            )
        if not os.access(folder, os.W_OK | os.X_OK) and not db_path.is_file():
            raise AuditInputError(f"--tracking-uri '{uri[:120]}'", f"folder '{str(folder)[:120]}' is not writable")
        if db_path.is_file() and not (os.access(db_path, os.W_OK) and os.access(folder, os.W_OK | os.X_OK)):
            # SQLite writes a journal beside the database: both must be writable.
            raise AuditInputError(
                f"--tracking-uri '{uri[:120]}'",
                "the store is read-only (the database file or its folder is not writable)",
            )
    elif uri.startswith("sqlite:"):
        raise AuditInputError(
            f"--tracking-uri '{uri[:120]}'", "expected sqlite:///relative/path.db or sqlite:////absolute/path.db"
        )
    return uri


@contextmanager
def _sqlite_init_lock(tracking_uri: str):
    prefix = "sqlite:///"
    if not tracking_uri.startswith(prefix):
        yield
        return
    import fcntl
    import hashlib
    import tempfile

    # In the temporary directory, named after the database: nothing is left beside the user's files.
    database = str(Path(tracking_uri[len(prefix) :]).resolve())
    lock_path = (
        Path(tempfile.gettempdir()) / f"privacy-audit-mlflow-{hashlib.sha256(database.encode()).hexdigest()[:16]}.lock"
    )
    with open(lock_path, "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


EXPERIMENT_PREFIX = "privacy-audit"


def experiment_name(command: str, name: str | None = None) -> str:
    """`privacy-audit/<command>` or `privacy-audit/<command>/<name>`: clear of MLflow's `Default`."""
    return "/".join(part for part in (EXPERIMENT_PREFIX, command, name) if part)


def system_tags(command: str) -> dict[str, str]:
    """MLflow's standard system tags for a run started by `privacy-audit <command>`."""
    import getpass

    from audit.machinery.environment import git_sha

    tags = {"mlflow.source.name": f"privacy-audit {command}", "mlflow.source.type": "LOCAL"}
    try:
        tags["mlflow.user"] = getpass.getuser()
    except Exception:  # no user name in this environment (e.g. a container without passwd entry)
        pass
    commit = git_sha()
    if commit:
        tags["mlflow.source.git.commit"] = commit
    return tags


def verdict_status(verdict: dict[str, Any] | None) -> str:
    """The verdict's status (issue-12's contract), or pass/fail from `passed` for older verdicts."""
    if not verdict:
        return "inconclusive"
    return str(verdict.get("status") or ("pass" if verdict.get("passed") else "fail"))


class AuditTracker:
    """A thin, explicit layer over `MlflowClient` for one audit invocation."""

    enabled = True

    def __init__(self, tracking_uri: str | None, experiment_name: str, command: str | None = None):
        from mlflow.tracking import MlflowClient

        _quiet_mlflow_logs()  # after the import: mlflow configures its own logger when imported

        self.tracking_uri = absolute_tracking_uri(check_tracking_uri(tracking_uri))
        try:
            # Opening a new store creates (migrates) its schema, which two processes must not do at
            # once: serialise it with a lock file beside a SQLite database.
            with _sqlite_init_lock(self.tracking_uri):
                self.client = _with_lock_retries(MlflowClient, tracking_uri=self.tracking_uri)
                self.experiment_id = _with_lock_retries(self._experiment_id, experiment_name)
        except AuditInputError:
            raise
        except Exception as exc:  # mlflow raises many types for an unusable store
            raise AuditInputError(
                f"--tracking-uri '{self.tracking_uri}'", f"cannot open the MLflow tracking store ({exc})"
            ) from None
        self.open_runs: list[str] = []
        self.system_tags = system_tags(command or experiment_name.removeprefix(EXPERIMENT_PREFIX + "/").split("/")[0])

    def _experiment_id(self, name: str) -> str:
        experiment = self.client.get_experiment_by_name(name)
        if experiment is not None:
            return experiment.experiment_id
        try:
            return self.client.create_experiment(name, artifact_location=_sqlite_artifact_root(self.tracking_uri))
        except Exception:
            # Another run created it between our lookup and our create: use theirs.
            experiment = self.client.get_experiment_by_name(name)
            if experiment is None:
                raise
            return experiment.experiment_id

    def start_run(self, name: str, *, parent_id: str | None = None, tags: dict[str, str] | None = None) -> str:
        all_tags = {**self.system_tags, **{k: str(v) for k, v in (tags or {}).items() if v is not None}}
        if parent_id is not None:
            all_tags["mlflow.parentRunId"] = parent_id
        run = _with_lock_retries(self.client.create_run, self.experiment_id, tags=all_tags, run_name=name)
        self.open_runs.append(run.info.run_id)
        return run.info.run_id

    def log_params(self, run_id: str, params: dict[str, Any]) -> None:
        from mlflow.entities import Param

        # None is "not applicable": MLflow would store the string "None", which reads like a value.
        entries = [Param(key, str(value)) for key, value in params.items() if value is not None]
        if entries:
            _with_lock_retries(self.client.log_batch, run_id, params=entries)

    def set_tag(self, run_id: str, key: str, value: str) -> None:
        _with_lock_retries(self.client.set_tag, run_id, key, str(value))

    def set_verdict(self, run_id: str, verdict: dict[str, Any] | None) -> None:
        """The parent run's `verdict` tag (pass / fail / inconclusive / no_claim) and one tag per claim."""
        from audit.machinery.verdict import claim_tags

        self.set_tag(run_id, "verdict", verdict_status(verdict))
        for key, value in claim_tags(verdict or {}).items():
            self.set_tag(run_id, key, value)

    def log_torch_model(self, run_id: str, model, input_example, artifact_path: str = "model") -> None:
        """The model in MLflow's PyTorch flavour, `runs:/<run>/model` (torch.export "pt2": it loads
        with `mlflow.pytorch.load_model` without this package). Saved locally, then logged as
        artifacts through the client, so no global MLflow state (tracking URI, active run) changes."""
        import tempfile
        import warnings

        import mlflow.pytorch
        import torch

        logging.getLogger("torch._export").setLevel(logging.ERROR)  # tracing notes about batch dims
        with tempfile.TemporaryDirectory() as tmp, warnings.catch_warnings():
            warnings.simplefilter("ignore")
            path = Path(tmp) / artifact_path
            mlflow.pytorch.save_model(
                model.cpu().eval(),
                str(path),
                input_example=input_example,
                pip_requirements=[f"torch=={torch.__version__.split('+')[0]}"],
            )
            self.client.log_artifacts(run_id, str(path), artifact_path=artifact_path)

    def log_table(self, run_id: str, frame, *, name: str, source: str | None, context: str) -> None:
        """Log a table as an MLflow dataset input (name, digest, schema, profile; not the rows)."""
        import warnings

        import mlflow.data
        from mlflow.entities import DatasetInput, InputTag

        with warnings.catch_warnings():  # schema hints and source-guessing notes meant for model authors
            warnings.simplefilter("ignore")
            dataset = mlflow.data.from_pandas(frame, source=source, name=name)  # type: ignore[attr-defined]
            entry = DatasetInput(
                dataset=dataset._to_mlflow_entity(), tags=[InputTag(key="mlflow.data.context", value=context)]
            )
        _with_lock_retries(self.client.log_inputs, run_id, datasets=[entry])

    def log_metrics(self, run_id: str, metrics: dict[str, float | None], step: int = 0) -> None:
        from mlflow.entities import Metric

        # MLflow stores no null; a missing value (e.g. no ε for a non-private target) is not logged.
        entries = [
            Metric(key, float(value), 0, step)
            for key, value in metrics.items()
            if value is not None and not (isinstance(value, float) and math.isnan(value))
        ]
        if entries:
            _with_lock_retries(self.client.log_batch, run_id, metrics=entries)

    def set_tags(self, run_id: str, tags: dict[str, str]) -> None:
        from mlflow.entities import RunTag

        entries = [RunTag(key, str(value)) for key, value in tags.items()]
        if entries:
            _with_lock_retries(self.client.log_batch, run_id, tags=entries)

    def log_artifact(self, run_id: str, path: Path, artifact_path: str | None = None) -> None:
        self.client.log_artifact(run_id, str(path), artifact_path=artifact_path)

    def finish(self, run_id: str, status: str = "FINISHED") -> None:
        _with_lock_retries(self.client.set_terminated, run_id, status=status)
        if run_id in self.open_runs:
            self.open_runs.remove(run_id)

    def close_if_running(self, run_ids: list[str], status: str) -> None:
        """Terminate runs an earlier, killed process left RUNNING (it could not close them itself)."""
        for run_id in run_ids:
            try:
                if self.client.get_run(run_id).info.status == "RUNNING":
                    self.client.set_terminated(run_id, status=status)
            except Exception:  # a run deleted by the user, or another store: nothing to close
                pass

    def fail_open_runs(self, status: str = "FAILED") -> None:
        """Children first, then the parent: nothing is left RUNNING after an error or Ctrl-C."""
        for run_id in reversed(list(self.open_runs)):
            try:
                self.finish(run_id, status)
            except Exception:  # the store itself may be the problem; never mask the original error
                pass


class NullTracker:
    """Tracking off: the AuditTracker interface, doing nothing (run ids are None)."""

    enabled = False
    tracking_uri = None
    experiment_id = None

    def __init__(self, *args: Any, **kwargs: Any):
        self.open_runs: list[str] = []

    def start_run(self, name: str, *, parent_id: str | None = None, tags: dict[str, str] | None = None) -> None:
        return None

    def __getattr__(self, name: str):  # log_params, log_metrics, log_artifact, finish, set_verdict, …
        if name.startswith("_"):
            raise AttributeError(name)
        return lambda *args, **kwargs: None


def open_tracker(
    tracking_uri: str | None, experiment: str, *, command: str | None = None, enabled: bool = True
) -> AuditTracker | NullTracker:
    """An `AuditTracker`, or a `NullTracker` when tracking is off."""
    return AuditTracker(tracking_uri, experiment, command) if enabled else NullTracker()


def target_metrics(record: dict[str, Any]) -> dict[str, float | None]:
    """The MLflow metrics of one target record of results.json (finite values only)."""
    metrics: dict[str, float | None] = {f"eps_{name}": value for name, value in record["epsilon"].items()}
    metrics["test_accuracy"] = record["test_accuracy"]
    metrics["eps_lb_best"] = record["epsilon_lb_best"]
    for attack in record["attacks"]:
        name = attack["name"]
        metrics[f"{name}_auc"] = attack["auc"]
        metrics[f"{name}_advantage"] = attack["advantage"]
        for level, value in attack["tpr_at_fpr"].items():
            metrics[f"{name}_tpr_at_fpr_{level}"] = value
        metrics[f"{name}_eps_lb_cp"] = attack["epsilon_lb"]["clopper_pearson"]
        metrics[f"{name}_eps_lb_one_run"] = attack["epsilon_lb"]["one_run"]
        metrics[f"{name}_eps_gdp_estimate"] = attack["epsilon_estimate_gdp"]["epsilon"]
    return {k: v for k, v in metrics.items() if v is None or math.isfinite(v)}


def synthetic_risk_metrics(entry: dict[str, Any]) -> dict[str, float | None]:
    """MLflow metrics of one synthetic entry's re-identification risks (none when not measured)."""
    risks = entry.get("risks")
    if not risks:
        return {}
    metrics: dict[str, float | None] = {
        "risk_singling_out": (risks.get("singling_out") or {}).get("value"),
        "risk_linkability": (risks.get("linkability") or {}).get("value"),
        "risk_inference_max": risks.get("inference_max"),
        "dcr_baseline_protection": risks["dcr_baseline_protection"]["score"],
    }
    for risk in risks.get("inference") or []:
        # MLflow keys allow letters, digits, _ - . / and spaces; a column name may hold anything else.
        metrics["risk_inference_" + re.sub(r"[^\w\-./ ]", "_", str(risk["secret"]))] = risk["value"]
    return metrics


def tag_run(tracking_uri: str, run_id: str, tags: dict[str, Any]) -> None:
    """Add tags to an existing (possibly finished) run: e.g. the privacy-ledger entry a command recorded
    after its run closed."""
    from mlflow.entities import RunTag
    from mlflow.tracking import MlflowClient

    _quiet_mlflow_logs()
    client = MlflowClient(tracking_uri=tracking_uri)
    entries = [RunTag(key, str(value)) for key, value in tags.items() if value is not None]
    if entries:
        _with_lock_retries(client.log_batch, run_id, tags=entries)


def _is_mlflow_sqlite(path: Path) -> bool:
    """A regular SQLite file holding MLflow's tables (opened read-only: MLflow would otherwise create
    its schema inside any database a results file names)."""
    import sqlite3

    if path.is_symlink() or not path.is_file():
        return False
    try:
        connection = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, timeout=5)
        try:
            names = {row[0] for row in connection.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        finally:
            connection.close()
    except sqlite3.Error:
        return False
    return {"runs", "tags", "experiments", "alembic_version"} <= names


def gate_run_target(results: dict[str, Any], tracking_uri: str | None) -> tuple[str, str] | str:
    """(tracking URI, run id) of the MLflow run a results file points to, or one sentence saying why
    the gate's verdict cannot be logged there. A URI read from the file is used only when it names an
    existing SQLite MLflow store: a results file must not make `gate` create a database or contact a
    server; `--tracking-uri` names any other store explicitly."""
    found = results.get("mlflow")
    mlflow: dict[str, Any] = found if isinstance(found, dict) else {}
    run_id = mlflow.get("parent_run_id") or mlflow.get("run_id")
    if not isinstance(run_id, str) or not run_id.isalnum() or len(run_id) > 64:
        return "MLflow: the results name no MLflow run, so the gate's verdict is in the files only"
    if tracking_uri is not None:
        return check_tracking_uri(tracking_uri), run_id
    uri = mlflow.get("tracking_uri")
    if not isinstance(uri, str) or not uri:
        return "MLflow: the results name no tracking store, so the gate's verdict is in the files only"
    shown_uri = uri[:120]
    if not uri.startswith("sqlite:///"):
        return (
            f"MLflow: the results point to '{shown_uri}', which the gate does not contact on a file's word; "
            "give --tracking-uri to log the gate's verdict there"
        )
    if not _is_mlflow_sqlite(Path(uri[len("sqlite:///") :])):
        return (
            f"MLflow: the store '{shown_uri}' the results point to is not an MLflow SQLite store here, "
            "so the gate's verdict is in the files only"
        )
    return uri, run_id


def log_gate_verdict(tracking_uri: str, run_id: str, tags: dict[str, str], policy_file: Path | None) -> str | None:
    """Add the gate's tags (never the run's own `verdict`) and the policy file to an existing run.
    Returns None, or one sentence saying why nothing was logged."""
    from mlflow.tracking import MlflowClient

    _quiet_mlflow_logs()
    tags = {k: v for k, v in tags.items() if k != "verdict"}  # the run's own verdict stays as the run wrote it
    try:
        client = _with_lock_retries(MlflowClient, tracking_uri=tracking_uri)
        try:
            client.get_run(run_id)
        except Exception:  # noqa: BLE001 - mlflow raises MlflowException / RestException for a missing run
            return (
                f"MLflow: run {run_id} is not in the store '{tracking_uri[:120]}', "
                "so the gate's verdict is in the files only"
            )
        tag_run(tracking_uri, run_id, tags)
        if policy_file is not None and policy_file.is_file():
            _with_lock_retries(client.log_artifact, run_id, str(policy_file), "gate")
    except AuditInputError as exc:
        return f"MLflow: the gate's verdict was not logged ({exc})"
    except Exception as exc:  # noqa: BLE001 - an unusable store: the gate's verdict stands, the log says why not
        return f"MLflow: the gate's verdict was not logged ({type(exc).__name__}: {' '.join(str(exc).split())[:160]})"
    return None
