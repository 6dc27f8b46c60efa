"""Hostile model files (issue 26, class "a model file that acts"): a `.skops`, ONNX or torch file can
hold data only. Loading never calls anything but constructors of allow-listed estimators; each
kind of danger a skops file can carry is refused by name before anything is imported or built;
ONNX graphs cannot read other files and run in a worker whose timeout stops an endless loop.

Each CLI case: exit 2, one line naming the file, nothing written (no run folder, no MLflow store,
no file the model asked for)."""

from __future__ import annotations

import importlib
import io
import json
import zipfile
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hostile_support import assert_refused, run_main, snapshot

from audit.errors import AuditInputError
from targets.skops_allowlist import ALLOWED_CLASSES, ESTIMATOR_CLASSES, check_skops_file

pytestmark = pytest.mark.security


@pytest.fixture(scope="module")
def base_skops(tmp_path_factory) -> bytes:
    """A real fitted LogisticRegression saved by skops: the file every hostile variant starts from."""
    import skops.io as sio
    from sklearn.linear_model import LogisticRegression

    rng = np.random.default_rng(0)
    X = rng.normal(size=(80, 3))
    y = (X[:, 0] > 0).astype(int)
    return sio.dumps(LogisticRegression().fit(X, y))


def _with_schema(raw: bytes, edit) -> bytes:
    """The skops archive `raw` with its schema.json rewritten by `edit(schema) -> schema`."""
    source = zipfile.ZipFile(io.BytesIO(raw))
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as target:
        for item in source.infolist():
            data = source.read(item.filename)
            if item.filename == "schema.json":
                data = json.dumps(edit(json.loads(data))).encode()
            target.writestr(item, data)
    return buffer.getvalue()


def _attribute(node: dict, marker: str) -> dict:
    """A dangerous node, placed where an estimator attribute would be (the content of the top object)."""
    return node


# One refused node per class of danger. `marker` is a file the node would create if it were loaded.
def _danger_nodes(marker: str) -> dict[str, dict]:
    args = {
        "__class__": "tuple",
        "__module__": "builtins",
        "__loader__": "TupleNode",
        "content": [
            {"__class__": "str", "__module__": "builtins", "__loader__": "JsonNode", "content": json.dumps(marker)},
            {"__class__": "str", "__module__": "builtins", "__loader__": "JsonNode", "content": '"w"'},
        ],
    }
    return {
        # a call of a function the file names (skops's reduce path): this one writes a file
        "reduce-call of a writer": {
            "__class__": "dump_svmlight_file",
            "__module__": "sklearn.datasets",
            "__loader__": "ConstructorFromReduceNode",
            "content": args,
        },
        "reduce-call of builtins.open": {
            "__class__": "open",
            "__module__": "builtins",
            "__loader__": "ConstructorFromReduceNode",
            "content": args,
        },
        "function under sklearn.": {
            "__class__": "dump_svmlight_file",
            "__module__": "sklearn.datasets",
            "__loader__": "FunctionNode",
            "content": {"module_path": "sklearn.datasets", "function": "dump_svmlight_file"},
        },
        "function os.system": {
            "__class__": "system",
            "__module__": "os",
            "__loader__": "FunctionNode",
            "content": {"module_path": "os", "function": "system"},
        },
        "method": {
            "__class__": "LogisticRegression",
            "__module__": "sklearn.linear_model._logistic",
            "__loader__": "MethodNode",
            "content": {"func": "fit", "obj": {}},
        },
        "partial": {
            "__class__": "partial",
            "__module__": "functools",
            "__loader__": "PartialNode",
            "content": {"func": {}, "args": [], "kwds": {}},
        },
        "operator": {
            "__class__": "attrgetter",
            "__module__": "operator",
            "__loader__": "OperatorFuncNode",
            "attrs": {},
        },
        "type / attribute": {"__class__": "system", "__module__": "os", "__loader__": "TypeNode", "content": None},
        "defaultdict factory": {
            "__class__": "defaultdict",
            "__module__": "collections",
            "__loader__": "DefaultDictNode",
            "content": {},
        },
        "user class": {"__class__": "Evil", "__module__": "evilmod", "__loader__": "ObjectNode", "content": {}},
        "subprocess class": {
            "__class__": "Popen",
            "__module__": "subprocess",
            "__loader__": "ObjectNode",
            "content": {},
        },
        "sklearn class off the list": {
            "__class__": "FunctionTransformer",
            "__module__": "sklearn.preprocessing._function_transformer",
            "__loader__": "ObjectNode",
            "content": {},
        },
        "sklearn function as class": {
            "__class__": "dump_svmlight_file",
            "__module__": "sklearn.datasets",
            "__loader__": "ObjectNode",
            "content": {},
        },
        "unknown loader": {"__class__": "x", "__module__": "sklearn", "__loader__": "ShellNode", "content": {}},
        "array from elsewhere": {
            "__class__": "ndarray",
            "__module__": "evilmod",
            "__loader__": "NdArrayNode",
            "content": {},
        },
        "json from elsewhere": {"__class__": "str", "__module__": "os", "__loader__": "JsonNode", "content": '"x"'},
        "random state from elsewhere": {
            "__class__": "RandomState",
            "__module__": "os",
            "__loader__": "RandomStateNode",
            "content": {},
        },
        "sparse matrix from elsewhere": {
            "__class__": "csr_matrix",
            "__module__": "os",
            "__loader__": "SparseMatrixNode",
            "content": {},
        },
        "malformed entry": {"__class__": ["list"], "__module__": "builtins", "__loader__": "ObjectNode"},
    }


DANGERS = list(_danger_nodes("x"))


def _hostile_skops(base: bytes, danger: str, marker: str) -> bytes:
    node = _danger_nodes(marker)[danger]

    def edit(schema):
        schema["content"]["content"]["hostile_attribute"] = node
        return schema

    return _with_schema(base, edit)


def _top_level(base: bytes, node: dict) -> bytes:
    return _with_schema(
        base,
        lambda schema: {**node, "protocol": schema.get("protocol"), "_skops_version": schema.get("_skops_version")},
    )


@pytest.fixture
def model_workdir(tmp_path, monkeypatch):
    rng = np.random.default_rng(1)
    for name in ("members", "nonmembers"):
        frame = pd.DataFrame(rng.normal(size=(40, 3)), columns=["a", "b", "c"])
        frame["y"] = (frame["a"] > 0).astype(int)
        frame.to_csv(tmp_path / f"{name}.csv", index=False)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _audit_model(path: Path, flag: str = "--skops", *extra: str) -> list[str]:
    return [
        "audit-model",
        flag,
        str(path),
        "--members",
        "members.csv",
        "--nonmembers",
        "nonmembers.csv",
        "--label",
        "y",
        "--claimed-epsilon",
        "inf",
        "--timeout",
        "60",
        *extra,
    ]


@pytest.mark.parametrize("danger", DANGERS)
def test_a_skops_file_naming_a_dangerous_object_is_refused_before_anything_loads(
    model_workdir, capsys, base_skops, danger
):
    marker = model_workdir / "written-by-the-model-file"
    path = model_workdir / "model.skops"
    path.write_bytes(_hostile_skops(base_skops, danger, str(marker)))
    assert_refused(capsys, _audit_model(path), "model.skops", folder=model_workdir)
    assert not marker.exists()


@pytest.mark.parametrize("danger", DANGERS)
def test_the_loader_refuses_each_danger_without_constructing_it(tmp_path, base_skops, danger):
    from targets.model_sources import load_skops_estimator

    marker = tmp_path / "written"
    path = tmp_path / "model.skops"
    path.write_bytes(_hostile_skops(base_skops, danger, str(marker)))
    with pytest.raises(AuditInputError) as info:
        load_skops_estimator(path)
    assert "model.skops" in str(info.value) and "nothing from the file was loaded" in str(info.value)
    assert not marker.exists()


BROKEN_ARCHIVES = {
    "not a zip": b"\x80\x04\x95 a pickle",
    "empty zip": None,
    "schema not JSON": b"{not json",
    "schema a list": b"[1, 2]",
    "schema without loader": b'{"a": 1}',
    "deep schema": ("[" * 100_000 + "]" * 100_000).encode(),
}


@pytest.mark.parametrize("case", list(BROKEN_ARCHIVES))
def test_a_broken_skops_archive_is_exit_2(model_workdir, capsys, case):
    path = model_workdir / "broken.skops"
    data = BROKEN_ARCHIVES[case]
    if case == "not a zip":
        path.write_bytes(data)
    else:
        buffer = io.BytesIO()
        with zipfile.ZipFile(buffer, "w") as archive:
            if data is not None:
                archive.writestr("schema.json", data)
        path.write_bytes(buffer.getvalue())
    assert_refused(capsys, _audit_model(path), "broken.skops", folder=model_workdir)


def test_a_skops_zip_bomb_schema_is_refused_unread(tmp_path):
    path = tmp_path / "bomb.skops"
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("schema.json", b" " * (65 * 2**20))  # compresses to ~64 KB
    assert path.stat().st_size < 2**20
    with pytest.raises(AuditInputError, match="larger than"):
        check_skops_file(path, "skops file 'bomb.skops'")


def test_a_top_level_helper_is_not_an_estimator(tmp_path, base_skops):
    path = tmp_path / "tree.skops"
    path.write_bytes(
        _top_level(
            base_skops,
            {"__class__": "Tree", "__module__": "sklearn.tree._tree", "__loader__": "TreeNode", "content": {}},
        )
    )
    with pytest.raises(AuditInputError, match="not a fitted estimator"):
        check_skops_file(path, "skops file 'tree.skops'")


@pytest.mark.parametrize("name", sorted(ALLOWED_CLASSES))
def test_every_allow_list_entry_is_a_class_never_a_function(name):
    """Reviewed list: each entry resolves to a class (a typo cannot put a function on it); the
    estimators are scikit-learn estimators."""
    from sklearn.base import BaseEstimator

    module, _, attribute = name.rpartition(".")
    obj = getattr(importlib.import_module(module), attribute)
    assert isinstance(obj, type), f"{name} is not a class"
    if name in ESTIMATOR_CLASSES:
        assert issubclass(obj, BaseEstimator), name


@pytest.mark.parametrize(
    "estimator",
    [
        "LogisticRegression",
        "RandomForestClassifier",
        "GradientBoostingClassifier",
        "HistGradientBoostingClassifier",
        "MLPClassifier",
        "KNeighborsClassifier",
        "Pipeline",
    ],
)
def test_plain_fitted_estimators_pass_the_allow_list(tmp_path, estimator):
    """The allow-list is not so tight that the estimators users audit are refused."""
    import skops.io as sio
    from sklearn import ensemble, linear_model, neighbors, neural_network, pipeline, preprocessing

    X = np.random.default_rng(0).normal(size=(60, 3))
    y = (X[:, 0] > 0).astype(int)
    model = {
        "LogisticRegression": linear_model.LogisticRegression(),
        "RandomForestClassifier": ensemble.RandomForestClassifier(n_estimators=3),
        "GradientBoostingClassifier": ensemble.GradientBoostingClassifier(n_estimators=3),
        "HistGradientBoostingClassifier": ensemble.HistGradientBoostingClassifier(max_iter=3),
        "MLPClassifier": neural_network.MLPClassifier(max_iter=20),
        "KNeighborsClassifier": neighbors.KNeighborsClassifier(3),
        "Pipeline": pipeline.make_pipeline(preprocessing.StandardScaler(), linear_model.LogisticRegression()),
    }[estimator]
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model.fit(X, y)
    sio.dump(model, tmp_path / "m.skops")
    from targets.model_sources import load_skops_estimator

    loaded, classes = load_skops_estimator(tmp_path / "m.skops")
    assert type(loaded).__name__ == type(model).__name__
    np.testing.assert_allclose(loaded.predict_proba(X), model.predict_proba(X))


# --------------------------------------------------------------------------------------------
# ONNX: no external files, and inference isolated with the timeout


def _onnx_model(tmp_path: Path, *, external: bool = False, loop: bool = False) -> Path:
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [None, 3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [None, 2])
    weight = numpy_helper.from_array(np.ones((3, 2), dtype=np.float32), "w")
    nodes = [helper.make_node("MatMul", ["x", "w"], ["y"])]
    if loop:  # y = x·w after a Loop of 2⁶² iterations: an endless graph
        body = helper.make_graph(
            [
                helper.make_node("Identity", ["cond_in"], ["cond_out"]),
                helper.make_node("Identity", ["v_in"], ["v_out"]),
            ],
            "body",
            [
                helper.make_tensor_value_info("i", TensorProto.INT64, []),
                helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
                helper.make_tensor_value_info("v_in", TensorProto.FLOAT, [None, 3]),
            ],
            [
                helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
                helper.make_tensor_value_info("v_out", TensorProto.FLOAT, [None, 3]),
            ],
        )
        trip = numpy_helper.from_array(np.array(2**62, dtype=np.int64), "trip")
        cond = numpy_helper.from_array(np.array(True), "cond")
        nodes = [
            helper.make_node("Loop", ["trip", "cond", "x"], ["x_loop"], body=body),
            helper.make_node("MatMul", ["x_loop", "w"], ["y"]),
        ]
        initializers = [weight, trip, cond]
    else:
        initializers = [weight]
    graph = helper.make_graph(nodes, "g", [x], [y], initializer=initializers)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    path = tmp_path / ("external.onnx" if external else "loop.onnx" if loop else "model.onnx")
    if external:
        secret = tmp_path.parent / f"{tmp_path.name}-secret.bin"
        secret.write_bytes(np.full(6, 7, dtype=np.float32).tobytes())
        tensor = model.graph.initializer[0]
        tensor.ClearField("raw_data")
        tensor.data_location = TensorProto.EXTERNAL
        for key, value in (("location", f"../{secret.name}"), ("offset", "0"), ("length", "24")):
            entry = tensor.external_data.add()
            entry.key, entry.value = key, value
    onnx.save(model, str(path))
    return path


def test_an_onnx_graph_reading_an_external_file_is_refused(model_workdir, capsys):
    path = _onnx_model(model_workdir, external=True)
    err = assert_refused(capsys, _audit_model(path, "--onnx"), "external.onnx", folder=model_workdir)
    assert "external data" in err


@pytest.mark.parametrize("content", [b"", b"not onnx at all", b"\x08\x07" * 100])
def test_a_file_that_is_not_onnx_is_exit_2(model_workdir, capsys, content):
    path = model_workdir / "garbage.onnx"
    path.write_bytes(content)
    assert_refused(capsys, _audit_model(path, "--onnx"), "garbage.onnx", folder=model_workdir)


@pytest.mark.slow  # waits for the timeout
def test_an_endless_onnx_graph_is_stopped_by_the_timeout(model_workdir, capsys):
    path = _onnx_model(model_workdir, loop=True)
    args = [
        "audit-model",
        "--onnx",
        str(path),
        "--members",
        "members.csv",
        "--nonmembers",
        "nonmembers.csv",
        "--label",
        "y",
        "--claimed-epsilon",
        "inf",
        "--timeout",
        "5",
    ]
    before = snapshot(model_workdir)
    code, seconds = run_main(args)
    err = capsys.readouterr().err
    assert code == 2, err
    assert "loop.onnx" in err and "within 5 s" in err, err
    assert seconds < 60
    assert snapshot(model_workdir) == before


def test_a_pickled_torch_model_is_refused_without_unpickling(model_workdir, capsys):
    import pickle

    marker = model_workdir / "unpickled"

    class _Payload:
        def __reduce__(self):
            return (open, (str(marker), "w"))

    path = model_workdir / "model.pt"
    path.write_bytes(pickle.dumps(_Payload()))
    args = [
        "audit-model",
        "--weights",
        str(path),
        "--members",
        "members.csv",
        "--nonmembers",
        "nonmembers.csv",
        "--label",
        "y",
        "--claimed-epsilon",
        "inf",
    ]
    assert_refused(capsys, args, "model.pt", folder=model_workdir)
    assert not marker.exists()
