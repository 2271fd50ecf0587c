"""The UCI Adult training data (32,561 rows, 15 columns), bundled with dpkit.

Source: Becker, B. & Kohavi, R. (1996). Adult. UCI Machine Learning Repository, CC BY 4.0.
The file is the original ``adult.data`` (gzip-compressed); ``adult.names`` is shipped beside it.

:func:`adult_domain` gives the *public* domain of each column: the category lists come from the
codebook (``adult.names``), and the numeric bounds are a-priori bounds chosen without looking at the
data (the Census top-codes capital gains at 99,999; ages and weekly hours are bounded by plausibility).
DP code must take bins, bounds and candidate sets from such public metadata, never from the data.
"""

from __future__ import annotations

import gzip
from importlib import resources
from typing import Any

import numpy as np

from dpkit.core.errors import InvalidParameter, WrongType

__all__ = ["ADULT_COLUMNS", "adult", "adult_domain"]

ADULT_COLUMNS: tuple[str, ...] = (
    "age", "workclass", "fnlwgt", "education", "education_num", "marital_status", "occupation",
    "relationship", "race", "sex", "capital_gain", "capital_loss", "hours_per_week", "native_country",
    "income",
)
_NUMERIC = {"age", "fnlwgt", "education_num", "capital_gain", "capital_loss", "hours_per_week"}

_CATEGORIES: dict[str, tuple[str, ...]] = {
    "workclass": ("Private", "Self-emp-not-inc", "Self-emp-inc", "Federal-gov", "Local-gov", "State-gov",
                  "Without-pay", "Never-worked"),
    "education": ("Bachelors", "Some-college", "11th", "HS-grad", "Prof-school", "Assoc-acdm", "Assoc-voc", "9th",
                  "7th-8th", "12th", "Masters", "1st-4th", "10th", "Doctorate", "5th-6th", "Preschool"),
    "marital_status": ("Married-civ-spouse", "Divorced", "Never-married", "Separated", "Widowed",
                       "Married-spouse-absent", "Married-AF-spouse"),
    "occupation": ("Tech-support", "Craft-repair", "Other-service", "Sales", "Exec-managerial", "Prof-specialty",
                   "Handlers-cleaners", "Machine-op-inspct", "Adm-clerical", "Farming-fishing", "Transport-moving",
                   "Priv-house-serv", "Protective-serv", "Armed-Forces"),
    "relationship": ("Wife", "Own-child", "Husband", "Not-in-family", "Other-relative", "Unmarried"),
    "race": ("White", "Asian-Pac-Islander", "Amer-Indian-Eskimo", "Other", "Black"),
    "sex": ("Female", "Male"),
    "native_country": ("United-States", "Cambodia", "England", "Puerto-Rico", "Canada", "Germany",
                       "Outlying-US(Guam-USVI-etc)", "India", "Japan", "Greece", "South", "China", "Cuba", "Iran",
                       "Honduras", "Philippines", "Italy", "Poland", "Jamaica", "Vietnam", "Mexico", "Portugal",
                       "Ireland", "France", "Dominican-Republic", "Laos", "Ecuador", "Taiwan", "Haiti", "Columbia",
                       "Hungary", "Guatemala", "Nicaragua", "Scotland", "Thailand", "Yugoslavia", "El-Salvador",
                       "Trinadad&Tobago", "Peru", "Hong", "Holand-Netherlands"),
    "income": ("<=50K", ">50K"),
}
_BOUNDS: dict[str, tuple[float, float]] = {
    "age": (0.0, 100.0),
    "education_num": (1.0, 16.0),
    "capital_gain": (0.0, 99999.0),
    "capital_loss": (0.0, 5000.0),
    "hours_per_week": (0.0, 100.0),
    "fnlwgt": (0.0, 1.5e6),
}

_cache: dict[str, np.ndarray] | None = None


def _load() -> dict[str, np.ndarray]:
    global _cache
    if _cache is None:
        raw = resources.files("dpkit.datasets").joinpath("data/adult.data.gz").read_bytes()
        lines = [ln for ln in gzip.decompress(raw).decode("ascii").splitlines() if ln.strip()]
        rows = [ln.split(", ") for ln in lines]
        cols = list(zip(*rows, strict=True))
        out: dict[str, np.ndarray] = {}
        for name, values in zip(ADULT_COLUMNS, cols, strict=True):
            if name in _NUMERIC:
                out[name] = np.array(values, dtype=np.int64)
            else:
                out[name] = np.array([None if v == "?" else v for v in values], dtype=object)
        _cache = out
    return _cache


def adult(*, as_frame: bool = False, columns: list[str] | None = None) -> Any:
    """The bundled UCI Adult training data (32,561 rows).

    Parameters
    ----------
    as_frame:
        False (default): a ``dict`` mapping column name to a numpy array (numeric columns int64,
        categorical columns object arrays of ``str`` with ``None`` where the file has ``?``).
        True: a pandas DataFrame (requires ``pandas``; missing categories are ``NaN``).
    columns:
        A subset of :data:`ADULT_COLUMNS` to return (default: all, in file order).

    Column names use underscores (``education_num``, ``hours_per_week``, ...).
    """
    if not isinstance(as_frame, (bool, np.bool_)):
        raise WrongType("as_frame", "a bool")
    if columns is None:
        names = list(ADULT_COLUMNS)
    else:
        if isinstance(columns, (str, bytes, dict)) or not isinstance(columns, (list, tuple, np.ndarray)):
            raise WrongType("columns", "a list of column names (see dpkit.datasets.ADULT_COLUMNS), or None")
        names = list(np.ravel(columns)) if isinstance(columns, np.ndarray) else list(columns)
        for c in names:
            if not isinstance(c, str) or c not in ADULT_COLUMNS:
                raise InvalidParameter("columns", "unknown column name (see dpkit.datasets.ADULT_COLUMNS)")
    data = _load()
    picked = {c: data[c].copy() for c in names}
    if not as_frame:
        return picked
    try:
        import pandas as pd
    except ImportError as exc:  # pragma: no cover - depends on environment
        raise ImportError("adult(as_frame=True) needs pandas: pip install 'dpkit[frames]'") from exc
    return pd.DataFrame(picked)


def adult_domain() -> dict[str, dict[str, Any]]:
    """The public (data-independent) domain of each Adult column.

    ``{"age": {"kind": "numeric", "bounds": (0, 100)}, "sex": {"kind": "categorical",
    "categories": ("Female", "Male")}, ...}``. Categories are the codebook's; numeric bounds are
    a-priori (not read from the data). Missing values (``?`` in the file) are outside every domain.
    """
    dom: dict[str, dict[str, Any]] = {}
    for c in ADULT_COLUMNS:
        if c in _NUMERIC:
            dom[c] = {"kind": "numeric", "bounds": _BOUNDS[c]}
        else:
            dom[c] = {"kind": "categorical", "categories": _CATEGORIES[c]}
    return dom
