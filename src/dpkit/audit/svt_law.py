"""The exact law of sparse-vector outputs: ``ln P[pattern]`` in closed form, for discrete or continuous Laplace noise.

Every sparse vector variant (Lyu, Su & Li 2017, Algs 1-7; Li et al. 2016, Algs 12-18) draws a threshold
noise ``rho`` and, for query ``i`` with answer ``q_i`` and threshold ``T_i``, a query noise ``nu_i``; it answers
``⊤`` iff ``q_i + nu_i >= T_i + rho``, else ``⊥``. Given ``rho = z`` the answers are independent, so with
``a_i = T_i - q_i``

    P[pattern] = ∫ p_rho(z) · Π_{i ⊥} P[nu < a_i + z] · Π_{i ⊤} P[nu >= a_i + z] dz          (a sum over z ∈ Z on
                                                                                          the lattice)

(Lyu–Su–Li Eq. 5). This module evaluates it **in closed form**, with no quadrature and no truncation.

Method
------
Write ``G(w) = P[nu >= w]``. For Laplace(b) and for the discrete Laplace ``DLap(t)`` (``P[k] ∝ r^|k|``,
``r = e^(-1/t)``, integer ``w``), ``G(w) = A e^(-λw)`` for ``w >= 0`` and ``1 - B e^(λw)`` for ``w < 0``
(continuous: ``A = B = 1/2``, ``λ = 1/b``; discrete: ``A = 1/(1+r)``, ``B = r/(1+r)``, ``λ = 1/t``), and
``p_rho(z) = N e^(-λ₁|z|)``. Split the z-axis at ``0`` and at every ``-a_i``; on each piece every factor is
either a pure exponential ``e^(α + βz)`` or ``1 - c e^(±λz)``, the latter in ``[1/2, 1]`` on the piece. The
product of the second kind is a Laurent polynomial in ``y = e^(λ(z - z₀))`` (``z₀`` the piece's left end), so
the piece's contribution is a finite sum of exponential integrals ``∫ e^(βz) dz`` (geometric sums on the
lattice), each in closed form. On the two infinite pieces the exponents have the right sign, so every
integral converges (the left piece only has ``+λ`` factors, the right one only ``-λ`` factors).

Accuracy. The polynomial's coefficients alternate in sign; since each factor lies in ``[1/2, 1]`` on its
piece the cancellation loses at most a factor ``3^J`` (``J`` = number of such factors). ``precision="float"``
does the sums in float64 log space (relative error ``<= 3^J · 2^-50``, used for ``J <= 12``: ``< 3e-10``);
``precision="decimal"`` does them in :mod:`decimal` arithmetic with ``60 + J`` significant digits
(relative error far below ``1e-30``); ``"auto"`` (default) picks float64 when ``J <= 12`` and every answer lies
within ``10^6`` noise scales of its threshold (float64 also loses about ``2^-52 · λ|T_i - q_i|`` in ``ln P``).
The result is the natural log of the probability (or of the probability *density* when numeric answers are
output, continuous case); ``-inf`` for an impossible output.

What can be expressed
---------------------
- ``law="discrete_laplace"``: the exact lattice mechanisms of :mod:`dpkit.svt` (threshold and query noise
  ``DLap``; ties ``u + nu == T + rho`` answer ``⊤``). ``values``, ``thresholds`` and numeric answers are lattice
  units, or the caller's units with ``granularity=g`` (then rounded with ``round_half_even(x / g)``, the
  mechanisms' rule, and the scales are in the caller's units too: ``t = scale / g``).
- ``law="laplace"``: the continuous Laplace laws of the papers (the published counterexamples).
- numeric answers: an output entry that is a real number (not a bool) means "``⊤`` with this numeric answer".
  ``numeric="fresh"`` (Lyu–Su–Li Alg 7 / Li Alg 18): the answer is ``q_i + eta_i`` with *fresh* noise
  ``eta_i`` of scale ``numeric_scale`` (same family as ``law``), independent of the comparison, adding
  ``ln p_eta(v - q_i)``. ``numeric="query_noise"`` (Lyu–Su–Li Alg 3 / Li Alg 14, **not private**): the
  answer is ``q_i + nu_i`` with the comparison's own noise, so ``nu_i = v - q_i`` and the comparison becomes
  the constraint ``z <= v - T_i``.
- ``query_scale=0``: no query noise (Lyu–Su–Li Alg 5 / Li Alg 16, **not private**): ``P`` is the probability
  that ``rho`` lies in an interval.
- ``resample_threshold=True`` (Dwork–Roth, Lyu–Su–Li Alg 2 / Li Alg 13): ``rho`` is redrawn after every
  ``⊤``, so the probability is the product over the segments that end at each ``⊤``.

Example
-------
Lyu–Su–Li Alg 5 (no query noise), ``q(D) = (0, 1)``, ``q(D') = (1, 0)``, ``T = 0``, ``ε = 1`` (``rho ~ Lap(2)``),
output ``⊥ ⊤``:

>>> import math
>>> from dpkit.audit.svt_law import svt_log_prob
>>> kw = dict(threshold_scale=2.0, query_scale=0.0, law="laplace")
>>> round(math.exp(svt_log_prob([0.0, 1.0], 0.0, [False, True], **kw)), 4)
0.1967
>>> svt_log_prob([1.0, 0.0], 0.0, [False, True], **kw)
-inf
"""

from __future__ import annotations

import decimal
import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
from scipy.special import logsumexp

from dpkit.core import _validate as check
from dpkit.core.errors import DPKitError, InvalidParameter, WrongType

if TYPE_CHECKING:
    from numpy.typing import ArrayLike

__all__ = ["SVTLoss", "svt_log_prob", "svt_log_probs", "svt_max_loss", "svt_patterns"]

LAWS = ("discrete_laplace", "laplace")
_FLOAT_MAX_FACTORS = 12
_NEG_INF = -math.inf
_TOP, _BOT, _FIXED = 1, 0, -1  # _FIXED: Alg 3's numeric answer (its noise is fixed by the answer: no tail factor)


# ---------------------------------------------------------------------------------------------
# validation
# ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class _Query:
    kind: int  # _TOP, _BOT or _FIXED
    a: Any  # T_i - q_i (int on the lattice, float for the continuous law)
    cap: Any = None  # Alg 3: z <= cap
    const: float = 0.0  # additive log factor independent of z


def _is_numeric_output(o: Any) -> bool:
    return not isinstance(o, (bool, np.bool_)) and o is not None


def _check_outputs(outputs: Any) -> list[Any]:
    if isinstance(outputs, (str, bytes)) or not isinstance(outputs, (Sequence, np.ndarray)) \
            or (isinstance(outputs, np.ndarray) and outputs.ndim != 1):
        raise WrongType("outputs", "a sequence of False/None (⊥), True (⊤) or real numbers (⊤ with numeric answer)")
    out: list[Any] = []
    for o in list(outputs):
        if o is None or isinstance(o, (bool, np.bool_)):
            out.append(bool(o) if o is not None else False)
        else:
            out.append(check.real("outputs", o))
    return out


#: At most this many queries (answers) in one exact computation, and this many output patterns.
MAX_QUERIES = 10**4
MAX_PATTERNS = 10**5


def _answers(name: str, values: Any) -> np.ndarray:
    """Query answers as a 1-D float64 array (typed errors naming ``name``)."""
    if isinstance(values, (str, bytes, dict, set, frozenset)) or check.safe_ndim(values) < 0:
        raise WrongType(name, "a 1-D array of query answers")
    vals = check.finite_array(name, check.as_array(name, values, "a 1-D array of query answers"), allow_empty=True)
    if vals.ndim != 1:
        raise WrongType(name, "a 1-D array of query answers")
    if vals.size > MAX_QUERIES:
        raise InvalidParameter(name, f"has more than {MAX_QUERIES} answers")
    return vals


def _scale(name: str, value: Any, *, allow_zero: bool = False) -> float:
    v = check.nonnegative(name, value) if allow_zero else check.positive(name, value)
    return v


class _Law:
    """The per-piece constants of one noise family (threshold scale t1, query scale t2), in float and Decimal."""

    def __init__(self, law: str, t1: float, t2: float) -> None:
        self.discrete = law == "discrete_laplace"
        self.t1, self.t2 = t1, t2
        self.lam1, self.lam = 1.0 / t1, 1.0 / t2
        if self.discrete:
            r1 = math.exp(-self.lam1)
            self.log_n1 = math.log(-math.expm1(-self.lam1)) - math.log1p(r1)
            r = math.exp(-self.lam)
            self.log_a = -math.log1p(r)
            self.log_b = -self.lam - math.log1p(r)
        else:
            self.log_n1 = -math.log(2.0 * t1)
            self.log_a = self.log_b = -math.log(2.0)

    def decimal_constants(self) -> dict[str, decimal.Decimal]:
        D = decimal.Decimal
        lam1, lam = 1 / D(self.t1), 1 / D(self.t2)
        if self.discrete:
            r1, r = (-lam1).exp(), (-lam).exp()
            n1 = (1 - r1) / (1 + r1)
            a_, b_ = 1 / (1 + r), r / (1 + r)
        else:
            n1 = 1 / (2 * D(self.t1))
            a_ = b_ = D(1) / 2
        return {"lam1": lam1, "lam": lam, "n1": n1, "A": a_, "B": b_}


def _log_pmf_or_pdf(law: str, scale: float, x: float) -> float:
    """ln of the noise law at ``x`` (discrete: pmf of DLap(scale) at the integer x; continuous: Laplace pdf)."""
    if law == "discrete_laplace":
        lam = 1.0 / scale
        return math.log(-math.expm1(-lam)) - math.log1p(math.exp(-lam)) - abs(x) * lam
    return -abs(x) / scale - math.log(2.0 * scale)


# ---------------------------------------------------------------------------------------------
# the pieces of the z-axis
# ---------------------------------------------------------------------------------------------
def _start(q: _Query, discrete: bool) -> Any:
    """Where the factor of ``q`` switches form: ``⊤`` is ``A e^(-λw)`` for ``w = a + z >= 0`` and ``1 - B e^(λw)``
    below; ``⊥`` is ``1 - A e^(-λw)`` for ``w >= 0`` (discrete: ``w >= 1``, so that ``A e^(-λw) <= r/(1+r) < 1/2``)
    and ``B e^(λw)`` below. Returns the first ``z`` of the upper form."""
    return -q.a + (1 if (discrete and q.kind == _BOT) else 0)


def _pieces(queries: list[_Query], discrete: bool) -> list[tuple[Any, Any]]:
    """``(lo, hi)`` pieces of the z-axis on which every factor keeps its form: continuous ``[lo, hi)``,
    discrete the integers ``lo..hi`` (``±inf`` for the open ends), restricted to ``z <= cap``."""
    starts = sorted({0, *(_start(q, discrete) for q in queries if q.kind != _FIXED)})
    caps = [q.cap for q in queries if q.cap is not None]
    cap = min(caps) if caps else math.inf
    out = []
    bounds = [-math.inf, *starts, math.inf]
    for lo, nxt in itertools.pairwise(bounds):
        hi = (nxt - 1 if discrete and nxt != math.inf else nxt)
        hi = min(hi, cap)
        if lo > hi or (not discrete and lo == hi):
            continue
        out.append((lo, hi))
    return out


def _piece_form(queries: list[_Query], law: _Law, lo: Any) -> tuple[float, tuple[int, int], list[tuple[Any, int]]]:
    """On a piece starting at ``lo``: ``(C, L, factors)`` with the piece's integrand
    ``e^(C + L z) Π (1 - c_j e^(μ_j λ z))``; ``L`` in units (``n1`` λ₁'s and ``n`` λ's) is returned as the pair
    ``(s1, s)`` with ``L = s1 λ₁ + s λ``; ``factors`` are ``(ln c_j, μ_j)`` with ``μ_j = ±1``."""
    above0 = lo != -math.inf and lo >= 0
    C = law.log_n1
    s1 = -1 if above0 else 1
    s = 0
    factors: list[tuple[float, int]] = []
    lam = law.lam
    for q in queries:
        ge = lo != -math.inf and lo >= _start(q, law.discrete)  # the upper form on this piece
        C += q.const
        if q.kind == _FIXED:
            continue
        if q.kind == _TOP:
            if ge:
                C += law.log_a - lam * q.a
                s -= 1
            else:
                factors.append((law.log_b + lam * q.a, 1))
        else:
            if ge:
                factors.append((law.log_a - lam * q.a, -1))
            else:
                C += law.log_b + lam * q.a
                s += 1
    return C, (s1, s), factors


def _poly(factors: list[tuple[Any, int]], z0: Any, lam: Any, exp: Any, one: Any) -> dict[int, Any]:
    """Coefficients of ``Π_j (1 - c_j e^(μ_j λ z))`` as a polynomial in ``y = e^(λ (z - z0))``: each factor is
    ``1 - (c_j e^(μ_j λ z0)) y^(μ_j)``; returns ``{power: coefficient}``."""
    poly = {0: one}
    for logc, mu in factors:
        k = exp(logc + mu * lam * z0)
        new = dict(poly)
        for e, v in poly.items():
            new[e + mu] = new.get(e + mu, 0 * one) - k * v
        poly = new
    return poly


# ---------------------------------------------------------------------------------------------
# float64 path (log space)
# ---------------------------------------------------------------------------------------------
def _log_expint(beta: np.ndarray, lo: float, hi: float, discrete: bool) -> np.ndarray:
    """``ln ∫_lo^hi e^(beta z) dz`` (continuous) or ``ln Σ_{z=lo}^{hi} e^(beta z)`` (discrete), per beta."""
    beta = np.asarray(beta, dtype=float)
    out = np.empty_like(beta)
    pos, neg, zero = beta > 0, beta < 0, beta == 0
    with np.errstate(all="ignore"):
        if discrete:
            n = hi - lo + 1
            b = beta[pos]
            tail = 0.0 if lo == -math.inf else np.log(-np.expm1(-b * n))
            out[pos] = b * hi + tail - np.log(-np.expm1(-b))
            b = beta[neg]
            tail = 0.0 if hi == math.inf else np.log(-np.expm1(b * n))
            out[neg] = b * lo + tail - np.log(-np.expm1(b))
            out[zero] = math.log(n) if math.isfinite(n) else math.inf
        else:
            n = hi - lo
            b = beta[pos]
            tail = 0.0 if lo == -math.inf else np.log(-np.expm1(-b * n))
            out[pos] = b * hi + tail - np.log(b)
            b = beta[neg]
            tail = 0.0 if hi == math.inf else np.log(-np.expm1(b * n))
            out[neg] = b * lo + tail - np.log(-b)
            out[zero] = math.log(n) if math.isfinite(n) else math.inf
    if not np.all(np.isfinite(out) | (out == -math.inf)):  # pragma: no cover - excluded by the piece structure
        raise AssertionError("divergent piece")
    return out


def _segment_float(queries: list[_Query], law: _Law) -> float:
    discrete = law.discrete
    logs = []
    for lo, hi in _pieces(queries, discrete):
        C, (s1, s), factors = _piece_form(queries, law, lo)
        z0 = lo if lo != -math.inf else hi  # any finite point of the piece
        if lo == -math.inf and hi == math.inf:  # pragma: no cover - 0 is always a breakpoint
            raise AssertionError("unbounded piece")
        poly = _poly(factors, float(z0), law.lam, math.exp, 1.0)
        powers = np.array(sorted(poly), dtype=float)
        coef = np.array([poly[int(e)] for e in powers], dtype=float)
        L = s1 * law.lam1 + s * law.lam
        beta = L + powers * law.lam
        with np.errstate(divide="ignore"):
            terms = C - powers * law.lam * float(z0) + np.log(np.abs(coef)) + _log_expint(beta, lo, hi, discrete)
        val, sign = logsumexp(terms, b=np.sign(coef), return_sign=True)
        if sign > 0 and np.isfinite(val):
            logs.append(float(val))
        # sign <= 0 only from rounding when the piece's mass is below ~3^J ulps of its largest term
    return float(logsumexp(logs)) if logs else _NEG_INF


# ---------------------------------------------------------------------------------------------
# decimal path (linear space, 60 + J digits)
# ---------------------------------------------------------------------------------------------
def _segment_decimal(queries: list[_Query], law: _Law) -> float:
    D = decimal.Decimal
    discrete = law.discrete
    J = len(queries)
    ctx = decimal.Context(prec=60 + J + 10 * (J > 40), Emax=decimal.MAX_EMAX, Emin=decimal.MIN_EMIN)
    with decimal.localcontext(ctx):
        k = law.decimal_constants()
        lam, lam1 = k["lam"], k["lam1"]
        ln_n1, ln_a, ln_b = k["n1"].ln(), k["A"].ln(), k["B"].ln()
        total = D(0)
        for lo, hi in _pieces(queries, discrete):
            above0 = lo != -math.inf and lo >= 0
            C = ln_n1
            s1 = -1 if above0 else 1
            s = 0
            factors: list[tuple[decimal.Decimal, int]] = []
            for q in queries:
                a = D(q.a)
                C += D(q.const)
                ge = lo != -math.inf and lo >= _start(q, discrete)
                if q.kind == _FIXED:
                    continue
                if q.kind == _TOP:
                    if ge:
                        C += ln_a - lam * a
                        s -= 1
                    else:
                        factors.append((ln_b + lam * a, 1))
                else:
                    if ge:
                        factors.append((ln_a - lam * a, -1))
                    else:
                        C += ln_b + lam * a
                        s += 1
            z0 = D(lo) if lo != -math.inf else D(hi)
            poly = _poly(factors, z0, lam, lambda x: x.exp(), D(1))
            L = s1 * lam1 + s * lam
            piece = D(0)
            for e, coef in poly.items():
                if coef == 0:
                    continue
                beta = L + e * lam
                piece += coef * (C - e * lam * z0).exp() * _dec_expint(beta, lo, hi, discrete)
            if piece > 0:
                total += piece
        if total <= 0:
            return _NEG_INF
        return float(total.ln())


def _dec_expint(beta: decimal.Decimal, lo: Any, hi: Any, discrete: bool) -> decimal.Decimal:
    D = decimal.Decimal
    if beta == 0:
        if lo == -math.inf or hi == math.inf:  # pragma: no cover - excluded by the piece structure
            raise AssertionError("divergent piece")
        return D(hi) - D(lo) + (1 if discrete else 0)
    if discrete:
        if lo == -math.inf:  # beta > 0: Σ_{z <= hi} e^(beta z) = e^(beta hi) / (1 - e^-beta)
            return (beta * D(hi)).exp() / (1 - (-beta).exp())
        if hi == math.inf:  # beta < 0
            return (beta * D(lo)).exp() / (1 - beta.exp())
        return ((beta * D(lo)).exp() - (beta * (D(hi) + 1)).exp()) / (1 - beta.exp())
    if lo == -math.inf:
        return (beta * D(hi)).exp() / beta
    if hi == math.inf:
        return -(beta * D(lo)).exp() / beta
    return ((beta * D(hi)).exp() - (beta * D(lo)).exp()) / beta


# ---------------------------------------------------------------------------------------------
# no query noise (Alg 5): P[rho in an interval]
# ---------------------------------------------------------------------------------------------
def _segment_noiseless(queries: list[_Query], law: _Law) -> float:
    from dpkit.audit.exact import DiscreteLaplace, Laplace, _log_between

    lo, hi = -math.inf, math.inf
    lo_closed = True
    for q in queries:
        if q.cap is not None:
            hi = min(hi, q.cap)
        if q.kind == _TOP:  # 0 >= a + z
            hi = min(hi, -q.a)
        else:  # 0 < a + z
            if law.discrete:
                lo = max(lo, -q.a + 1)
            elif -q.a >= lo:
                lo, lo_closed = -q.a, False
    if law.discrete:
        return _log_between(DiscreteLaplace(0, law.t1), lo, hi) + sum(q.const for q in queries)
    return _log_between(Laplace(0.0, law.t1), lo, hi, lo_closed=lo_closed) + sum(q.const for q in queries)


# ---------------------------------------------------------------------------------------------
# public API
# ---------------------------------------------------------------------------------------------
def _prepare(values: Any, thresholds: Any, outputs: Any, law: str, granularity: Any, threshold_scale: Any,
             query_scale: Any, numeric_scale: Any, numeric: str) -> tuple[list[Any], list[Any], list[Any], float,
                                                                           float, float | None]:
    if not isinstance(law, str) or law not in LAWS:
        raise InvalidParameter("law", "must be 'discrete_laplace' or 'laplace'")
    check.choice("numeric", numeric, ("fresh", "query_noise"))
    outs = _check_outputs(outputs)
    vals = _answers("values", values)
    if vals.ndim != 1:
        raise WrongType("values", "a 1-D array of query answers")
    if vals.size < len(outs):
        raise InvalidParameter("values", "needs at least one answer per output")
    nd = check.safe_ndim(thresholds)
    if nd < 0 or isinstance(thresholds, (str, bytes)):
        raise WrongType("thresholds", "a real number or an array of real numbers")
    if nd == 0:
        thr = np.full(vals.size, check.real("thresholds", thresholds))
    else:
        thr = check.finite_array("thresholds", check.as_array("thresholds", thresholds, "an array of real numbers"),
                                 allow_empty=True).reshape(-1)
        if thr.size < len(outs):
            raise InvalidParameter("thresholds", "needs one threshold per output (or a scalar)")
    t1 = _scale("threshold_scale", threshold_scale)
    t2 = _scale("query_scale", query_scale, allow_zero=True)
    t3 = None if numeric_scale is None else _scale("numeric_scale", numeric_scale)
    if numeric == "fresh" and t3 is None and any(_is_numeric_output(o) for o in outs):
        raise InvalidParameter("numeric_scale", "is needed for numeric answers with numeric='fresh'")
    g = None
    if granularity is not None:
        if law != "discrete_laplace":
            raise InvalidParameter("granularity", "only for law='discrete_laplace'")
        g = check.positive("granularity", granularity)
        t1, t2 = t1 / g, t2 / g
        t3 = None if t3 is None else t3 / g
    k = len(outs)
    if law == "discrete_laplace":
        gg = 1.0 if g is None else g
        u = np.rint(vals[:k] / gg)
        tu = np.rint(thr[:k] / gg)
        if g is None and not (np.all(u == vals[:k]) and np.all(tu == thr[:k])):
            raise InvalidParameter("values", "must be integers (lattice units) unless a granularity is given")
        u_list: list[float] = [int(x) for x in u]
        t_list: list[float] = [int(x) for x in tu]
        outs = [o if not _is_numeric_output(o) else (o / gg) for o in outs]
    else:
        u_list = [float(x) for x in vals[:k]]
        t_list = [float(x) for x in thr[:k]]
    return outs, u_list, t_list, t1, t2, t3


def _queries(outs: list[Any], u: list[Any], t: list[Any], law: str, t2: float, t3: float | None,
             numeric: str) -> list[_Query] | None:
    """The factor list; ``None`` when the output is impossible (a numeric answer off the lattice)."""
    discrete = law == "discrete_laplace"
    qs: list[_Query] = []
    for o, ui, ti in zip(outs, u, t, strict=False):
        a = ti - ui
        if not _is_numeric_output(o):
            qs.append(_Query(_TOP if o else _BOT, a))
            continue
        v = float(o)
        if discrete:
            if v != math.floor(v):
                return None
            v = int(v)
        if numeric == "fresh":
            assert t3 is not None
            qs.append(_Query(_TOP, a, const=_log_pmf_or_pdf(law, t3, v - ui)))
        elif t2 == 0:  # the answer is q_i itself
            if v != ui:
                return None
            qs.append(_Query(_TOP, a))
        else:  # Alg 3: nu_i = v - u_i, and nu_i >= a + z  <=>  z <= v - T_i
            qs.append(_Query(_FIXED, 0, cap=v - ti, const=_log_pmf_or_pdf(law, t2, v - ui)))
    return qs


def _segment(queries: list[_Query], law: _Law, t2: float, precision: str) -> float:
    if t2 == 0:
        return _segment_noiseless(queries, law)
    J = sum(q.kind != _FIXED for q in queries)
    # float64 also loses absolute accuracy ~2^-52 |λ a| in ln P when answers lie very many noise scales away
    far = max((abs(float(q.a)) for q in queries), default=0.0) * max(law.lam, law.lam1)
    if precision == "float" or (precision == "auto" and J <= _FLOAT_MAX_FACTORS and far <= 1e6):
        return _segment_float(queries, law)
    return _segment_decimal(queries, law)


def svt_log_prob(values: ArrayLike, thresholds: float | ArrayLike, outputs: Sequence[bool | float | None], *,
                 threshold_scale: float, query_scale: float, law: str = "discrete_laplace",
                 granularity: float | None = None, numeric_scale: float | None = None, numeric: str = "fresh",
                 resample_threshold: bool = False, precision: str = "auto") -> float:
    """``ln P[the sparse vector run answers outputs]`` on query answers ``values``, exactly.

    Parameters
    ----------
    values:
        The true answers ``q_i(D)`` (at least one per output; later ones are ignored: the run stopped).
    thresholds:
        ``T`` (a scalar) or the per-query thresholds ``T_i``.
    outputs:
        One entry per query answered: ``False``/``None`` (``⊥``), ``True`` (``⊤``) or a real number (``⊤`` with
        that numeric answer; see ``numeric``).
    threshold_scale, query_scale:
        Scales of the threshold noise ``rho`` and of the query noise ``nu`` (``b`` of Laplace(b), or ``t`` of
        DLap(t)); ``query_scale=0`` means no query noise (Lyu–Su–Li Alg 5).
    law:
        ``"discrete_laplace"`` (lattice; ``⊤`` on ties) or ``"laplace"`` (continuous).
    granularity:
        Lattice step ``g`` (discrete law only): values, thresholds, numeric answers and scales are then in the
        caller's units, rounded to the lattice by ``round_half_even(x / g)``. Without it they are lattice units
        (integers).
    numeric_scale, numeric:
        How numeric answers were produced: ``"fresh"`` noise of scale ``numeric_scale`` (Alg 7), or
        ``"query_noise"``: the comparison's own noisy value ``q_i + nu_i`` (Alg 3, not private).
    resample_threshold:
        Redraw ``rho`` (same scale) after every ``⊤`` (Dwork–Roth, Alg 2).
    precision:
        ``"auto"``, ``"float"`` or ``"decimal"`` (module docstring).

    Returns
    -------
    float
        The natural log of the probability (a log density in the numeric answers, continuous law),
        ``-inf`` when the output is impossible.
    """
    if not isinstance(precision, str) or precision not in ("auto", "float", "decimal"):
        raise InvalidParameter("precision", "must be 'auto', 'float' or 'decimal'")
    if not isinstance(resample_threshold, (bool, np.bool_)):
        raise WrongType("resample_threshold", "a bool")
    outs, u, t, t1, t2, t3 = _prepare(values, thresholds, outputs, law, granularity, threshold_scale, query_scale,
                                      numeric_scale, numeric)
    try:
        return _svt_log_prob(outs, u, t, t1, t2, t3, law, numeric, resample_threshold, precision)
    except DPKitError:
        raise
    except Exception:  # float/Decimal arithmetic at extreme finite parameters (overflow, huge lattice values)
        raise InvalidParameter("values", "values, thresholds and scales are outside the range this exact "
                                         "computation supports") from None


def _svt_log_prob(outs: list[Any], u: list[Any], t: list[Any], t1: float, t2: float, t3: float | None, law: str,
                  numeric: str, resample_threshold: bool, precision: str) -> float:
    qs = _queries(outs, u, t, law, t2, t3, numeric)
    if qs is None:
        return _NEG_INF
    lw = _Law(law, t1, t2 if t2 > 0 else 1.0)
    if not resample_threshold:
        segments = [qs]
    else:
        segments, cur = [], []
        for q, o in zip(qs, outs, strict=True):
            cur.append(q)
            if o is True or _is_numeric_output(o):
                segments.append(cur)
                cur = []
        if cur or not segments:
            segments.append(cur)
    total = 0.0
    for seg in segments:
        v = _segment(seg, lw, t2, precision)
        if v == _NEG_INF:
            return _NEG_INF
        total += v
    return total


def svt_patterns(queries: int, cutoff: int) -> list[tuple[bool, ...]]:
    """Every ``⊥/⊤`` output of a sparse vector run with cutoff ``cutoff`` over ``queries`` queries: the
    length-``queries`` sequences with fewer than ``cutoff`` ``⊤``, and the prefixes that end at the
    ``cutoff``-th ``⊤`` (the run halts there). Their probabilities sum to one.

    >>> svt_patterns(2, 1)
    [(True,), (False, True), (False, False)]
    """
    m = check.size_limit("queries", queries, MAX_QUERIES)
    c = check.integer("cutoff", cutoff, minimum=1)
    c = min(c, m + 1)
    count = sum(math.comb(m, j) for j in range(min(c, m + 1)))  # full-length patterns with < c tops
    count += sum(math.comb(length - 1, c - 1) for length in range(c, m + 1))  # halted at the c-th top
    if count > MAX_PATTERNS:
        raise InvalidParameter("queries", f"with this cutoff gives more than {MAX_PATTERNS} output patterns")
    out: list[tuple[bool, ...]] = []

    def rec(prefix: tuple[bool, ...], tops: int) -> None:
        if tops == c or len(prefix) == m:
            out.append(prefix)
            return
        rec((*prefix, True), tops + 1)
        rec((*prefix, False), tops)

    rec((), 0)
    return out


def svt_log_probs(values: ArrayLike, thresholds: float | ArrayLike, cutoff: int,
                  **kwargs: Any) -> dict[tuple[bool, ...], float]:
    """``{pattern: ln P[pattern]}`` over :func:`svt_patterns` ``(len(values), cutoff)``; ``kwargs`` as for
    :func:`svt_log_prob` (no numeric answers)."""
    _check_kwargs(kwargs)
    m = _answers("values", values).size
    return {p: svt_log_prob(values, thresholds, list(p), **kwargs) for p in svt_patterns(m, cutoff)}


_KWARGS = ("threshold_scale", "query_scale", "law", "granularity", "numeric_scale", "numeric", "resample_threshold",
           "precision")


def _check_kwargs(kwargs: dict[str, Any]) -> None:
    for k in kwargs:
        if k not in _KWARGS:
            raise InvalidParameter("kwargs", "unknown keyword argument (see svt_log_prob)")
    for k in ("threshold_scale", "query_scale"):
        if k not in kwargs:
            raise InvalidParameter(k, "is required")


@dataclass(frozen=True)
class SVTLoss:
    """The largest ``|ln P_D[pattern] - ln P_D'[pattern]|`` over the patterns, and where it is reached."""

    loss: float
    pattern: tuple[bool, ...]
    direction: str  # "D/D'" or "D'/D"


def svt_max_loss(values: ArrayLike, values_prime: ArrayLike, thresholds: float | ArrayLike, cutoff: int,
                 **kwargs: Any) -> SVTLoss:
    """The exact privacy loss of a sparse vector run between the answers ``values`` (``D``) and
    ``values_prime`` (``D'``): the maximum over every output pattern with at most ``cutoff`` ``⊤``, both
    directions. ``kwargs`` as for :func:`svt_log_prob`. ``loss`` is ``inf`` when some pattern is possible on
    one input only.

    >>> from dpkit.audit.svt_law import svt_max_loss
    >>> res = svt_max_loss([0.0, 1.0], [1.0, 0.0], 0.0, 2, threshold_scale=2.0, query_scale=0.0, law="laplace")
    >>> res.loss
    inf
    """
    _check_kwargs(kwargs)
    if _answers("values", values).size != _answers("values_prime", values_prime).size:
        raise InvalidParameter("values_prime", "must have as many answers as values")
    a = svt_log_probs(values, thresholds, cutoff, **kwargs)
    b = svt_log_probs(values_prime, thresholds, cutoff, **kwargs)
    best = SVTLoss(_NEG_INF, (), "D/D'")
    for p in a:
        for x, y, d in ((a[p], b[p], "D/D'"), (b[p], a[p], "D'/D")):
            if x == _NEG_INF:
                continue
            loss = math.inf if y == _NEG_INF else x - y
            if loss > best.loss:
                best = SVTLoss(loss, p, d)
    return best
