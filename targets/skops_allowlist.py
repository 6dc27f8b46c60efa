"""What a `.skops` file may contain: an explicit, reviewed allow-list, checked before skops runs.

A skops file is a zip holding `schema.json`: a tree of nodes, each naming a loader
(`__loader__`) and a Python object (`__module__`, `__class__`). skops's own loaders would, for
some node kinds, *call* what the file names: `ConstructorFromReduceNode` calls
`module.name(*args)` (a function that writes files, if the file says so), `FunctionNode`,
`MethodNode`, `PartialNode` and `OperatorFuncNode` hand back callables an estimator may call
later, `TypeNode` returns any attribute of any module, and every node imports the module it names.
A prefix test ("anything under sklearn.") lets all of that through.

So the file's tree is read here as JSON — nothing imported, nothing constructed — and every node
must be one of:

* a container or literal (dict, list, tuple, set, str/number JSON, bytes, slice);
* a numpy array, dtype, scalar type, masked array or random state/generator, or a scipy sparse
  matrix (data only);
* an instance of a class on `ESTIMATOR_CLASSES` or `HELPER_CLASSES` (plain estimators and the
  data-holding helpers they are made of), built by skops with `cls.__new__` + `__setstate__` —
  the classes' own scikit-learn code, never a function the file chooses.

Functions, methods, partials, operators, reduce-constructors and every class not on the lists are
refused, naming the first one found; nothing from the file has been constructed at that point.
Each list entry is tested to be a class (tests/test_hostile_model_files.py), so a function cannot
slip onto the list by a typo.
"""

from __future__ import annotations

import json
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from audit.errors import AuditInputError

# The most a skops file's schema.json may hold uncompressed (a fitted forest of a few hundred trees
# is a few MiB); refused before decompressing more (a zip bomb).
MAX_SCHEMA_BYTES = 64 * 2**20
MAX_SKOPS_FILE_BYTES = 2 * 2**30
MAX_NODES = 2_000_000

# Node loaders that only hold data.
DATA_LOADERS = frozenset(
    {
        "DictNode",
        "ListNode",
        "TupleNode",
        "SetNode",
        "JsonNode",
        "BytesNode",
        "BytearrayNode",
        "SliceNode",
        "CachedNode",
        "_DictWithDeprecatedKeysNode",
        "NdArrayNode",
        "MaskedArrayNode",
        "DTypeNode",
        "RandomStateNode",
        "RandomGeneratorNode",
        "SparseMatrixNode",
    }
)
# Node loaders that build an instance of a listed class (`cls.__new__`, then its own `__setstate__`).
INSTANCE_LOADERS = frozenset({"ObjectNode", "TreeNode", "LossNode"})
# Node loaders refused whatever they name: each returns or calls a callable chosen by the file.
CALLABLE_LOADERS = frozenset(
    {
        "FunctionNode",
        "MethodNode",
        "PartialNode",
        "OperatorFuncNode",
        "ConstructorFromReduceNode",
        "TypeNode",
        "DefaultDictNode",
    }
)
# TypeNode of these builtins is harmless (a dtype of str) but is refused all the same, except:
SAFE_TYPES = frozenset(
    {
        "builtins.str",
        "builtins.int",
        "builtins.float",
        "builtins.bool",
        "builtins.bytes",
        "builtins.complex",
        "builtins.object",
    }
)

# Modules a data node may name (the `__module__` of an array, dtype or container node).
_DATA_MODULES = {
    "DictNode": {"builtins"},
    "ListNode": {"builtins"},
    "TupleNode": {"builtins"},
    "SetNode": {"builtins"},
    "JsonNode": {"builtins"},
    "BytesNode": {"builtins"},
    "BytearrayNode": {"builtins"},
    "SliceNode": {"builtins"},
    "_DictWithDeprecatedKeysNode": {"sklearn.covariance._graph_lasso"},
    "NdArrayNode": {"numpy"},
    "MaskedArrayNode": {"numpy.ma.core"},
    "DTypeNode": {"numpy"},
    "RandomStateNode": {"numpy.random.mtrand"},
    "RandomGeneratorNode": {"numpy.random._generator"},
    "SparseMatrixNode": {
        "scipy.sparse._csr",
        "scipy.sparse._csc",
        "scipy.sparse._coo",
        "scipy.sparse._arrays",
        "scipy.sparse._bsr",
        "scipy.sparse._dia",
        "scipy.sparse._dok",
        "scipy.sparse._lil",
    },
}

# Plain estimators: fitted classifiers, the transformers of a preprocessing pipeline and the pipeline.
ESTIMATOR_CLASSES = frozenset(
    {
        "sklearn.linear_model._logistic.LogisticRegression",
        "sklearn.linear_model._logistic.LogisticRegressionCV",
        "sklearn.linear_model._stochastic_gradient.SGDClassifier",
        "sklearn.linear_model._ridge.RidgeClassifier",
        "sklearn.linear_model._ridge.RidgeClassifierCV",
        "sklearn.linear_model._perceptron.Perceptron",
        "sklearn.linear_model._passive_aggressive.PassiveAggressiveClassifier",
        "sklearn.svm._classes.SVC",
        "sklearn.svm._classes.NuSVC",
        "sklearn.svm._classes.LinearSVC",
        "sklearn.tree._classes.DecisionTreeClassifier",
        "sklearn.tree._classes.DecisionTreeRegressor",
        "sklearn.tree._classes.ExtraTreeClassifier",
        "sklearn.tree._classes.ExtraTreeRegressor",
        "sklearn.ensemble._forest.RandomForestClassifier",
        "sklearn.ensemble._forest.ExtraTreesClassifier",
        "sklearn.ensemble._gb.GradientBoostingClassifier",
        "sklearn.ensemble._hist_gradient_boosting.gradient_boosting.HistGradientBoostingClassifier",
        "sklearn.ensemble._hist_gradient_boosting.binning._BinMapper",
        "sklearn.ensemble._weight_boosting.AdaBoostClassifier",
        "sklearn.ensemble._bagging.BaggingClassifier",
        "sklearn.neighbors._classification.KNeighborsClassifier",
        "sklearn.neighbors._nearest_centroid.NearestCentroid",
        "sklearn.naive_bayes.GaussianNB",
        "sklearn.naive_bayes.MultinomialNB",
        "sklearn.naive_bayes.BernoulliNB",
        "sklearn.naive_bayes.ComplementNB",
        "sklearn.naive_bayes.CategoricalNB",
        "sklearn.discriminant_analysis.LinearDiscriminantAnalysis",
        "sklearn.discriminant_analysis.QuadraticDiscriminantAnalysis",
        "sklearn.neural_network._multilayer_perceptron.MLPClassifier",
        "sklearn.dummy.DummyClassifier",
        "sklearn.calibration.CalibratedClassifierCV",
        "sklearn.calibration._SigmoidCalibration",
        "sklearn.isotonic.IsotonicRegression",
        "sklearn.pipeline.Pipeline",
        "sklearn.preprocessing._data.StandardScaler",
        "sklearn.preprocessing._data.MinMaxScaler",
        "sklearn.preprocessing._data.MaxAbsScaler",
        "sklearn.preprocessing._data.RobustScaler",
        "sklearn.preprocessing._data.Normalizer",
        "sklearn.preprocessing._data.QuantileTransformer",
        "sklearn.preprocessing._data.PowerTransformer",
        "sklearn.preprocessing._encoders.OneHotEncoder",
        "sklearn.preprocessing._encoders.OrdinalEncoder",
        "sklearn.preprocessing._label.LabelEncoder",
        "sklearn.preprocessing._label.LabelBinarizer",
        "sklearn.preprocessing._polynomial.PolynomialFeatures",
        "sklearn.impute._base.SimpleImputer",
        "sklearn.decomposition._pca.PCA",
        "sklearn.feature_selection._variance_threshold.VarianceThreshold",
    }
)
# Data-holding helpers that fitted estimators are made of (trees, losses, links, optimizer state,
# neighbour indexes). Classes of scikit-learn's own compiled code; built with __new__ + __setstate__.
HELPER_CLASSES = frozenset(
    {
        "sklearn.calibration._CalibratedClassifier",
        "sklearn.tree._tree.Tree",
        "sklearn._loss.loss.HalfBinomialLoss",
        "sklearn._loss.loss.HalfMultinomialLoss",
        "sklearn._loss.loss.ExponentialLoss",
        "sklearn._loss._loss.CyHalfBinomialLoss",
        "sklearn._loss._loss.CyHalfMultinomialLoss",
        "sklearn._loss._loss.CyExponentialLoss",
        "sklearn._loss.link.LogitLink",
        "sklearn._loss.link.MultinomialLogit",
        "sklearn._loss.link.IdentityLink",
        "sklearn._loss.link.Interval",
        "sklearn.ensemble._hist_gradient_boosting.predictor.TreePredictor",
        "sklearn.neural_network._stochastic_optimizers.AdamOptimizer",
        "sklearn.neural_network._stochastic_optimizers.SGDOptimizer",
        "sklearn.neighbors._kd_tree.KDTree",
        "sklearn.neighbors._ball_tree.BallTree",
        "sklearn.metrics._dist_metrics.EuclideanDistance64",
        "sklearn.metrics._dist_metrics.ManhattanDistance64",
        "sklearn.metrics._dist_metrics.MinkowskiDistance64",
        "sklearn.metrics._dist_metrics.ChebyshevDistance64",
        "sklearn.dummy.DummyRegressor",
    }
)
ALLOWED_CLASSES = ESTIMATOR_CLASSES | HELPER_CLASSES


def _nodes(tree: Any, budget: list[int]) -> Iterator[dict]:
    """Every node of a skops schema (iteratively: a deep tree cannot exhaust the stack)."""
    stack = [tree]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            if "__loader__" in item:
                budget[0] -= 1
                if budget[0] < 0:
                    raise _Refused(f"holds more than {MAX_NODES:,} objects")
                yield item
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)


class _Refused(Exception):
    pass


def _check_node(node: dict) -> None:
    loader = node.get("__loader__")
    module, name = node.get("__module__"), node.get("__class__")
    if (
        not isinstance(loader, str)
        or not isinstance(module, (str, type(None)))
        or not isinstance(name, (str, type(None)))
    ):
        raise _Refused("holds a malformed object entry")
    full = f"{module}.{name}"
    if loader == "TypeNode" and full in SAFE_TYPES:
        return
    if loader in CALLABLE_LOADERS:
        kind = {
            "FunctionNode": "a function",
            "MethodNode": "a method",
            "PartialNode": "a functools.partial",
            "OperatorFuncNode": "an operator function",
            "ConstructorFromReduceNode": "a call of",
            "TypeNode": "a type or attribute",
            "DefaultDictNode": "a defaultdict (its factory is a callable)",
        }[loader]
        raise _Refused(f"names {kind} {full!s}: a model file may hold data and plain estimators only")
    if loader == "CachedNode":
        return
    if loader in DATA_LOADERS:
        allowed = _DATA_MODULES.get(loader, set())
        if module not in allowed:
            raise _Refused(f"names {full} as {loader}: not a plain data type")
        if loader == "JsonNode" and name not in ("str", "int", "float", "bool", "NoneType", "list", "dict"):
            raise _Refused(f"names {full} as plain JSON data")
        return
    if loader in INSTANCE_LOADERS:
        if full not in ALLOWED_CLASSES:
            raise _Refused(
                f"names type {full}, which is not on the allow-list of trusted plain scikit-learn estimators "
                "(docs/errors.md)"
            )
        return
    raise _Refused(f"uses the skops loader {loader!r} ({full}), which is not on the allow-list")


def check_skops_file(path: Path, where: str) -> list[str]:
    """The classes a skops file names, all on the allow-list; AuditInputError (exit 2) otherwise.

    Reads only the zip's directory and `schema.json` (bounded); imports and constructs nothing.
    """
    try:
        size = path.stat().st_size
    except OSError as exc:
        raise AuditInputError(where, f"cannot be read ({exc.strerror})") from None
    if size > MAX_SKOPS_FILE_BYTES:
        raise AuditInputError(where, f"is larger than {MAX_SKOPS_FILE_BYTES // 2**30} GiB")
    try:
        with zipfile.ZipFile(path) as archive:
            info = archive.getinfo("schema.json")
            if info.file_size > MAX_SCHEMA_BYTES:
                raise AuditInputError(where, f"its schema.json is larger than {MAX_SCHEMA_BYTES // 2**20} MiB")
            with archive.open(info) as handle:
                raw = handle.read(MAX_SCHEMA_BYTES + 1)
    except AuditInputError:
        raise
    except KeyError:
        raise AuditInputError(where, "is not a skops file (no schema.json in the archive)") from None
    except (zipfile.BadZipFile, OSError, ValueError, NotImplementedError, EOFError) as exc:
        raise AuditInputError(where, f"is not a readable skops archive ({type(exc).__name__})") from None
    if len(raw) > MAX_SCHEMA_BYTES:
        raise AuditInputError(where, f"its schema.json is larger than {MAX_SCHEMA_BYTES // 2**20} MiB")
    try:
        tree = json.loads(raw)
    except (ValueError, RecursionError):
        raise AuditInputError(where, "is not a skops file (its schema.json is not JSON)") from None
    if not isinstance(tree, dict) or "__loader__" not in tree:
        raise AuditInputError(where, "is not a skops file (its schema.json has no object at the top)")
    classes: list[str] = []
    try:
        for node in _nodes(tree, [MAX_NODES]):
            _check_node(node)
            if node.get("__loader__") in INSTANCE_LOADERS:
                full = f"{node['__module__']}.{node['__class__']}"
                if full not in classes:
                    classes.append(full)
    except _Refused as exc:
        raise AuditInputError(where, f"{exc}; nothing from the file was loaded") from None
    top = f"{tree.get('__module__')}.{tree.get('__class__')}"
    if top not in ESTIMATOR_CLASSES:
        raise AuditInputError(where, f"holds a {top} at the top, not a fitted estimator on the allow-list")
    return classes
