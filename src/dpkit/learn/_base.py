"""Shared pieces of :mod:`dpkit.learn`: the scikit-learn estimator protocol without scikit-learn, and the
validation of features and labels against **declared, public** bounds and classes.

Nothing here draws randomness or charges a budget. The estimators follow scikit-learn's conventions (every
``__init__`` argument stored unchanged as an attribute of the same name, validated only in ``fit``; fitted state
in attributes ending with ``_``), so ``sklearn.base.clone``, ``Pipeline`` and ``GridSearchCV`` work with them;
scikit-learn itself is imported only inside ``__sklearn_tags__`` (which only scikit-learn calls).

An ``accountant`` passed to an estimator is **shared**, never copied: :class:`~dpkit.core.accountant.Accountant`
and :class:`~dpkit.noise.source.RandomSource` return themselves from ``copy.copy``/``copy.deepcopy``, so the
clones a grid search makes all charge the same budget (a copied accountant would be a fresh budget).
"""

from __future__ import annotations

import inspect
from typing import TYPE_CHECKING, Any

import numpy as np

from dpkit.core import _validate as check
from dpkit.core.errors import DPKitError, InvalidData, InvalidParameter, NotFitted, WrongType
from dpkit.mechanisms.contract import is_replace, resolve_neighbours, unit_rows

if TYPE_CHECKING:
    from dpkit.core.accountant import Accountant
    from dpkit.core.neighbours import Neighbours

__all__ = [
    "ClassifierMixin",
    "Estimator",
    "ModelClassifier",
    "RegressorMixin",
    "check_fitted",
    "columns",
    "feature_bounds",
    "features",
    "labels",
    "level_codes",
    "level_counts",
    "matrix",
    "same_arrays",
    "targets",
    "unit_sensitivity",
]

#: Largest number of training rows (counts stay exact in float64).
MAX_ROWS = 2**40
#: Largest number of features.
MAX_FEATURES = 100_000
#: Largest number of levels of one categorical feature.
MAX_CATEGORIES = 1_000_000


class Estimator:
    """The scikit-learn estimator protocol: ``get_params``/``set_params`` from the ``__init__`` signature, a
    readable ``repr``, and ``__sklearn_tags__`` for scikit-learn >= 1.6 (imported there, lazily)."""

    _estimator_type: str = ""

    @classmethod
    def _param_names(cls) -> list[str]:
        init = cls.__init__
        if init is object.__init__:
            return []
        sig = inspect.signature(init)
        return sorted(p.name for p in sig.parameters.values()
                      if p.name != "self" and p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL))

    def get_params(self, deep: bool = True) -> dict[str, Any]:
        """The ``__init__`` parameters as a dict (``deep``: also those of nested estimators, ``name__param``)."""
        out: dict[str, Any] = {}
        for name in self._param_names():
            value = getattr(self, name)
            if deep and hasattr(value, "get_params") and not isinstance(value, type):
                for k, v in value.get_params(deep=True).items():
                    out[f"{name}__{k}"] = v
            out[name] = value
        return out

    def set_params(self, **params: Any) -> Estimator:
        """Set ``__init__`` parameters (validated at the next ``fit``); unknown names raise
        :class:`~dpkit.core.errors.InvalidParameter`."""
        valid = set(self._param_names())
        nested: dict[str, dict[str, Any]] = {}
        for key, value in params.items():
            name, sep, sub = key.partition("__")
            if name not in valid:
                raise InvalidParameter(name, f"is not a parameter of {type(self).__name__}")
            if sep:
                nested.setdefault(name, {})[sub] = value
            else:
                setattr(self, name, value)
        for name, sub_params in nested.items():
            getattr(self, name).set_params(**sub_params)
        return self

    def __repr__(self) -> str:
        sig = inspect.signature(type(self).__init__)
        shown = []
        for name in self._param_names():
            default = sig.parameters[name].default
            value = getattr(self, name, None)
            try:
                same = value is default or bool(value == default)
            except Exception:
                same = False
            if not same:
                shown.append(f"{name}={value!r}")
        return f"{type(self).__name__}({', '.join(shown)})"

    def __sklearn_tags__(self) -> Any:  # pragma: no cover - exercised by the scikit-learn tests
        from sklearn.utils import ClassifierTags, RegressorTags, Tags, TargetTags

        kind = self._estimator_type or None
        tags = Tags(estimator_type=kind, target_tags=TargetTags(required=kind in ("classifier", "regressor")))
        if kind == "classifier":
            tags.classifier_tags = ClassifierTags()
        elif kind == "regressor":
            tags.regressor_tags = RegressorTags()
        tags.non_deterministic = True
        return tags


class ClassifierMixin:
    """``score`` as accuracy (mean of ``predict(X) == y``), post-processing of the fitted model."""

    _estimator_type = "classifier"

    def score(self, X: Any, y: Any, sample_weight: Any = None) -> float:
        """Mean accuracy of ``predict(X)`` against ``y`` (optionally weighted). Post-processing: if ``X`` and
        ``y`` are private, this number is not private."""
        pred = self.predict(X)  # type: ignore[attr-defined]
        truth = np.asarray(y)
        if truth.shape != pred.shape:
            raise InvalidData("y", "must have one label per row of X")
        hits = (pred == truth).astype(np.float64)
        return float(np.average(hits, weights=None if sample_weight is None else np.asarray(sample_weight)))


class ModelClassifier(ClassifierMixin):
    """A classifier whose ``release_.value`` is a fitted model with its own ``predict``: the estimators of the
    Naive Bayes and tree families (post-processing of the release)."""

    release_: Any

    def _model(self) -> Any:
        check_fitted(self, "release_")
        return self.release_.value

    def predict(self, X: Any) -> np.ndarray:
        """The predicted declared class of every row (post-processing of the fitted model)."""
        return np.asarray(self._model().predict(X))


class RegressorMixin:
    """``score`` as the coefficient of determination R² (post-processing of the fitted model)."""

    _estimator_type = "regressor"

    def score(self, X: Any, y: Any, sample_weight: Any = None) -> float:
        """R² of ``predict(X)`` against ``y``. Post-processing: if ``X`` and ``y`` are private, this number is
        not private."""
        pred = np.asarray(self.predict(X), dtype=np.float64)  # type: ignore[attr-defined]
        truth = check.finite_array("y", y, ndim=1)
        if truth.shape != pred.shape:
            raise InvalidData("y", "must have one target per row of X")
        w = None if sample_weight is None else np.asarray(sample_weight, dtype=np.float64)
        mean = np.average(truth, weights=w)
        ss_res = float(np.average((truth - pred) ** 2, weights=w))
        ss_tot = float(np.average((truth - mean) ** 2, weights=w))
        return 1.0 - ss_res / ss_tot if ss_tot > 0 else (1.0 if ss_res == 0 else 0.0)


def check_fitted(est: Any, attr: str) -> None:
    """Raise :class:`~dpkit.core.errors.NotFitted` unless ``est`` has the fitted attribute ``attr``."""
    if not hasattr(est, attr):
        raise NotFitted(type(est).__name__)


def matrix(name: str, X: Any) -> np.ndarray:
    if hasattr(X, "to_numpy") and not isinstance(X, np.ndarray):  # pandas / polars frames
        try:
            X = X.to_numpy()
        except DPKitError:
            raise
        except Exception:
            raise WrongType(name, "a 2-D array of numbers") from None
    arr = check.finite_array(name, X, ndim=2)
    if arr.shape[0] > MAX_ROWS:
        raise InvalidData(name, "has too many rows")
    if not 1 <= arr.shape[1] <= MAX_FEATURES:
        raise InvalidData(name, f"must have between 1 and {MAX_FEATURES} columns")
    return arr


def feature_bounds(bounds: Any, d: int, name: str = "bounds") -> np.ndarray:
    """Public per-feature bounds as a ``(d, 2)`` float array: one pair ``(lo, hi)`` for every feature, or a
    sequence of ``d`` pairs; each ``lo < hi``, finite."""
    if bounds is None:
        raise InvalidParameter(name, "is required (declare public bounds; dpkit never reads them from the data)")
    try:
        arr = np.asarray(bounds, dtype=np.float64)
    except Exception:
        raise WrongType(name, "a pair (lo, hi) or a sequence of one pair per feature") from None
    if arr.shape == (2,):
        arr = np.tile(arr, (d, 1))
    if arr.shape != (d, 2):
        raise InvalidParameter(name, f"must be one pair (lo, hi) or {d} pairs, one per feature")
    if not np.all(np.isfinite(arr)) or np.any(np.abs(arr) > 1e15):
        raise InvalidParameter(name, "must be finite and at most 1e15 in magnitude")
    if not np.all(arr[:, 0] < arr[:, 1]):
        raise InvalidParameter(name, "each pair must have lo < hi")
    return arr


def features(X: Any, *, bounds: Any = None, norm: Any = None, name: str = "X") -> tuple[np.ndarray, dict[str, Any]]:
    """Private features ``X`` (2-D, finite, at least one row) made to meet the **declared** constraint:

    - ``bounds``: one ``(lo, hi)`` for all features or one per feature; every value is clamped into its bounds;
    - ``norm``: a bound ``C > 0`` on each row's L2 norm; a longer row is scaled down to norm ``C``;
    - both: clamped, then scaled.

    Neither given: :class:`~dpkit.core.errors.InvalidParameter` naming ``bounds`` (dpkit never reads bounds
    from the data). Returns the constrained float64 copy and the public facts ``{"bounds": (d, 2) array or
    None, "norm": C or None, "max_norm": a public bound on every row's L2 norm}``."""
    arr = matrix(name, X)
    d = arr.shape[1]
    if bounds is None and norm is None:
        raise InvalidParameter("bounds", "declare public feature bounds or a row norm bound (norm=); "
                               "dpkit never reads them from the data")
    b = None
    out = arr.copy()
    max_norm = float("inf")
    if bounds is not None:
        b = feature_bounds(bounds, d)
        np.clip(out, b[:, 0], b[:, 1], out=out)
        max_norm = float(np.sqrt(np.sum(np.max(np.abs(b), axis=1) ** 2)))
    c = None
    if norm is not None:
        c = check.positive("norm", norm)
        if c > 1e15:
            raise InvalidParameter("norm", "must be at most 1e15")
        lengths = np.sqrt(np.einsum("ij,ij->i", out, out))
        over = lengths > c
        if np.any(over):
            out[over] *= (c / lengths[over])[:, None]
        max_norm = min(max_norm, c)
    return out, {"bounds": b, "norm": c, "max_norm": max_norm}


def columns(X: Any, d: int, name: str = "X") -> np.ndarray:
    """Public or post-processing features for ``predict``: 2-D, finite, ``d`` columns (no bounds applied)."""
    arr = matrix(name, X)
    if arr.shape[1] != d:
        raise InvalidData(name, f"must have {d} columns, as in fit")
    return arr


def labels(y: Any, classes: Any, n: int, name: str = "y") -> tuple[np.ndarray, np.ndarray]:
    """Private labels checked against the **declared** ``classes`` (public: at least two distinct values, sorted
    as numpy sorts them). Returns ``(classes, codes)`` with ``codes[i]`` the index of ``y[i]`` in ``classes``.
    A label outside ``classes`` raises :class:`~dpkit.core.errors.InvalidData` naming ``y`` (never the value);
    ``classes=None`` raises :class:`~dpkit.core.errors.InvalidParameter`: dpkit never reads the classes from
    the data."""
    if classes is None:
        raise InvalidParameter("classes", "is required (declare the public label set; dpkit never reads it from "
                               "the data)")
    try:
        cls = np.asarray(classes)
    except Exception:
        raise WrongType("classes", "a sequence of labels") from None
    if cls.ndim != 1 or (cls.dtype == object and any(c is None for c in cls)):
        raise InvalidParameter("classes", "must be a 1-D sequence of labels")
    try:
        cls = np.unique(cls)
    except Exception:
        raise InvalidParameter("classes", "must be sortable labels of one type") from None
    if cls.size < 2:
        raise InvalidParameter("classes", "must hold at least two distinct labels")
    if cls.dtype.kind == "f" and not np.all(np.isfinite(cls)):
        raise InvalidParameter("classes", "must not contain NaN or infinity")
    if hasattr(y, "to_numpy") and not isinstance(y, np.ndarray):
        try:
            y = y.to_numpy()
        except Exception:
            raise WrongType(name, "a 1-D array of labels") from None
    if y is None or isinstance(y, (str, bytes)):
        raise WrongType(name, "a 1-D array of labels")
    try:
        arr = np.asarray(y)
    except Exception:
        raise WrongType(name, "a 1-D array of labels") from None
    if arr.ndim != 1:
        raise InvalidData(name, "must be 1-dimensional")
    if arr.shape[0] != n:
        raise InvalidData(name, "must have one label per row of X")
    try:
        idx = np.searchsorted(cls, arr)
        idx = np.clip(idx, 0, cls.size - 1)
        ok = cls[idx] == arr
    except Exception:
        raise InvalidData(name, "holds labels not comparable with classes") from None
    if not np.all(ok):
        raise InvalidData(name, "holds a label outside the declared classes")
    return cls, idx.astype(np.int64)


def targets(y: Any, n: int, *, bounds: Any, name: str = "y") -> tuple[np.ndarray, tuple[float, float]]:
    """Private real targets clamped into the **declared** ``bounds`` (``y_bounds``): 1-D, finite, one per row."""
    if bounds is None:
        raise InvalidParameter("y_bounds", "is required (declare public target bounds; dpkit never reads them "
                               "from the data)")
    lo, hi = check.bounds(bounds, name="y_bounds")
    if hasattr(y, "to_numpy") and not isinstance(y, np.ndarray):
        try:
            y = y.to_numpy()
        except Exception:
            raise WrongType(name, "a 1-D array of numbers") from None
    arr = check.finite_array(name, y, ndim=1)
    if arr.shape[0] != n:
        raise InvalidData(name, "must have one target per row of X")
    return np.clip(arr, lo, hi), (lo, hi)


def same_arrays(a: Any, b: Any, names: tuple[str, ...]) -> bool:
    """Whether the fitted models ``a`` and ``b`` hold equal arrays (or tuples of arrays) in attributes ``names``."""
    for n in names:
        x, y = getattr(a, n), getattr(b, n)
        if isinstance(x, tuple):
            if len(x) != len(y) or not all(np.array_equal(p, q) for p, q in zip(x, y, strict=True)):
                return False
        elif not np.array_equal(np.asarray(x), np.asarray(y)):
            return False
    return True


def unit_sensitivity(neighbours: Neighbours | None, accountant: Accountant | None) -> tuple[Neighbours, int]:
    """The call's neighbour relation and how many records one neighbour step changes in a count (the privacy
    unit's rows; doubled under replace-one)."""
    nb = resolve_neighbours(neighbours, accountant)
    return nb, unit_rows(nb) * (2 if is_replace(nb) else 1)


def level_counts(categories: Any, d: int) -> np.ndarray:
    """The **declared** number of levels of each of ``d`` categorical features (one int for all, or one each)."""
    if categories is None:
        raise InvalidParameter("categories", "is required (declare the number of levels of every feature; dpkit "
                               "never reads it from the data)")
    if isinstance(categories, (str, bytes, bool)):
        raise WrongType("categories", "a positive integer or one per feature")
    if isinstance(categories, (int, np.integer)):
        items = [categories] * d
    else:
        try:
            items = list(categories)
        except TypeError:
            raise WrongType("categories", "a positive integer or one per feature") from None
    if len(items) != d:
        raise InvalidParameter("categories", f"must give one level count per feature ({d})")
    out = np.array([check.integer("categories", v, minimum=1, maximum=MAX_CATEGORIES) for v in items],
                   dtype=np.int64)
    return out


def level_codes(X: Any, n_categories: np.ndarray, *, predict: bool = False) -> np.ndarray:
    """Integer level codes ``0 .. n_categories[j] - 1`` per column (a code outside them: :class:`InvalidData`)."""
    arr = columns(X, int(n_categories.size)) if predict else matrix("X", X)
    if not np.all(arr == np.round(arr)):
        raise InvalidData("X", "must hold integer level codes")
    if arr.shape[1] != n_categories.size:
        raise InvalidData("X", f"must have {n_categories.size} columns, one per declared feature")
    if np.any(arr < 0) or np.any(arr >= n_categories[None, :]):
        raise InvalidData("X", "holds a code outside the declared categories")
    return arr.astype(np.int64)
