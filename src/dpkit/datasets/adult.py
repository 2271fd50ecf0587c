"""The UCI Adult training data (32,561 rows, 15 columns), bundled with dpkit.

Source: Becker, B. & Kohavi, R. (1996). Adult. UCI Machine Learning Repository, CC BY 4.0.
dpkit ships it as ``data/adult.npz``, a lossless numpy-only archive of UCI's ``adult.data`` (integer columns,
and each categorical column as codes into its codebook categories), built by :mod:`dpkit.datasets._build`;
the test suite checks that it renders back to the original file byte for byte (:data:`TEXT_SHA256`).
``adult.names`` (the codebook) is shipped beside it.

:func:`adult_domain` gives the *public* domain of each column: the category lists come from the
codebook (``adult.names``), and the numeric bounds are a-priori bounds chosen without looking at the
data (the Census top-codes capital gains at 99,999; ages and weekly hours are bounded by plausibility).
DP code must take bins, bounds and candidate sets from such public metadata, never from the data.
"""

from __future__ import annotations

from collections.abc import Sequence
from importlib import resources
from typing import TYPE_CHECKING, Any, Literal, overload

import numpy as np

from dpkit.core.errors import InvalidParameter, MissingDependency, WrongType

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["ADULT_COLUMNS", "adult", "adult_domain"]

#: SHA-256 of UCI's ``adult.data`` (the text the bundled archive reproduces).
TEXT_SHA256 = "5b00264637dbfec36bdeaab5676b0b309ff9eb788d63554ca0a249491c86603d"
#: SHA-256 of ``adult.data.gz`` as dpkit shipped it before the archive: the bundled data's identity in a ledger
#: (:func:`dpkit.tables.source_fingerprint`), unchanged so that ledgers written earlier still recognise it.
GZ_SHA256 = "80e9b4b5996043b5b415c98d11e402ac85ac99551f94242ce0101ad6b1e06183"
_ARCHIVE = "data/adult.npz"

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
    """The columns, read once from the archive: numeric columns int64, categorical ones object arrays of
    ``str`` with ``None`` for a missing value (exactly what parsing ``adult.data`` gives)."""
    global _cache
    if _cache is None:
        out: dict[str, np.ndarray] = {}
        with resources.files("dpkit.datasets").joinpath(_ARCHIVE).open("rb") as fh, np.load(fh) as z:
            for name in ADULT_COLUMNS:
                if name in _NUMERIC:
                    out[name] = z[name].astype(np.int64)
                else:  # code -1 (missing) picks the None appended to the categories
                    table = np.array([*z[name + ".categories"].tolist(), None], dtype=object)
                    out[name] = table[z[name]]
        _cache = out
    return _cache


@overload
def adult(*, as_frame: Literal[True] = ..., columns: Sequence[str] | None = ...) -> pd.DataFrame: ...


@overload
def adult(*, as_frame: Literal[False], columns: Sequence[str] | None = ...) -> dict[str, np.ndarray]: ...


@overload
def adult(*, as_frame: bool = ..., columns: Sequence[str] | None = ...) -> pd.DataFrame | dict[str, np.ndarray]: ...


def adult(*, as_frame: bool = True, columns: Sequence[str] | None = None) -> pd.DataFrame | dict[str, np.ndarray]:
    """The bundled UCI Adult training data (32,561 rows), as scikit-learn's dataset loaders give it.

    Parameters
    ----------
    as_frame:
        True (default): a pandas DataFrame (needs pandas: ``pip install 'dpkit[frames]'``). Numeric columns
        are int64; categorical columns have pandas' default string dtype (``str`` in pandas 3, ``object`` in
        pandas 2), a missing value (``?`` in the file) being missing (``NaN`` in pandas 3, ``None`` in
        pandas 2). The same frame as ``pandas.DataFrame(adult(as_frame=False))``: the string columns suit
        :mod:`dpkit.tables` and the engines (a ``Categorical`` would become a DuckDB ``ENUM``).
        False: a ``dict`` mapping column name to a numpy array (numeric columns int64, categorical columns
        object arrays of ``str`` with ``None`` where the file has ``?``); needs numpy only.
    columns:
        A subset of :data:`ADULT_COLUMNS` to return (default: all, in file order).

    Returns
    -------
    A fresh copy each call (changing it changes nothing for the next caller). Column names use underscores
    (``education_num``, ``hours_per_week``, ...). For pandas ``Categorical`` columns over the public codebook
    categories: ``df[c].astype(pandas.CategoricalDtype(adult_domain()[c]["categories"]))``.

    Raises
    ------
    MissingDependency
        ``as_frame=True`` without pandas installed (use ``as_frame=False``, or install the ``frames`` extra).
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
    if as_frame:
        try:
            import pandas as pd
        except ImportError:
            raise MissingDependency(
                "dpkit.datasets.adult() returns a pandas DataFrame and needs pandas: pip install 'dpkit[frames]'; "
                "or call adult(as_frame=False) for a dict of numpy arrays") from None
    data = _load()
    picked = {c: data[c].copy() for c in names}
    if not as_frame:
        return picked
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
