"""The registry of statistic kinds of :mod:`dpkit.tables`: one typed class per kind, registered in one place.

A statistic kind (``count``, ``sum``, ``mean``, ``quantile``, ...) is a subclass of :class:`Kind` registered with
:func:`register_kind`. Everything kind-specific lives in the class, and every layer asks the registry instead
of testing kind names:

- the **query builder**: ``Query.<method>(...)`` (e.g. ``Query.mean(column, bounds)``) calls :meth:`Kind.build`,
  which validates the public parameters against the schema and returns the :class:`~dpkit.tables.Statistic`;
  ``Query.add(kind, ...)`` does the same for any registered kind;
- the **CLI spec** (``docs/cli.md``): ``stat = "<spec_name>"`` with the keys :attr:`Kind.spec_keys`, read by
  :meth:`Kind.parse_spec` and turned into a query by :meth:`Kind.from_spec`;
- **planning**: :meth:`Kind.calibrate` declares the noisy integer vectors (engine metric, L1 and squared L2
  sensitivity from the contribution bounds, noise scale from the statistic's share) or the selection steps;
  :meth:`Kind.plan_row` describes them in :meth:`Session.plan <dpkit.tables.Session.plan>`;
- the **engine**: :meth:`Kind.metrics` adds exact aggregates to the query's main pass, :meth:`Kind.table` asks for
  a pass of its own (bucket counts);
- **measuring**: :meth:`Kind.measure` runs the DP step on those exact aggregates through a family's public
  function (:mod:`dpkit.stats.aggregates`) and emits the result rows;
- the **report**: :meth:`Kind.render` draws a series of result rows in the HTML report (a bar chart for the
  charted kinds).

Flags (class attributes) answer the questions other layers ask: :attr:`Kind.bounded` (values clamped to public
bounds: diagnostics and coverage notes), :attr:`Kind.private_bounds` (``bounds=None`` finds them privately),
:attr:`Kind.public_bins` (values outside public bins are not counted), :attr:`Kind.fixed_halfwidth` (a
data-independent half-width: ``plan`` shows it and ``solve`` can target it), :attr:`Kind.charted`.

``docs/extending.md`` walks through a new kind; ``tests/tables/test_registry.py`` registers one in a test.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from fractions import Fraction
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from dpkit.core import _exact
from dpkit.core import _validate as check
from dpkit.core.errors import InvalidParameter, WrongType
from dpkit.stats import aggregates

if TYPE_CHECKING:  # pragma: no cover
    from dpkit.tables._query import Query, Statistic

__all__ = ["Kind", "check_positive", "check_real", "find_kind", "get_kind", "kinds", "numeric_column", "register_kind",
           "unregister_kind"]

_MAX_BINS = 2**16
_MAX_KEYS = 2**22

_REGISTRY: dict[str, Kind] = {}
_BUILTIN: frozenset[str] = frozenset()
_LOADING_BUILTINS = True


def numeric_column(q: Query, column: Any) -> str:
    """``column``, checked to be a numeric column of the query's schema (for a kind's :meth:`Kind.build`):
    :class:`~dpkit.core.errors.WrongType` / :class:`~dpkit.core.errors.InvalidParameter` naming ``"column"``."""
    from dpkit.tables._query import numeric_column as _numeric_column

    return _numeric_column(q, column)


def check_real(name: str, value: Any) -> float:
    """A public real parameter of a kind: a finite float, else a typed dpkit error naming ``name`` (never the
    value)."""
    return check.real(name, value)


def check_positive(name: str, value: Any) -> float:
    """A public parameter that must be a finite real > 0, else a typed dpkit error naming ``name``."""
    return check.positive(name, value)


class Kind:
    """One statistic kind. Subclass it, set :attr:`name`, implement :meth:`build`, :meth:`calibrate` and
    :meth:`measure` (and :meth:`metrics` / :meth:`table` for the exact aggregates it needs), then
    :func:`register_kind` it. The defaults below suit a statistic of one column without bounds."""

    #: The kind's name: ``Statistic.kind`` and the ``statistic`` column of the result rows.
    name: ClassVar[str] = ""
    #: The :class:`~dpkit.tables.Query` builder method (default: :attr:`name`).
    method: ClassVar[str] = ""
    #: The CLI spec's ``stat = "..."`` (default: :attr:`method`).
    spec_name: ClassVar[str] = ""
    #: The keys a CLI spec statistic of this kind accepts, besides ``stat`` and ``weight``. ``column`` and
    #: ``bounds`` are read by the spec parser (``bounds = [lo, hi] | "domain" | "private"``); the others by
    #: :meth:`parse_spec`.
    spec_keys: ClassVar[tuple[str, ...]] = ()
    #: Values are clamped to ``Statistic.bounds`` (diagnostics count the clamped values; coverage notes say so).
    bounded: ClassVar[bool] = False
    #: ``bounds=None`` means: find the bounds privately (a third of the share, :mod:`dpkit.tables._measuring`).
    private_bounds: ClassVar[bool] = False
    #: Values outside public bins / domains are not counted (coverage notes say so).
    public_bins: ClassVar[bool] = False
    #: Its rows are counts: ``postprocess={"nonnegative": True}`` clips them at zero.
    nonnegative: ClassVar[bool] = False
    #: The half-width of one value is data-independent: shown by ``plan``, targeted by ``solve``.
    fixed_halfwidth: ClassVar[bool] = False
    #: The report draws a bar chart of a series of its rows.
    charted: ClassVar[bool] = False
    #: It needs its own engine pass (:meth:`table`): the bounded table is then materialised once.
    own_pass: ClassVar[bool] = False
    #: It needs the distinct-unit count of each group (engine metric ``_d``).
    distinct_units: ClassVar[bool] = False
    #: Which of its noisy parts ``plan`` describes.
    main_part: ClassVar[int] = 0

    # ------------------------------------------------------------------ identity
    @property
    def builder(self) -> str:
        return self.method or self.name

    @property
    def spec(self) -> str:
        return self.spec_name or self.builder

    def __repr__(self) -> str:
        return f"<statistic kind {self.name!r}>"

    # ------------------------------------------------------------------ query
    def build(self, q: Query, *args: Any, **kwargs: Any) -> Statistic:
        """Validate the public parameters of ``Query.<method>(*args, **kwargs)`` and return the statistic."""
        raise NotImplementedError

    def label(self, st: Statistic) -> str:
        """``sum(income)``: the key of ``solve``'s targets and of privately found bounds."""
        return f"{st.kind}({st.column})" if st.column else st.kind

    def column_text(self, st: Statistic) -> str:
        """The ``column`` cell of the statistic's result rows."""
        return st.column or ",".join(st.columns)

    def columns(self, st: Statistic) -> tuple[str, ...]:
        """The columns the statistic reads (validated before the charge, kept by contribution bounding)."""
        return ((st.column,) if st.column else ()) + tuple(st.columns)

    def auto_bounds(self, st: Statistic) -> bool:
        return self.private_bounds and st.bounds is None

    def is_nonnegative(self, st: Statistic) -> bool:
        """Whether ``postprocess={"nonnegative": True}`` clips the statistic's rows at zero."""
        return self.nonnegative

    # ------------------------------------------------------------------ CLI spec
    def parse_spec(self, path: str, value: Mapping[str, Any], kw: dict[str, Any], reader: Any) -> None:
        """Read the kind's own spec keys from ``value`` into ``kw`` (the :class:`~dpkit.cli.spec.StatSpec`
        fields; keys that are not fields go into ``kw["options"]``). ``reader`` is the spec's typed readers
        (:class:`dpkit.cli.spec.SpecReader`); errors are ``reader.error(path, message)``. The default puts
        each of :attr:`spec_keys` other than ``column`` and ``bounds`` that is present, as given, into
        ``kw["options"]``."""
        for key in self.spec_keys:
            if key not in ("column", "bounds") and key in value:
                kw.setdefault("options", {})[key] = value[key]

    def from_spec(self, q: Query, st: Any) -> Query:
        """Add the validated spec statistic ``st`` (a :class:`~dpkit.cli.spec.StatSpec`) to the query."""
        return q.add(self.name, weight=st.weight)

    def columns_texts(self, st: Statistic) -> tuple[str, ...]:
        """Every ``column`` cell its result rows may carry (post-processing finds its rows by these)."""
        return (self.column_text(st),)

    def needs_zcdp(self, st: Statistic) -> bool:
        """Whether the statistic's DP step is a zCDP mechanism (a ``ZCDP`` budget, or an ``ApproxDP`` budget with
        delta > 0, which the query then spends as rho-zCDP); under a ``PureDP`` budget it is refused."""
        return False

    # ------------------------------------------------------------------ planning
    def calibrate(self, sp: Any, cal: Any) -> None:
        """Fill ``sp.parts`` (``cal.part(metric, l1, l2_squared, share)``) or the kind's selection parameters
        for the statistic ``sp.stat`` and its budget share ``sp.share`` (:mod:`dpkit.tables._planning`)."""
        raise NotImplementedError

    def plan_row(self, sp: Any, noise: str, confidence: float) -> dict[str, Any]:
        """``{"column", "mechanism", "scale", "half_width_95"}`` of ``Session.plan`` (scale and half-width in
        value units; NaN where the half-width depends on private sizes)."""
        from dpkit.tables._planning import mechanism_text

        st = sp.stat
        main = sp.parts[self.main_part]
        g = st.granularity if main.metric == "sum" else 1.0
        hw = float("nan")
        if self.fixed_halfwidth:
            hw = main.noise.halfwidth(confidence) * g
        return {"column": self.column_text(st), "mechanism": mechanism_text(noise, main.scale * g),
                "scale": main.scale * g, "half_width_95": hw}

    # ------------------------------------------------------------------ engine
    def metrics(self, i: int, st: Statistic, t: Any, ev: Any) -> dict[str, Any]:
        """Exact aggregates over the bounded table ``t`` added to the query's main pass (named with the
        statistic's index ``i``, e.g. ``_s{i}``); ``ev`` is :class:`dpkit.tables._bounding.EngineView`."""
        return {}

    def table(self, i: int, st: Statistic, t: Any, by: list[str], ev: Any) -> Any:
        """An aggregate expression for a pass of its own over ``t`` (grouped by ``by`` and more), or None."""
        return None

    def data_checks(self, i: int, st: Statistic, t: Any, ev: Any) -> dict[str, Any]:
        """Exact aggregates over the query's filtered rows, computed in the pre-charge validation pass (named
        with the statistic's index ``i``); :meth:`check_data` reads them. Their only outcome is pass or a typed
        refusal before anything is charged."""
        return {}

    def check_data(self, i: int, st: Statistic, values: Mapping[str, Any]) -> None:
        """Refuse the data before the charge (a typed error naming a parameter, never a value) from the
        :meth:`data_checks` aggregates ``values``."""

    # ------------------------------------------------------------------ measuring
    def measure(self, i: int, sp: Any, m: Any) -> None:
        """Draw the statistic's noise (in a fixed order) from the exact aggregates and emit its rows
        (``m`` is :class:`dpkit.tables._measuring.Measure`)."""
        raise NotImplementedError

    # ------------------------------------------------------------------ report
    def render(self, title: str, rows: list[dict[str, Any]], report: Any) -> str:
        """HTML for a series of rows (one column of one query) in the report; ``report`` offers ``chart``."""
        return report.chart(title, rows) if self.charted else ""


# -------------------------------------------------------------------------------------------------------------
# the registry
# -------------------------------------------------------------------------------------------------------------
def register_kind(cls: type[Kind]) -> type[Kind]:
    """Register the statistic kind ``cls`` (a :class:`Kind` subclass; usable as a class decorator). Its name,
    builder method and spec name must be new identifiers. Returns ``cls``."""
    if not (isinstance(cls, type) and issubclass(cls, Kind)):
        raise WrongType("kind", "a subclass of dpkit.tables.kinds.Kind")
    k = cls()
    for what, v in (("name", k.name), ("method", k.builder), ("spec_name", k.spec)):
        if not isinstance(v, str) or not v.isidentifier() or v.startswith("_"):
            raise InvalidParameter("kind", f"its {what} must be an identifier not starting with _")
    from dpkit.tables._query import Query

    for other in _REGISTRY.values():
        if {k.name, k.builder, k.spec} & {other.name, other.builder, other.spec}:
            raise InvalidParameter("kind", f"its name clashes with the registered kind {other.name!r}")
    if not _LOADING_BUILTINS and (k.builder in vars(Query) or k.builder in Query.__dataclass_fields__):
        raise InvalidParameter("kind", f"{k.builder!r} is already a Query method")
    if k.name in ("diagnostic", "partition_selection"):
        raise InvalidParameter("kind", "that name is reserved")
    _REGISTRY[k.name] = k
    return cls


def unregister_kind(name: str) -> None:
    """Remove a kind registered with :func:`register_kind` (the built-in kinds stay)."""
    if name in _BUILTIN:
        raise InvalidParameter("kind", "built-in kinds cannot be removed")
    _REGISTRY.pop(name, None)


def find_kind(name: str) -> Kind | None:
    """The kind named ``name`` (``Statistic.kind``), or None."""
    return _REGISTRY.get(name) if isinstance(name, str) else None


def get_kind(name: str) -> Kind:
    """The kind named ``name``; :class:`~dpkit.core.errors.InvalidParameter` when none is registered."""
    k = find_kind(name)
    if k is None:
        raise InvalidParameter("kind", "unknown statistic kind")
    return k


def kinds() -> tuple[Kind, ...]:
    """Every registered kind, in registration order (the built-in ones first)."""
    return tuple(_REGISTRY.values())


def by_method(method: str) -> Kind | None:
    """The kind whose query builder method is ``method``."""
    for k in _REGISTRY.values():
        if k.builder == method:
            return k
    return None


def by_spec(spec_name: str) -> Kind | None:
    """The kind whose CLI spec name is ``spec_name``."""
    for k in _REGISTRY.values():
        if k.spec == spec_name:
            return k
    return None


# -------------------------------------------------------------------------------------------------------------
# helpers shared by the built-in kinds
# -------------------------------------------------------------------------------------------------------------
def _mech(noise: str, scale: float) -> str:
    from dpkit.tables._planning import mechanism_text

    return mechanism_text(noise, scale)


def _weight(weight: Any) -> float:
    return check.positive("weight", weight)


class _CountLike(Kind):
    """A vector of row counts per group (and cell): L1 ``L``, L2² ``L2²`` (:mod:`dpkit.tables._calib`)."""

    nonnegative = True
    fixed_halfwidth = True
    charted = True

    def calibrate(self, sp: Any, cal: Any) -> None:
        sp.parts = [cal.part("count", cal.bounds.l1, cal.bounds.l2_squared, sp.share)]


@register_kind
class Count(_CountLike):
    """``Query.count()``: the number of rows (after bounding) per group."""

    name = "count"

    def build(self, q: Query, *, weight: float = 1.0) -> Statistic:
        from dpkit.tables._query import Statistic

        return Statistic("count", weight=_weight(weight))

    def measure(self, i: int, sp: Any, m: Any) -> None:
        m.counts(sp, m.metric("_n"))


@register_kind
class CountDistinct(_CountLike):
    """``Query.count_distinct()``: the number of distinct privacy units per group (L1 = L2² = ``G``)."""

    name = "count_distinct"
    distinct_units = True

    def build(self, q: Query, *, weight: float = 1.0) -> Statistic:
        from dpkit.tables._query import Statistic

        return Statistic("count_distinct", weight=_weight(weight))

    def calibrate(self, sp: Any, cal: Any) -> None:
        sp.parts = [cal.part("distinct", cal.bounds.groups, cal.bounds.groups, sp.share)]

    def measure(self, i: int, sp: Any, m: Any) -> None:
        m.counts(sp, m.metric("_d"))


class _Clamped(Kind):
    """A statistic of one numeric column clamped to public bounds and rounded to the public granularity
    (``K`` units per row at most: sums have L1 ``L K``, sums of squares ``L K²``)."""

    spec_keys: ClassVar[tuple[str, ...]] = ("column", "bounds")
    bounded = True
    private_bounds = True
    #: the budget split over the noisy vectors: count, sum, sum of squares
    n_parts: ClassVar[int] = 1

    def build(self, q: Query, column: str, bounds: Any = None, *, granularity: float | None = None,
              weight: float = 1.0) -> Statistic:
        from dpkit.tables._query import bounded_statistic

        return bounded_statistic(q, self.name, column, bounds, granularity, weight)

    def from_spec(self, q: Query, st: Any) -> Query:
        return q.add(self.name, st.column, bounds=st.bounds, weight=st.weight)

    def metrics(self, i: int, st: Statistic, t: Any, ev: Any) -> dict[str, Any]:
        uexpr = ev.units(t, st)
        out = {f"_s{i}": uexpr.sum()}
        if self.n_parts > 1:
            out[f"_c{i}"] = uexpr.count()
        if self.n_parts > 2:
            dec = uexpr.cast("decimal(38, 0)")
            out[f"_q{i}"] = (dec * dec).sum()
        return out

    def calibrate(self, sp: Any, cal: Any) -> None:
        st, b = sp.stat, cal.bounds
        sub = _exact.split_budget(sp.share, [1] * self.n_parts, name="weight") if self.n_parts > 1 else [sp.share]
        u = st.units
        if self.n_parts == 1:
            sp.parts = [cal.part("sum", b.l1 * u, b.l2_squared * u * u, sub[0])]
            return
        sp.parts = [cal.part("count", b.l1, b.l2_squared, sub[0]), cal.part("sum", b.l1 * u, b.l2_squared * u * u,
                                                                           sub[1])]
        if self.n_parts == 3:
            sp.parts.append(cal.part("sumsq", b.l1 * u * u, b.l2_squared * u**4, sub[2]))


@register_kind
class Sum(_Clamped):
    """``Query.sum(column, bounds)``: the sum of the clamped, rounded values (one noisy vector)."""

    name = "sum"
    fixed_halfwidth = True
    charted = True

    def is_nonnegative(self, st: Statistic) -> bool:
        return st.bounds is not None and st.bounds[0] >= 0

    def measure(self, i: int, sp: Any, m: Any) -> None:
        st, part = sp.stat, sp.parts[0]
        g = st.granularity
        noisy = m.sample(aggregates.integers_plan(m.metric(f"_s{i}"), part.noise)).value
        hw = part.noise.halfwidth()
        for j in range(m.ng):
            v = int(noisy[j])
            m.emit(st, j, "", v * g, (v - hw) * g, (v + hw) * g, _mech(m.noise, part.scale * g))


#: The estimators of the ``mean`` kind (``Query.mean(..., method=...)``, spec key ``method``).
MEAN_METHODS = ("centred", "noisy_ratio", "auto")
_MEAN_SHARES = (1, 1, 8)  # centred: the centre's sum : the count : the centred sum (10% / 10% / 80%)
_CENTRE_STEPS = 1024  # the centre's grid has at least this many steps over the bounds (as dpkit.stats.mean's)
_METHODS_TEXT = "'centred', 'noisy_ratio' or 'auto'"


def _mean_method(method: Any) -> str:
    if not isinstance(method, str):
        raise WrongType("method", f"a str: {_METHODS_TEXT}")
    if method not in MEAN_METHODS:
        raise InvalidParameter("method", f"must be {_METHODS_TEXT}")
    return method


def _noise_variance(noise: Any) -> float:
    """The variance of one coordinate of ``noise`` (public): ``2t²`` for the discrete Laplace of scale ``t`` (its
    exact variance ``2e^{-1/t}/(1 - e^{-1/t})²`` is at most that), ``σ²`` for the discrete Gaussian (its variance
    is at most ``σ²``): the predicted errors of ``method="auto"`` use these."""
    return 2.0 * noise.scale**2 if noise.law == "laplace" else float(noise.scale) ** 2


def _auto_choice(c1: int, p: int, q: int, lo_u: int, hi_u: int, v_c1: float, v_t1: float, v_a: float,
                 v_c2: float, v_t2: float) -> bool:
    """``method="auto"``: True when the centred sum (option (a)) has the smaller predicted error of the group's
    mean, False for the noisy ratio at the midpoint (option (b)); a function of the released stage-1 count
    ``c1``, the released centre ``p`` (``1/q`` units) and public variances only (units²: ``v_c1``, ``v_c2`` of
    the counts, ``v_t1``, ``v_t2`` of the doubled midpoint-centred sums, ``v_a`` of the centred sum in units).

    Both estimators' error is ``(e_sum - (μ - x)·e_count)/n`` to first order (``x`` the point the sum is centred
    at, ``e`` the noises of the estimates used): (a) ``v_a + E(μ - c)²·v_c1``, (b) ``v_T/4 + E(μ - mid)²·v_n``
    with ``v_n = 1/(1/v_c1 + 1/v_c2)``, ``v_T = 1/(1/v_t1 + 1/v_t2)`` (inverse-variance weighting). The mean
    ``μ`` is unknown: ``E(μ - x)² = (c - x)² + V`` with ``c`` the centre and ``V`` its first-order variance from
    stage 1, ``(v_t1/4 + (c - mid)²·v_c1)/max(c1, 1)²``, at most ``(Δ/2)²`` (the mean lies in the bounds)."""
    c = p / q
    mid = (lo_u + hi_u) / 2
    half = (hi_u - lo_u) / 2
    var_mu = min((v_t1 / 4 + (c - mid) ** 2 * v_c1) / max(float(c1), 1.0) ** 2, half * half)
    pred_a = v_a + var_mu * v_c1
    v_n = 1.0 / (1.0 / v_c1 + 1.0 / v_c2)
    v_t = 1.0 / (1.0 / v_t1 + 1.0 / v_t2)
    pred_b = v_t / 4 + ((c - mid) ** 2 + var_mu) * v_n
    return pred_a <= pred_b


def _centre_scale(width: int) -> int:
    """``Q``: the centre lies on the grid of step ``g / Q`` (``Q`` the smallest power of two with ``Q·Δ_u >=
    1024``; 1 for wide bounds), a public function of the bounds and the granularity."""
    q = 1
    while q * max(width, 1) < _CENTRE_STEPS:
        q *= 2
    return q


def _centres(c_noisy: Any, t_noisy: Any, lo_u: int, hi_u: int, q: int = 1) -> list[int]:
    """The centre ``P`` of each group on the grid of step ``1/q`` unit (``P/q`` units) from its noisy count ``C̃``
    and noisy doubled centred sum ``T̃ = Σ(2u - lo_u - hi_u) + noise``: the integer nearest ``q·(mid_u + T̃ /
    (2 C̃))`` (half up), clamped to ``[q·lo_u, q·hi_u]``; ``floor(q·mid_u)`` where ``C̃ < 1``. Exact integer
    arithmetic (post-processing of released values)."""
    out = []
    for cj, tj in zip(c_noisy, t_noisy, strict=True):
        cj, tj = int(cj), int(tj)
        if cj < 1:
            c = (q * (lo_u + hi_u)) // 2
        else:  # floor(q (lo_u + hi_u)/2 + q T/(2C) + 1/2) = floor((q C (lo_u + hi_u) + q T + C) / (2C))
            c = (q * cj * (lo_u + hi_u) + q * tj + cj) // (2 * cj)
        out.append(min(max(c, q * lo_u), q * hi_u))
    return out


@register_kind
class Mean(_Clamped):
    """``Query.mean(column, bounds, method="centred")``: the mean of the clamped, rounded values per group.

    Values are clamped to the public ``bounds = (lo, hi)`` and rounded to the granularity ``g``: integer units
    ``u`` in ``[lo_u, hi_u]`` (``Δ_u = hi_u - lo_u``, midpoint ``mid_u``); ``n`` and ``S = Σu`` are the group's
    exact count and sum, from the query's one main pass over the bounded rows. ``L`` / ``L2²`` are the count's
    sensitivities under the contribution bounds (:mod:`dpkit.tables._calib`; 1 / 1 under the row unit).

    Parameters
    ----------
    column:
        A numeric column of the query's schema.
    bounds:
        Public ``(lo, hi)``; ``None``: found privately with a third of the statistic's share
        (:func:`dpkit.tables._measuring.find_bounds`), the rest calibrates the mean as below.
    granularity:
        The public rounding step ``g`` (default: 1 for an integer column with bounds within ``2^24``, else about
        ``2^-20`` of the larger bound).
    weight:
        The statistic's relative share of the query's budget.
    method:
        ``"centred"`` (default since issue #16: a private centre per group, then the sum centred there, as
        :func:`dpkit.stats.mean`'s default) or ``"noisy_ratio"`` (the kind's estimator before issue #16: pass it
        to reproduce earlier releases) or ``"auto"`` (per group, the centred sum or a noisy ratio at the midpoint
        pooled with the centre's count and sum, whichever has the smaller predicted error given the released
        stage-1 values; not the default: it loses some small-group cells of ``bench/tables/mean16.py``, see
        Error). Anything else: :class:`~dpkit.core.errors.WrongType` /
        :class:`~dpkit.core.errors.InvalidParameter` naming ``method``, when the query is built. CLI spec key
        ``method``.

    Guarantee
    ---------
    The statistic's share of the query's budget (``ε`` with discrete Laplace noise, ``ρ`` with discrete
    Gaussian noise), under the session's neighbour relation: add/remove one privacy unit with contribution
    bounds (one row by default).

    - ``"centred"``: adaptive sequential composition of three releases whose shares ``ε_T : ε_C : ε_S = 1 : 1 :
      8`` sum to at most the statistic's share exactly (each rounded down): the doubled sum centred at the
      midpoint ``T = Σ(2u - lo_u - hi_u)`` (every term at most ``Δ_u``: L1 ``L·Δ_u``, L2² ``L2²·Δ_u²``), the
      count (L1 ``L``, L2² ``L2²``), and, given the centres ``P_g`` computed from those two released vectors
      only (on the public grid of step ``1/Q`` unit, ``Q`` the smallest power of two with ``Q·Δ_u >= 1024``),
      the centred sums ``Σ(Q u - P_g)`` in ``1/Q`` units. A unit with ``r_g`` rows in group ``g``
      (``Σ r_g <= L``, ``Σ r_g² <= L2²``) moves group ``g``'s centred sum by at most ``r_g A_g``,
      ``A_g = max(P_g - Q lo_u, Q hi_u - P_g)``; each group's noise is calibrated to its own ``A_g`` (scale
      ``t_g >= L A_g / ε_S``, or ``σ_g² >= L2² A_g² / (2ρ_S)``), so the discrete Laplace loss is
      ``Σ r_g A_g / t_g <= ε_S`` and the discrete Gaussian loss ``Σ r_g² A_g² / (2σ_g²) <= ρ_S`` (Canonne, Kamath
      & Steinke 2020). The groups are public keys (disjoint rows: parallel composition inside the contribution
      bounds) or privately selected keys (the query's partition selection). The centre and the ratio are
      post-processing.
    - ``"noisy_ratio"``: sequential composition of the count and the sum (L1 ``L·K``, ``K = max(|lo_u|,
      |hi_u|)``), half the share each.
    - ``"auto"``: the same stage 1 (count and doubled midpoint-centred sum, 10% each), then, per group, a choice
      made from that group's released stage-1 values and public quantities only (adaptive composition: it is
      post-processing of a DP release): option (a) the centred sum as above, or option (b) a second count and a
      second doubled midpoint-centred sum ``T`` (L1 ``L`` and ``L·Δ_u``, L2² ``L2²`` and ``L2²·Δ_u²``), with the
      two halves of the centred sum's share ``ε_S`` (rounded down: ``ε_b1 + ε_b2 <= ε_S`` exactly). A unit with
      ``r_g`` rows in group ``g`` loses ``r_g A_g / t_g <= r_g ε_S / L`` in a group of option (a) and
      ``r_g / t_b1 + r_g Δ_u / t_b2 <= r_g (ε_b1 + ε_b2) / L <= r_g ε_S / L`` in a group of option (b) (discrete
      Gaussian: ``r_g² ρ_S / L2²`` in both), so whatever the split of the groups the second stage loses at most
      ``ε_S`` (``ρ_S``), as ``"centred"``'s does.

    Cost
    ----
    Nothing of its own: the query's one charge, before any aggregate is read or any random byte drawn, covers
    the statistic's share, which its noisy vectors spend in full at most; a refused query charges nothing.
    The centred sums need no second engine pass: ``Σ(Q u - P) = Q S - n P`` exactly (integers), the centred sum
    of the very rows (same salt, same kept rows) of ``S`` and ``n``. ``"auto"`` declares and charges exactly what
    ``"centred"`` does, whichever option each group takes (option (b) spends the centred sum's share, split in
    two), and refuses exactly what it refuses, before the charge (its option-(b) noise is calibrated at
    planning).

    Output law
    ----------
    Per released group, a float in ``[lo, hi]``.

    - ``"centred"``: ``C̃ = n + noise`` and ``T̃ = T + noise`` for every group (in that order), the centre ``P``
      = the integer nearest ``Q·(mid_u + T̃/(2C̃))`` (half up), clamped to ``[Q lo_u, Q hi_u]``
      (``floor(Q mid_u)`` where ``C̃ < 1``), then ``S̃₂ = Q S - n P + noise`` (one vector per distinct ``A``, in
      increasing ``A``, groups in their order inside), all noise exact discrete Laplace (or discrete Gaussian)
      of the calibrated scales; the release is ``clamp((P + S̃₂/C̃)·g/Q, lo, hi)``, the midpoint
      ``(lo + hi)/2`` where ``C̃ < 1``. ``c = P g/Q`` is the centre in value units.
    - ``"noisy_ratio"``: ``C̃ = n + noise`` then ``S̃ = S + noise``, ``clamp(S̃ g / C̃, lo, hi)`` (the midpoint
      where ``C̃ < 1``), :func:`dpkit.stats.aggregates.mean_plan`'s law.
    - ``"auto"``: ``C̃``, ``T̃`` and ``P`` as for ``"centred"``; then each group takes option (a) when
      ``pred_a <= pred_b`` (below), else (b). In units² (``v`` the public noise variances: ``2t²`` for the
      discrete Laplace of scale ``t``, ``σ²`` for the discrete Gaussian; ``c = P/Q``; ``V = min((v_T1/4 + (c -
      mid_u)²·v_C1) / max(C̃, 1)², (Δ_u/2)²)``, the first-order variance of stage 1's mean, at most that of a
      mean anywhere in the bounds): ``pred_a = v_a + V·v_C1`` (``v_a`` the centred sum's variance at the group's
      ``A``, ``/Q²``) and ``pred_b = v_T/4 + ((c - mid_u)² + V)·v_n`` with ``v_n = 1/(1/v_C1 + 1/v_C2)``, ``v_T =
      1/(1/v_T1 + 1/v_T2)``: both are the first-order variance of ``n × (estimate - μ)``, ``e_sum - (μ -
      x)·e_count`` for a sum centred at ``x`` (``c`` or ``mid_u``), with ``E(μ - x)² = (c - x)² + V``. Option
      (b)'s groups draw ``C̃₂ = n + noise`` (one vector, groups in order) then ``T̃₂ = T + noise`` at the halves'
      scales, before the centred sums of option (a)'s groups (drawn as for ``"centred"``); the release is
      ``clamp((mid_u + T̂/(2n̂))·g, lo, hi)`` with the inverse-variance pools ``n̂ = (C̃/v_C1 + C̃₂/v_C2)·v_n``,
      ``T̂ = (T̃/v_T1 + T̃₂/v_T2)·v_T`` (the midpoint where ``n̂ < 1``); option (a)'s release is ``"centred"``'s.
      With no group in option (b) the release is ``"centred"``'s, draw for draw.

    Error
    -----
    ``lo``/``hi`` of each row: the ratio's extremes over the box of its two noisy parts (the count and the
    (centred) sum, each within its central ``1 - 0.05/2`` interval), clamped to the bounds, and the bounds
    themselves where the count's interval reaches below 1: it holds the exact mean of the clamped, rounded
    values with probability at least 0.95 (for ``"centred"``: the sum's interval is that of the scale drawn
    for the released centre, whatever it is; for option (b) of ``"auto"``: the pools within ``w·h₁ + (1 -
    w)·h₂``, each of the four noises within its central ``1 - 0.05/4`` interval). Roughly ``|error| <~ (b_S +
    |mean - c|·b_C)·g/n``: ``"centred"`` has ``b_S = L·A/(0.8 ε)`` (``A/Q`` in units), ``b_C = L/(0.1 ε)``
    and ``c`` within about ``L·Δ_u/(0.1 ε·2n)`` units of the mean;
    ``"noisy_ratio"`` has ``b_S = 2L·K/ε`` and multiplies its count's error ``b_C = 2L/ε`` by the mean's
    distance from 0 (in units) instead of from ``c``. Measured on Adult (``bench/tables/mean16.py``;
    ``docs/benchmarks.md``, "The mean of dpkit.tables"; median |error|): ungrouped, ``"centred"`` has 0.32–0.33×
    the error of ``"noisy_ratio"`` on age and hours per week and 0.60× on capital gain at ε ∈ {0.1, 1} (4,000
    draws of the kind's law), the same as :func:`dpkit.stats.mean`'s default within Monte-Carlo noise. By native
    country and by race (100 releases) it is 0.33–0.90× in every cell except capital gain (bounds ``[0, 99999]``,
    mean about 1,000) in groups of fewer than 1,000 rows at ε = 0.1 (3.0× for 100–999 rows, 9.3× below 100) and
    of fewer than 100 rows at ε = 1 (1.5×): there ``n ε`` is small against ``Δ``, the first stage's centre is
    noise, the count (10% of the share) often falls below 1 (then the release is the midpoint), and neither
    estimator is informative (errors above the group means in both); ``"noisy_ratio"`` is the better choice
    there. ``"auto"`` (the same bench, 4,000 draws ungrouped, 300 grouped releases) equals ``"centred"`` on
    large groups (option (a) is taken there) and has the smallest mean absolute error in every small-group cell of
    capital gain and the smallest median error in most cells, but not in all: in the small-group cells where
    neither estimator is informative the medians reward where the noise lands (``"centred"`` falls back to the
    midpoint, near the age means; ``"noisy_ratio"`` often clamps to 0, next to the capital gain means), and there
    ``"auto"`` has up to 2.9× the better median (``docs/benchmarks.md``), so it is offered, not the default.
    The choice rule is first-order: it ignores the ratio's nonlinearity when the count's noise is as large as
    the group. Clamping biases the mean towards the bounds when values lie outside them.
    """

    name = "mean"
    spec_keys = ("column", "bounds", "method")
    n_parts = 2
    charted = True
    main_part = 1

    def build(self, q: Query, column: str, bounds: Any = None, *, granularity: float | None = None,
              weight: float = 1.0, method: str = "centred") -> Statistic:
        from dataclasses import replace

        from dpkit.tables._query import bounded_statistic

        st = bounded_statistic(q, self.name, column, bounds, granularity, weight)
        return replace(st, options=(("method", _mean_method(method)),))

    @staticmethod
    def method_of(st: Statistic) -> str:
        """The statistic's estimator (``"centred"``, ``"noisy_ratio"`` or ``"auto"``)."""
        return str(st.option.get("method", "centred"))

    def parse_spec(self, path: str, value: Mapping[str, Any], kw: dict[str, Any], reader: Any) -> None:
        if "method" in value:
            m = reader.str_(f"{path}.method", value["method"])
            if m not in MEAN_METHODS:
                raise reader.error(f"{path}.method", f"must be {_METHODS_TEXT}")
            kw.setdefault("options", {})["method"] = m

    def from_spec(self, q: Query, st: Any) -> Query:
        return q.add(self.name, st.column, bounds=st.bounds, weight=st.weight,
                     method=st.options.get("method", "centred"))

    def calibrate(self, sp: Any, cal: Any) -> None:
        if self.method_of(sp.stat) == "noisy_ratio":
            super().calibrate(sp, cal)
            return
        st, b = sp.stat, cal.bounds
        lo_u, hi_u = st.unit_range
        d = max(hi_u - lo_u, 1)
        w = _centre_scale(d) * d
        e_t, e_c, e_s = _exact.split_budget(sp.share, list(_MEAN_SHARES), name="weight")
        # the count, the doubled sum centred at the midpoint, and the centred sum's widest calibration (in 1/Q
        # units, A = Q Δ_u; checked here, before any charge: every A of a release is at most this one)
        sp.parts = [cal.part("count", b.l1, b.l2_squared, e_c), cal.part("sum", b.l1 * d, b.l2_squared * d * d, e_t),
                    cal.part("sum", b.l1 * w, b.l2_squared * w * w, e_s)]
        if self.method_of(st) == "auto":  # option (b) of stage 2: a count and a doubled midpoint-centred sum, e_s
            e_bc, e_bt = _exact.split_budget(e_s, [1, 1], name="weight")  # split in halves (rounded down)
            sp.parts += [cal.part("count", b.l1, b.l2_squared, e_bc),
                         cal.part("sum", b.l1 * d, b.l2_squared * d * d, e_bt)]

    def plan_row(self, sp: Any, noise: str, confidence: float) -> dict[str, Any]:
        if self.method_of(sp.stat) == "noisy_ratio":
            return super().plan_row(sp, noise, confidence)
        st = sp.stat
        g = st.granularity
        c_part, t_part, s_part = sp.parts[:3]
        lo_u, hi_u = st.unit_range
        widest = s_part.scale * g / _centre_scale(max(hi_u - lo_u, 1))
        mech = (f"{_mech(noise, widest)[:-1]} at most; count {_mech(noise, c_part.scale)}; "
                f"centre {_mech(noise, t_part.scale * g / 2)})")
        if self.method_of(st) == "auto":
            bc, bt = sp.parts[3:]
            mech += (f" or, per group, {_mech(noise, bt.scale * g / 2)[:-1]}; count {_mech(noise, bc.scale)}; "
                     "pooled with the centre's)")
        return {"column": self.column_text(st), "mechanism": mech, "scale": widest, "half_width_95": float("nan")}

    def measure(self, i: int, sp: Any, m: Any) -> None:
        st = sp.stat
        if self.method_of(st) == "noisy_ratio":
            c_part, s_part = sp.parts[0], sp.parts[1]
            out = m.sample(aggregates.mean_plan(m.metric(f"_s{i}"), m.metric(f"_c{i}"), bounds=st.bounds,
                                                granularity=st.granularity, sum_noise=s_part.noise,
                                                count_noise=c_part.noise))
            lo, hi = out.interval_fn(0.95)
            mech = f"{_mech(m.noise, s_part.scale * st.granularity)[:-1]}; count {_mech(m.noise, c_part.scale)})"
            for j in range(m.ng):
                m.emit(st, j, "", out.value[j], lo[j], hi[j], mech)
            return
        self._measure_centred(i, sp, m, self.method_of(st) == "auto")

    def _measure_centred(self, i: int, sp: Any, m: Any, auto: bool = False) -> None:
        st = sp.stat
        c_part, t_part, s_part = sp.parts[:3]
        lo, hi = st.bounds
        lo_u, hi_u = st.unit_range
        q = _centre_scale(max(hi_u - lo_u, 1))
        g = st.granularity / q  # the value of one unit of the centred sums (1/q of a granularity unit)
        total, n = m.metric(f"_s{i}"), m.metric(f"_c{i}")
        # stage 1: the count, then the doubled sum centred at the midpoint (exact integers)
        c_noisy = m.sample(aggregates.integers_plan(n, c_part.noise)).value
        doubled = np.array([2 * s - k * (lo_u + hi_u) for s, k in zip(total, n, strict=True)], dtype=object)
        t_noisy = m.sample(aggregates.integers_plan(doubled, t_part.noise)).value
        centres = _centres(c_noisy, t_noisy, lo_u, hi_u, q)
        # stage 2, in 1/q units: Σ(q u - P) = q S - n P per group, with its own sensitivity A = max(P - q lo_u,
        # q hi_u - P) per row
        widths = [max(c - q * lo_u, q * hi_u - c, 1) for c in centres]
        s2: list[int] = [0] * m.ng
        noises: dict[int, Any] = {}
        b = m.plan.bounds
        each = 1 - (1 - 0.95) / 2
        for a in sorted(set(widths)):
            noises[a] = aggregates.integer_noise(m.noise, b.l1 * a, b.l2_squared * a * a, s_part.noise.share)
        ratio: dict[int, tuple[float, float, float, float]] = {}  # auto, option (b): group -> (n, T, h_n, h_T)
        if auto:
            ratio = self._measure_ratio(sp, m, n, doubled, c_noisy, t_noisy, centres, widths, noises, q)
        slots: dict[int, list[int]] = {}
        for j, a in enumerate(widths):
            if j not in ratio:
                slots.setdefault(a, []).append(j)
        for a in sorted(slots):  # one vector per distinct A, in increasing A; groups in their order inside
            where = slots[a]
            noise = noises[a]
            exact = np.array([q * total[j] - n[j] * centres[j] for j in where], dtype=object)
            drawn = m.sample(aggregates.integers_plan(exact, noise)).value
            for j, v in zip(where, drawn, strict=True):
                s2[j] = int(v)
        hc = c_part.noise.halfwidth(each)
        hws = {a: noise.halfwidth(each) for a, noise in noises.items()}
        mid = (lo + hi) / 2
        centre_text = _mech(m.noise, t_part.scale * st.granularity / 2)
        if ratio:
            bc, bt = sp.parts[3:]
            ratio_text = (f"{_mech(m.noise, bt.scale * st.granularity / 2)[:-1]}; count {_mech(m.noise, bc.scale)}; "
                          f"pooled with the centre's: count {_mech(m.noise, c_part.scale)}, sum {centre_text})")
        for j in range(m.ng):
            if j in ratio:  # auto, option (b): mid + T/(2n) from the pooled count and doubled midpoint-centred sum
                nj, tj, hn, ht = ratio[j]
                mid_u = (lo_u + hi_u) / 2
                g1 = st.granularity
                value = min(max((mid_u + tj / (2 * nj)) * g1, lo), hi) if nj >= 1 else mid
                a_lo, a_hi = lo, hi
                if nj - hn >= 1:
                    cands = [(mid_u + (tj + dt) / (2 * (nj + dn))) * g1 for dt in (-ht, ht) for dn in (-hn, hn)]
                    a_lo, a_hi = max(lo, min(cands)), min(hi, max(cands))
                m.emit(st, j, "", value, a_lo, a_hi, ratio_text)
                continue
            cj, sj, c = int(c_noisy[j]), s2[j], centres[j]
            value = min(max((c + sj / cj) * g, lo), hi) if cj >= 1 else mid
            a_lo, a_hi = lo, hi
            if cj - hc >= 1:
                hs = hws[widths[j]]
                cands = [(c + (sj + ds) / (cj + dc)) * g for ds in (-hs, hs) for dc in (-hc, hc)]
                a_lo, a_hi = max(lo, min(cands)), min(hi, max(cands))
            mech = (f"{_mech(m.noise, noises[widths[j]].scale * g)[:-1]}; count {_mech(m.noise, c_part.scale)}; "
                    f"centre {centre_text})")
            m.emit(st, j, "", value, a_lo, a_hi, mech)

    @staticmethod
    def _measure_ratio(sp: Any, m: Any, n: Any, doubled: Any, c_noisy: Any, t_noisy: Any, centres: list[int],
                       widths: list[int], noises: dict[int, Any], q: int) -> dict[int, tuple[float, float, float,
                                                                                              float]]:
        """``method="auto"``: choose each group's stage 2 from its released stage-1 values (:func:`_auto_choice`);
        for the groups of option (b), draw the count then the doubled midpoint-centred sum (halves of the centred
        sum's share, one vector each, groups in their order) and pool each with its stage-1 twin by inverse-variance
        weights (public). Returns ``{group: (n̂, T̂, h_n, h_T)}``: the pooled estimates and half-widths that hold
        together with probability >= 0.95 (each of the four noises within its central ``1 - 0.05/4``
        interval)."""
        st = sp.stat
        c_part, t_part, _, bc, bt = sp.parts
        lo_u, hi_u = st.unit_range
        v_c1, v_t1 = _noise_variance(c_part.noise), _noise_variance(t_part.noise)
        v_c2, v_t2 = _noise_variance(bc.noise), _noise_variance(bt.noise)
        v_a = {a: _noise_variance(noise) / (q * q) for a, noise in noises.items()}
        where = [j for j in range(len(centres)) if not _auto_choice(int(c_noisy[j]), centres[j], q, lo_u, hi_u, v_c1,
                                                                    v_t1, v_a[widths[j]], v_c2, v_t2)]
        if not where:
            return {}
        c2 = m.sample(aggregates.integers_plan(np.array([n[j] for j in where], dtype=object), bc.noise)).value
        t2 = m.sample(aggregates.integers_plan(np.array([doubled[j] for j in where], dtype=object), bt.noise)).value
        each = 1 - (1 - 0.95) / 4
        wc, wt = v_c2 / (v_c1 + v_c2), v_t2 / (v_t1 + v_t2)  # the stage-1 twins' weights
        hn = wc * c_part.noise.halfwidth(each) + (1 - wc) * bc.noise.halfwidth(each)
        ht = wt * t_part.noise.halfwidth(each) + (1 - wt) * bt.noise.halfwidth(each)
        out = {}
        for k, j in enumerate(where):
            out[j] = (wc * float(c_noisy[j]) + (1 - wc) * float(c2[k]),
                      wt * float(t_noisy[j]) + (1 - wt) * float(t2[k]), hn, ht)
        return out


@register_kind
class Variance(_Clamped):
    """``Query.variance(column, bounds)``: from a noisy count, sum and sum of squares (a third of the share
    each), by :func:`dpkit.stats.aggregates.variance_plan`."""

    name = "variance"
    n_parts = 3
    main_part = 1

    def measure(self, i: int, sp: Any, m: Any) -> None:
        st = sp.stat
        c_part, s_part, q_part = sp.parts
        out = m.sample(aggregates.variance_plan(m.metric(f"_s{i}"), m.metric(f"_c{i}"), m.metric(f"_q{i}"),
                                                bounds=st.bounds, granularity=st.granularity,
                                                sum_noise=s_part.noise, count_noise=c_part.noise,
                                                square_noise=q_part.noise))
        mech = (f"{_mech(m.noise, s_part.scale * st.granularity)[:-1]}; count {_mech(m.noise, c_part.scale)}; "
                "squares)")
        for j in range(m.ng):
            m.emit(st, j, "", out.value[j], float("nan"), float("nan"), mech)


@register_kind
class Quantile(Kind):
    """``Query.quantiles(column, levels, bounds, bins=None)``: per group and level, the exponential mechanism
    over ``bins`` equal-width buckets of the public bounds (by default, for an integer-typed column with integer
    bounds at most 65,536 apart, the integers of the bounds: bucket ``i`` is the integer ``lo + i``, exact
    answers; otherwise 1,024 buckets, answered by their midpoints) with the rank quality of
    :mod:`dpkit.stats.order_statistics` (:func:`dpkit.stats.aggregates.bucket_quantiles_plan`).

    A unit touching ``c_g`` rows of ``r`` groups moves group ``g``'s quality by at most ``c_g max(q, 1-q)``, and
    the exponential mechanism's loss is at most ``ε d / Δ`` for a change ``d <= Δ``, so declaring
    ``Δ = L max(q, 1-q)`` (``L`` the count L1) makes the ``r`` per-group selections ε-DP together; each level
    gets ``ε / #levels`` and the per-group lattice rounding is absorbed by a factor ``1 / (1 + 2r / 2^20)``."""

    name = "quantile"
    method = "quantiles"
    spec_keys = ("column", "levels", "bounds")
    bounded = True
    own_pass = True

    def build(self, q: Query, column: str, levels: Any, bounds: Any = None, *, bins: int | None = None,
              weight: float = 1.0) -> Statistic:
        from dpkit.tables._query import Statistic, numeric_column, public_pair

        col = numeric_column(q, column)
        if bounds is None:
            raise InvalidParameter("bounds", "public clamping bounds (lo, hi) are required")
        b = public_pair(bounds)
        lv = check.public_vector("levels", [levels] if np.isscalar(levels) else levels, max_size=256)
        if np.any(lv < 0) or np.any(lv > 1):
            raise InvalidParameter("levels", "must be in [0, 1]")
        options: tuple[tuple[str, Any], ...] = ()
        if bins is None:
            lo, hi = b
            span = hi - lo + 1
            if (q.schema[col] == "int" and float(lo).is_integer() and float(hi).is_integer()
                    and span <= _MAX_BINS):
                k, options = int(span), (("grid", "integer"),)  # bucket i is the integer lo + i
            else:
                k = 1024
        else:
            k = check.integer("bins", bins, minimum=1)
        if k > _MAX_BINS:
            raise InvalidParameter("bins", "too many bins")
        return Statistic("quantile", col, b, None, _weight(weight), levels=tuple(float(x) for x in lv), bins=k,
                         options=options)

    @staticmethod
    def _integer_grid(st: Statistic) -> bool:
        return ("grid", "integer") in st.options

    def parse_spec(self, path: str, value: Mapping[str, Any], kw: dict[str, Any], reader: Any) -> None:
        if "levels" not in value:
            raise reader.error(f"{path}.levels", "missing: e.g. [0.25, 0.5, 0.75]")
        kw["levels"] = reader.increasing(f"{path}.levels", value["levels"], min_len=1, open01=True)

    def from_spec(self, q: Query, st: Any) -> Query:
        return q.quantiles(st.column, list(st.levels), bounds=st.bounds, weight=st.weight)

    def calibrate(self, sp: Any, cal: Any) -> None:
        st = sp.stat
        eps = cal.epsilon(sp.share)
        per = _exact.split_budget(eps, [1] * len(st.levels), name="weight") if len(st.levels) > 1 else [eps]
        r = cal.bounds.groups
        e = per[0]
        if r >= 2:
            e = _exact.float_at_most(Fraction(e) / (1 + Fraction(2 * r, 2**cal.lattice_bits)))
        if not e > 0:
            raise InvalidParameter("budget", "too small to split over the quantile levels")
        sp.em_epsilon = e
        sp.em_sensitivity = [cal.bounds.l1 * max(Fraction(x), 1 - Fraction(x)) for x in st.levels]
        if any(d == 0 for d in sp.em_sensitivity):  # pragma: no cover - max(q, 1-q) >= 1/2
            raise InvalidParameter("levels", "invalid")

    def plan_row(self, sp: Any, noise: str, confidence: float) -> dict[str, Any]:
        return {"column": sp.stat.column, "mechanism": f"exponential(epsilon={sp.em_epsilon:.6g})",
                "scale": float("nan"), "half_width_95": float("nan")}

    def table(self, i: int, st: Statistic, t: Any, by: list[str], ev: Any) -> Any:
        lo, hi = st.bounds  # type: ignore[misc]
        x = ev.float_(t[st.column])
        if self._integer_grid(st):  # an integer column: bucket i holds exactly the integer lo + i
            bexpr = ev.clip((ev.clip(x, lo, hi) - lo).round().cast("int64"), 0, st.bins - 1)
        else:
            width = (hi - lo) / st.bins
            bexpr = ev.clip(((ev.clip(x, lo, hi) - lo) / width).floor().cast("int64"), 0, st.bins - 1)
        tt = t.mutate(_dpk_bin=bexpr).filter(lambda x: x["_dpk_bin"].notnull())
        return tt.aggregate(by=[*by, "_dpk_bin"], _n=tt.count())

    def measure(self, i: int, sp: Any, m: Any) -> None:
        st = sp.stat
        k = st.bins
        counts: dict[tuple[Any, ...], np.ndarray] = {}
        for r in m.extra(i)[[*m.by, "_dpk_bin", "_n"]].itertuples(index=False, name=None):
            gk = tuple(m.py(v) for v in r[:-2])
            arr = counts.setdefault(gk, np.zeros(k, dtype=np.int64))
            arr[int(r[-2])] += int(r[-1])
        mech = f"exponential(epsilon={sp.em_epsilon:.6g})"
        for j, gk in enumerate(m.groups):
            c = counts.get(gk, np.zeros(k, dtype=np.int64))
            lo, hi = st.bounds
            # integer grid: buckets of width 1 centred on lo .. hi, so the midpoint of bucket i is the integer lo + i
            edges = (lo - 0.5, hi + 0.5) if self._integer_grid(st) else (lo, hi)
            values = m.sample(aggregates.bucket_quantiles_plan(c, st.levels, bounds=edges,
                                                               sensitivities=sp.em_sensitivity,
                                                               epsilon=sp.em_epsilon)).value
            for lv, value in zip(st.levels, values, strict=True):
                m.emit(st, j, f"{lv:g}", value, float("nan"), float("nan"), mech)


class _Cells(_CountLike):
    """Counts per public cell inside each group: the same L1 / L2 as the counts (a unit's rows of one group may
    all fall in one cell); one noise vector over groups × cells, group-major."""

    public_bins = True
    own_pass = True

    def cells(self, st: Statistic) -> tuple[list[tuple[Any, ...]], list[str], list[str]]:
        """``(cells, labels, engine columns)``."""
        raise NotImplementedError

    def cell_key(self, st: Statistic, key: tuple[Any, ...]) -> tuple[Any, ...]:
        return key

    def measure(self, i: int, sp: Any, m: Any) -> None:
        st, part = sp.stat, sp.parts[0]
        cells, labels, bcols = self.cells(st)
        lookup: dict[tuple[Any, ...], int] = {}
        for r in m.extra(i)[[*m.by, *bcols, "_n"]].itertuples(index=False, name=None):
            lookup[self.cell_key(st, tuple(m.py(v) for v in r[:-1]))] = int(r[-1])
        exact = np.zeros(len(m.groups) * len(cells), dtype=object)
        idx = 0
        for gk in m.groups:
            for cell in cells:
                exact[idx] = lookup.get((*gk, *cell), 0)
                idx += 1
        noisy = m.sample(aggregates.integers_plan(exact, part.noise)).value
        hw = part.noise.halfwidth()
        mech = _mech(m.noise, part.scale)
        idx = 0
        for j in range(len(m.groups)):
            for label in labels:
                v = int(noisy[idx])
                idx += 1
                m.emit(st, j, label, v, v - hw, v + hw, mech)


@register_kind
class Histogram(_Cells):
    """``Query.histogram(column, edges=... | categories=...)``: counts per public bin."""

    name = "histogram"
    spec_keys = ("column", "edges", "categories")

    def build(self, q: Query, column: str, *, edges: Any = None, categories: Any = None,
              weight: float = 1.0) -> Statistic:
        from dpkit.tables._query import Statistic, numeric_column, public_values

        if not isinstance(column, str):
            raise WrongType("column", "a column name")
        if column not in q.schema:
            raise InvalidParameter("column", f"unknown column {column!r}")
        w = _weight(weight)
        if (edges is None) == (categories is None):
            raise InvalidParameter("edges", "give exactly one of edges and categories")
        if edges is not None:
            numeric_column(q, column)
            e = check.public_vector("edges", edges, min_size=2, max_size=_MAX_BINS, increasing=True)
            return Statistic("histogram", column, weight=w, edges=tuple(float(x) for x in e))
        cats = public_values("categories", categories, q.schema[column])
        return Statistic("histogram", column, weight=w, categories=cats)

    def parse_spec(self, path: str, value: Mapping[str, Any], kw: dict[str, Any], reader: Any) -> None:
        has_e, has_c = "edges" in value, "categories" in value
        if has_e == has_c:
            raise reader.error(f"{path}.edges", "give exactly one of edges (numeric bins) or categories")
        if has_e:
            kw["edges"] = reader.increasing(f"{path}.edges", value["edges"], min_len=2)
        elif value["categories"] == "domain":
            kw["categories"] = reader.keys_for(f"{path}.categories", kw["column"])
        else:
            kw["categories"] = reader.scalars(f"{path}.categories", value["categories"])

    def from_spec(self, q: Query, st: Any) -> Query:
        if st.edges is not None:
            return q.histogram(st.column, edges=list(st.edges), weight=st.weight)
        return q.histogram(st.column, categories=list(st.categories or ()), weight=st.weight)

    def table(self, i: int, st: Statistic, t: Any, by: list[str], ev: Any) -> Any:
        col = t[st.column]
        if st.edges:
            bexpr = ev.float_(col).bucket(list(st.edges), closed="left", close_extreme=True)
            tt = t.mutate(_dpk_bin=bexpr).filter(lambda x: x["_dpk_bin"].notnull())
        else:
            tt = t.filter(col.isin(list(st.categories))).mutate(_dpk_bin=col)
        return tt.aggregate(by=[*by, "_dpk_bin"], _n=tt.count())

    def cells(self, st: Statistic) -> tuple[list[tuple[Any, ...]], list[str], list[str]]:
        if st.edges:
            e = st.edges
            labels = [f"[{e[j]:g}, {e[j + 1]:g}{']' if j == len(e) - 2 else ')'}" for j in range(len(e) - 1)]
            return [(j,) for j in range(len(e) - 1)], labels, ["_dpk_bin"]
        return [(c,) for c in st.categories], [str(c) for c in st.categories], ["_dpk_bin"]

    def cell_key(self, st: Statistic, key: tuple[Any, ...]) -> tuple[Any, ...]:
        return (*key[:-1], int(key[-1])) if st.edges else key


@register_kind
class Contingency(_Cells):
    """``Query.contingency(columns, domains)``: a k-way table of counts over public domains."""

    name = "contingency"
    spec_keys = ("columns", "domains")

    def build(self, q: Query, columns: Sequence[str], domains: Mapping[str, Any], *,
              weight: float = 1.0) -> Statistic:
        from dpkit.tables._query import Statistic, public_values

        if isinstance(columns, str) or not isinstance(columns, Sequence) or not columns:
            raise WrongType("columns", "a non-empty list of column names")
        if not isinstance(domains, Mapping):
            raise WrongType("domains", "a mapping column -> list of values")
        cols = tuple(columns)
        doms = []
        cells = 1
        for c in cols:
            if not isinstance(c, str) or c not in q.schema:
                raise InvalidParameter("columns", f"unknown column {c!r}")
            if c not in domains:
                raise InvalidParameter("domains", f"no domain for column {c!r}")
            d = public_values("domains", domains[c], q.schema[c])
            doms.append(d)
            cells *= len(d)
        if len(set(cols)) != len(cols):
            raise InvalidParameter("columns", "repeated column")
        if cells > _MAX_KEYS:
            raise InvalidParameter("domains", "too many cells")
        return Statistic("contingency", "", weight=_weight(weight), columns=cols, domains=tuple(doms))

    def label(self, st: Statistic) -> str:
        return f"contingency({','.join(st.columns)})"

    def parse_spec(self, path: str, value: Mapping[str, Any], kw: dict[str, Any], reader: Any) -> None:
        if "columns" not in value:
            raise reader.error(f"{path}.columns", "missing: two or more columns")
        cl = reader.list_(f"{path}.columns", value["columns"], min_len=2)
        cols = tuple(reader.ident(f"{path}.columns[{i}]", c) for i, c in enumerate(cl))
        if len(set(cols)) != len(cols):
            raise reader.error(f"{path}.columns", "repeats a column")
        dv = value.get("domains", "domain")
        doms: dict[str, tuple[Any, ...]] = {}
        if dv == "domain":
            for c in cols:
                doms[c] = reader.keys_for(f"{path}.domains", c)
        else:
            dt = reader.table(f"{path}.domains", dv, set(cols))
            for c in cols:
                doms[c] = reader.scalars(f"{path}.domains.{c}", dt[c]) if c in dt else \
                    reader.keys_for(f"{path}.domains.{c}", c)
        kw["columns"], kw["domains"] = cols, doms

    def from_spec(self, q: Query, st: Any) -> Query:
        return q.contingency(list(st.columns), domains={c: list(v) for c, v in st.domains.items()},
                             weight=st.weight)

    def table(self, i: int, st: Statistic, t: Any, by: list[str], ev: Any) -> Any:
        tt = t
        for c, d in zip(st.columns, st.domains, strict=True):
            tt = tt.filter(tt[c].isin(list(d)))
        return tt.aggregate(by=[*by, *st.columns], _n=tt.count())

    def cells(self, st: Statistic) -> tuple[list[tuple[Any, ...]], list[str], list[str]]:
        cells = list(itertools.product(*st.domains))
        labels = [", ".join(f"{c}={v}" for c, v in zip(st.columns, cell, strict=True)) for cell in cells]
        return cells, labels, list(st.columns)


from dpkit.tables import _learn_kinds, _synth_kinds  # noqa: E402,F401  (register the model, marginals, synthetic kinds)

#: The kinds dpkit ships (they cannot be unregistered).
_BUILTIN = frozenset(_REGISTRY)
_LOADING_BUILTINS = False
