"""Fuzzing the boundary (issue 17): over a thousand random configs, policies and results files.

Whatever a user hands the validators — the config resolver behind `run`/`run --dry-run`, the
policy loader behind `gate`, the results loader behind `gate`/`report` — the answer is a valid
object or one `AuditInputError` line (exit 2): never another exception (exit 3), never a hang,
never a message that quotes the input at length. The validators run in-process (fast); a smaller
share of the examples goes through the real commands (`main`), asserting exit codes 0/1/2 only.
"""

from __future__ import annotations

import copy
import json
import math
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings  # noqa: E402 - the dev extra: a missing fuzzer fails, never skips
from hypothesis import strategies as st  # noqa: E402

from audit.errors import AuditInputError  # noqa: E402
from audit.machinery.config import PRESETS, AuditConfig, resolve_config  # noqa: E402
from audit.machinery.input_files import parse_yaml_text  # noqa: E402
from audit.machinery.policy import evaluate_policy, policy_from_dict, validate_results  # noqa: E402
from audit.machinery.policy_model import PolicyRules  # noqa: E402

EXAMPLE = json.loads((Path(__file__).parent / "data" / "results_smoke_example.json").read_text())
PER_EXAMPLE_SECONDS = 10.0  # a hang shows up as a slow example

import attacks  # noqa: E402,F401 - validating attack names imports torch once: not inside a timed example

# 400 configs + 300 YAML texts + 300 policies + 300 results files: 1,300 random inputs at the validators.
FUZZ = settings(
    max_examples=300,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
        HealthCheck.filter_too_much,
        HealthCheck.function_scoped_fixture,
    ],
)
CONFIG_FUZZ = settings(FUZZ, max_examples=400)
CLI_FUZZ = settings(FUZZ, max_examples=15)

# Values a careless or hostile user writes: extremes, look-alikes, wrong types, nesting.
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([0, 1, -1, 0.5, 1e-300, 1e300, 2**32, 2**63, "inf", "1", "0.1", "nan", "", "∞", ".inf", "true"]),
    st.text(max_size=30),
)
values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)

CONFIG_KEYS = {
    None: ["name", "seed", "device", "cpu_threads", "data", "split", "training", "privacy", "attacks", "synthetic"],
    "data": ["source", "path", "label", "n_rows"],
    "split": ["test_fraction", "candidate_fraction"],
    "training": ["hidden_sizes", "epochs", "batch_size", "lr", "momentum", "max_grad_norm"],
    "privacy": ["epsilons", "delta", "accountant", "secure_mode"],
    "attacks": [
        "names",
        "confidence",
        "n_shadow_models",
        "n_reference_models",
        "lira_global_variance",
        "rmia_a",
        "rmia_gamma",
        "rmia_population",
    ],
    "synthetic": ["generators", "epsilons", "dp_vae_epochs"],
}


@st.composite
def configs(draw):
    """A config mapping: mostly real field names (so validation gets deep), some typos, random values."""
    config = {}
    for key in draw(st.lists(st.sampled_from(CONFIG_KEYS[None] + ["trainig"]), max_size=5, unique=True)):
        if key in CONFIG_KEYS and draw(st.booleans()):
            fields = draw(st.lists(st.sampled_from(CONFIG_KEYS[key] + ["unknown"]), max_size=4, unique=True))
            config[key] = {field: draw(values) for field in fields}
        else:
            config[key] = draw(values)
    return config


# Every rule a policy may set (the model is the one place they are declared), and one near-miss typo.
POLICY_RULES = [*PolicyRules.model_fields, "max_aucc"]


@st.composite
def policies(draw):
    rules = {
        rule: draw(values | st.floats(0, 1))
        for rule in draw(st.lists(st.sampled_from(POLICY_RULES), max_size=4, unique=True))
    }
    policy = {"rules": rules} if draw(st.booleans()) or rules else draw(values)
    if isinstance(policy, dict) and draw(st.booleans()):
        policy["overrides"] = draw(
            st.lists(st.fixed_dictionaries({"epsilon": values, "rules": st.just(rules)}), max_size=2) | values
        )
    return policy


def _paths(node, prefix=()):
    yield prefix
    if isinstance(node, dict):
        for key, child in node.items():
            yield from _paths(child, prefix + (key,))
    elif isinstance(node, list):
        for index, child in enumerate(node[:3]):
            yield from _paths(child, prefix + (index,))


RESULT_PATHS = [p for p in _paths(EXAMPLE) if p]


@st.composite
def results_files(draw):
    """The example results.json with 1–3 values replaced or deleted at random places."""
    results = copy.deepcopy(EXAMPLE)
    for _ in range(draw(st.integers(1, 3))):
        path = draw(st.sampled_from(RESULT_PATHS))
        parent = results
        try:
            for key in path[:-1]:
                parent = parent[key]
            if draw(st.booleans()) and isinstance(parent, dict):
                parent.pop(path[-1], None)
            else:
                parent[path[-1]] = draw(values)
        except (KeyError, IndexError, TypeError):  # an earlier mutation removed the path
            continue
    return results


def _only_input_errors(call):
    started = time.monotonic()
    try:
        result = call()
    except AuditInputError as exc:
        assert len(str(exc)) < 800, str(exc)[:300]  # names the field; never quotes the input at length
        result = exc
    assert time.monotonic() - started < PER_EXAMPLE_SECONDS
    return result


@CONFIG_FUZZ
@given(config=configs())
def test_random_configs_resolve_or_name_one_field(config):
    result = _only_input_errors(lambda: resolve_config("smoke", None, config))
    if isinstance(result, AuditConfig):  # what validation accepted is finite, typed and in range
        assert all(isinstance(e, float) and (e == math.inf or 0 < e < math.inf) for e in result.privacy.epsilons)
        assert isinstance(result.training.epochs, int) and not isinstance(result.training.epochs, bool)
        assert 0 <= result.seed < 2**32 and math.isfinite(result.training.lr)


@FUZZ
@given(text=st.text(max_size=200) | st.builds(lambda c: json.dumps(c), configs()))
def test_random_yaml_text_parses_or_is_refused_in_one_line(text):
    parsed = _only_input_errors(lambda: parse_yaml_text(text, "config file 'fuzz.yaml'"))
    if isinstance(parsed, dict):
        _only_input_errors(lambda: resolve_config("smoke", None, parsed))


@FUZZ
@given(policy=policies())
def test_random_policies_load_or_name_one_field(policy):
    loaded = _only_input_errors(lambda: policy_from_dict(policy, source="policy file 'fuzz.yaml'"))
    if not isinstance(loaded, AuditInputError):
        _only_input_errors(lambda: evaluate_policy(loaded, EXAMPLE, source="results"))


GATE_POLICY = policy_from_dict({"rules": {"max_auc": 0.9, "max_epsilon_lb": 4.0, "max_tpr_at_fpr": {0.01: 0.5}}})


@FUZZ
@given(results=results_files())
def test_random_results_validate_and_gate_or_name_one_field(results):
    def validate_and_gate():
        validate_results(results, source="results file 'fuzz.json'")
        return evaluate_policy(GATE_POLICY, results, source="results file 'fuzz.json'")

    _only_input_errors(validate_and_gate)


# ---------------------------------------------------------------------------------------------------
# The same through the commands: exit codes 0, 1 or 2 only, never 3, and within the time limit.
# ---------------------------------------------------------------------------------------------------


def _exit_code(args, capsys) -> int:
    from audit.cli import main

    started = time.monotonic()
    with pytest.raises(SystemExit) as exited:
        main(args)
    err = capsys.readouterr().err
    assert time.monotonic() - started < 30
    assert exited.value.code in (0, 1, 2), err
    assert "Traceback" not in err
    return exited.value.code


@CLI_FUZZ
@given(config=configs())
def test_run_dry_run_on_random_configs_exits_0_or_2(config, tmp_path_factory, capsys):
    folder = tmp_path_factory.mktemp("dry")
    path = folder / "config.yaml"
    path.write_text(json.dumps(config))  # JSON is YAML
    _exit_code(
        [
            "run",
            "--dry-run",
            "--preset",
            "smoke",
            "--config",
            str(path),
            "--out",
            str(folder / "runs"),
            "--tracking-uri",
            f"sqlite:///{folder / 'mlflow.db'}",
        ],
        capsys,
    )
    assert not (folder / "runs").exists() and not (folder / "mlflow.db").exists()  # a dry run writes nothing


@CLI_FUZZ
@given(results=results_files(), policy=policies())
def test_gate_and_report_on_random_files_never_exit_3(results, policy, tmp_path_factory, capsys):
    folder = tmp_path_factory.mktemp("gate")
    (folder / "results.json").write_text(json.dumps(results, allow_nan=True))
    (folder / "policy.yaml").write_text(json.dumps(policy, allow_nan=True))
    _exit_code(["gate", "--policy", str(folder / "policy.yaml"), str(folder / "results.json")], capsys)
    _exit_code(["report", str(folder / "results.json"), "--out", str(folder / "report")], capsys)


def test_the_fuzzing_throws_over_1000_inputs_at_the_validators():
    assert CONFIG_FUZZ.max_examples + 3 * FUZZ.max_examples >= 1000 and len(PRESETS) >= 1
