"""Executors (audit/machinery/executors.py): the same audit gives the same numbers in this process, in
child processes and on a real local Ray cluster; a Ray worker killed mid-task is retried and the
numbers do not move; a task that keeps dying fails the run, whose folder then resumes."""

from __future__ import annotations

import json
import math
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import pytest

from audit.errors import AuditInputError
from audit.machinery.executors import LocalExecutor, ProcessExecutor, RayExecutor, make_executor
from audit.machinery.tracking import experiment_name
from audit.machinery.workers import WorkerInternalError

# A small audit that still exercises every kind of task: targets at two ε, reference and shadow
# models split into tasks of two models, and two synthetic generators.
TINY = {
    "name": "tiny",
    "data": {"n_rows": 700},
    "training": {"hidden_sizes": [16], "epochs": 2},
    # GDP: Opacus calibrates σ in closed form (PRV's numeric search is most of a small run's time).
    # The white-box twin and the conformance probes run in the driver process, never on the executor:
    # left out here (test_end_to_end.py's killed-and-resumed smoke run compares their numbers across
    # processes).
    "privacy": {"epsilons": [2.0, "inf"], "accountant": "gdp", "whitebox_one_run": False, "conformance": False},
    "attacks": {
        "names": ["loss", "shadow", "lira", "rmia"],
        "n_shadow_models": 2,
        "n_reference_models": 4,
        "rmia_population": 40,
        "models_per_task": 2,
    },
    "synthetic": {"generators": ["noisy_copy", "gaussian_copula"]},
}
# Run-dependent fields: where and when, not what was measured.
NOT_NUMBERS = {"train_seconds", "train_seconds_with_canaries", "train_seconds_target", "seconds", "mlflow_run_id"}


def tiny_config(**overrides):
    from audit.machinery.config import resolve_config

    return resolve_config("smoke", overrides={**TINY, **overrides})


def numbers(results: dict) -> dict:
    """What results.json measured: targets and synthetic releases, without run ids and timings."""

    def strip(value):
        if isinstance(value, dict):
            return {k: strip(v) for k, v in value.items() if k not in NOT_NUMBERS}
        if isinstance(value, list):
            return [strip(v) for v in value]
        return value

    return {"targets": strip(results["targets"]), "synthetic": strip(results["synthetic"])}


def run_tiny(tmp_path: Path, executor, name: str, tracking_uri: str, **kwargs):
    from audit.sweep.runner import run_audit

    return run_audit(
        tiny_config(), out_dir=tmp_path / name / "runs", tracking_uri=tracking_uri, executor=executor, **kwargs
    )


def square_plus(x, *, offset=0):
    return x * x + offset


def crash_once_then_square(x, *, marker: str):
    """Dies by SIGKILL the first time task 1 runs (a worker killed mid-task), then behaves."""
    if x == 1 and not os.path.exists(marker):
        Path(marker).write_text(str(os.getpid()))
        os.kill(os.getpid(), signal.SIGKILL)
    return x * x


def always_crash(x):
    os.kill(os.getpid(), signal.SIGKILL)


@pytest.fixture(scope="module")
def ray_cluster():
    """A real local Ray cluster (2 CPUs), shared by this module's tests and stopped after them."""
    if os.environ.get("PRIVACY_AUDIT_REQUIRE_RAY"):  # CI: a missing extra must fail, not skip
        import ray
    else:
        ray = pytest.importorskip("ray", reason="the Ray tests need the [ray] extra (CI installs it)")
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    # Ray workers import this module's task functions by name: give them the test folder's path.
    here = Path(__file__).resolve().parent
    ray.init(
        num_cpus=2,
        include_dashboard=False,
        logging_level="ERROR",
        log_to_driver=False,
        runtime_env={"env_vars": {"PYTHONPATH": os.pathsep.join([str(here), str(here.parent)])}},
    )
    yield ray
    ray.shutdown()


# -- the interface ----------------------------------------------------------------------------------


@pytest.mark.slow  # spawns processes and Ray workers: > 20 s on a loaded 2-core machine
def test_every_executor_returns_results_in_task_order(tmp_path, ray_cluster):
    tasks = [(x,) for x in range(7)]
    expected = [x * x + 1 for x in range(7)]
    seen = []
    with ProcessExecutor(2) as processes:
        assert processes.map(square_plus, tasks, {"offset": 1}) == expected
    ray_executor = make_executor("ray")  # joins the running cluster, leaves it running
    assert ray_executor.map(square_plus, tasks, {"offset": 1}, on_result=lambda i, r: seen.append(i)) == expected
    assert sorted(seen) == list(range(7))
    assert LocalExecutor().map(square_plus, tasks, {"offset": 1}) == expected


def test_bad_executor_options_are_input_errors():
    with pytest.raises(AuditInputError, match="--executor"):
        make_executor("threads")
    with pytest.raises(AuditInputError, match="--ray-address"):
        make_executor("processes", ray_address="auto")
    with pytest.raises(AuditInputError, match="--workers"):
        make_executor("processes", workers=0)


def test_ray_task_errors_map_like_local_ones(ray_cluster):
    from audit.machinery.workers import call_user_function

    executor = make_executor("ray")
    with pytest.raises(AuditInputError, match="cannot import module 'no_such_module_14'"):
        executor.map(call_user_function, [("no_such_module_14:train", "--trainer")])
    with pytest.raises(WorkerInternalError, match="math domain error"):
        executor.map(math.sqrt, [(-1.0,)])


def test_a_killed_ray_worker_is_retried_and_the_results_do_not_change(tmp_path, ray_cluster):
    marker = tmp_path / "killed_once"
    results = make_executor("ray").map(crash_once_then_square, [(x,) for x in range(4)], {"marker": str(marker)})
    assert marker.exists()  # the worker really died once
    assert results == [0, 1, 4, 9]


def test_a_task_that_keeps_dying_fails_with_a_clear_message(ray_cluster):
    from audit.machinery.executors import ExecutorTaskError

    executor = RayExecutor(max_retries=1)
    with pytest.raises(ExecutorTaskError, match=r"task 0 \(always_crash\) failed on Ray after 1 retries"):
        executor.map(always_crash, [(1,)])


# -- the audit --------------------------------------------------------------------------------------


def _kill_first_busy_ray_worker(killed: list[int], stop: threading.Event) -> None:
    """Watch the process table for a Ray worker running a task and SIGKILL it (once).

    Ray names a busy worker process after its task; every task of the executor goes through one
    wrapper (`ray::_ray_task`), so the first busy worker seen is killed mid-task.
    """
    while not stop.is_set() and not killed:
        for pid in (p for p in os.listdir("/proc") if p.isdigit()):
            try:
                cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            if cmdline.startswith("ray::_ray_task"):
                os.kill(int(pid), signal.SIGKILL)
                killed.append(int(pid))
                return
        time.sleep(0.02)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def start_mlflow_server(folder: Path) -> tuple[subprocess.Popen, str]:
    """A real `mlflow server` on 127.0.0.1: SQLite backend store, proxied artifact root, in `folder`."""
    port = _free_port()
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "mlflow",
            "server",
            "--backend-store-uri",
            f"sqlite:///{folder / 'server.db'}",
            "--artifacts-destination",
            str(folder / "artifacts"),
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--workers",
            "1",
        ],
        stdout=subprocess.DEVNULL,
        stderr=open(folder / "server.log", "w"),
        start_new_session=True,
        # MLflow 3's server also starts a job runner (a job process and ~7 huey consumers, each importing
        # MLflow: ~20 s of CPU) for its GenAI jobs; the tracking API these tests log through does not use it.
        env={**os.environ, "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"},
    )
    return process, f"http://127.0.0.1:{port}"


def wait_until_up(process: subprocess.Popen, uri: str, timeout: float = 180) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert process.poll() is None, "mlflow server exited"
        try:
            with urllib.request.urlopen(f"{uri}/health", timeout=2) as response:
                if response.status == 200:
                    return
        except OSError:
            time.sleep(0.5)
    raise AssertionError(f"mlflow server at {uri} did not come up within {timeout} s")


def stop_server(process: subprocess.Popen) -> None:
    """Stop the server and its uvicorn worker (its own process group): politely, then for sure."""
    os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=10)


SEARCH_RUNS = """
import json, sys, mlflow
mlflow.set_tracking_uri(sys.argv[1])
runs = mlflow.search_runs(experiment_names=[sys.argv[2]], output_format="list")
print(json.dumps([{"id": r.info.run_id, "status": r.info.status, "metrics": r.data.metrics,
                   "parent": r.data.tags.get("mlflow.parentRunId"),
                   "artifacts": [a.path for a in mlflow.MlflowClient().list_artifacts(r.info.run_id)]} for r in runs]))
"""


@pytest.mark.slow
def test_same_numbers_on_every_executor_a_killed_ray_worker_and_a_live_mlflow_server(tmp_path, ray_cluster):
    """local, processes --workers 2 and Ray (one of its workers SIGKILLed mid-task) give identical
    results; the Ray run logs to a live `mlflow server`, read back by `mlflow.search_runs` in another process."""
    server, server_uri = start_mlflow_server(tmp_path)  # starts while the first two runs train
    try:
        store = f"sqlite:///{tmp_path / 'mlflow.db'}"  # one store: its schema is created once
        # side_process=False: the local run's second lane (one more spawned interpreter, ~6 s of CPU) is not what
        # is compared here; tests/test_side_lane.py checks that it leaves every number as it is.
        local = run_tiny(tmp_path, LocalExecutor(), "local", store, side_process=False)
        with ProcessExecutor(2) as processes:
            in_children = run_tiny(tmp_path, processes, "processes", store)
        wait_until_up(server, server_uri)
        killed: list[int] = []
        stop = threading.Event()
        watcher = threading.Thread(target=_kill_first_busy_ray_worker, args=(killed, stop), daemon=True)
        watcher.start()
        try:
            on_ray = run_tiny(tmp_path, make_executor("ray"), "ray", server_uri)
        finally:
            stop.set()
            watcher.join(timeout=5)
        assert killed, "no Ray worker was seen running a task"
        assert [r.results["execution"]["executor"] for r in (local, in_children, on_ray)] == [
            "local",
            "processes",
            "ray",
        ]
        assert len(local.results["synthetic"]) == 2 and len(local.results["targets"]) == 2
        assert numbers(in_children.results) == numbers(local.results)
        assert numbers(on_ray.results) == numbers(local.results)

        reader = subprocess.run(
            [sys.executable, "-c", SEARCH_RUNS, server_uri, experiment_name("run", "tiny")],
            capture_output=True,
            text=True,
            timeout=300,
            env={**os.environ, "MLFLOW_TRACKING_URI": server_uri},
        )
        assert reader.returncode == 0, reader.stderr[-2000:]
        runs = {run["id"]: run for run in json.loads(reader.stdout.strip().splitlines()[-1])}
        mlflow_ids = on_ray.results["mlflow"]
        parent = runs[mlflow_ids["parent_run_id"]]
        assert parent["status"] == "FINISHED" and "results.json" in parent["artifacts"]
        for target, child_id in zip(on_ray.results["targets"], mlflow_ids["child_run_ids"]):
            child = runs[child_id]
            assert child["parent"] == mlflow_ids["parent_run_id"] and child["status"] == "FINISHED"
            assert child["metrics"]["eps_lb_best"] == target["epsilon_lb_best"]
    finally:
        stop_server(server)


class FailsMidMap:
    """Wraps an executor: the first `map` delivers `keep` results, then fails the way a task that
    keeps dying fails on Ray (ExecutorTaskError). What was delivered is checkpointed by the run."""

    def __init__(self, inner, keep: int):
        self.inner, self.keep = inner, keep
        self.name, self.workers = inner.name, inner.workers

    def task_device(self, requested, driver_device):
        return self.inner.task_device(requested, driver_device)

    def describe(self):
        return self.inner.describe()

    def close(self):
        self.inner.close()

    def map(self, function, tasks, kwargs=None, on_result=None):
        from audit.machinery.executors import ExecutorTaskError

        delivered = []

        def deliver(index, result):
            if len(delivered) == self.keep:
                raise ExecutorTaskError(f"task {index} ({function.__name__}) failed on Ray after 3 retries")
            delivered.append(index)
            if on_result is not None:
                on_result(index, result)

        return self.inner.map(function, tasks, kwargs, on_result=deliver)


@pytest.mark.slow
def test_a_run_failed_by_its_executor_resumes_on_another_with_the_same_numbers(tmp_path):
    from audit.machinery.executors import ExecutorTaskError
    from audit.sweep.runner import run_audit

    config = tiny_config(attacks={"names": ["loss"]}, synthetic=None)
    store = f"sqlite:///{tmp_path / 'mlflow.db'}"
    out = tmp_path / "runs"
    # One worker is enough for a map that delivers one target and then fails (a second would only add a spawned
    # interpreter's imports); the local runs leave out the side lane (tests/test_side_lane.py: same numbers).
    with ProcessExecutor(1) as processes, pytest.raises(ExecutorTaskError, match="failed on Ray after 3 retries"):
        run_audit(config, out_dir=out, tracking_uri=store, executor=FailsMidMap(processes, keep=1))
    (partial,) = [p for p in out.iterdir() if p.name.startswith(".")]  # the staging folder is kept
    assert len(list((partial / "checkpoints").glob("eps_*/target.json"))) == 1  # one target finished
    resumed = run_audit(
        config, out_dir=out, tracking_uri=store, resume=partial, executor=LocalExecutor(), side_process=False
    )
    fresh = run_audit(
        config, out_dir=tmp_path / "fresh", tracking_uri=store, executor=LocalExecutor(), side_process=False
    )
    assert numbers(resumed.results) == numbers(fresh.results)


# -- bench --executor -------------------------------------------------------------------------------


def test_projection_counts_whole_rounds_of_the_measured_task_cost():
    from audit.machinery.executor_benchmark import projected_wall_seconds

    assert projected_wall_seconds(10, 2.0, n_gpus=1, slots_per_gpu=4) == 6.0  # 3 rounds of 4 slots
    assert projected_wall_seconds(8, 2.0, n_gpus=2, slots_per_gpu=4) == 2.0
    assert projected_wall_seconds(10_000, 0.5, n_gpus=64, slots_per_gpu=4) == 40 * 0.5


@pytest.mark.slow
def test_trainer_runs_give_the_same_models_on_one_or_two_workers():
    from audit.machinery.executor_benchmark import trainer_throughput

    one = trainer_throughput("local", 1, 3, n_rows=64)
    two = trainer_throughput("processes", 2, 3, n_rows=64)
    assert one["workers"] == 1 and two["workers"] == 2
    assert one["checksums"] == two["checksums"] and len(set(one["checksums"])) == 3  # seeded by run id
    assert one["runs_per_second"] > 0 and two["seconds_per_run_per_worker"] > 0
    assert one["runs"] == 3  # min_seconds 0: one timed batch
    assert all(m["load_average_before"] is None or len(m["load_average_before"]) == 3 for m in (one, two))


# -- canary-audit --executor: user code isolated from the driver on every executor ------------------

# Run-dependent fields of canary-audit.json: where it ran and where it was logged.
CANARY_NOT_NUMBERS = {"execution", "mlflow", "integrity"}  # the digest covers the execution block too
SLEEPY_TRAINER = (
    "import time\nCLAIM = {'epsilon': 1.0, 'delta': 1e-5}\ndef train(features, labels, seed):\n    time.sleep(3600)\n"
)


def canary_cli(
    tmp_path: Path, name: str, *executor: str, timeout_s: str = "300", fresh_process: bool = True
) -> subprocess.CompletedProcess:
    from tests.conftest import run_cli, run_cli_in_process

    args = (
        "canary-audit",
        "--trainer",
        "audit.demos.dp_trainers:broken_no_clipping",
        "--models",
        "4",
        "--canaries",
        "2",
        "--rows",
        "64",
        "--timeout",
        timeout_s,
        "--quiet",
        "--out",
        str(tmp_path / name),
        "--tracking-uri",
        f"sqlite:///{tmp_path / 'mlflow.db'}",
        *executor,
    )
    return run_cli(*args, cwd=tmp_path) if fresh_process else run_cli_in_process(*args, cwd=tmp_path)


def canary_result(folder: Path) -> dict:
    (path,) = folder.glob("*-canary-audit/canary-audit.json")
    return json.loads(path.read_text())


@pytest.mark.slow  # three canary audits (8 trainings each), one in a fresh process: ≈ 25 s here
def test_a_canary_audit_gives_the_same_numbers_on_every_executor(tmp_path, ray_cluster):
    """local (one isolated child), processes --workers 2 and the running local Ray cluster (joined
    by its address from the CLI, as a user joins theirs) give identical canary-audit.json numbers.

    The Ray run is a fresh `privacy-audit` process, so that it joins the cluster by its address
    (this process is already connected); local and processes run the CLI in this process (their
    training runs are real child processes either way), which saves two interpreters' imports."""
    address = ray_cluster.get_runtime_context().gcs_address
    runs = {
        "local": ("--executor", "local"),
        "processes": ("--executor", "processes", "--workers", "2"),
        "ray": ("--executor", "ray", "--ray-address", address),
    }
    results = {}
    for name, flags in runs.items():
        done = canary_cli(tmp_path, name, *flags, fresh_process=name == "ray")
        assert done.returncode == 0, done.stderr[-2000:]
        results[name] = canary_result(tmp_path / name)
    assert [results[n]["execution"]["executor"] for n in runs] == list(runs)
    assert results["processes"]["execution"]["workers"] == 2
    measured = {n: {k: v for k, v in r.items() if k not in CANARY_NOT_NUMBERS} for n, r in results.items()}
    assert measured["local"]["n_runs"] == 4 and 0.0 <= measured["local"]["auc"] <= 1.0
    assert measured["processes"] == measured["local"]
    assert measured["ray"] == measured["local"]


def _busy_ray_workers() -> list[int]:
    """Ray worker processes running a task of ours (an idle worker is renamed ray::IDLE)."""
    busy = []
    for pid in (p for p in os.listdir("/proc") if p.isdigit()):
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if cmdline.startswith("ray::_ray_task"):
            busy.append(int(pid))
    return busy


def test_a_hung_ray_task_is_cancelled_after_the_timeout_naming_the_trainer(tmp_path, ray_cluster, monkeypatch):
    from audit.machinery.executors import make_user_code_executor
    from audit.machinery.workers import UserCodeError, call_user_function

    (tmp_path / "sleepy_trainer_14.py").write_text(SLEEPY_TRAINER)
    monkeypatch.chdir(tmp_path)  # the Ray task imports the user's module from the driver's folder
    executor = make_user_code_executor("ray", timeout=2, name="--trainer", what="trainer sleepy_trainer_14:train")
    started = time.monotonic()
    with pytest.raises(
        UserCodeError,
        match=r"trainer sleepy_trainer_14:train did not return within 2 s on Ray "
        r"\(task 0, call_user_function",
    ) as raised:
        executor.map(call_user_function, [("sleepy_trainer_14:train", "--trainer", (None, None, 0))])
    assert raised.value.where == "--trainer"
    assert time.monotonic() - started < 60
    deadline = time.monotonic() + 30
    while _busy_ray_workers() and time.monotonic() < deadline:  # force-cancel kills the worker process
        time.sleep(0.2)
    assert not _busy_ray_workers(), "the hung task still runs after its timeout"
    # The cluster keeps working; with a timeout only `slots` tasks are in flight, refilled in order.
    # (A longer timeout: the killed worker's replacement starts, and imports torch, on the task's clock.)
    patient = make_user_code_executor("ray", timeout=120, name="--trainer", what="trainer")
    assert patient.slots == 2
    assert patient.map(square_plus, [(x,) for x in range(5)], {"offset": 1}) == [x * x + 1 for x in range(5)]


def test_canary_audit_on_ray_with_a_hung_trainer_exits_2_naming_it(tmp_path, ray_cluster):
    from tests.conftest import run_cli

    (tmp_path / "sleepy_trainer_cli.py").write_text(SLEEPY_TRAINER)
    address = ray_cluster.get_runtime_context().gcs_address
    done = run_cli(
        "canary-audit",
        "--trainer",
        "sleepy_trainer_cli:train",
        "--models",
        "4",
        "--timeout",
        "3",
        "--executor",
        "ray",
        "--ray-address",
        address,
        "--quiet",
        "--out",
        str(tmp_path / "runs"),
        "--tracking-uri",
        f"sqlite:///{tmp_path / 'mlflow.db'}",
        cwd=tmp_path,
        timeout=300,
    )
    assert done.returncode == 2, done.stderr[-2000:]
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("error: --trainer: the trainer sleepy_trainer_cli:train did not return within 3 s on Ray")
    assert not list((tmp_path / "runs").glob("*-canary-audit"))  # nothing half-written


@pytest.mark.parametrize(
    "command, flags, where",
    [
        (
            ("canary-audit", "--trainer", "audit.demos.dp_trainers:correct_dpsgd"),
            ("--executor", "local", "--workers", "2"),
            "--workers",
        ),
        (
            ("audit-model", "--function", "m:f", "--trainer", "m:train", "--members", "m.csv", "--nonmembers", "n.csv"),
            ("--executor", "processes", "--ray-address", "auto"),
            "--ray-address",
        ),
    ],
)
def test_bad_executor_flags_exit_2_before_any_user_code_runs(tmp_path, command, flags, where):
    # in this process: the README runs canary-audit and audit-model in fresh ones, with their exit codes
    from tests.conftest import run_cli_in_process

    done = run_cli_in_process(*command, *flags, "--out", str(tmp_path / "runs"), cwd=tmp_path)
    assert done.returncode == 2 and done.stderr.strip().splitlines()[-1].startswith(f"error: {where}:"), done.stderr
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())


# -- audit-model --trainer on executors -------------------------------------------------------------

USER_TRAINER_MODULE = """
from sklearn.ensemble import RandomForestClassifier


def train_forest(features, labels, seed):
    # seed-dependent on purpose: a model that ignored its seed could not tell executors apart
    return RandomForestClassifier(n_estimators=8, max_depth=4, random_state=seed).fit(features, labels)
"""


@pytest.mark.slow  # 3 × 4 reference forests, each executor starting its workers: ≈ 30 s here
def test_audit_model_user_trainer_references_give_the_same_numbers_on_every_executor(
    tmp_path, ray_cluster, monkeypatch
):
    from sklearn.ensemble import RandomForestClassifier

    from audit.machinery.config import AuditConfig
    from audit.model_audits.model_audit import audit_user_model
    from targets.datasets import make_default_tabular

    (tmp_path / "user_forest_14.py").write_text(USER_TRAINER_MODULE)
    monkeypatch.chdir(tmp_path)  # the workers import the user's module from the driver's folder
    n = 60
    data = make_default_tabular(4 * n, seed=3)
    X, y = data.features.astype("float32"), data.labels.astype("int64")
    target = RandomForestClassifier(n_estimators=8, max_depth=4, random_state=0).fit(X[:n], y[:n])
    config = AuditConfig.model_validate(
        {
            "name": "executors",
            "privacy": {"epsilons": ["inf"]},
            "attacks": {"n_reference_models": 4, "rmia_population": 60},
        }
    )
    common = dict(
        model=target,
        trainer="user_forest_14:train_forest",
        members=(X[:n], y[:n]),
        nonmembers=(X[n : 2 * n], y[n : 2 * n]),
        population=(X[2 * n :], y[2 * n :]),
        attack_names=["lira_offline"],
        device="cpu",
    )
    runs = {"local": {}, "processes": {"workers": 2}, "ray": {}}
    results = {
        kind: audit_user_model(config, executor=kind, scores_path=tmp_path / f"{kind}.csv", **extra, **common)
        for kind, extra in runs.items()
    }
    assert [results[k]["execution"]["executor"] for k in runs] == list(runs)
    assert results["processes"]["execution"]["workers"] == 2
    local = results["local"]["targets"]
    assert {a["name"] for a in local[0]["attacks"]} == {"loss", "lira_offline"}  # loss always runs
    for kind in ("processes", "ray"):
        assert json.dumps(results[kind]["targets"], sort_keys=True) == json.dumps(local, sort_keys=True), kind
        assert (tmp_path / f"{kind}.csv").read_text() == (tmp_path / "local.csv").read_text()  # every score
