"""Synthetic DataFrames from a graphical model fitted to noisy marginals (issue #13).

:func:`synthesize` encodes a DataFrame on a **public** schema (declared categories; public bins for numeric
columns), runs a marginal-based method that returns a fitted :class:`~dpkit.marginals.GraphicalModel` (dpkit's
select-measure-generate release :func:`~dpkit.marginals.smg` by default, or MST), samples records from the model
exactly (:meth:`~dpkit.marginals.GraphicalModel.synthetic`: i.i.d. rows, no row-order artefacts) and decodes them
back to the original columns, dtypes and categories.

Methods are pluggable by name (:data:`METHODS`): a method is a **plan builder**
``builder(records, rho=None, *, epsilon=None, delta=None, neighbours=None, accountant=None, **options) -> Plan``
(the :mod:`dpkit.mechanisms.contract` protocol) whose draw returns (an :class:`Outcome` whose value is) the fitted
``GraphicalModel``; a builder taking ``total=`` gets the release's noisy record count as its model's total. A
builder reads the records only through :func:`~dpkit.marginals.marginal` and ``len`` (with ``weights`` they are
weighted :class:`~dpkit.marginals.Records`: weighted counts and the total weight), as MST and smg do.
:func:`synthesize` draws it inside its own plan, so the whole release is one charge.
"""

from __future__ import annotations

import importlib
import inspect
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from dpkit.core import _exact
from dpkit.core import _validate as check
from dpkit.core.errors import InvalidData, InvalidParameter, MissingDependency, WrongType
from dpkit.core.privacy import ZCDP, ApproxDP, PrivacyLoss, approx_to_zcdp_rho
from dpkit.mechanisms import Release
from dpkit.mechanisms.contract import Outcome, Plan, resolve_neighbours, run, unit_rows
from dpkit.mechanisms.discrete import discrete_gaussian_plan

if TYPE_CHECKING:
    from dpkit.core.accountant import Accountant
    from dpkit.core.neighbours import Neighbours
    from dpkit.noise.source import RandomSource

__all__ = ["METHODS", "synthesize"]

#: Method name -> (module, plan builder name), imported on first use. ``smg`` is dpkit's own
#: select-measure-generate release (:func:`dpkit.marginals.smg`, the default), ``mst`` McKenna et al.'s MST.
METHODS: dict[str, tuple[str, str]] = {
    "mst": ("dpkit.marginals.mst", "mst_plan"),
    "smg": ("dpkit.marginals.aim", "smg_plan"),
}
#: Most synthetic rows one call produces (the model's sampler limit).
MAX_ROWS = 2**26
#: Most levels one column may have.
MAX_LEVELS = 2**20
#: Largest total of a ``weights`` column (the number of underlying records of a pre-aggregated frame). The rows
#: are not expanded (the marginals are weighted counts); the limit is the marginal methods' exact score
#: arithmetic (MST and smg refuse ``2^40`` records or more).
MAX_WEIGHT_TOTAL = 2**40 - 1
#: Default share of the zCDP budget spent on the noisy record count (``count_share``).
DEFAULT_COUNT_SHARE = 0.02
_MAX_FIT_TOTAL = 2**40  # the largest total the marginal methods' fits accept
_BIN_VALUES = ("uniform", "midpoint")


def _pandas() -> Any:
    try:
        import pandas as pd
    except ImportError as exc:  # pragma: no cover - pandas is installed in the test environment
        raise MissingDependency("dpkit.synth needs pandas: pip install 'dpkit[frames]'") from exc
    return pd


def _label(col: Any) -> str:
    """A column's name for error messages (schema, not data)."""
    text = str(col)
    return text if len(text) <= 60 else text[:57] + "..."


@dataclass
class _Column:
    label: Any  # the DataFrame's column label
    attr: str  # the attribute name in the Domain
    dtype: Any  # the input dtype (restored on output)
    kind: str  # "categorical" or "binned"
    categories: list[Any] | None = None
    ordered: bool = False
    edges: np.ndarray | None = None
    integer: bool = False  # binned integer column

    @property
    def size(self) -> int:
        if self.kind == "categorical":
            assert self.categories is not None
            return len(self.categories)
        assert self.edges is not None
        return int(self.edges.size - 1)


def _edges(pd: Any, label: Any, raw: Any, integer: bool) -> np.ndarray:
    name = "bins"
    try:
        arr = np.asarray(raw, dtype=np.float64)
    except (TypeError, ValueError):
        raise WrongType(name, f"bin edges of column {_label(label)!r}: an increasing sequence of numbers") from None
    if arr.ndim != 1 or arr.size < 2:
        raise InvalidParameter(name, f"column {_label(label)!r} needs at least two bin edges")
    if arr.size - 1 > MAX_LEVELS:
        raise InvalidParameter(name, f"column {_label(label)!r} has more than {MAX_LEVELS} bins")
    if not np.isfinite(arr).all():
        raise InvalidParameter(name, f"column {_label(label)!r}: bin edges must be finite")
    if not (np.diff(arr) > 0).all():
        raise InvalidParameter(name, f"column {_label(label)!r}: bin edges must be strictly increasing")
    if integer:
        lo, hi = _int_range(arr)
        if (hi < lo).any():
            raise InvalidParameter(name, f"column {_label(label)!r} is an integer column and a bin holds no "
                                         "integer")
    return arr


def _int_range(edges: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The integers in each bin ``[e_j, e_{j+1})`` (the last bin closed): ``lo_j .. hi_j``."""
    lo = np.ceil(edges[:-1])
    hi = np.ceil(edges[1:]) - 1.0
    hi[-1] = np.floor(edges[-1])
    return lo, hi


def _schema(pd: Any, data: Any, domain: Any, bins: Any) -> list[_Column]:
    if domain is None:
        domain = {}
    if bins is None:
        bins = {}
    if not isinstance(domain, Mapping):
        raise WrongType("domain", "a mapping column -> categories (or {'bins': edges}, or a number of codes)")
    if not isinstance(bins, Mapping):
        raise WrongType("bins", "a mapping column -> bin edges")
    labels = list(data.columns)
    if len(set(labels)) != len(labels):
        raise InvalidParameter("data", "has repeated column names")
    if not labels:
        raise InvalidData("data", "has no columns")
    for key in domain:
        if key not in labels:
            raise InvalidParameter("domain", f"names a column {_label(key)!r} that is not in the data")
    for key in bins:
        if key not in labels:
            raise InvalidParameter("bins", f"names a column {_label(key)!r} that is not in the data")
    use_names = all(isinstance(c, str) and c for c in labels)
    out: list[_Column] = []
    for i, col in enumerate(labels):
        dtype = data[col].dtype
        attr = col if use_names else f"c{i}"
        spec = domain.get(col)
        edges = bins.get(col)
        if isinstance(spec, Mapping):
            if set(spec) != {"bins"}:
                raise InvalidParameter("domain", f"column {_label(col)!r}: a mapping spec must be {{'bins': edges}}")
            if edges is not None:
                raise InvalidParameter("bins", f"column {_label(col)!r} has bins in both domain and bins")
            edges, spec = spec["bins"], None
        if spec is not None and edges is not None:
            raise InvalidParameter("domain", f"column {_label(col)!r} is given both categories and bins")
        if edges is not None:
            if not (pd.api.types.is_numeric_dtype(dtype) and not pd.api.types.is_bool_dtype(dtype)):
                raise WrongType("bins", f"column {_label(col)!r} must be numeric to be binned")
            integer = bool(pd.api.types.is_integer_dtype(dtype))
            out.append(_Column(col, attr, dtype, "binned", edges=_edges(pd, col, edges, integer), integer=integer))
            continue
        ordered = False
        if spec is None:
            if pd.api.types.is_bool_dtype(dtype):
                cats: list[Any] = [False, True]
            elif pd.api.types.is_numeric_dtype(dtype):
                raise InvalidParameter("bins", f"numeric column {_label(col)!r} is unbounded: give public bins "
                                               "(bins={column: edges}) or declare its values in domain=")
            else:
                raise InvalidParameter("domain", f"column {_label(col)!r} has no public categories: declare them "
                                                 "in domain= (they are never read from the data)")
        elif isinstance(spec, pd.CategoricalDtype):
            cats, ordered = list(spec.categories), bool(spec.ordered)
        elif isinstance(spec, (bool, np.bool_)):
            raise WrongType("domain", f"column {_label(col)!r}: categories must be a sequence or a number of codes")
        elif isinstance(spec, (int, np.integer)):
            k = check.integer("domain", spec, minimum=1, maximum=MAX_LEVELS)
            cats = list(range(k))
        elif isinstance(spec, (str, bytes)) or not isinstance(spec, (Sequence, np.ndarray, pd.Index)):
            raise WrongType("domain", f"column {_label(col)!r}: categories must be a sequence or a number of codes")
        else:
            cats = list(spec)
        if not cats:
            raise InvalidParameter("domain", f"column {_label(col)!r} has no categories")
        if len(cats) > MAX_LEVELS:
            raise InvalidParameter("domain", f"column {_label(col)!r} has more than {MAX_LEVELS} categories")
        try:
            index = pd.Index(cats, dtype=object)
            unique = index.is_unique
            missing = bool(index.isna().any())
        except TypeError:
            raise WrongType("domain", f"column {_label(col)!r}: categories must be hashable") from None
        if not unique:
            raise InvalidParameter("domain", f"column {_label(col)!r} lists a category twice")
        if missing:
            raise InvalidParameter("domain", f"column {_label(col)!r}: a category is missing (NaN/None)")
        if not isinstance(dtype, pd.CategoricalDtype):
            try:  # every declared category must survive the round trip to the column's dtype
                back = pd.Series(index, dtype=object).astype(dtype)
                same = list(back.astype(object)) == cats
            except (TypeError, ValueError, OverflowError):
                same = False
            if not same:
                raise InvalidParameter("domain", f"column {_label(col)!r}: a declared category does not fit the "
                                                 "column's dtype")
        out.append(_Column(col, attr, dtype, "categorical", categories=cats, ordered=ordered))
    return out


def _weight_column(pd: Any, data: Any, weights: Any, domain: Any, bins: Any) -> Any:
    """The label of the ``weights`` column (validated as a column name; its values are checked later)."""
    if weights is None:
        return None
    labels = list(data.columns)
    try:
        present = weights in labels
    except TypeError:  # an unhashable or uncomparable label
        present = False
    if not present:
        raise InvalidParameter("weights", "must name a column of the data")
    if labels.count(weights) != 1:
        raise InvalidParameter("data", "has repeated column names")
    for name, spec in (("domain", domain), ("bins", bins)):
        if isinstance(spec, Mapping) and weights in spec:
            raise InvalidParameter(name, f"names the weights column {_label(weights)!r}, which is not synthesized")
    if len(labels) < 2:
        raise InvalidData("data", "has no columns besides the weights column")
    return weights


def _weight_values(pd: Any, column: Any) -> np.ndarray:
    """The validated multiplicities (int64, each and their total at most :data:`MAX_WEIGHT_TOTAL`, total >= 1)."""
    dtype = column.dtype
    if pd.api.types.is_bool_dtype(dtype) or not pd.api.types.is_numeric_dtype(dtype) \
            or pd.api.types.is_complex_dtype(dtype):
        raise WrongType("weights", "an integer column (each row's number of records)")
    x = np.asarray(column.to_numpy(dtype=np.float64, na_value=np.nan), dtype=np.float64)
    if np.isnan(x).any():
        raise InvalidData("weights", "contains missing values")
    if np.isinf(x).any():
        raise InvalidData("weights", "contains an infinite value")
    if (x < 0).any():
        raise InvalidData("weights", "contains a negative weight")
    if (x > MAX_WEIGHT_TOTAL).any():  # exact: the limit is a float; a value this large is above it anyway
        raise InvalidData("weights", f"total is above the limit of {MAX_WEIGHT_TOTAL} records")
    if not (x == np.floor(x)).all():
        raise InvalidData("weights", "must hold whole numbers")
    w = x.astype(np.int64)  # integers at most 2^40 - 1 < 2^53 are exact floats; larger ones are refused above
    if float(x.sum()) > 2.0 * MAX_WEIGHT_TOTAL:  # guards the exact int64 sum below
        raise InvalidData("weights", f"total is above the limit of {MAX_WEIGHT_TOTAL} records")
    total = int(w.sum())
    if total > MAX_WEIGHT_TOTAL:
        raise InvalidData("weights", f"total is above the limit of {MAX_WEIGHT_TOTAL} records")
    if total == 0:
        raise InvalidData("weights", "total is 0: there are no records")
    return w


def _encode(pd: Any, data: Any, cols: list[_Column]) -> np.ndarray:
    n = len(data)
    codes = np.empty((n, len(cols)), dtype=np.int64)
    for j, c in enumerate(cols):
        s = data[c.label]
        if bool(s.isna().any()):
            raise InvalidData("data", f"column {_label(c.label)!r} contains missing values")
        if c.kind == "categorical":
            assert c.categories is not None
            k = np.asarray(pd.Index(c.categories, dtype=object).get_indexer(s.astype(object)), dtype=np.int64)
            if (k < 0).any():
                raise InvalidData("data", f"column {_label(c.label)!r} has a value outside its declared categories")
        else:
            assert c.edges is not None
            x = np.asarray(s, dtype=np.float64)
            if not np.isfinite(x).all():
                raise InvalidData("data", f"column {_label(c.label)!r} contains infinite values")
            if (x < c.edges[0]).any() or (x > c.edges[-1]).any():
                raise InvalidData("data", f"column {_label(c.label)!r} has a value outside its bins")
            k = np.minimum(np.searchsorted(c.edges, x, side="right") - 1, c.edges.size - 2).astype(np.int64)
        codes[:, j] = k
    return codes


def _uniform(rng: RandomSource, n: int) -> np.ndarray:
    return (rng.uint64(n) >> np.uint64(11)).astype(np.float64) * 2.0**-53


def _decode(pd: Any, codes: np.ndarray, cols: list[_Column], bin_values: str, rng: RandomSource) -> Any:
    n = codes.shape[0]
    series: dict[Any, Any] = {}
    for j, c in enumerate(cols):
        k = codes[:, j]
        if c.kind == "categorical":
            assert c.categories is not None
            if isinstance(c.dtype, pd.CategoricalDtype):
                dt = pd.CategoricalDtype(pd.Index(c.categories), ordered=c.dtype.ordered or c.ordered)
                series[c.label] = pd.Series(pd.Categorical.from_codes(k, dtype=dt))
            else:
                vals = np.empty(len(c.categories), dtype=object)
                vals[:] = c.categories
                series[c.label] = pd.Series(vals[k], dtype=object).astype(c.dtype)
            continue
        assert c.edges is not None
        e = c.edges
        if c.integer:
            lo, hi = _int_range(e)
            lo_k, hi_k = lo[k], hi[k]
            if bin_values == "midpoint":
                v = np.floor((lo_k + hi_k) / 2.0)
            else:
                v = np.minimum(lo_k + np.floor(_uniform(rng, n) * (hi_k - lo_k + 1.0)), hi_k)
        else:
            lo_k, hi_k = e[k], e[k + 1]
            if bin_values == "midpoint":
                v = lo_k + (hi_k - lo_k) / 2.0
            else:
                v = np.clip(lo_k + _uniform(rng, n) * (hi_k - lo_k), lo_k, hi_k)
        series[c.label] = pd.Series(v).astype(c.dtype)
    return pd.DataFrame(series, columns=[c.label for c in cols])


def _method(name: Any) -> Any:
    name = check.choice("method", name, tuple(METHODS))
    module, attr = METHODS[name]
    try:
        builder = getattr(importlib.import_module(module), attr)
    except (ImportError, AttributeError):
        raise InvalidParameter("method", f"{name!r} is not available in this version of dpkit") from None
    return name, builder


def synthesize(data: Any, epsilon: float | None = None, *, delta: float | None = 1e-9, rho: float | None = None,
               domain: Mapping[Any, Any] | None = None, bins: Mapping[Any, Any] | None = None, method: str = "smg",
               rows: int | None = None, bin_values: str = "uniform", options: Mapping[str, Any] | None = None,
               weights: Any = None, count_share: float = DEFAULT_COUNT_SHARE, neighbours: Neighbours | None = None,
               accountant: Accountant | None = None, rng: RandomSource | None = None,
               description: str = "") -> Release:
    """A differentially private synthetic copy of a DataFrame, with its columns, dtypes and categories.

    Parameters
    ----------
    data:
        The private ``pandas.DataFrame`` (at least one row and one column; no missing values). Every column must
        have a public domain (below); its rows are the records of the neighbour relation.
    epsilon, delta:
        An ``(epsilon, delta)`` budget (``epsilon > 0``, ``0 < delta < 1``, default ``delta = 1e-9``): the release
        spends the largest ``rho`` whose zCDP implies it (CKS 2020) and is charged ``ApproxDP(epsilon, delta)``
        (``ZCDP(rho)`` instead when ``count_share > 0`` and the accountant's budget is zCDP).
    rho:
        A zCDP budget instead (``delta`` is then ignored), charged ``ZCDP(rho)``.
    domain:
        Public domains by column label: a sequence of categories (the declared vocabulary, in the output's
        order), a ``pandas.CategoricalDtype``, an integer ``k`` (the codes ``0 .. k-1``) or ``{"bins": edges}``.
        Categories are **never read from the data**: a non-numeric column without declared categories is refused
        (``InvalidParameter`` naming the column). Boolean columns default to ``[False, True]``.
    bins:
        Public bin edges by column label for numeric columns, ``e_0 < e_1 < ... < e_m`` (bins ``[e_j, e_{j+1})``,
        the last closed). A numeric column with neither bins nor declared values is refused as unbounded.
    method:
        The fitting method, by name (:data:`METHODS`): ``"smg"`` (default: dpkit's own select-measure-generate
        release, :func:`dpkit.marginals.smg`, adaptive in the manner of AIM) or ``"mst"``
        (:func:`dpkit.marginals.mst`). ``smg`` is the default on the measured figures (``smg``'s module
        docstring, ``docs/benchmarks.md``; mean TV over all 2-way / 3-way marginals at epsilon = 1): Adult
        0.038 / 0.089 against MST's 0.046-0.051 / 0.102-0.108, NLTCS 0.003-0.004 / 0.007-0.008 against MST's
        0.088 / 0.142 (a tree cannot hold NLTCS's interactions); on the small Titanic (1 304 records) it is on par
        (0.189 / 0.307 mean of 4 runs, MST 0.175 / 0.287 in 2). It is slower (about 2-3 CPU minutes on Adult;
        1.3 s against MST's 1.0 s on a 3 000-row, 6-column frame): choose ``"mst"`` for speed.
    rows:
        The number of synthetic rows (public, ``0 .. 2^26``). Default: the noisy record count (``count_share >
        0``), else the fitted model's total.
    bin_values:
        How a binned numeric value is drawn back from its bin: ``"uniform"`` (default: uniform in the bin; for
        an integer column uniform over the bin's integers) or ``"midpoint"`` (the bin's midpoint, rounded down
        for integer columns).
    options:
        Keyword options of the method (e.g. ``{"iters": 500, "compress": False}`` for MST).
    weights:
        The label of an integer column of ``data`` giving each row's multiplicity, for pre-aggregated data (e.g.
        a group-by with a count column): a row of weight ``w`` stands for ``w`` identical records, and the
        **records of the neighbour relation are those underlying records**, not the rows. The weight column is
        not synthesized (the output has the other columns, in order, with their dtypes) and may not be named in
        ``domain`` or ``bins``. Integer dtypes (nullable ones included) or floats holding whole numbers; refused
        with a typed error naming ``"weights"`` (never showing a value) when missing from the data
        (``InvalidParameter``), not numeric (``WrongType``), or holding a missing, infinite, negative or
        fractional value, a total of 0 or a total above :data:`MAX_WEIGHT_TOTAL` (``2^40 - 1``, the methods'
        exact score arithmetic) records (``InvalidData``); all before any charge. Rows of weight 0 are dropped
        before encoding (their values are not read). Implementation: the rows are **not** expanded: they become
        weighted :class:`~dpkit.marginals.Records` whose marginals are weighted counts (exact integers) and
        whose length is the total, equal to the expanded frame's, so the release equals that of the expanded
        frame, draw for draw, at the memory of the aggregated frame. Default ``None``: every row is one record.
    count_share:
        Share of the zCDP budget ``rho`` spent on a noisy count of the records (in ``[0, 1)``; default 0.02). The
        count is the default number of rows and the total of the fitted model (the method's ``total=``). ``0``:
        no count is measured, and the model's own total estimate (from its noisy marginals) is used, as before
        this option existed. The method gets the rest of ``rho``.
    neighbours:
        The neighbour relation over records (default: the accountant's, else add/remove one record: one row, or
        with ``weights`` one unit of a row's weight).
    accountant:
        If given, charged the method's cost once, before any randomness.
    rng:
        A :class:`~dpkit.noise.source.RandomSource` (default: the OS CSPRNG).
    description:
        Free text written into the receipt.

    Guarantee
    ---------
    ``rho``-zCDP, hence ``(epsilon, delta)``-DP when given those (CKS 2020 conversion), under the neighbour
    relation over records, by sequential composition of the noisy count and the method: the count ``n + Z`` with
    ``Z`` discrete Gaussian calibrated to ``rho_c`` at sensitivity ``Δ = k`` (``k`` records per privacy unit,
    else 1; under replace-one the count does not move, so ``Δ`` is conservative) is exactly ``rho_c``-zCDP
    (Canonne, Kamath & Steinke 2020), and the method is ``rho_m``-zCDP (for MST :func:`dpkit.marginals.mst`,
    for smg :func:`dpkit.marginals.smg`) with ``rho_c + rho_m <= rho`` exactly (rationals,
    :func:`dpkit.core._exact.split_budget`). The count is given to the method as a public total: its fits
    are post-processing of released values. With ``count_share = 0`` the guarantee is the method's alone.
    The schema (categories, bins, dtypes, column names) is public input, not read from the data; the encoding is
    a fixed per-row map, so neighbouring DataFrames give neighbouring records. With ``weights`` the records are
    the underlying ones: the method sees the weighted frame only through its marginals and record count, which
    are exactly those of its expansion (each row repeated ``weight`` times), so the release is the same function
    of the expansion, and two weighted frames whose expansions are neighbours give neighbouring records; the
    guarantee does **not** treat a whole row of weight ``w`` as one record (protecting a row would need a
    privacy unit of ``w`` records). The sampled records and the values drawn within bins are functions of the
    released model and count and of fresh randomness only: post-processing.

    Cost
    ----
    Exactly the budget given, charged **once** before any randomness: ``ApproxDP(epsilon, delta)`` or
    ``ZCDP(rho)`` (given ``(epsilon, delta)``, the zCDP ``rho`` they imply is split). The split:
    ``rho_c = count_share rho`` (largest float at most it, in rationals) for the count and ``rho_m`` (the rest)
    for the method (MST: split a third each between 1-way marginals, the tree selection and the tree's 2-way
    marginals); ``params`` list ``"count_rho"``, ``"method_rho"``, ``"count_std"``. With ``count_share = 0``:
    the method's own cost for the whole budget, and the default row count (the fitted model's total, estimated
    from its noisy marginals) takes no separate share.

    Output law
    ----------
    First (``count_share > 0``) the count ``c = N + Z``, ``N`` the number of records (with ``weights``, their
    total) and ``Z`` discrete Gaussian of scale ``sigma_c = Δ / sqrt(2 rho_c)`` (an integer; it may be below 1).
    ``model`` = the method's fitted :class:`~dpkit.marginals.GraphicalModel` on the encoded records, fitted with
    total ``min(max(c, 1), 2^40)`` (each
    categorical column's codes are its index in the declared categories; a binned column's code is its bin;
    with ``weights``, each row's codes counted ``weight`` times: the marginals of the expanded frame).
    ``n`` = ``rows``, else ``min(max(c, 1), 2^26)``, else (``count_share = 0``) ``max(1, round(model.total))``
    (at most ``2^26``). The codes are ``model.synthetic(n,
    rng)``: ``n`` i.i.d. draws from the model (exact inverse-CDF sampling down the junction tree: no row-order
    artefacts). Decoding: categories by index; a bin ``[e_j, e_{j+1})`` gives ``e_j + U (e_{j+1} - e_j)``
    (``U`` a 53-bit uniform; integer columns: a uniform integer of the bin) or the midpoint. Columns, their order
    and dtypes are the input's; categorical columns get the declared categories (with the input's
    ``ordered`` flag); the index is ``0 .. n-1``.

    The :class:`Release`'s ``value`` is the DataFrame; ``parts``: ``"model"``, ``"rows"`` (``n``),
    ``"count"`` (``c``, unclipped; ``None`` when ``count_share = 0``), ``"method"`` (the method's own parts:
    its noisy measurements, MST's tree, ...).

    Error
    -----
    The count's error is ``Z``: mean 0, standard deviation at most ``sigma_c`` (``params["count_std"]``; e.g.
    7.3 records for ``rho = 0.5`` and the default share); clipping to ``[1, 2^26]`` only matters for tiny data.
    The method's error on the marginals (MST: measurement noise, selection, and the tree's bias on interactions
    it does not hold) plus the sampling error of ``n`` i.i.d. rows (a marginal with ``c`` cells moves by about
    ``sqrt(c / (2 pi n))`` in total variation), plus the within-bin spread of numeric columns (uniform within
    a bin: the synthetic values' distribution inside a bin is not learnt). No interval is provided.

    Examples
    --------
    >>> import numpy as np, pandas as pd
    >>> from dpkit.noise import deterministic_source
    >>> i = np.arange(300)
    >>> df = pd.DataFrame({"sex": np.where(i % 3 == 0, "f", "m"), "age": 18 + (i * 37) % 72})
    >>> rel = synthesize(df, 1.0, domain={"sex": ["f", "m"]}, bins={"age": [18, 30, 45, 60, 90]},
    ...                  rows=100, rng=deterministic_source(1))
    >>> rel.value.shape, list(rel.value.columns), rel.value["age"].dtype == df["age"].dtype
    ((100, 2), ['sex', 'age'], True)
    """
    return run(_synthesize_plan(data, epsilon, delta=delta, rho=rho, domain=domain, bins=bins, method=method,
                                rows=rows, bin_values=bin_values, options=options, weights=weights,
                                count_share=count_share, neighbours=neighbours, accountant=accountant),
               accountant=accountant, rng=rng, description=description)


def _synthesize_plan(data: Any, epsilon: Any, *, delta: Any, rho: Any, domain: Any, bins: Any, method: Any,
                     rows: Any, bin_values: Any, options: Any, weights: Any = None,
                     count_share: Any = DEFAULT_COUNT_SHARE, neighbours: Neighbours | None = None,
                     accountant: Accountant | None = None) -> Plan:
    """The validated plan of :func:`synthesize` (nothing drawn or charged)."""
    pd = _pandas()
    if not isinstance(data, pd.DataFrame):
        raise WrongType("data", "a pandas DataFrame")
    name, builder = _method(method)
    bin_values = check.choice("bin_values", bin_values, _BIN_VALUES)
    n_rows = None if rows is None else check.size_limit("rows", rows, MAX_ROWS)
    if options is None:
        options = {}
    if not isinstance(options, Mapping) or any(not isinstance(k, str) for k in options):
        raise WrongType("options", "a mapping of the method's keyword options")
    count_share = check.real("count_share", count_share)
    if not 0.0 <= count_share < 1.0:
        raise InvalidParameter("count_share", "must be in [0, 1)")
    reserved = {"records", "rho", "epsilon", "delta", "neighbours", "accountant", "rng", "description"}
    if set(options) & reserved:
        raise InvalidParameter("options", "may not set the budget, the records or the neighbour relation")
    if count_share > 0 and "total" in options:
        raise InvalidParameter("options", "may not set total: the noisy count is the total (or count_share=0)")
    sig = inspect.signature(builder)
    takes_any = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in sig.parameters.values())
    if not takes_any and not set(options) <= set(sig.parameters):
        raise InvalidParameter("options", f"has an option that method {name!r} does not take")
    takes_total = takes_any or "total" in sig.parameters
    if rho is not None:
        if epsilon is not None:
            raise InvalidParameter("rho", "give either rho or (epsilon, delta), not both")
        budget: dict[str, Any] = {"rho": rho}
    else:
        if epsilon is None:
            raise InvalidParameter("epsilon", "give epsilon (with delta) or rho")
        budget = {"epsilon": epsilon, "delta": delta}
    split = _count_split(budget, count_share, accountant) if count_share > 0 else None
    nb = resolve_neighbours(neighbours, accountant)
    wcol = _weight_column(pd, data, weights, domain, bins)
    frame = data if wcol is None else data.drop(columns=[wcol])
    cols = _schema(pd, frame, domain, bins)
    from dpkit.marginals.domain import Domain, Records

    dom = Domain([(c.attr, c.size) for c in cols])
    if len(data) == 0:
        raise InvalidData("data", "must not be empty")
    if wcol is None:
        records = Records(_encode(pd, frame, cols), dom)
    else:  # not expanded: the methods read records through marginal() (weighted counts) and len() (the total)
        w = _weight_values(pd, data[wcol])
        keep = w > 0
        records = Records(_encode(pd, frame[keep], cols), dom, weights=w[keep])
    inner_budget = budget if split is None else {"rho": split["method_rho"]}
    inner = builder(records, neighbours=nb, accountant=accountant, **inner_budget, **options)
    if not isinstance(inner, Plan):  # pragma: no cover - a registered builder broke the protocol
        raise WrongType("method", "a plan builder")
    params = {**inner.params, "method": name, "rows": n_rows, "bin_values": bin_values,
              "columns": [_label(c.label) for c in cols], "inner_mechanism": inner.mechanism,
              "weights": None if wcol is None else _label(wcol), "count_share": count_share}
    cost = inner.cost
    n_records = len(records)
    count_plan: Plan | None = None
    if split is not None:
        count_sens = float(unit_rows(nb))
        count_plan = discrete_gaussian_plan(n_records, count_sens, rho=split["count_rho"])
        cost = split["cost"]
        params.update(split["params"])
        params.update({"count_rho": split["count_rho"], "method_rho": split["method_rho"],
                       "count_sensitivity": count_sens, "count_std": count_plan.scale})

    def draw(rng: RandomSource) -> Outcome:
        count: int | None = None
        plan = inner
        if count_plan is not None:
            count = int(count_plan.sample(rng).value)
            if takes_total:  # the same validated arguments, plus the public total: cannot fail
                total = float(min(max(count, 1), _MAX_FIT_TOTAL))
                plan = builder(records, neighbours=nb, accountant=accountant, **inner_budget, **options, total=total)
        out = plan.sample(rng)
        model = out.value
        if n_rows is not None:
            n = n_rows
        elif count is not None:
            n = min(MAX_ROWS, max(1, count))
        else:
            n = int(min(MAX_ROWS, max(1, math.floor(model.total + 0.5))))
        codes = model.synthetic(n, rng).codes
        frame = _decode(pd, codes, cols, bin_values, rng)
        return Outcome(frame, parts={"model": model, "rows": n, "count": count, "method": dict(out.parts)},
                       fields={"scale": None})

    return Plan(mechanism="synthesize", cost=cost, draw=draw, sensitivity=inner.sensitivity, scale=None,
                params=params, neighbours=nb)


def _count_split(budget: dict[str, Any], share: float, accountant: Any) -> dict[str, Any]:
    """The validated budget split between the noisy count and the method: ``{"cost", "count_rho",
    "method_rho", "params"}`` (the exact rational sum of the two parts is at most the zCDP ``rho``)."""
    if "rho" in budget:
        r = check.positive("rho", budget["rho"])
        cost: PrivacyLoss = ZCDP(r)
        top: dict[str, Any] = {"rho": r}
    else:
        eps = check.epsilon(budget["epsilon"])
        if budget["delta"] is None:
            raise InvalidParameter("delta", "the release adds Gaussian noise: give delta with epsilon (or rho)")
        dlt = check.delta(budget["delta"], allow_zero=False)
        r = approx_to_zcdp_rho(eps, dlt)
        if not r > 0:
            raise InvalidParameter("epsilon", "with this delta: too small for a positive zCDP budget")
        from dpkit.core.accountant import Accountant

        zc = isinstance(accountant, Accountant) and isinstance(accountant.budget, ZCDP)
        cost = ZCDP(r) if zc else ApproxDP(eps, dlt)
        top = {"epsilon": eps, "delta": dlt, "rho": r}
    count_rho, method_rho = _exact.split_budget(r, [share, 1.0 - share], name="count_share", total_name="rho")
    return {"cost": cost, "count_rho": count_rho, "method_rho": method_rho, "params": top}
