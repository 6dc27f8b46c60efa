"""Fuzzing the new surfaces (issue 26), extending tests/test_fuzz_inputs.py: `gate` and `report` on
generated results files and run folders, and the model-file loaders on generated files.

Whatever the file, the answer is a verdict (exit 0/1) or one `AuditInputError` line (exit 2):
never another exception (exit 3), never a hang, never a byte of a file outside the run folder in
what is written. The loaders and validators run in-process for many examples; a smaller share
goes through the real commands (`main`)."""

from __future__ import annotations

import copy
import io
import json
import os
import time
import zipfile
from pathlib import Path

import pytest
from hostile_support import run_main
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from audit.errors import AuditInputError

pytestmark = pytest.mark.security

DATA = Path(__file__).parent / "data"
KINDS = ("canary-audit", "mechanism-audit", "whitebox-audit", "conformance", "accountant-check")
EXAMPLES = {kind: json.loads((DATA / "audit_results" / f"{kind}.json").read_text()) for kind in KINDS}
RUN_EXAMPLE = json.loads((DATA / "results_smoke_example.json").read_text())
FUZZ = settings(
    max_examples=250,
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
CLI_FUZZ = settings(FUZZ, max_examples=25)
PER_EXAMPLE_SECONDS = 20.0

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    st.sampled_from([0, 1, -1, 0.5, 1e-300, 1e300, 99, "pass", "fail", "inconclusive", "ok", "unsound", "", "1"]),
    st.text(max_size=20),
)
values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=8,
)


def _paths(node, prefix=()):
    """Every path to a value inside a JSON document."""
    yield prefix
    if isinstance(node, dict):
        for key, value in node.items():
            yield from _paths(value, prefix + (key,))
    elif isinstance(node, list):
        for index, value in enumerate(node[:3]):
            yield from _paths(value, prefix + (index,))


PATHS = {kind: [p for p in _paths(EXAMPLES[kind]) if p] for kind in KINDS}
RUN_PATHS = [p for p in _paths(RUN_EXAMPLE) if p and len(p) <= 5]


@st.composite
def mutated(draw, document, paths):
    doc = copy.deepcopy(document)
    for _ in range(draw(st.integers(1, 3))):
        path = draw(st.sampled_from(paths))
        node = doc
        try:
            for part in path[:-1]:
                node = node[part]
            if draw(st.booleans()) and isinstance(node, dict):
                node.pop(path[-1], None)
            else:
                node[path[-1]] = draw(values)
        except (KeyError, IndexError, TypeError):
            continue
    return doc


def _judge_single(kind: str, result, tmp: Path) -> None:
    """What `gate` does with a single-audit file, in-process: load, decide, render."""
    from audit.cli.results_commands import _as_input_error
    from audit.dp_validation.result_files import load_audit_result
    from audit.machinery.policy import policy_from_dict
    from audit.machinery.single_audit_verdicts import single_audit_verdict_with_policy
    from reports.audit_report import render_audit_report
    from reports.junit import render_junit_xml

    path = tmp / f"{kind}.json"
    path.write_text(json.dumps(result))
    loaded = load_audit_result(path, kind)
    policy = policy_from_dict({"rules": {"max_epsilon_lb": 50.0}})
    with _as_input_error("x", "y"):
        verdict, evaluation = single_audit_verdict_with_policy(kind, loaded, policy)
        gated = {**loaded, "verdict": verdict, "policy_evaluation": evaluation.as_dict()}
        render_audit_report(kind, gated)
        render_junit_xml(gated)


@pytest.mark.parametrize("kind", KINDS)
def test_generated_single_audit_results_are_judged_or_refused(kind, tmp_path):
    @FUZZ
    @given(result=mutated(EXAMPLES[kind], PATHS[kind]))
    def check(result):
        started = time.monotonic()
        try:
            _judge_single(kind, result, tmp_path)
        except AuditInputError as exc:
            assert len(str(exc)) < 1000
        assert time.monotonic() - started < PER_EXAMPLE_SECONDS

    check()


def _render_run(results, run_dir: Path | None) -> None:
    """What `report` and `gate` do with a run's results, in-process: validate, decide, render all three."""
    from audit.cli.results_commands import _as_input_error
    from audit.machinery.policy import policy_from_dict, validate_results
    from audit.machinery.verdict import verdict_for_results
    from reports.html_report import render_html_report
    from reports.junit import render_junit_xml
    from reports.markdown_summary import render_summary_markdown

    started = time.monotonic()
    try:
        validate_results(results, source="results")
        with _as_input_error("results", "a results.json"):
            decided, evaluation = verdict_for_results(results, policy_from_dict({"rules": {"max_auc": 0.9}}))
            render_html_report(decided, run_dir, evaluation=evaluation)
            render_summary_markdown(decided, evaluation=evaluation)
            render_junit_xml(decided, evaluation=evaluation)
    except AuditInputError as exc:
        assert len(str(exc)) < 1000
    assert time.monotonic() - started < PER_EXAMPLE_SECONDS


@pytest.fixture(scope="module")
def run_folder_with_summary_figures(tmp_path_factory) -> Path:
    """A run folder holding the two summary figures, so the page inlines them instead of redrawing."""
    from PIL import Image

    folder = tmp_path_factory.mktemp("run_with_figures")
    (folder / "figures").mkdir()
    for stem in ("empirical_vs_accountant", "privacy_utility"):
        Image.new("RGB", (4, 4)).save(folder / "figures" / f"{stem}.png")
    return folder


# Redrawing the two summary figures with matplotlib is ~95 % of an example's CPU (~0.3 s of 0.3 s),
# and it reads only `targets` (reports/html_figures.py::_redraw_from_results). So the whole-document
# fuzz (250 examples) renders with the figures present in the run folder, and the redraw gets its own
# fuzz whose mutations all land in `targets` (every example reaches the figure code with altered numbers,
# where a whole-document mutation reached it with a changed figure field in a minority of examples).
TARGET_PATHS = [p for p in RUN_PATHS if p[0] == "targets"]
REDRAW_FUZZ = settings(FUZZ, max_examples=40)


@FUZZ
@given(results=mutated(RUN_EXAMPLE, RUN_PATHS))
def test_generated_run_results_are_rendered_or_refused(results, run_folder_with_summary_figures):
    _render_run(results, run_folder_with_summary_figures)


@REDRAW_FUZZ
@given(results=mutated(RUN_EXAMPLE, TARGET_PATHS))
def test_generated_target_numbers_are_redrawn_or_refused(results):
    _render_run(results, None)


@CLI_FUZZ
@given(kind=st.sampled_from(KINDS), data=st.data())
def test_gate_on_generated_files_exits_0_1_or_2(kind, data, tmp_path_factory, capsys):
    folder = tmp_path_factory.mktemp("gate")
    result = data.draw(mutated(EXAMPLES[kind], PATHS[kind]))
    (folder / f"{kind}.json").write_text(json.dumps(result))
    (folder / "p.yaml").write_text("rules:\n  max_epsilon_lb: 50.0\n")
    code, seconds = run_main(
        ["gate", str(folder / f"{kind}.json"), "--policy", str(folder / "p.yaml"), "--out", str(folder / "out")]
    )
    out, err = capsys.readouterr()
    assert code in (0, 1, 2), err
    assert "Traceback" not in err + out and seconds < 60
    if code == 2:
        assert err.startswith("error:") and err.count("\n") == 1 and not (folder / "out").exists()


SECRET = b"FUZZ-SECRET-0815"
ENTRY_KINDS = ("png", "not_png", "link_secret", "link_dir", "fifo", "dir", "dangling", "link_png")


def _make_entry(folder: Path, name: str, kind: str, secret: Path) -> None:
    path = folder / "figures" / name
    if os.path.lexists(path):
        return
    if kind == "png":
        path.write_bytes(b"\x89PNG\r\n\x1a\n" + os.urandom(16))
    elif kind == "not_png":
        path.write_bytes(os.urandom(32))
    elif kind == "link_secret":
        path.symlink_to(secret)
    elif kind == "link_dir":
        path.symlink_to(secret.parent)
    elif kind == "fifo":
        os.mkfifo(path)
    elif kind == "dir":
        path.mkdir()
    elif kind == "dangling":
        path.symlink_to(folder / "nowhere")
    else:
        target = folder / "figures" / "real.bin"
        target.write_bytes(b"\x89PNG\r\n\x1a\n")
        path.symlink_to(target)


@CLI_FUZZ
@given(
    entries=st.lists(
        st.tuples(
            st.sampled_from(["roc_all", "roc_eps_1", "privacy_utility", "synthetic_a", "x", "empirical_vs_accountant"]),
            st.sampled_from(ENTRY_KINDS),
        ),
        min_size=0,
        max_size=4,
    ),
    command=st.sampled_from(["report", "gate"]),
)
def test_report_and_gate_on_generated_run_folders(entries, command, tmp_path_factory, capsys):
    root = tmp_path_factory.mktemp("folder")
    secret = root / "outside" / "secret.txt"
    secret.parent.mkdir()
    secret.write_bytes(SECRET)
    folder = root / "run"
    (folder / "figures").mkdir(parents=True)
    (folder / "results.json").write_text(json.dumps(RUN_EXAMPLE))
    (root / "p.yaml").write_text("rules:\n  max_auc: 0.99\n")
    for stem, kind in entries:
        _make_entry(folder, f"{stem}.png", kind, secret)
    args = (
        ["report", str(folder / "results.json"), "--out", str(root / "out")]
        if command == "report"
        else ["gate", str(folder), "--policy", str(root / "p.yaml"), "--out", str(root / "out")]
    )
    code, seconds = run_main(args)
    out, err = capsys.readouterr()
    assert code in (0, 1, 2), err
    assert seconds < 60 and "Traceback" not in err + out
    clean = all(kind in ("png",) for _, kind in entries)
    if clean:
        assert code in (0, 1), err
    if code == 2:
        assert err.startswith("error:") and err.count("\n") == 1 and not (root / "out").exists()
    for dirpath, _, files in os.walk(root / "out"):
        for name in files:
            assert SECRET not in (Path(dirpath) / name).read_bytes()


# --------------------------------------------------------------------------------------------
# model-file loaders

LOADERS = [
    "DictNode",
    "ListNode",
    "TupleNode",
    "JsonNode",
    "ObjectNode",
    "NdArrayNode",
    "FunctionNode",
    "TypeNode",
    "ConstructorFromReduceNode",
    "MethodNode",
    "PartialNode",
    "TreeNode",
    "CachedNode",
    "Bogus",
    7,
    None,
]
MODULES = ["builtins", "numpy", "os", "sklearn.linear_model._logistic", "sklearn.tree._tree", "subprocess", "", None, 3]
CLASSES = ["dict", "list", "LogisticRegression", "Tree", "system", "Popen", "ndarray", "str", "", None, []]


@st.composite
def skops_nodes(draw, depth=0):
    node = {
        "__loader__": draw(st.sampled_from(LOADERS)),
        "__module__": draw(st.sampled_from(MODULES)),
        "__class__": draw(st.sampled_from(CLASSES)),
    }
    if depth < 3 and draw(st.booleans()):
        node["content"] = draw(st.dictionaries(st.text(max_size=5), skops_nodes(depth=depth + 1), max_size=3))
    elif draw(st.booleans()):
        node["content"] = draw(values)
    return node


def _zip(schema: bytes) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("schema.json", schema)
    return buffer.getvalue()


@FUZZ
@given(tree=skops_nodes())
def test_the_skops_check_on_generated_trees_allows_or_names_the_file(tree, tmp_path_factory):
    from targets.skops_allowlist import ALLOWED_CLASSES, check_skops_file

    path = tmp_path_factory.mktemp("skops") / "m.skops"
    path.write_bytes(_zip(json.dumps(tree).encode()))
    try:
        classes = check_skops_file(path, "skops file 'm.skops'")
    except AuditInputError as exc:
        assert "m.skops" in str(exc)
    else:
        assert set(classes) <= ALLOWED_CLASSES


@FUZZ
@given(blob=st.binary(max_size=2048), suffix=st.sampled_from([".pt", ".safetensors", ".skops", ".onnx"]))
def test_model_loaders_on_random_bytes_raise_only_input_errors(blob, suffix, tmp_path_factory):
    from targets.model_sources import check_onnx_file, load_skops_estimator, load_state_dict_file

    path = tmp_path_factory.mktemp("blob") / f"model{suffix}"
    path.write_bytes(blob if suffix != ".skops" or blob[:1] != b"z" else _zip(blob))
    try:
        if suffix in (".pt", ".safetensors"):
            load_state_dict_file(path)
        elif suffix == ".skops":
            load_skops_estimator(path)
        else:
            check_onnx_file(path, f"ONNX file '{path.name}'")
    except AuditInputError as exc:
        assert path.name in str(exc)
