"""The ``model`` statistic kind of :mod:`dpkit.tables` (issue #14): train one :mod:`dpkit.learn` model on the rows
of a table and release its parameters and a differentially private held-out score.

``Query.model(estimator, label, features, bounds=..., categories=..., classes=... | y_bounds=..., options=...,
test_fraction=0.2, score_share=1.0)`` (CLI: ``stat = "model"``; ``docs/cli.md``):

- ``estimator``: ``"logistic_regression"``, ``"linear_svc"``, ``"linear_regression"``, ``"gaussian_nb"`` or
  ``"categorical_nb"`` (the public functions of :mod:`dpkit.learn`); ``options`` are that function's other
  public parameters (``method``, ``steps``, ``l2``, ...), validated before the charge.
- ``label``: the target column, with declared ``classes`` (classifiers; a row whose label is not a declared class
  is not used) or declared ``y_bounds`` (regression; targets clamped into them).
- ``features``: numeric columns with declared ``bounds`` (clamped, then scaled to ``[0, 1]`` by the public
  bounds) and categorical columns with declared ``categories`` (one-hot over the declared list; a value outside
  it, or missing, is all zeros; ``categorical_nb`` takes categorical features only, each coded by its index in
  the declared list, with one more level for any other value). Nothing is read from the data to build the design
  matrix except the rows themselves. A row with a missing label or numeric feature is not used (under
  ``nan_policy="raise"`` the release refuses such a table before the charge, as for every kind).

How it runs. The engine returns the label, feature (and privacy-unit) columns of the rows kept by contribution
bounding (its own pass); dpkit sorts them in a **canonical order** (unit, label, design row: identical rows are
interchangeable), so every engine gives the same release for the same seed. After the query's one charge:

1. **the split**: each record (each privacy unit, under ``unit_of``) is put in the held-out part with probability
   ``test_fraction``, independently, by a draw from the session's random source (53-bit uniforms: the
   probability is ``test_fraction`` exactly for a public fraction with at most 53 significant bits);
2. **training**: the estimator's public function on the training part (``accountant=None``: the query's charge
   covers it), with the statistic's budget share and ``neighbours=`` the records' relation (add/remove one row,
   or the session's :class:`~dpkit.core.neighbours.PrivacyUnit` of ``max_rows`` rows);
3. **the held-out score**: classifiers: a noisy count of correct predictions and a noisy count of held-out rows
   (each half of ``score_share`` of the share), accuracy = their ratio with a 95% interval; regression: a noisy
   sum of squared errors (predictions and targets clamped to ``y_bounds``, each error rounded onto a lattice of
   ``(hi - lo)^2 / 2^20``) and a noisy row count, RMSE = ``sqrt(sum / rows)`` with a 95% interval. Discrete
   Laplace noise (pure budgets) or discrete Gaussian noise (zCDP), sensitivity ``R`` rows (``R`` lattice steps
   per row for the error sum).

Guarantee. **Parallel composition over a data-independent partition**: let ``S`` be the split (a random subset of
records drawn independently of the data, i.i.d. per record or per unit). For neighbours ``D' = D + u`` (one
record, or one unit's at most ``R`` bounded rows), couple the splits of the common records (their law is i.i.d.
``Bernoulli(test_fraction)`` whatever their positions); then ``u`` lies in exactly one part, and only the
mechanism run on that part sees a changed input (by at most ``R`` rows): conditioned on the split, the output
is ``(A(T + u), B(H))`` or ``(A(T), B(H + u))``, each within the guarantee of the mechanism concerned, and the
unconditional law is the same mixture over the split for ``D`` and ``D'``. Pure ε-DP and (ε, δ)-DP are preserved
by such mixtures, and so is ρ-zCDP (Rényi divergence is jointly quasi-convex). So training (cost = the share)
and scoring (``score_share`` × the share, at most the share) together cost **the share**, not their sum. The
training guarantee is the estimator's (its docstring in :mod:`dpkit.learn`); the noisy counts' sensitivities
are ``R`` (a unit changes at most ``R`` held-out rows, each moving the correct count or the row count by one and
the error sum by at most ``2^20`` lattice steps). Everything else is public: the declared bounds, categories,
classes, the fraction, the options.

Cost. The statistic's share of the query's budget, charged once with the query before any row is read or random
byte drawn. ``logistic_regression`` / ``linear_svc`` with ``method="gd"`` (the default) are zCDP (a ``ZCDP``
budget, or ``ApproxDP`` with delta > 0 spent as the largest converting rho; a ``PureDP`` budget is refused before
anything is read); ``linear_regression`` (``ssp``) takes either noise family; the pure ε methods (``objective``,
``expsearch``, ``functional``, the naive Bayes models) get ``ε = share`` (or ``ε = sqrt(2 rho)``, whose ε-DP
implies rho-zCDP, in a zCDP query).

Bad input refused before the charge (typed errors naming the parameter, never a value): an unknown estimator,
column or option, a feature without bounds or categories, a classifier without classes, a regression without
y_bounds, an option the estimator refuses (checked by building the estimator's release on two public dummy
rows against an accountant that refuses every charge: nothing is drawn), a grouped query, a budget of the wrong
type; and, by the pre-charge data pass, a table with fewer than :data:`MIN_ROWS` usable rows (or units) or more
than :data:`MAX_ROWS` (the refusal, like those of the other kinds' pre-charge checks, discloses only that the
row count is outside these public limits; nothing is charged or released).
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Mapping, Sequence
from fractions import Fraction
from typing import TYPE_CHECKING, Any

import numpy as np

from dpkit.core import _exact
from dpkit.core import _validate as check
from dpkit.core.errors import BudgetExceeded, IncompatibleLoss, InvalidData, InvalidParameter, WrongType
from dpkit.tables.kinds import Kind, register_kind

if TYPE_CHECKING:  # pragma: no cover
    from dpkit.tables._query import Query, Statistic

__all__ = ["ESTIMATORS", "MAX_DESIGN_COLUMNS", "MAX_ROWS", "MIN_ROWS", "Model"]

#: The estimators of a ``model`` statistic: name -> ``"classifier"`` / ``"regressor"``.
ESTIMATORS: dict[str, str] = {
    "logistic_regression": "classifier",
    "linear_svc": "classifier",
    "linear_regression": "regressor",
    "gaussian_nb": "classifier",
    "categorical_nb": "classifier",
}
#: The most usable rows a model statistic reads (the design matrix is built in memory): refused above, before
#: the charge, by the pre-charge data pass.
MAX_ROWS = 2**22
#: The fewest usable rows (and privacy units) a model statistic accepts: with a held-out fraction of at most
#: 1/2 the training part is then empty with probability at most 2^-50.
MIN_ROWS = 50
#: The most columns of the design matrix (numeric features plus the declared categories of the others).
MAX_DESIGN_COLUMNS = 2000
#: The most features.
MAX_FEATURES = 512
#: The error sum's lattice: one row's squared error is at most this many steps.
_ERROR_STEPS = 2**20
#: Parameters of the dpkit.learn functions that the kind sets itself (never ``options``).
_RESERVED = frozenset({"X", "y", "epsilon", "delta", "rho", "classes", "bounds", "norm", "y_bounds", "l1_norm",
                       "categories", "neighbours", "accountant", "rng", "description"})


def _function(estimator: str) -> Any:
    import dpkit.learn as learn

    return getattr(learn, estimator)


def _zcdp_only(estimator: str, opts: Mapping[str, Any]) -> bool:
    return estimator in ("logistic_regression", "linear_svc") and opts.get("method", "gd") == "gd"


def _pure_only(estimator: str, opts: Mapping[str, Any]) -> bool:
    if estimator in ("gaussian_nb", "categorical_nb"):
        return True
    if estimator == "linear_regression":
        return opts.get("method", "ssp") == "functional"
    return not _zcdp_only(estimator, opts)


def _budget_kwargs(estimator: str, opts: Mapping[str, Any], share: float, noise: str) -> dict[str, float]:
    """The learner's budget arguments for the statistic's share (ε under Laplace noise, ρ under Gaussian)."""
    from dpkit.tables._planning import eps_of_rho

    if _zcdp_only(estimator, opts):
        return {"rho": share}
    if _pure_only(estimator, opts):
        return {"epsilon": share if noise == "laplace" else eps_of_rho(share)}
    return {"epsilon": share} if noise == "laplace" else {"rho": share}


def _neighbours(unit: Any, rows: int) -> Any:
    from dpkit.core.neighbours import AddRemove, PrivacyUnit

    if unit is not None:
        return unit
    return AddRemove() if rows <= 1 else PrivacyUnit("unit", max_rows=rows)


# -------------------------------------------------------------------------------------------------------------
# the design
# -------------------------------------------------------------------------------------------------------------
def _numeric(st: Statistic) -> dict[str, tuple[float, float]]:
    return {c: (lo, hi) for c, lo, hi in st.option["bounds"]}


def _design_names(st: Statistic) -> list[str]:
    """The design matrix's column names: ``age`` for a numeric feature, ``sex=Male`` for a one-hot column
    (``categorical_nb``: one name per feature)."""
    if st.option["estimator"] == "categorical_nb":
        return list(st.columns)
    num = _numeric(st)
    out: list[str] = []
    for c, d in zip(st.columns, st.domains, strict=True):
        out.extend([c] if c in num else [f"{c}={v}" for v in d])
    return out


def _design(st: Statistic, frame: Any) -> np.ndarray:
    """The design matrix of the rows of ``frame`` (public scaling and encoding only)."""
    import pandas as pd

    num = _numeric(st)
    n = len(frame)
    cols: list[np.ndarray] = []
    nb = st.option["estimator"] == "categorical_nb"
    for c, d in zip(st.columns, st.domains, strict=True):
        if c in num:
            lo, hi = num[c]
            x = pd.to_numeric(frame[c], errors="coerce").to_numpy(dtype=np.float64)
            cols.append(((np.clip(x, lo, hi) - lo) / (hi - lo))[:, None])
            continue
        lookup = {v: k for k, v in enumerate(d)}
        codes = np.fromiter((lookup.get(_py(v), -1) if not _missing(v) else -1 for v in frame[c].tolist()),
                            dtype=np.int64, count=n)
        if nb:
            cols.append(np.where(codes < 0, len(d), codes).astype(np.float64)[:, None])
        else:
            onehot = np.zeros((n, len(d)))
            ok = codes >= 0
            onehot[np.flatnonzero(ok), codes[ok]] = 1.0
            cols.append(onehot)
    return np.hstack(cols) if cols else np.zeros((n, 0))


def _py(v: Any) -> Any:
    return v.item() if isinstance(v, np.generic) else v


def _missing(v: Any) -> bool:
    import pandas as pd

    return v is None or v is pd.NA or (isinstance(v, float) and math.isnan(v))


def _dummy(st: Statistic) -> tuple[np.ndarray, list[Any]]:
    """Two public rows (zeros) and two public labels: the learner validates its options on them."""
    d = len(_design_names(st))
    y = list(st.option["classes"][:2]) if st.option["classes"] is not None else list(st.option["y_bounds"])
    return np.zeros((2, d)), y


def _learner_kwargs(st: Statistic) -> dict[str, Any]:
    """The public arguments describing the design: bounds, row norm, classes, y_bounds, level counts."""
    est = st.option["estimator"]
    kw: dict[str, Any] = dict(st.option["options"])
    groups = len(st.columns)
    if est == "categorical_nb":
        kw["categories"] = [len(d) + 1 for d in st.domains]
    elif est == "gaussian_nb":
        kw["bounds"] = (0.0, 1.0)
        kw["l1_norm"] = float(groups)
    else:
        kw["bounds"] = (0.0, 1.0)
        kw["norm"] = math.sqrt(groups)
    if st.option["classes"] is not None:
        kw["classes"] = list(st.option["classes"])
    else:
        kw["y_bounds"] = tuple(st.option["y_bounds"])
    return kw


def _validate_learner(st: Statistic, budget: dict[str, float], rows: int) -> None:
    """Build the learner's release on public dummy rows, charged to an accountant that refuses every charge:
    every public-parameter check runs, nothing is drawn (the refusal comes before the draw)."""
    from dpkit.core.accountant import Accountant
    from dpkit.core.privacy import ZCDP, PureDP

    est = st.option["estimator"]
    nb = _neighbours(None, rows)
    tiny = ZCDP(1e-300) if "rho" in budget else PureDP(1e-300)
    acc = Accountant(tiny, neighbours=nb)
    X, y = _dummy(st)
    try:
        _function(est)(X, y, **budget, **_learner_kwargs(st), neighbours=nb, accountant=acc)
    except (BudgetExceeded, IncompatibleLoss):
        return
    except (InvalidParameter, WrongType, InvalidData) as exc:
        param = getattr(exc, "param", "")
        where = "budget" if param in ("rho", "epsilon", "delta", "steps") and "budget" in str(exc) else "options"
        raise InvalidParameter(where, f"{est}: {exc}") from None
    raise AssertionError("the refusing accountant accepted a charge")  # pragma: no cover


def _options(estimator: str, options: Any) -> tuple[tuple[str, Any], ...]:
    if options is None:
        return ()
    if not isinstance(options, Mapping):
        raise WrongType("options", "a mapping option name -> value (the estimator's public parameters)")
    params = inspect.signature(_function(estimator)).parameters
    allowed = sorted(p for p in params if p not in _RESERVED)
    out = []
    for k in sorted(options, key=str):
        if not isinstance(k, str) or k not in allowed:
            raise InvalidParameter("options", (f"{k!r} is not an option of {estimator}" if isinstance(k, str)
                                               else "option names are strings")
                                   + f" (options: {', '.join(allowed)})")
        v = options[k]
        if isinstance(v, np.generic):
            v = v.item()
        if v is not None and not isinstance(v, (bool, int, float, str)):
            raise WrongType("options", f"{k}: a number, string or boolean")
        out.append((k, v))
    return tuple(out)


# -------------------------------------------------------------------------------------------------------------
# the kind
# -------------------------------------------------------------------------------------------------------------
@register_kind
class Model(Kind):
    """``Query.model(estimator, label, features, ...)``: one :mod:`dpkit.learn` model trained on the table's rows,
    its parameters and a DP held-out score (module docstring: guarantee, cost, refusals).

    Result rows (``column`` = the label): one per coefficient (``bin = "coef <feature>"``, one-vs-rest models
    ``"coef <feature> [<class>]"``) and intercept (``"intercept"``) for the linear models; ``"prior [<class>]"``,
    ``"mean <feature> [<class>]"``, ``"var <feature> [<class>]"`` for Gaussian naive Bayes;
    ``"prior [<class>]"`` and ``"log P(<feature>=<level>) [<class>]"`` for categorical naive Bayes (coefficients
    are per unit of the feature scaled to ``[0, 1]`` by its bounds); then the held-out score: ``"held-out
    rows"``, ``"held-out correct"`` / ``"held-out squared error"`` (noisy, with 95% intervals) and ``"held-out
    accuracy"`` / ``"held-out RMSE"`` (their ratio, post-processing, with a 95% interval from the two counts'
    97.5% intervals)."""

    name = "model"
    spec_keys = ("estimator", "label", "features", "feature_bounds", "domains", "classes", "y_bounds", "options",
                 "test_fraction", "score_share")
    public_bins = True
    own_pass = True

    # ------------------------------------------------------------------ query
    def build(self, q: Query, estimator: str, label: str, features: Sequence[str], *,
              bounds: Mapping[str, Any] | None = None, categories: Mapping[str, Any] | None = None,
              classes: Sequence[Any] | None = None, y_bounds: Sequence[float] | None = None,
              options: Mapping[str, Any] | None = None, test_fraction: float = 0.2, score_share: float = 1.0,
              weight: float = 1.0) -> Statistic:
        from dpkit.tables._query import Statistic, public_pair, public_values

        if q.by:
            raise InvalidParameter("group_by", "a model is trained on the whole table: remove group_by")
        est = check.choice("estimator", estimator, tuple(ESTIMATORS))
        if not isinstance(label, str) or label not in q.schema:
            raise InvalidParameter("label", f"unknown column {label!r}" if isinstance(label, str) else
                                   "a column name")
        if isinstance(features, (str, bytes)) or not isinstance(features, Sequence) or not features:
            raise WrongType("features", "a non-empty list of column names")
        feats = tuple(features)
        if len(feats) > MAX_FEATURES:
            raise InvalidParameter("features", f"more than {MAX_FEATURES} features")
        for c in feats:
            if not isinstance(c, str) or c not in q.schema:
                raise InvalidParameter("features", f"unknown column {c!r}" if isinstance(c, str) else
                                       "unknown column")
        if len(set(feats)) != len(feats):
            raise InvalidParameter("features", "repeated column")
        if label in feats:
            raise InvalidParameter("features", "the label is not a feature")
        bounds = {} if bounds is None else bounds
        categories = {} if categories is None else categories
        for name, m in (("bounds", bounds), ("categories", categories)):
            if not isinstance(m, Mapping):
                raise WrongType(name, "a mapping feature -> public " + ("(lo, hi)" if name == "bounds" else
                                                                          "categories"))
            for c in m:
                if c not in feats:
                    raise InvalidParameter(name, f"names a column {c!r} that is not a feature" if isinstance(c, str)
                                           else "names a column that is not a feature")
        num: list[tuple[str, float, float]] = []
        doms: list[tuple[Any, ...]] = []
        for c in feats:
            if c in bounds and c in categories:
                raise InvalidParameter("bounds", f"feature {c!r} has both bounds and categories")
            if c in bounds:
                if q.schema[c] not in ("int", "float"):
                    raise WrongType("bounds", f"feature {c!r} must be numeric to have bounds")
                try:
                    lo, hi = public_pair(bounds[c])
                except (InvalidParameter, WrongType) as exc:
                    raise type(exc)("bounds", f"feature {c!r}: {str(exc).split(': ', 1)[-1]}") from None
                num.append((c, lo, hi))
                doms.append(())
            elif c in categories:
                doms.append(public_values("categories", categories[c], q.schema[c]))
            else:
                raise InvalidParameter("bounds", f"feature {c!r} has neither public bounds (numeric) nor public "
                                                 "categories; they are never read from the data")
        if est == "categorical_nb" and num:
            raise InvalidParameter("features", "categorical_nb takes categorical features only (declare categories)")
        width = len(feats) if est == "categorical_nb" else len(num) + sum(len(d) for d in doms)
        if width > MAX_DESIGN_COLUMNS:
            raise InvalidParameter("categories", f"the design matrix would have more than {MAX_DESIGN_COLUMNS} "
                                                 "columns")
        cls: tuple[Any, ...] | None = None
        yb: tuple[float, float] | None = None
        if ESTIMATORS[est] == "classifier":
            if classes is None:
                raise InvalidParameter("classes", f"{est} needs the declared classes of the label (never read from "
                                                  "the data)")
            if y_bounds is not None:
                raise InvalidParameter("y_bounds", f"{est} is a classifier: give classes, not y_bounds")
            cls = public_values("classes", classes, q.schema[label])
            if len(cls) < 2:
                raise InvalidParameter("classes", "at least two classes")
        else:
            if y_bounds is None:
                raise InvalidParameter("y_bounds", f"{est} needs declared target bounds (never read from the data)")
            if classes is not None:
                raise InvalidParameter("classes", f"{est} is a regression: give y_bounds, not classes")
            if q.schema[label] not in ("int", "float"):
                raise WrongType("label", "a numeric column for a regression")
            try:
                yb = public_pair(y_bounds)
            except (InvalidParameter, WrongType) as exc:
                raise type(exc)("y_bounds", str(exc).split(": ", 1)[-1]) from None
        opts = _options(est, options)
        f = check.real("test_fraction", test_fraction)
        if not 0.0 < f <= 0.5:
            raise InvalidParameter("test_fraction", "must lie in (0, 0.5]")
        ss = check.probability("score_share", score_share, open_high=False)
        w = check.positive("weight", weight)
        st = Statistic("model", label, weight=w, columns=feats, domains=tuple(doms),
                       options=(("estimator", est), ("bounds", tuple(num)), ("classes", cls), ("y_bounds", yb),
                                ("options", opts), ("test_fraction", f), ("score_share", ss)))
        # the learner's own checks of its options, on public dummy rows (no budget yet: a unit share)
        budget = _budget_kwargs(est, dict(opts), 1.0, "gaussian" if _zcdp_only(est, dict(opts)) else "laplace")
        _validate_learner(st, budget, 1)
        return st

    def label(self, st: Statistic) -> str:
        return f"model({st.column})"

    def column_text(self, st: Statistic) -> str:
        return st.column

    def columns(self, st: Statistic) -> tuple[str, ...]:
        return (st.column, *st.columns)

    def needs_zcdp(self, st: Statistic) -> bool:
        return _zcdp_only(st.option["estimator"], dict(st.option["options"]))

    # ------------------------------------------------------------------ CLI spec
    def parse_spec(self, path: str, value: Mapping[str, Any], kw: dict[str, Any], reader: Any) -> None:
        """``estimator``, ``label``, ``features`` (required); ``feature_bounds = {col = [lo, hi]}`` for numeric
        features and ``domains = {col = [categories]}`` for the others (default: the ``[domain]`` entry of each
        feature: a category list or ``{bounds = [lo, hi]}``); ``classes`` (classifiers; default the label's
        ``[domain]`` categories) or ``y_bounds`` (regression; default its ``[domain]`` bounds); ``options = {...}``;
        ``test_fraction``; ``score_share``."""
        for key in ("estimator", "label", "features"):
            if key not in value:
                raise reader.error(f"{path}.{key}", "missing")
        est = reader.str_(f"{path}.estimator", value["estimator"])
        if est not in ESTIMATORS:
            raise reader.error(f"{path}.estimator", f"one of {', '.join(ESTIMATORS)}")
        label = reader.ident(f"{path}.label", value["label"])
        fl = reader.list_(f"{path}.features", value["features"])
        feats = tuple(reader.ident(f"{path}.features[{i}]", c) for i, c in enumerate(fl))
        if len(set(feats)) != len(feats):
            raise reader.error(f"{path}.features", "repeats a column")
        fb = reader.table(f"{path}.feature_bounds", value["feature_bounds"], set(feats)) \
            if "feature_bounds" in value else {}
        dv = reader.table(f"{path}.domains", value["domains"], set(feats)) if "domains" in value else {}
        bounds: dict[str, tuple[float, float]] = {}
        cats: dict[str, tuple[Any, ...]] = {}
        for c in feats:
            if c in fb and c in dv:
                raise reader.error(f"{path}.domains.{c}", "the feature has feature_bounds too: give one of them")
            if c in fb:
                bounds[c] = reader.bounds(f"{path}.feature_bounds.{c}", fb[c], allow_private=False)
            elif c in dv:
                cats[c] = reader.scalars(f"{path}.domains.{c}", dv[c])
            else:
                d = reader.domain.get(c)
                if isinstance(d, tuple):
                    cats[c] = d
                elif isinstance(d, dict) and "bounds" in d:
                    bounds[c] = (float(d["bounds"][0]), float(d["bounds"][1]))
                else:
                    raise reader.error(f"{path}.feature_bounds", f"feature {c!r} has no public bounds or categories "
                                                                 "in [domain], feature_bounds or domains (never read "
                                                                 "from the data)")
        opts: dict[str, Any] = {"estimator": est, "bounds": bounds}
        if ESTIMATORS[est] == "classifier":
            if "y_bounds" in value:
                raise reader.error(f"{path}.y_bounds", f"{est} is a classifier: give classes")
            if "classes" in value:
                opts["classes"] = reader.scalars(f"{path}.classes", value["classes"])
            else:
                d = reader.domain.get(label)
                if not isinstance(d, tuple):
                    raise reader.error(f"{path}.classes", f"missing: no category list for {label!r} in [domain]")
                opts["classes"] = d
        else:
            if "classes" in value:
                raise reader.error(f"{path}.classes", f"{est} is a regression: give y_bounds")
            if "y_bounds" in value:
                opts["y_bounds"] = reader.bounds(f"{path}.y_bounds", value["y_bounds"], allow_private=False)
            else:
                d = reader.domain.get(label)
                if not (isinstance(d, dict) and "bounds" in d):
                    raise reader.error(f"{path}.y_bounds", f"missing: no bounds for {label!r} in [domain]")
                opts["y_bounds"] = tuple(d["bounds"])
        if "options" in value:
            ot = value["options"]
            if not isinstance(ot, dict):
                raise reader.error(f"{path}.options", "must be a table {name = value, ...}")
            for k, v in ot.items():
                if isinstance(v, (dict, list)):
                    raise reader.error(f"{path}.options.{k}", "a number, string or boolean")
            opts["options"] = dict(ot)
        if "test_fraction" in value:
            opts["test_fraction"] = reader.num(f"{path}.test_fraction", value["test_fraction"])
        if "score_share" in value:
            opts["score_share"] = reader.num(f"{path}.score_share", value["score_share"])
        kw["column"] = label
        kw["columns"] = feats
        kw["domains"] = cats
        kw.setdefault("options", {}).update(opts)

    def from_spec(self, q: Query, st: Any) -> Query:
        o = st.options
        return q.model(o["estimator"], st.column, list(st.columns), bounds=dict(o.get("bounds", {})),
                       categories={c: list(v) for c, v in st.domains.items()},
                       classes=list(o["classes"]) if o.get("classes") is not None else None,
                       y_bounds=o.get("y_bounds"), options=o.get("options"),
                       test_fraction=o.get("test_fraction", 0.2), score_share=o.get("score_share", 1.0),
                       weight=st.weight)

    # ------------------------------------------------------------------ planning
    def calibrate(self, sp: Any, cal: Any) -> None:
        st = sp.stat
        est = st.option["estimator"]
        opts = dict(st.option["options"])
        r = cal.bounds.rows
        _validate_learner(st, _budget_kwargs(est, opts, sp.share, cal.noise), r)
        s = _exact.float_at_most(Fraction(sp.share) * Fraction(st.option["score_share"]))
        halves = _exact.split_budget(s, [1, 1], name="score_share")
        if not all(h > 0 for h in halves):
            raise InvalidParameter("budget", f"{st.label}: too small for the held-out score")
        first = _ERROR_STEPS * r if st.option["classes"] is None else r
        sp.parts = [cal.part("model_score", first, first * first, halves[0]),
                    cal.part("model_rows", r, r * r, halves[1])]

    def plan_row(self, sp: Any, noise: str, confidence: float) -> dict[str, Any]:
        from dpkit.tables._planning import mechanism_text

        st = sp.stat
        est = st.option["estimator"]
        budget = _budget_kwargs(est, dict(st.option["options"]), sp.share, noise)
        what = "correct predictions" if st.option["classes"] is not None else "squared errors"
        return {"column": st.column,
                "mechanism": f"{est}({_method(st)}, {_budget_text(budget)}) on the training part; held-out "
                             f"{what}: {mechanism_text(noise, sp.parts[0].noise.scale)}, rows: "
                             f"{mechanism_text(noise, sp.parts[1].noise.scale)} (parallel composition)",
                "scale": float("nan"), "half_width_95": float("nan")}

    # ------------------------------------------------------------------ engine
    def _usable(self, st: Statistic, t: Any, ev: Any) -> Any:
        """The rows the model uses: a label among the classes (or a numeric label), numeric features present."""
        lab = t[st.column]
        cond = lab.isin(list(st.option["classes"])) if st.option["classes"] is not None else \
            ev.float_(lab).notnull()
        for c, _, _ in st.option["bounds"]:
            cond = cond & ev.float_(t[c]).notnull()
        return cond

    def data_checks(self, i: int, st: Statistic, t: Any, ev: Any) -> dict[str, Any]:
        ok = self._usable(st, t, ev)
        out = {f"_k{i}": ev.ibis.ifelse(ok, 1, 0).sum()}
        if ev.unit_column is not None:
            uid = t[ev.unit_column]
            out[f"_ku{i}"] = ev.ibis.ifelse(ok, uid, ev.ibis.null(uid.type())).nunique()
        return out

    def check_data(self, i: int, st: Statistic, values: Mapping[str, Any]) -> None:
        def num(v: Any) -> int:
            return 0 if v is None or (isinstance(v, float) and math.isnan(v)) else int(v)

        n = num(values.get(f"_k{i}"))
        units = num(values.get(f"_ku{i}")) if f"_ku{i}" in values else n
        if n < MIN_ROWS or units < MIN_ROWS:
            raise InvalidData("data", f"{st.label}: fewer than {MIN_ROWS} usable rows (or privacy units): a label "
                                      "among the classes and every numeric feature present (after filters)")
        if n > MAX_ROWS:
            raise InvalidData("data", f"{st.label}: more than {MAX_ROWS} usable rows, above the limit of the "
                                      "model statistic; filter or sample the table first")

    def table(self, i: int, st: Statistic, t: Any, by: list[str], ev: Any) -> Any:
        cols = [st.column, *st.columns]
        if ev.unit_column is not None and ev.unit_column not in cols:
            cols.append(ev.unit_column)
        return t.filter(self._usable(st, t, ev)).select(*cols)

    # ------------------------------------------------------------------ measuring
    def measure(self, i: int, sp: Any, m: Any) -> None:
        import pandas as pd

        from dpkit.stats.aggregates import integers_plan
        from dpkit.tables._planning import mechanism_text

        st = sp.stat
        est = st.option["estimator"]
        opts = dict(st.option["options"])
        frame = m.extra(i).reset_index(drop=True)
        X = _design(st, frame)
        classes = st.option["classes"]
        if classes is not None:
            lookup = {v: k for k, v in enumerate(classes)}
            ycode = np.fromiter((lookup[_py(v)] for v in frame[st.column].tolist()), dtype=np.int64,
                                count=len(frame))
            yval: np.ndarray = np.empty(len(frame), dtype=object)
            yval[:] = [classes[k] for k in ycode]
            ykey = ycode.astype(np.float64)
        else:
            lo_y, hi_y = st.option["y_bounds"]
            yval = np.clip(pd.to_numeric(frame[st.column]).to_numpy(dtype=np.float64), lo_y, hi_y)
            ykey = yval
        unit_col = m.unit.column if m.unit is not None else None
        if unit_col is not None:
            ucode, _ = pd.factorize(frame[unit_col], sort=True)
        else:
            ucode = np.zeros(len(frame), dtype=np.int64)
        # canonical order: unit, label, design row (identical rows are interchangeable)
        keys = [X[:, j] for j in range(X.shape[1] - 1, -1, -1)] + [ykey, ucode]
        order = np.lexsort(keys) if len(frame) else np.zeros(0, dtype=np.int64)
        X, yval, ucode = X[order], yval[order], np.asarray(ucode)[order]
        # 1. the split: one 53-bit uniform per record (per unit), held out with probability test_fraction
        f = st.option["test_fraction"]
        thr = int(f * 2**53)
        if unit_col is not None:
            first = np.flatnonzero(np.r_[True, ucode[1:] != ucode[:-1]]) if len(ucode) else np.zeros(0, np.int64)
            draws = (m.rng.uint64(len(first)) >> np.uint64(11)) < thr if len(first) else np.zeros(0, dtype=bool)
            held = np.repeat(draws, np.diff(np.r_[first, len(ucode)]))
        else:
            held = (m.rng.uint64(len(yval)) >> np.uint64(11)) < thr if len(yval) else np.zeros(0, dtype=bool)
        train, test = ~held, held
        if not train.any():  # probability <= 2^-50 (MIN_ROWS records, test_fraction <= 1/2)
            raise InvalidData("data", f"{st.label}: the random split left no training row")
        # 2. training (the query's one charge covers it)
        budget = _budget_kwargs(est, opts, sp.share, m.noise)
        nb = _neighbours(m.unit, 1)
        ytr = yval[train] if classes is not None else yval[train].astype(np.float64)
        rel = _function(est)(X[train], ytr, **budget, **_learner_kwargs(st), neighbours=nb, rng=m.rng)
        model = rel.value
        mech = f"{est}({_method(st)}, {_budget_text(budget)}): trained on the training part (a random split)"
        self._emit_model(st, m, model, mech)
        # 3. the held-out score: noisy counts, each sensitivity R (R lattice steps per row for the error sum)
        Xte, yte = X[test], yval[test]
        pred = model.predict(Xte) if len(Xte) else np.zeros(0)
        if classes is not None:
            exact_first = int(sum(1 for a, b in zip(pred.tolist(), yte.tolist(), strict=True) if a == b))
        else:
            lo_y, hi_y = st.option["y_bounds"]
            err = (np.clip(np.asarray(pred, dtype=np.float64), lo_y, hi_y) - yte.astype(np.float64)) ** 2
            g = (hi_y - lo_y) ** 2 / _ERROR_STEPS
            units = np.clip(np.floor(err / g + 0.5), 0, _ERROR_STEPS).astype(np.int64)
            exact_first = int(units.sum())
        p0, p1 = sp.parts
        n1 = m.sample(integers_plan(np.array([exact_first], dtype=object), p0.noise)).value[0]
        n2 = m.sample(integers_plan(np.array([int(test.sum())], dtype=object), p1.noise)).value[0]
        h0, h1 = p0.noise.halfwidth(0.95), p1.noise.halfwidth(0.95)
        j0, j1 = p0.noise.halfwidth(0.975), p1.noise.halfwidth(0.975)
        where = "on the held-out part (parallel composition with training)"
        rows_mech = f"{mechanism_text(m.noise, p1.noise.scale)} {where}"
        m.emit(st, 0, "held-out rows", float(n2), float(n2 - h1), float(n2 + h1), rows_mech)
        if classes is not None:
            m.emit(st, 0, "held-out correct", float(n1), float(n1 - h0), float(n1 + h0),
                   f"{mechanism_text(m.noise, p0.noise.scale)} {where}")
            acc = min(max(float(n1) / max(float(n2), 1.0), 0.0), 1.0)
            lo = max(float(n1 - j0), 0.0) / (float(n2) + j1) if float(n2) + j1 > 0 else 0.0
            hi = min(float(n1 + j0) / (float(n2) - j1), 1.0) if float(n2) - j1 > 0 else 1.0
            m.emit(st, 0, "held-out accuracy", acc, min(lo, 1.0), max(hi, 0.0),
                   "post-processing: noisy correct / noisy rows; interval from both counts' 97.5% intervals",
                   postprocessed=True)
        else:
            g = (st.option["y_bounds"][1] - st.option["y_bounds"][0]) ** 2 / _ERROR_STEPS
            m.emit(st, 0, "held-out squared error", float(n1) * g, float(n1 - h0) * g, float(n1 + h0) * g,
                   f"{mechanism_text(m.noise, p0.noise.scale * g)} {where}; errors on a lattice of {g:.3g}")
            top = st.option["y_bounds"][1] - st.option["y_bounds"][0]
            rmse = min(math.sqrt(max(float(n1), 0.0) * g / max(float(n2), 1.0)), top)
            lo = math.sqrt(max(float(n1 - j0), 0.0) * g / (float(n2) + j1)) if float(n2) + j1 > 0 else 0.0
            hi = math.sqrt(max(float(n1 + j0), 0.0) * g / (float(n2) - j1)) if float(n2) - j1 > 0 else top
            m.emit(st, 0, "held-out RMSE", rmse, min(lo, top), min(hi, top),
                   "post-processing: sqrt(noisy squared error / noisy rows); interval from both counts' 97.5% "
                   "intervals", postprocessed=True)

    def _emit_model(self, st: Statistic, m: Any, model: Any, mech: str) -> None:
        nan = float("nan")
        names = _design_names(st)
        est = st.option["estimator"]

        def emit(bin_: str, v: float) -> None:
            m.emit(st, 0, bin_, float(v), nan, nan, mech)

        if est in ("logistic_regression", "linear_svc"):
            coef = np.asarray(model.coef)
            cls = list(model.classes)
            tags = [""] if coef.shape[0] == 1 else [f" [{c}]" for c in cls]
            for r, tag in enumerate(tags):
                for j, nm in enumerate(names):
                    emit(f"coef {nm}{tag}", coef[r, j])
                emit(f"intercept{tag}", model.intercept[r])
        elif est == "linear_regression":
            for j, nm in enumerate(names):
                emit(f"coef {nm}", model.coef[j])
            emit("intercept", model.intercept)
        elif est == "gaussian_nb":
            cls = list(model.classes)
            for k, c in enumerate(cls):
                emit(f"prior [{c}]", model.class_prior[k])
            for k, c in enumerate(cls):
                for j, nm in enumerate(names):
                    emit(f"mean {nm} [{c}]", model.theta[k, j])
                    emit(f"var {nm} [{c}]", model.var[k, j])
        else:  # categorical_nb
            cls = list(model.classes)
            for k, c in enumerate(cls):
                emit(f"prior [{c}]", model.class_prior[k])
            for j, (feat, d) in enumerate(zip(st.columns, st.domains, strict=True)):
                levels = [*(str(v) for v in d), "(other)"]
                table = model.feature_log_prob[j]
                for k, c in enumerate(cls):
                    for v, lv in enumerate(levels):
                        emit(f"log P({feat}={lv}) [{c}]", table[k, v])

    # ------------------------------------------------------------------ report
    def render(self, title: str, rows: list[dict[str, Any]], report: Any) -> str:
        return render_model(rows, report)


def _method(st: Statistic) -> str:
    est = st.option["estimator"]
    o = dict(st.option["options"])
    if est in ("logistic_regression", "linear_svc"):
        return str(o.get("method", "gd"))
    if est == "linear_regression":
        return str(o.get("method", "ssp"))
    return "noisy counts and sums" if est == "gaussian_nb" else "noisy counts"


def _budget_text(budget: Mapping[str, float]) -> str:
    return ", ".join(f"{k}={v:.6g}" for k, v in budget.items())


def render_model(rows: list[dict[str, Any]], report: Any) -> str:
    """The model's section: what was trained, the DP held-out score with its interval, and a chart of its
    coefficients (released values only)."""
    by = {report.text(r.get("bin")): r for r in rows}
    first = rows[0] if rows else {}
    label = report.text(first.get("column"))
    mech = report.text(first.get("mechanism")).split(":", 1)[0]
    out = [f'<div class="model"><p><b>model of {report.escape(label)}</b>: {report.escape(mech)}, trained on a '
           "random part of the rows; the other part (held out, chosen at random independently of the data) "
           "measures it.</p>"]
    score = by.get("held-out accuracy") or by.get("held-out RMSE")
    if score is not None:
        what = "accuracy" if "held-out accuracy" in by else "RMSE"
        rows_r = by.get("held-out rows") or {}
        out.append(f"<p><b>held-out {what}: {report.escape(report.number(score.get('value')))}</b> "
                   f"(95% interval {report.escape(report.interval(score.get('lo'), score.get('hi')))}) on about "
                   f"{report.escape(report.number(round(float(rows_r.get('value', 0.0)))))} held-out rows.</p>"
                   '<p class="small">This score is differentially private: it is the ratio of noisy counts '
                   + ("(correct predictions and held-out rows)" if what == "accuracy" else
                      "(the sum of squared errors and held-out rows)")
                   + " released with noise from this query's budget. Training and scoring use disjoint parts of "
                   "a random split chosen independently of the data, so they compose in parallel: the score costs "
                   "no budget beyond the model's. The interval covers the noise of both counts (95% jointly); it "
                   "does not cover the variation of the split. No score computed on the private data without "
                   "noise is shown.</p>")
    coefs = [r for r in rows if report.text(r.get("bin")).startswith(("coef ", "intercept"))]
    priors = [r for r in rows if report.text(r.get("bin")).startswith("prior ")]
    if coefs:
        out.append('<p class="small">Coefficients are per unit of each feature scaled to [0, 1] by its declared '
                   "bounds (a numeric feature's coefficient is the change of the score from its lower to its upper "
                   "bound; a category's is the change when the row has it). They are the DP release itself.</p>")
        out.append(report.chart(f"coefficients of the model of {label}", coefs))
    elif priors:
        out.append(report.chart(f"class priors of the model of {label}", priors))
    out.append("</div>")
    return "".join(out)
