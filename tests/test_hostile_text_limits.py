"""Hostile counts, second round (issue 26): the text job's and every other command's counts in the one
range table, the memory they imply refused before work starts (run, federated, text, synth-check,
bench), `--workers` capped at what a Ray cluster can run, control characters and rich markup in
what the consoles echo, and `gate`/`report` rendering each output once.

Memory refusals are made deterministic by giving the commands a small `available_memory()`: the
estimate is compared with it exactly as with the machine's own `MemAvailable`."""

from __future__ import annotations

import hashlib
import io
import json
import re
import typing
from pathlib import Path

import annotated_types
import pytest
from hostile_support import assert_refused, run_main, snapshot

from audit.machinery import limits
from audit.machinery.limits import COUNT_LIMITS, limits_table_markdown, model_folder_limits_markdown

pytestmark = pytest.mark.security

DOCS = Path(__file__).resolve().parents[1] / "docs" / "errors.md"
DATA = Path(__file__).parent / "data"
MiB = 2**20


@pytest.fixture
def workdir(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _small_machine(monkeypatch, mib: int) -> None:
    monkeypatch.setattr(limits, "available_memory", lambda: mib * MiB)


# ------------------------------------------------------------------------------------------------
# The table is the one source: the config's own bounds, every integer option, the docs


def _config_int_fields():
    from audit.machinery import config as c

    sections = {
        "data": c.DataConfig,
        "training": c.TrainingConfig,
        "privacy": c.PrivacyConfig,
        "attacks": c.AttackConfig,
        "synthetic": c.SyntheticConfig,
        "federated": c.FederatedConfig,
        "text": c.TextConfig,
    }
    for section, model in sections.items():
        for name, field in model.model_fields.items():
            args = [a for a in typing.get_args(field.annotation) if a is not type(None)] or [field.annotation]
            base = args[0]
            if base is int or typing.get_origin(base) is list and typing.get_args(base) == (int,):
                yield f"{section}.{name}", field


# Integers that are not counts: an index checked against the data, a seed (its own row in the docs).
NOT_COUNTS = {"federated.watch_client"}
# Bounds enforced by a validator rather than Field(ge=, le=): (low, high) as the validator has them.
VALIDATED = {
    "attacks.n_shadow_models": (1, 1_024),
    "attacks.n_reference_models": (2, 4_096),
    "text.repetitions": (1, 10_000),
    "training.hidden_sizes": (1, 65_536),
}


@pytest.mark.parametrize("name, field", list(_config_int_fields()), ids=[n for n, _ in _config_int_fields()])
def test_every_integer_config_field_is_in_the_range_table_with_the_same_bounds(name, field):
    if name in NOT_COUNTS:
        return
    assert name in COUNT_LIMITS, f"{name} is a count without a row in audit/machinery/limits.py"
    if name in VALIDATED:
        assert (COUNT_LIMITS[name].low, COUNT_LIMITS[name].high) == VALIDATED[name]
        return
    low = next(m.ge for m in field.metadata if isinstance(m, annotated_types.Ge))
    high = next(m.le for m in field.metadata if isinstance(m, annotated_types.Le))
    assert (COUNT_LIMITS[name].low, COUNT_LIMITS[name].high) == (low, high)


def _command_int_options():
    import audit.cli  # noqa: F401 - registers the commands
    from audit.cli.app import app

    def walk(typer_app, prefix):
        for command in typer_app.registered_commands:
            yield [*prefix, command.name or command.callback.__name__.replace("_", "-")], command.callback
        for group in typer_app.registered_groups:
            yield from walk(group.typer_instance, [*prefix, group.name])

    for name, callback in walk(app, []):
        for parameter, hint in typing.get_type_hints(callback, include_extras=True).items():
            base = typing.get_args(hint)[0] if typing.get_args(hint) else hint
            if base is int or (typing.get_origin(base) is typing.Union and int in typing.get_args(base)):
                yield " ".join(name), "--" + parameter.replace("_", "-")


# Integer options that are not counts: seeds (docs/errors.md's own row), an id, threads (their own row).
NOT_COUNT_OPTIONS = {"--seed", "ledger remove --release", "bench --threads"}


@pytest.mark.parametrize("command, option", list(_command_int_options()))
def test_every_integer_option_of_every_command_is_in_the_range_table(command, option):
    if option in NOT_COUNT_OPTIONS or f"{command} {option}" in NOT_COUNT_OPTIONS:
        return
    keys = {option, f"{command} {option}", f"{command.split()[0]} {option}"}
    assert keys & set(COUNT_LIMITS), f"{command} {option} is a count without a row in the range table"


def _docs_table(header: str) -> list[str]:
    text = DOCS.read_text(encoding="utf-8")
    start = text.index(header)
    rows = []
    for line in text[start:].splitlines()[2:]:
        if not line.startswith("|"):
            break
        rows.append(line)
    return rows


def test_the_docs_tables_are_the_range_tables_exactly():
    assert _docs_table("| option or field | range | commands | why |") == limits_table_markdown()
    assert _docs_table("| in a model folder | limit |") == model_folder_limits_markdown()


def test_the_ledgers_own_bounds_are_the_tables():
    from audit.ledger import mechanisms

    assert COUNT_LIMITS["ledger --steps"].high == mechanisms._MAX_STEPS
    assert COUNT_LIMITS["ledger --count"].high == mechanisms._MAX_COUNT


# ------------------------------------------------------------------------------------------------
# run --preset text: every count outside its range, refused before anything starts

TEXT_KEYS = [key for key in COUNT_LIMITS if key.startswith("text.")]
TEXT_CASES = []
for key in TEXT_KEYS:
    field = key.split(".", 1)[1]
    limit = COUNT_LIMITS[key]
    wrap = (lambda v: [v]) if field == "repetitions" else (lambda v: v)
    TEXT_CASES.append((f"{key} above", field, wrap(limit.high + 1)))
    TEXT_CASES.append((f"{key} below", field, wrap(limit.low - 1)))


@pytest.mark.parametrize("case, field, value", TEXT_CASES, ids=[c for c, _, _ in TEXT_CASES])
def test_a_text_count_outside_the_table_is_refused(workdir, capsys, case, field, value):
    (workdir / "text.yaml").write_text(f"text:\n  {field}: {json.dumps(value)}\n")
    assert_refused(
        capsys, ["run", "--preset", "text", "--config", "text.yaml", "--dry-run"], f"text.{field}", folder=workdir
    )


MEMORY_CONFIGS = {
    "text: vocab × length × batch": ("text", "text:\n  vocab_size: 100000\n  max_length: 4096\n  batch_size: 100000\n"),
    "text: wide and deep": ("text", "text:\n  d_model: 4096\n  n_layers: 48\n  n_heads: 64\n  batch_size: 4096\n"),
    "text: attention length²": ("text", "text:\n  max_length: 4096\n  batch_size: 1000000\n  n_heads: 64\n"),
    "run: rows × batch × width": ("default", "data:\n  n_rows: 10000000\ntraining:\n  batch_size: 1000000\n"),
    "run: 16 layers of 65,536": ("default", "training:\n  hidden_sizes: [65536, 65536, 65536]\n"),
    "run: 4,096 reference models × RMIA population": (
        "default",
        "attacks:\n  n_reference_models: 4096\n  rmia_population: 1000000\n",
    ),
    "federated: clients × width": (
        "clients",
        "federated:\n  n_clients: 500\ntraining:\n  hidden_sizes: [65536, 4096]\n",
    ),
    "federated: rows × batch": ("hospitals", "data:\n  n_rows: 10000000\ntraining:\n  batch_size: 1000000\n"),
}


@pytest.mark.parametrize("case", list(MEMORY_CONFIGS))
def test_counts_whose_memory_exceeds_the_machine_are_refused(workdir, capsys, monkeypatch, case):
    preset, text = MEMORY_CONFIGS[case]
    _small_machine(monkeypatch, 2048)
    (workdir / "big.yaml").write_text(text)
    err = assert_refused(
        capsys,
        ["run", "--preset", preset, "--config", "big.yaml", "--dry-run", "--tracking-uri", f"sqlite:///{workdir}/m.db"],
        "--config",
        folder=workdir,
    )
    assert "needs about" in err and "available" in err


@pytest.mark.parametrize("preset", ["smoke", "text", "clients"])
def test_the_shipped_presets_fit_a_small_machine(workdir, capsys, monkeypatch, preset):
    """No false refusals: the shipped presets' estimates are far below 1 GiB."""
    from audit.machinery.config import resolve_config
    from audit.machinery.memory_estimates import check_run_memory, check_text_run_memory

    _small_machine(monkeypatch, 1024)
    config = resolve_config(preset, None, {})
    check_text_run_memory(config) if config.text is not None else check_run_memory(config, 8)


def test_synth_check_refuses_tables_past_the_memory(workdir, capsys, monkeypatch):
    import numpy as np
    import pandas as pd

    rng = np.random.default_rng(0)
    for name in ("train", "holdout", "synthetic"):
        pd.DataFrame({"a": rng.normal(size=300), "b": rng.integers(0, 5, 300)}).to_csv(
            workdir / f"{name}.csv", index=False
        )
    _small_machine(monkeypatch, 1)
    err = assert_refused(
        capsys,
        ["synth-check", "--train", "train.csv", "--holdout", "holdout.csv", "--synthetic", "synthetic.csv"],
        "--synthetic",
        folder=workdir,
    )
    assert "300 + 300 + 300 rows" in err


BENCH_CASES = [
    (["--models", "4096"], "--models", 1024),  # in range; 4,096 models with per-sample gradients do not fit
    (["--models", "0"], "--models", None),
    (["--epochs", "0"], "--epochs", None),
    (["--epochs", "1001"], "--epochs", None),
    (["--executor", "processes", "--runs", "0"], "--runs", None),
    (["--executor", "processes", "--runs", str(10**9)], "--runs", None),
    (["--executor", "processes", "--slots-per-gpu", "0"], "--slots-per-gpu", None),
    (["--executor", "processes", "--slots-per-gpu", "65"], "--slots-per-gpu", None),
    (["--executor", "processes", "--gpus", "1,0"], "--gpus", None),
    (["--executor", "processes", "--rows", "19"], "--rows", None),
    (["--executor", "processes", "--rows", str(10**9)], "--rows", None),
]


@pytest.mark.parametrize("extra, names, mib", BENCH_CASES, ids=[" ".join(e) for e, _, _ in BENCH_CASES])
def test_bench_counts_and_memory_are_checked_first(workdir, capsys, monkeypatch, extra, names, mib):
    if mib is not None:
        _small_machine(monkeypatch, mib)
    assert_refused(capsys, ["bench", *extra], names, folder=workdir)


# ------------------------------------------------------------------------------------------------
# Workers: capped at what the executor can run


def test_ray_workers_are_capped_at_the_clusters_cpus_in_one_line():
    from audit.machinery.executors import ray_worker_cap

    assert ray_worker_cap(None, {"CPU": 16.0}, "auto") == (16, None)
    assert ray_worker_cap(8, {"CPU": 16.0}, "auto") == (8, None)
    workers, note = ray_worker_cap(64, {"CPU": 16.0}, "ray://head:10001")
    assert workers == 16 and "\n" not in note and "--workers 64 capped at 16" in note and "ray://head:10001" in note
    workers, note = ray_worker_cap(9, {"CPU": 2.0, "GPU": 1.0}, None)
    assert workers == 2 and "local Ray cluster" in note


def test_a_joined_ray_cluster_is_not_capped_by_this_machines_cores():
    """Before joining, only the sanity bound applies (a cluster may be larger than this machine);
    a billion workers is still refused."""
    pytest.importorskip("ray")
    from audit.errors import AuditInputError
    from audit.machinery.executors import RAY_CLUSTER_MAX_WORKERS, check_executor_options

    check_executor_options("ray", limits.max_workers() + 1, "auto")
    with pytest.raises(AuditInputError, match="--workers"):
        check_executor_options("ray", RAY_CLUSTER_MAX_WORKERS + 1, "auto")
    with pytest.raises(AuditInputError, match="--workers"):
        check_executor_options("processes", limits.max_workers() + 1, None)


# ------------------------------------------------------------------------------------------------
# What the consoles echo: control characters and markup

HOSTILE = ["\x1b[2J\x1b[H", "\x1b]0;owned\x07", "\x9b31m", "\u202e", "a\rb", "[/x]", "[bold red]", "[link=file:///etc]"]


@pytest.mark.parametrize("text", HOSTILE, ids=[repr(t) for t in HOSTILE])
def test_the_consoles_escape_every_string_they_render(text):
    from rich.console import Group
    from rich.table import Table

    from audit.cli.app import EscapingConsole, shown
    from reports.console import _line

    buffer = io.StringIO()
    console = EscapingConsole(file=buffer, width=200, force_terminal=False, color_system=None)
    console.print(f"details: {shown(text)}/x.json")
    table = Table(title=shown(text))
    table.add_column(shown(text))
    table.add_row(shown(text))
    console.print(Group(_line(f"generator {text}"), table))
    console.print(f"plain {text}", markup=False)
    out = buffer.getvalue()
    assert not re.search(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u202e]", out), repr(out)
    if text.startswith("["):
        assert f"details: {text}/x.json" in out  # markup shown as written, not interpreted


@pytest.fixture
def run_folder(workdir):
    results = json.loads((DATA / "results_smoke_example.json").read_text())
    (workdir / "policy.yaml").write_text("rules:\n  max_epsilon_lb: 50.0\n")
    return workdir, results


@pytest.mark.parametrize(
    "name", ["run\x1b[2J\x1b]0;owned\x07", "run[/x]", "run\u202e"], ids=["escapes", "markup", "rlo"]
)
def test_gate_shows_a_hostile_folder_name_escaped(run_folder, capsys, name):
    workdir, results = run_folder
    (workdir / name).mkdir(parents=True)  # "run[/x]" is the folder "x]" inside "run["
    (workdir / name / "results.json").write_text(json.dumps(results))
    code, _ = run_main(["gate", name, "--policy", "policy.yaml"])
    out, err = capsys.readouterr()
    assert code in (0, 1), err + out
    assert not re.search(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u202e]", out + err), repr(out + err)
    assert "report: " in out and "internal error" not in err


# ------------------------------------------------------------------------------------------------
# gate / report: every output rendered once, the page quoting the results.json beside it


@pytest.mark.parametrize("command", ["gate", "report"])
def test_gate_and_report_render_each_output_once(run_folder, capsys, monkeypatch, command):
    import reports.html_report as html_report
    import reports.junit as junit
    import reports.markdown_summary as markdown_summary

    workdir, results = run_folder
    results = {
        **results,
        "ledger": {
            "dataset": "patients",
            "recorded": True,
            "epsilon_spent": 1.5,
            "epsilon_spent_unbounded": False,
            "delta": 1e-5,
            "method": "pld",
            "basic_epsilon": 2.0,
            "advanced_epsilon": 1.8,
            "max_total_epsilon": 10.0,
        },
    }
    (workdir / "run").mkdir()
    (workdir / "run" / "results.json").write_text(json.dumps(results))
    calls = {"html": 0, "junit": 0, "summary": 0}

    def counted(module, name, key):
        original = getattr(module, name)

        def wrapper(*args, **kwargs):
            calls[key] += 1
            return original(*args, **kwargs)

        monkeypatch.setattr(module, name, wrapper)

    counted(html_report, "render_html_report", "html")
    counted(junit, "render_junit_xml", "junit")
    counted(markdown_summary, "render_summary_markdown", "summary")
    args = (
        ["gate", "run", "--policy", "policy.yaml", "--out", "out"]
        if command == "gate"
        else ["report", "run/results.json", "--out", "out"]
    )
    code, _ = run_main(args)
    out, err = capsys.readouterr()
    assert code in (0, 1), err + out
    assert calls == {"html": 1, "junit": 1, "summary": 1}
    page = (workdir / "out" / "report.html").read_text()
    digest = hashlib.sha256((workdir / "out" / "results.json").read_bytes()).hexdigest()
    assert digest in page, "the page must quote the SHA-256 of the results.json written beside it"
    assert page.count('id="ledger"') == 1, "the ledger section once"


def test_a_refused_gate_renders_nothing_and_writes_nothing(run_folder, capsys):
    workdir, results = run_folder
    (workdir / "run").mkdir()
    (workdir / "run" / "results.json").write_text(json.dumps({**results, "schema_version": 99}))
    before = snapshot(workdir)
    assert_refused(
        capsys,
        ["gate", "run", "--policy", "policy.yaml", "--out", "out"],
        "results.json",
        folder=workdir,
        before=before,
    )


def test_the_battery_is_large():
    assert len(TEXT_CASES) + len(MEMORY_CONFIGS) + len(BENCH_CASES) + len(HOSTILE) >= 60
