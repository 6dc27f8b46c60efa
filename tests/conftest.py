"""Shared fixtures. Tests run on the CPU with real Opacus, real MLflow (SQLite file) and real files.

Conventions for every test file (docs/test-suite.md has the long form):

- Markers: `slow` (trains real models end to end, runs a full audit in a fresh process, or otherwise takes
  more than ~5 s of CPU on its own), `browser` (headless Chromium), `packaging` (builds or installs the
  wheel), `gpu` (needs a CUDA device; skipped without one, the only skip a CPU machine may show).
  `make test-fast` runs `-m "not slow and not browser and not packaging"`.
- The suite runs under pytest-xdist (`make test` = `-n 2 --dist loadfile`). So: tmp_path / tmp_path_factory
  for every file, port 0 for every server, one MLflow store per test (or per shared fixture), never chdir
  without monkeypatch.chdir, never write into the checkout.
- Expensive things are built once: a module-scoped fixture, shared by the tests of its file. loadfile keeps
  a file on one worker, so it is built once; a session-scoped fixture would be built once per worker.
  (`xdist_group` marks do nothing here: xdist 3.8 groups by rewriting `item._nodeid`, which pytest 9.2 no
  longer reads, so loadgroup schedules test by test.)
"""

from __future__ import annotations

import contextlib
import io
import os
import subprocess
import sys
from pathlib import Path

import pytest

os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
os.environ.setdefault("DO_NOT_TRACK", "true")

REPO = Path(__file__).resolve().parents[1]
TESTS = REPO / "tests"

# A tiny `run` over the smoke preset (a `--config` diff, YAML) for tests of plumbing — concurrent writers,
# resume, executors, progress lines — whose guarantee does not depend on the audit's size. 400 rows train a
# [16] MLP for 3 epochs; batch 16 keeps Opacus's Poisson rate at 1/8: at the small training set's default
# rate (batch 64: q = 1/2) the PRV accountant's noise calibration alone took ~10 s of CPU, at 1/8 about 1 s.
# One DP target and the non-private one, the loss attack; the white-box twin and the conformance probes (driver
# or side-lane training, checked by the smoke run in tests/test_end_to_end.py) left out.
TINY_RUN_YAML = (
    "data:\n  n_rows: 400\n"
    "training:\n  hidden_sizes: [16]\n  epochs: 3\n  batch_size: 16\n"
    "privacy:\n  epsilons: [1.0, .inf]\n  whitebox_one_run: false\n  conformance: false\n"
    "attacks:\n  names: [loss]\n"
)


def run_cli(*args: str, cwd: Path, timeout: float = 600) -> subprocess.CompletedProcess:
    """Run `privacy-audit ARGS` as a user would, in a fresh process, from `cwd`."""
    return _run_this_checkout([sys.executable, "-m", "audit.cli", *args], cwd, timeout)


def _run_this_checkout(argv: list[str], cwd: Path, timeout: float) -> subprocess.CompletedProcess:
    return subprocess.run(
        argv,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )


@pytest.fixture
def cli(tmp_path):
    def _run(*args: str, timeout: float = 600) -> subprocess.CompletedProcess:
        return run_cli(*args, cwd=tmp_path, timeout=timeout)

    return _run


def run_cli_in_process(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    """`privacy-audit ARGS` through its console-script entry point (`audit.cli.main`, which maps every ending
    to its exit code) in this process, from `cwd`: the exit code, stdout and stderr `run_cli` would give,
    without a fresh interpreter's ~4-5 s of CPU importing torch, MLflow, scikit-learn and SciPy (measured
    for `audit-scores`: 5.8 s in a fresh process, 0.9 s in-process with its own new MLflow store).

    Worker processes the command starts (user code, training) are real processes either way. Use `run_cli`
    where the test is about the process itself: signals, the CLI's own time limit, what a fresh interpreter
    imports, module state a command could leave behind, usage lines (which name the program)."""
    from audit.cli import main

    out, err = io.StringIO(), io.StringIO()
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(cwd)
        patch.setenv("PYTHONPATH", str(REPO))  # worker processes import this checkout's code, as run_cli's do
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                main(list(args))
                code = 0
            except SystemExit as ended:
                code = ended.code if isinstance(ended.code, int) else 1
    return subprocess.CompletedProcess(["privacy-audit", *args], code, out.getvalue(), err.getvalue())


@pytest.fixture
def cli_in_process(tmp_path):
    """Like `cli` (same call, same result object), in this process: for tests that read what a command
    prints, writes and exits with, not how its process behaves. A test module opts in with
    `@pytest.fixture\ndef cli(cli_in_process): return cli_in_process`."""

    def _run(*args: str, timeout: float = 600) -> subprocess.CompletedProcess:  # timeout: run_cli's signature
        return run_cli_in_process(*args, cwd=tmp_path)

    return _run


# --- a preloaded CLI: many commands, each its own process, without each paying the imports -----------
CLI_SERVER = TESTS / "cli_server.py"


@pytest.fixture(scope="module")
def preloaded_cli_socket(tmp_path_factory):
    """tests/cli_server.py started once per file that asks for it: it imports torch, MLflow, scikit-learn,
    SciPy, pandas and Opacus once (~11 s of CPU) and forks one process per command (`run_cli_preloaded`):
    worth it from ~3 commands a file. Module scope, so that the commands' CPU time (the server reaps them)
    is counted in that file's last test (PRIVACY_AUDIT_TEST_TIMES), not in whichever test ends the session."""
    folder = tmp_path_factory.mktemp("cli")
    socket_path = folder / "s"
    server = subprocess.Popen(
        [sys.executable, str(CLI_SERVER), str(socket_path)],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    try:
        assert server.stdout is not None and server.stdout.readline().strip() == "ready", "cli_server did not start"
        yield socket_path
    finally:
        server.kill()
        server.wait()


def preloaded_cli_command(socket_path: Path) -> list[str]:
    """The argv prefix of a client: `[*prefix, ARGS]` runs `privacy-audit ARGS` in a fresh forked process."""
    return [sys.executable, "-S", str(CLI_SERVER), str(socket_path)]


def run_cli_preloaded(*args: str, cwd: Path, socket_path: Path, timeout: float = 600) -> subprocess.CompletedProcess:
    """`run_cli`'s call and result, the command forked from the preloaded server instead of a fresh
    interpreter: a process of its own (exit code, output, signals, workers), without ~4-11 s of imports."""
    return _run_this_checkout([*preloaded_cli_command(socket_path), *args], cwd, timeout)


@pytest.fixture
def preloaded_cli(tmp_path, preloaded_cli_socket):
    """Like `cli` (same call, same result object), each command forked from the preloaded server."""

    def _run(*args: str, timeout: float = 600) -> subprocess.CompletedProcess:
        return run_cli_preloaded(*args, cwd=tmp_path, socket_path=preloaded_cli_socket, timeout=timeout)

    return _run


@pytest.fixture(autouse=True)
def _no_crash_log_folder_left_behind():
    """An in-process CLI call sets the crash-log folder (a process-wide setting), often relative ('.'):
    reset it so a later test's internal error never writes its log into the checkout."""
    yield
    crash_log = sys.modules.get("audit.machinery.crash_log")
    if crash_log is not None:
        crash_log.set_log_folder(None)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "mlflow_migration: the test is about MLflow creating a new store: its schema is migrated by MLflow, "
        "not copied from the process's template (tests/mlflow_migration.py)",
    )


@pytest.fixture(autouse=True)
def _new_mlflow_stores_copy_a_migrated_schema(request):
    """A new MLflow SQLite store opened in this process gets the schema MLflow migrated once for the process,
    copied (tests/mlflow_migration.py): 2.4-4.4 s of CPU per store otherwise. Only once MLflow is loaded (a
    test that never touches it does not import it); a test marked `mlflow_migration` migrates."""
    if "mlflow.store.db.utils" not in sys.modules:
        yield
        return
    from tests import mlflow_migration

    if request.node.get_closest_marker("mlflow_migration") is None:
        mlflow_migration.install()  # stays installed: the next tests find it there
        yield
        return
    import mlflow.store.db.utils as db_utils

    copying = db_utils._initialize_tables
    original = getattr(copying, "migrates_with", None)
    if original is not None:
        db_utils._initialize_tables = original
    try:
        yield
    finally:
        db_utils._initialize_tables = copying


# Tests measured at or above a CPU cost each (`python -m tests.timing TIMES --slow S` over a whole-suite run,
# docs/test-suite.md) are listed in tests/measured_slow.txt and marked `slow` here, so `make test-fast` leaves
# them out; `make test` and CI still run them. A data file, not code: regenerating it touches no test file.
# Prefer a `@pytest.mark.slow` (with a comment saying what costs) in a new test itself.
MEASURED_SLOW = frozenset(
    line
    for line in (TESTS / "measured_slow.txt").read_text(encoding="utf-8").splitlines()  # ids may end in a space
    if line and not line.startswith("#")
)


# --- scheduling: the costliest files first ---------------------------------------------------------
# `--dist loadfile` hands each worker whole files, in the order the workers collected them; xdist's default
# reorders them by number of tests, which put two-test files costing minutes (the README run, the end-to-end
# smoke run) last, with one worker busy for minutes after the other ran dry. `make test` passes
# --no-loadscope-reorder, and in xdist workers the items are sorted here by each file's measured CPU seconds,
# costliest first (longest-processing-time-first: the files that start last are the cheap ones).
# FILE_CPU_SECONDS is `python -m tests.timing TIMES --costs` over a whole-suite run (docs/test-suite.md);
# a file not in it counts as DEFAULT_FILE_CPU_SECONDS. Stale numbers cost balance, never correctness.
# 28 Nov 2026 (wave 10, issues 37/40): `PRIVACY_AUDIT_TEST_TIMES=... make test` on a fresh clone of main after
# wave 10's merges, idle (load 2-3 with the suite itself): 2790 s of test CPU (the workers of fresh CLI
# processes counted: the fork server is waited for), 25 min 20 s of pytest wall;
# `python -m tests.timing TIMES --costs`. Files new since keep the default.
DEFAULT_FILE_CPU_SECONDS = 5.0
FILE_CPU_SECONDS: dict[str, float] = {
    "tests/test_readme_examples_no_inputs.py": 152,
    "tests/test_end_to_end.py": 152,
    "tests/test_canary_audit.py": 126,
    "tests/test_hostile_library_output.py": 117,
    "tests/test_in_script_audit.py": 106,
    "tests/test_opacus_setup_table.py": 105,
    "tests/test_verdict.py": 102,
    "tests/test_executors.py": 93,
    "tests/test_hostile_interrupts.py": 92,
    "tests/test_readme_examples.py": 80,
    "tests/test_null_false_alarms.py": 71,
    "tests/test_one_run_whitebox.py": 69,
    "tests/test_sequential.py": 66,
    "tests/test_benchmarks.py": 56,
    "tests/test_ledger_store.py": 52,
    "tests/test_concurrent_runs.py": 51,
    "tests/test_hostile_fuzz.py": 50,
    "tests/test_bad_inputs.py": 49,
    "tests/test_ledger_composition.py": 48,
    "tests/test_tradeoff_curves.py": 41,
    "tests/test_progress_terminal.py": 39,
    "tests/test_llm_run.py": 38,
    "tests/test_fuzz_inputs.py": 38,
    "tests/test_text_run.py": 35,
    "tests/test_security_ledger.py": 35,
    "tests/test_lightning_audit.py": 34,
    "tests/test_ledger_cli.py": 34,
    "tests/test_digits_cnn.py": 33,
    "tests/test_opacus_conformance.py": 31,
    "tests/test_hostile_results_files.py": 31,
    "tests/test_synthetic_risks.py": 30,
    "tests/test_conformance.py": 26,
    "tests/test_text_attacks.py": 26,
    "tests/test_conformance_opacus_usage.py": 26,
    "tests/test_hostile_user_code.py": 25,
    "tests/test_side_lane.py": 24,
    "tests/test_federated_accountants.py": 20,
    "tests/test_whitebox_audit.py": 19,
    "tests/test_cli_naming_and_output.py": 18,
    "tests/test_verdict_claims.py": 18,
    "tests/test_federated_run.py": 18,
    "tests/test_hostile_round_three.py": 18,
    "tests/test_language_model_audit.py": 17,
    "tests/test_packaging.py": 15,
    "tests/test_federated_targets.py": 14,
    "tests/test_sequential_audits.py": 14,
    "tests/test_training.py": 13,
    "tests/test_one_run_rows_verdict.py": 13,
    "tests/test_cli_audits.py": 13,
    "tests/test_llm_padding_trim.py": 13,
    "tests/test_cli_server.py": 13,
    "tests/test_reports.py": 12,
    "tests/test_report_layout.py": 12,
    "tests/test_mode_power.py": 12,
    "tests/test_hostile_text_limits.py": 12,
    "tests/test_synthesizers.py": 12,
    "tests/test_llm_targets.py": 11,
    "tests/test_hostile_model_files.py": 11,
    "tests/test_cli_startup.py": 11,
    "tests/test_hostile_run_folders.py": 10,
    "tests/test_accountant_check.py": 10,
    "tests/test_federated_conformance.py": 10,
    "tests/test_whitebox_one_run_rows.py": 10,
    "tests/test_hostile_limits.py": 10,
    "tests/test_any_model_audit.py": 9,
    "tests/test_preset_timings.py": 9,
    "tests/test_hostile_lm_folders.py": 9,
    "tests/test_verdict_power_words.py": 9,
    "tests/test_docs_site.py": 8,
    "tests/test_model_audit.py": 7,
    "tests/test_synthetic_checks.py": 7,
    "tests/test_forged_results.py": 7,
    "tests/test_epsilon_bounds.py": 7,
    "tests/test_one_run_monotone.py": 7,
    "tests/test_public_api.py": 7,
    "tests/test_security_secrets.py": 7,
    "tests/test_text_targets.py": 6,
    "tests/test_planned_schedule.py": 6,
    "tests/test_console_tables.py": 6,
    "tests/test_policy_single_audits.py": 6,
    "tests/test_cli_light_commands.py": 6,
    "tests/test_attacks.py": 5,
    "tests/test_gate_mlflow.py": 5,
    "tests/test_vectorized_dpsgd.py": 4,
    "tests/test_gaussian_dp_audit.py": 4,
    "tests/test_tracking.py": 4,
    "tests/test_cli_help.py": 4,
    "tests/test_mlflow_migration.py": 4,
    "tests/test_figures.py": 3,
    "tests/test_mechanism_audit.py": 3,
    "tests/test_statistics_fast_paths.py": 3,
    "tests/test_pld_deltas.py": 2,
    "tests/test_llm_one_run.py": 2,
    "tests/test_fdp_one_run.py": 2,
    "tests/test_result_integrity.py": 2,
    "tests/test_security_flags.py": 2,
    "tests/test_file_modes.py": 2,
    "tests/test_security_models.py": 2,
    "tests/test_worker_cpu_accounting.py": 2,
    "tests/test_profile_inverse.py": 2,
    "tests/test_one_run_output.py": 2,
    "tests/test_security_processes.py": 2,
    "tests/test_parameter_flags.py": 2,
    "tests/test_tangent_test_memo.py": 2,
    "tests/test_report_templates.py": 2,
    "tests/test_attack_plugin.py": 1,
    "tests/test_text_exposure.py": 1,
    "tests/test_shared_reference_bank.py": 1,
    "tests/test_gaussian_withholding.py": 1,
    "tests/test_workers.py": 1,
    "tests/test_policy_canary_rule.py": 1,
    "tests/test_shipped_policies.py": 1,
    "tests/test_text_lora_embeddings.py": 1,
    "tests/test_audit_ceilings.py": 1,
    "tests/test_gdp_fit.py": 1,
    "tests/test_results_schema.py": 1,
    "tests/test_policy.py": 1,
    "tests/test_typed_results.py": 1,
    "tests/test_typed_bound_results.py": 1,
    "tests/test_layout.py": 1,
    "tests/test_label_only_attack.py": 1,
    "tests/test_canary_client_count.py": 1,
    "tests/test_attack_metrics.py": 1,
    "tests/test_audit_kind_plugin.py": 1,
    "tests/test_whitebox_device.py": 1,
    "tests/test_progress.py": 0,
    "tests/test_verdict_rows.py": 0,
    "tests/test_cli_flags_docs.py": 0,
    "tests/test_distance_groups.py": 0,
    "tests/test_loss_attack.py": 0,
    "tests/test_one_run_schema.py": 0,
    "tests/test_federated_canary_table.py": 0,
    "tests/test_one_run_canaries.py": 0,
    "tests/test_datasets.py": 0,
    "tests/test_worker_preload.py": 0,
    "tests/test_llm_canary_design.py": 0,
    "tests/test_config.py": 0,
    "tests/test_tracking_uri.py": 0,
    "tests/test_dpsgd_step_backward.py": 0,
    "tests/test_splits.py": 0,
    "tests/test_secrets_verdict_words.py": 0,
    "tests/test_score_ties.py": 0,
    "tests/test_leakage_labels.py": 0,
    "tests/test_reference_count_power_bench.py": 0,
    "tests/test_audit_kinds.py": 0,
    "tests/test_estimator_registry.py": 0,
    "tests/test_llm_report_labels.py": 0,
    "tests/test_single_audit_words.py": 0,
    "tests/test_min_k_floor.py": 0,
}


def file_cpu_seconds(nodeid: str) -> float:
    return FILE_CPU_SECONDS.get(nodeid.split("::")[0], DEFAULT_FILE_CPU_SECONDS)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if hasattr(config, "workerinput"):  # an xdist worker: its order is the schedule (stable: a file keeps its order)
        items.sort(key=lambda item: -file_cpu_seconds(item.nodeid))
    cuda = None
    for item in items:
        measured_slow = item.nodeid in MEASURED_SLOW or item.nodeid.split("[")[0] in MEASURED_SLOW
        if measured_slow and item.get_closest_marker("slow") is None:
            item.add_marker(pytest.mark.slow)
        if item.get_closest_marker("gpu") is not None:
            if cuda is None:
                import torch

                cuda = torch.cuda.is_available()
            if not cuda:
                item.add_marker(pytest.mark.skip(reason="needs a CUDA GPU (marked gpu)"))


# --- where the time goes ---------------------------------------------------------------------------
# PRIVACY_AUDIT_TEST_TIMES=FILE appends one line per test as it finishes (setup, call and teardown
# together): nodeid, wall seconds, CPU seconds (this process, the children it waited for, and its live descendants:
# CLI runs, worker pools, tests/cli_server.py and the commands it forks, each counted in the test it ran in). Works
# under xdist (each worker appends its own lines); `python -m tests.timing FILE` sums them per file.
_TIMES = os.environ.get("PRIVACY_AUDIT_TEST_TIMES")


def _live_descendants_cpu_seconds() -> float:
    """CPU seconds of this process's live descendants (and of the children they reaped), from /proc: a
    module-scoped worker pool or server is reaped only when its file ends, and without this its workers'
    CPU would all land on the file's last test. Linux only; elsewhere 0 (children count when reaped)."""
    parents: dict[int, int] = {}
    spent: dict[int, int] = {}
    try:
        entries = [entry.name for entry in os.scandir("/proc") if entry.name.isdigit()]
    except OSError:
        return 0.0
    for name in entries:
        try:
            with open(f"/proc/{name}/stat", encoding="ascii", errors="replace") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        parents[int(name)] = int(fields[1])
        spent[int(name)] = sum(int(field) for field in fields[11:15])  # utime stime cutime cstime
    children: dict[int, list[int]] = {}
    for pid, parent in parents.items():
        children.setdefault(parent, []).append(pid)
    total, stack = 0, list(children.get(os.getpid(), []))
    while stack:
        pid = stack.pop()
        total += spent.get(pid, 0)
        stack.extend(children.get(pid, []))
    return total / os.sysconf("SC_CLK_TCK")


def _cpu_seconds() -> float:
    import resource

    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    reaped = own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime
    return reaped + _live_descendants_cpu_seconds()


if _TIMES:
    import time

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_protocol(item, nextitem):
        start_wall, start_cpu = time.perf_counter(), _cpu_seconds()
        yield
        wall, cpu = time.perf_counter() - start_wall, _cpu_seconds() - start_cpu
        with open(_TIMES, "a") as out:
            out.write(f"{item.nodeid}\t{wall:.2f}\t{cpu:.2f}\n")
