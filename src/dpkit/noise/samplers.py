"""Exact, vectorized samplers for discrete noise.

Every sampler here returns draws whose law is *exactly* the stated one: no decision that
depends on randomness is ever taken on a floating-point approximation alone.

Output laws
-----------
- :func:`sample_bernoulli_exp` ``(gamma)``: ``True`` with probability exactly ``exp(-gamma)``,
  where ``gamma`` is the exact rational value of each float64 entry.
- :func:`sample_discrete_laplace` ``(scale, size)``: integers with
  ``P[X = k] = (1 - q) / (1 + q) * q**|k|``, ``q = exp(-1/scale)``, scale the exact rational
  value of the float.
- :func:`sample_discrete_gaussian` ``(sigma, size)``: integers with
  ``P[X = k] = exp(-k**2 / (2 sigma**2)) / sum_j exp(-j**2 / (2 sigma**2))`` (sigma**2 is the
  exact rational square of the float sigma); Canonne, Kamath & Steinke (2020), Algorithm 3.

How exactness is obtained (the *lazy uniform*)
----------------------------------------------
Each sample is an inversion of one uniform variable ``U``: e.g. for the discrete Laplace,
``|X| = ceil(c(U)) - 1`` with ``c(U) = scale * (ln(2/(1+q)) - ln U)``. We draw a word ``k`` of
``b`` bits; all we know is ``U in [k/2**b, (k+1)/2**b)`` (further bits of ``U`` are drawn only if
needed). The candidate is computed in float64 (``log``/``log1p``), then *verified*: it is kept
only if ``[f - E, f + E]`` lies inside one interval ``(m, m+1]`` (or on one side of the Bernoulli
threshold), where ``f`` is the float value and

    E = _ETA * (|f| + scale)  +  (how far c moves over the interval of U, e.g. scale/k)

with ``_ETA = 2**-42``. This is a rigorous bound: each computation is a handful of IEEE
operations (relative error 2**-53 each) and one libm call (``log``/``log1p``) on an argument whose
own relative error is <= 2**-52; with a libm error of ``u`` ulp the total error is below
``scale * 2**-52 + (u + 4) * 2**-52 * |f|``, so ``2**-42`` covers libms up to ~500 ulp (numpy's
are within 4 ulp; ``tests/noise/test_noise_exactness.py`` measures this platform's, and checks
that the fast path and the exact path give the same output on the same words).

Elements whose interval may straddle a threshold (probability about ``2**-41 * scale`` plus
``2**-b`` per threshold) are *not* resampled (that would bias the law): they go to an exact slow
path that appends further random 64-bit words to ``U`` and decides with rigorous interval
arithmetic in Python's :mod:`decimal` (directed rounding for + - * /; ``exp``/``ln`` are correctly
rounded and widened by two ulps), at a precision that grows with the number of bits of ``U``.
It terminates with probability one. ``_ETA`` is a private hook: tests raise it to force the slow
path on (almost) every element and check the law in that mode too.

Words: 32 bits per discrete-Laplace sample for scale <= 256 and per Bernoulli trial, 64 bits for
larger scales. Scales above 2**24 use the fact that the binary digits of a geometric variable are
independent: the low bits are drawn as truncated geometrics of 20 bits each (near uniform, well
conditioned) and the top part as a geometric of scale <= 2**24 (one 64-bit word per part).
Scales (and sigmas) are limited to ``[2**-400, 2**50]``.

Table samplers (issue #16). Calls of at least ``_TABLE_MIN`` (2**14) samples of the discrete Gaussian, and of the
discrete Laplace of scale > 2**24, use :class:`_TableSampler` instead: an exact rejection sampler from a step
envelope over bins of width ``w`` (a power of two near scale/32), drawn with an alias table in exact integer
arithmetic and accepted by an integer *squeeze* (no transcendental function for ~97-99% of the candidates), a
float *band* test with the same rigorous margin ``_ETA`` for the rest, and the exact decimal slow path where that
is undecided; the tails beyond the table are exact geometric envelopes decided in decimal. One 64-bit word per
candidate (two for scales whose bin offset needs more bits), about 1.01-1.02 candidates per sample, drawn in
rounds of ``_TFILL`` samples plus a margin of extra candidates for the rejected ones. The law is the
same exact law, so which sampler a call uses depends only on the law, the scale and the size of the call (never
on a cache): smaller calls draw exactly the values they drew before. The discrete Laplace of scale <= 2**24 keeps
:class:`_DirectLaplace` at every size (one log per sample measured as fast as the table there).

All bits come from a :class:`~dpkit.noise.source.RandomSource` (by default an AES-256-CTR stream keyed
from the OS CSPRNG).
"""

from __future__ import annotations

import functools
import math
import threading
from collections.abc import Callable, Iterator
from decimal import ROUND_CEILING, ROUND_FLOOR, ROUND_HALF_EVEN, Context, Decimal
from fractions import Fraction
from typing import TYPE_CHECKING, Any

import numpy as np

from dpkit.core import _validate as check
from dpkit.core.errors import InvalidData, InvalidParameter, WrongType
from dpkit.noise import source as _source
from dpkit.noise.source import RandomSource

if TYPE_CHECKING:
    from numpy.typing import ArrayLike

__all__ = ["sample_bernoulli_exp", "sample_discrete_gaussian", "sample_discrete_laplace"]

# Relative error margin of the float fast path (see module docstring). Private hook: tests set
# it to a huge value (e.g. 1.0) to force the exact slow path on (almost) every element.
_ETA = 2.0**-42

_BLOCK = 1 << 16  # elements per vectorized block (keeps the working set in cache)
_DIRECT_MAX = float(2**24)  # largest scale drawn with a single word
_CHUNK_BITS = 20  # width of a low chunk of a large geometric
_MIN_SCALE = 2.0**-400
_MAX_SCALE = 2.0**50
_MASK63 = np.uint64((1 << 63) - 1)
_TWO_M63 = 2.0**-63
_TWO_M64 = 2.0**-64


# --------------------------------------------------------------------------------------------
# Exact slow path: rigorous interval arithmetic in decimal
# --------------------------------------------------------------------------------------------


class _Undecided(Exception):
    """The current knowledge of U does not allow evaluating the enclosure (e.g. ln(0))."""


_Iv = tuple[Decimal, Decimal]


class _Arith:
    """Interval arithmetic on (lo, hi) Decimal pairs at a fixed precision.

    + - * / are rounded outward with directed-rounding contexts; exp and ln (correctly rounded
    by the decimal module) are widened by two ulps on each side.
    """

    def __init__(self, prec: int) -> None:
        kw: dict[str, Any] = {"prec": prec, "Emin": -(10**9), "Emax": 10**9}
        self.F = Context(rounding=ROUND_FLOOR, **kw)
        self.C = Context(rounding=ROUND_CEILING, **kw)
        self.N = Context(rounding=ROUND_HALF_EVEN, **kw)
        self.prec = prec

    def const(self, x: int | float | Fraction) -> _Iv:
        if isinstance(x, Fraction):
            n, d = Decimal(x.numerator), Decimal(x.denominator)
            return self.F.divide(n, d), self.C.divide(n, d)
        v = Decimal(x)  # exact for int and float
        return self.F.plus(v), self.C.plus(v)

    def uniform(self, num: int, nbits: int) -> _Iv:
        den = Decimal(1 << nbits)
        return self.F.divide(Decimal(num), den), self.C.divide(Decimal(num + 1), den)

    def add(self, a: _Iv, b: _Iv) -> _Iv:
        return self.F.add(a[0], b[0]), self.C.add(a[1], b[1])

    def sub(self, a: _Iv, b: _Iv) -> _Iv:
        return self.F.subtract(a[0], b[1]), self.C.subtract(a[1], b[0])

    def neg(self, a: _Iv) -> _Iv:
        return self.F.minus(a[1]), self.C.minus(a[0])

    def mul(self, a: _Iv, b: _Iv) -> _Iv:
        lo = min(self.F.multiply(x, y) for x in a for y in b)
        hi = max(self.C.multiply(x, y) for x in a for y in b)
        return lo, hi

    def div(self, a: _Iv, b: _Iv) -> _Iv:
        if b[0] <= 0:
            raise _Undecided
        lo = min(self.F.divide(x, y) for x in a for y in b)
        hi = max(self.C.divide(x, y) for x in a for y in b)
        return lo, hi

    def exp(self, a: _Iv) -> _Iv:
        n = self.N
        lo = n.next_minus(n.next_minus(n.exp(a[0])))
        hi = n.next_plus(n.next_plus(n.exp(a[1])))
        return max(lo, Decimal(0)), hi

    def ln(self, a: _Iv) -> _Iv:
        if a[0] <= 0:
            raise _Undecided
        n = self.N
        return n.next_minus(n.next_minus(n.ln(a[0]))), n.next_plus(n.next_plus(n.ln(a[1])))


@functools.lru_cache(maxsize=64)
def _arith(prec: int) -> _Arith:
    return _Arith(prec)


def _prec_for(nbits: int) -> int:
    # 0.33 decimal digits per bit of U (> log10 2) plus headroom for magnitudes up to 2**60.
    return 50 + nbits // 3


def _next_word(rng: RandomSource) -> int:
    return int(rng.uint64(1)[0])


def _slow_ceil(num: int, nbits: int, rng: RandomSource, enclose: Callable[[_Arith, _Iv], _Iv]) -> int:
    """Exact ``ceil(c(U)) - 1`` for a continuous monotone ``c``, with U in [num, num+1) / 2**nbits.

    ``enclose(ar, U)`` returns a rigorous enclosure of ``c`` over the interval ``U``. While the
    enclosure may contain an integer, U is refined with 64 more random bits.
    """
    while True:
        ar = _arith(_prec_for(nbits))
        try:
            lo, hi = enclose(ar, ar.uniform(num, nbits))
        except _Undecided:
            pass
        else:
            m = int(hi.to_integral_value(rounding=ROUND_CEILING)) - 1
            if lo > m:
                return m
        num = (num << 64) | _next_word(rng)
        nbits += 64


def _slow_bernoulli(num: int, nbits: int, rng: RandomSource, gamma: Fraction) -> bool:
    """Exact ``U < exp(-gamma)`` with U in [num, num+1) / 2**nbits, refining U as needed."""
    while True:
        ar = _arith(_prec_for(nbits))
        e_lo, e_hi = ar.exp(ar.neg(ar.const(gamma)))
        u_lo, u_hi = ar.uniform(num, nbits)
        if u_hi <= e_lo:
            return True
        if u_lo >= e_hi:
            return False
        num = (num << 64) | _next_word(rng)
        nbits += 64


def _memo(fn: Callable[[_Arith], Any]) -> Callable[[_Arith], Any]:
    cache: dict[int, Any] = {}

    def get(ar: _Arith) -> Any:
        if ar.prec not in cache:
            cache[ar.prec] = fn(ar)
        return cache[ar.prec]

    return get


def _enclose_direct(t: float) -> Callable[[_Arith, _Iv], _Iv]:
    """c(V) = t * (ln(2 / (1 + q)) - ln V), q = exp(-1/t): |X| >= m (m >= 1) iff m < c(V)."""

    @_memo
    def consts(ar: _Arith) -> tuple[_Iv, _Iv]:
        tt = ar.const(t)
        q = ar.exp(ar.neg(ar.div(ar.const(1), tt)))
        big_l = ar.ln(ar.div(ar.const(2), ar.add(ar.const(1), q)))
        return tt, big_l

    def enclose(ar: _Arith, u: _Iv) -> _Iv:
        tt, big_l = consts(ar)
        return ar.mul(tt, ar.sub(big_l, ar.ln(u)))

    return enclose


def _enclose_top(s: float) -> Callable[[_Arith, _Iv], _Iv]:
    """c(V) = -s ln V: a geometric G with P[G >= g] = exp(-g/s) is ceil(c(V)) - 1."""

    def enclose(ar: _Arith, u: _Iv) -> _Iv:
        return ar.mul(ar.const(s), ar.neg(ar.ln(u)))

    return enclose


def _enclose_low(s: float, n: int) -> Callable[[_Arith, _Iv], _Iv]:
    """c(W) = -s ln(1 - W (1 - r**n)), r = exp(-1/s): truncated geometric on {0..n-1}."""

    @_memo
    def consts(ar: _Arith) -> tuple[_Iv, _Iv, _Iv]:
        ss = ar.const(s)
        one = ar.const(1)
        a = ar.sub(one, ar.exp(ar.neg(ar.div(ar.const(n), ss))))
        return ss, one, a

    def enclose(ar: _Arith, u: _Iv) -> _Iv:
        ss, one, a = consts(ar)
        return ar.mul(ar.neg(ss), ar.ln(ar.sub(one, ar.mul(u, a))))

    return enclose


def _to_float(iv: _Iv) -> float:
    return float((iv[0] + iv[1]) / 2)


# --------------------------------------------------------------------------------------------
# Fast vectorized kernels (float candidates + rigorous verification)
# --------------------------------------------------------------------------------------------


class _Work:
    """Scratch buffers for one block (reused across blocks to stay in cache); grow on demand."""

    def __init__(self) -> None:
        self._alloc(0)

    def _alloc(self, n: int) -> None:
        self.f = np.empty(n)
        self.hi = np.empty(n)
        self.lo = np.empty(n)
        self.slack = np.empty(n)
        self.ok = np.empty(n, dtype=bool)
        self.sign = np.empty(n, dtype=np.int64)
        self.w32 = np.empty(n, dtype=np.uint32)
        self.w64 = np.empty(n, dtype=np.uint64)

    def view(self, cnt: int) -> tuple[np.ndarray, ...]:
        if cnt > self.f.size:
            self._alloc(cnt)
        return self.f[:cnt], self.hi[:cnt], self.lo[:cnt], self.slack[:cnt], self.ok[:cnt], self.sign[:cnt]

    def words(self, cnt: int, bits: int) -> np.ndarray:
        """A reused word buffer (a fresh half-megabyte array per block cost more than the words themselves)."""
        if cnt > self.f.size:
            self._alloc(cnt)
        return self.w32[:cnt] if bits == 32 else self.w64[:cnt]


def _work(tls: threading.local) -> _Work:
    """This thread's scratch buffers (samplers are cached and shared, so buffers are per thread)."""
    w = getattr(tls, "work", None)
    if w is None:
        w = tls.work = _Work()
    return w


def _verified_ceil(
    f: np.ndarray, slack: np.ndarray | float, hi: np.ndarray, lo: np.ndarray, ok: np.ndarray
) -> np.ndarray:
    """Candidate ``m = ceil(c) - 1`` for a true value ``c`` with ``|c - f| <= _ETA |f| + slack``.

    ``ok[i]`` is set when ``[f - err, f + err]`` provably lies in ``(m, m+1]`` (then m is exact);
    returns m (as floats, in ``hi``). Float rounding of these few operations is < 2**-50 |f|,
    covered by the slack between the true error (< 2**-48 |f|) and ``_ETA``.
    """
    eta = _ETA
    np.multiply(f, 1.0 + eta, out=hi)
    hi += slack
    np.ceil(hi, out=hi)
    np.multiply(f, 1.0 - eta, out=lo)
    lo -= slack
    np.ceil(lo, out=lo)
    np.equal(hi, lo, out=ok)
    hi -= 1.0
    return hi


def _direct_bits(t: float) -> int:
    # 32-bit words suffice for small scales: the chance that the 2**-31-wide interval of V
    # straddles a threshold is about t 2**-31 ln(2**31 / t) < 2e-6 for t <= 256.
    return 32 if t <= 256.0 else 64


def _l_const(t: float) -> float:
    """ln(2 / (1 + exp(-1/t))) to within one ulp (rigorous enclosure, then its midpoint)."""
    ar = _arith(60)
    q = ar.exp(ar.neg(ar.div(ar.const(1), ar.const(t))))
    return _to_float(ar.ln(ar.div(ar.const(2), ar.add(ar.const(1), q))))


class _DirectLaplace:
    """Discrete Laplace, scale t <= 2**24: one word per sample, sign bit + lazy V.

    |X| = ceil(t (L - ln V)) - 1 with L = ln(2/(1+q)), since P[|X| >= m] = 2 q**m / (1+q) for
    m >= 1; the sign is an independent fair bit (irrelevant when |X| = 0). The word has ``wb``
    bits (32 or 64): the top bit is the sign, the other ``wb - 1`` bits give
    V in [k, k+1) / 2**(wb-1).

    Error bound for f = fl(t L - t fl(log(k 2**-(wb-1)))): a libm error of u ulp in log plus the
    roundings give |f - c(k/2**(wb-1))| <= t 2**-52 + (u + 3) 2**-52 f, and over the interval of V
    c moves by t ln(1 + 1/k) <= t/k: slack = _ETA t + t/k, relative margin _ETA on f.
    """

    def __init__(self, t: float) -> None:
        self.t = t
        self.t_l = t * _l_const(t)
        self.wb = wb = _direct_bits(t)
        self.itype = np.int32 if wb == 32 else np.int64
        self.mask = (np.uint32 if wb == 32 else np.uint64)((1 << (wb - 1)) - 1)
        self.vscale = 2.0 ** -(wb - 1)
        self._tls = threading.local()
        self.enclose: Callable[[_Arith, _Iv], _Iv] | None = None

    def fill(self, out: np.ndarray, rng: RandomSource) -> int:
        """Fill ``out`` (int64, at most _BLOCK long) with independent draws; returns an upper bound on ``|out|``."""
        t, wb, cnt = self.t, self.wb, out.size
        work = _work(self._tls)
        f, hi, lo, slack, ok, sign = work.view(cnt)
        w = work.words(cnt, wb)
        _fill_words(rng, w)  # the bytes of rng.uint32(cnt) / rng.uint64(cnt)
        np.right_shift(w.view(self.itype), wb - 1, out=sign)  # 0 or -1
        k = w & self.mask
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            np.multiply(k, 1.0, out=slack)  # float(k), rounded to nearest
            np.multiply(slack, self.vscale, out=f)  # exact scaling
            np.divide(t, slack, out=slack)  # t/k (inf for k = 0: undecided)
            slack += _ETA * t
            np.log(f, out=f)
            f *= -t
            f += self.t_l
            m = _verified_ceil(f, slack, hi, lo, ok)
            out[...] = m
        out ^= sign
        out -= sign
        # the fast path's values: m <= f (1 + eta) + slack with f <= t (L + (wb - 1) ln 2) < 44.4 t (k >= 1,
        # L < ln 2) and slack < 1/2 wherever ok (else hi != lo)
        bound = int(45.0 * t) + 2
        if not ok.all():
            if self.enclose is None:
                self.enclose = _enclose_direct(t)
            for i in np.flatnonzero(~ok).tolist():
                mag = _slow_ceil(int(k[i]), wb - 1, rng, self.enclose)
                out[i] = -mag if sign[i] else mag
                bound = max(bound, mag)
        return bound


class _ChunkedLaplace:
    """Discrete Laplace for scale t > 2**24: sign + geometric G in binary chunks; reject (-, 0).

    G = sum_j C_j 2**(20 j) + T 2**(20 J), with C_j ~ truncated geometric on {0..2**20-1} of ratio
    q**(2**(20 j)) and T geometric of ratio q**(2**(20 J)), all independent (the binary digits of a
    geometric variable are independent). Then X = +-G with the pair (negative, 0) rejected and
    redrawn (CKS 2020, Algorithm 2): P[X = k] proportional to q**|k|.

    Low chunk, scale s > 2**24 > n = 2**20: C = ceil(c(W)) - 1, c(W) = -s log1p(-W A),
    A = 1 - exp(-n/s) < 1/16; log1p is well conditioned there (condition number < 1.1), so
    |f - c| <= (u + 4) 2**-52 f, and c moves by < 2 n 2**-63 over the interval of W.
    Top chunk, scale s <= 2**24: T = ceil(-s ln V) - 1, error as in the direct path.
    """

    def __init__(self, t: float) -> None:
        self.lows: list[Any] = []
        lows = self.lows
        s = t
        while s > _DIRECT_MAX:
            lows.append(s)
            s = s / float(1 << _CHUNK_BITS)  # exact: power of two
        self.top_s = s
        nlow = 1 << _CHUNK_BITS
        ar = _arith(60)
        self.amps = [_to_float(ar.sub(ar.const(1), ar.exp(ar.neg(ar.div(ar.const(nlow), ar.const(x)))))) for x in lows]
        self.encl_low = [_enclose_low(x, nlow) for x in lows]
        self.encl_top = _enclose_top(s)
        self.low_slack = 4.0 * nlow * _TWO_M63
        self._tls = threading.local()

    def _draw(self, cnt: int, rng: RandomSource) -> tuple[np.ndarray, np.ndarray]:
        f, hi, lo, slack, ok, _ = _work(self._tls).view(cnt)
        nw = len(self.lows) + 1
        words = rng.uint64(cnt * nw).reshape(nw, cnt)
        neg = words[0] >> np.uint64(63) == 1
        g = np.zeros(cnt, dtype=np.int64)
        for j, (s, amp) in enumerate(zip(self.lows, self.amps, strict=True)):
            k = words[j] & _MASK63
            with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
                np.multiply(k, -_TWO_M63 * amp, out=f)  # -W A (one rounding of float(k), one product)
                np.log1p(f, out=f)
                f *= -s
                m = _verified_ceil(f, self.low_slack, hi, lo, ok)
                c = m.astype(np.int64)
            if not ok.all():
                for i in np.flatnonzero(~ok).tolist():
                    c[i] = _slow_ceil(int(k[i]), 63, rng, self.encl_low[j])
            c <<= _CHUNK_BITS * j
            g += c
        k = words[-1]
        s = self.top_s
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            np.multiply(k, 1.0, out=slack)
            np.multiply(slack, _TWO_M64, out=f)
            np.divide(s, slack, out=slack)
            slack += _ETA * s
            np.log(f, out=f)
            f *= -s
            m = _verified_ceil(f, slack, hi, lo, ok)
            c = m.astype(np.int64)
        if not ok.all():
            for i in np.flatnonzero(~ok).tolist():
                c[i] = _slow_ceil(int(k[i]), 64, rng, self.encl_top)
        c <<= _CHUNK_BITS * len(self.lows)
        g += c
        return neg, g

    def fill(self, out: np.ndarray, rng: RandomSource) -> None:
        todo = np.arange(out.size)
        while todo.size:
            neg, g = self._draw(todo.size, rng)
            rej = neg & (g == 0)
            np.negative(g, out=g, where=neg)
            out[todo] = g
            todo = todo[rej]


@functools.lru_cache(maxsize=256)
def _laplace_sampler(t: float) -> _DirectLaplace | _ChunkedLaplace:
    """The sampler for scale ``t`` (its constants are computed once per scale; samplers are stateless)."""
    return _DirectLaplace(t) if t <= _DIRECT_MAX else _ChunkedLaplace(t)


def _direct_sampler(t: float) -> _DirectLaplace:
    sampler = _laplace_sampler(t)
    assert isinstance(sampler, _DirectLaplace)
    return sampler


def _dlap(t: float, n: int, rng: RandomSource) -> np.ndarray:
    out = np.empty(n, dtype=np.int64)
    for _ in _noise_blocks(False, t, n, rng, out):
        pass
    return out


def _noise_blocks(gauss: bool, s: float, n: int, rng: RandomSource, out: np.ndarray | None = None,
                  bounds: list[int | None] | None = None) -> Iterator[np.ndarray]:
    """``n`` iid draws of the discrete Laplace (scale s) or Gaussian (sigma s), as consecutive int64 blocks of at
    most ``_BLOCK`` (each valid until the next is asked for), so that a caller can use each while it is in cache;
    with ``out`` (int64, size n) the blocks are its consecutive slices, filled in place. With ``bounds`` (a list),
    ``bounds[0]`` is set, before each block is yielded, to an upper bound on the magnitudes of that block's values
    (None where the sampler does not give one).

    Which exact sampler: the discrete Laplace of scale <= 2**24 always uses :class:`_DirectLaplace` (one log per
    sample is as fast as the table there), block by block as before; calls of at least ``_TABLE_MIN`` samples
    otherwise use the table samplers (:class:`_TableSampler`), smaller ones the previous samplers (chunked
    Laplace, CKS Gaussian), whose seeded values are unchanged. All have exactly the same law.
    """
    sampler: _DirectLaplace | _TableSampler
    if bounds is None:
        bounds = [None]
    if (not gauss and s <= _DIRECT_MAX) or n >= _TABLE_MIN:
        if not gauss and s <= _DIRECT_MAX:
            sampler, blk = _direct_sampler(s), _BLOCK
        else:
            sampler, blk = _table_sampler(gauss, s, _ETA), _TFILL
        buf = np.empty(min(n, blk), dtype=np.int64) if out is None else out
        for start in range(0, n, blk):
            b = buf[: min(blk, n - start)] if out is None else out[start : start + blk]
            bounds[0] = sampler.fill(b, rng)
            yield b
        return
    bounds[0] = None
    if gauss:
        res = _dgauss_cks(s, n, rng)
    else:
        chunked = _laplace_sampler(s)
        res = np.empty(n, dtype=np.int64)
        for start in range(0, n, _BLOCK):
            chunked.fill(res[start : start + _BLOCK], rng)
    if out is not None:
        out[...] = res
        yield out
    else:
        yield res


_BERN_BITS = 32  # the 2**-32-wide interval of U contains exp(-gamma) with probability 2**-32


def _bernoulli_block(
    gt: np.ndarray, gerr: np.ndarray | float, rng: RandomSource, exact: Callable[[int], Fraction]
) -> np.ndarray:
    """``U < exp(-gamma_i)`` for each i, where ``|gamma_i - gt[i]| <= gerr[i]`` rigorously and
    ``exact(i)`` is the exact rational gamma_i (used only in the slow path).

    U < exp(-gamma) iff -ln U > gamma. With U in [k, k+1)/2**32: f = -fl(log(k 2**-32)) is within
    2**-52 + (u + 1) 2**-52 f of -ln(k/2**32), and -ln U moves by <= ln(1 + 1/k) <= 1/k.
    """
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        w = rng.uint32(gt.size)
        kf = w.astype(np.float64)
        fu = np.log(kf * 2.0**-_BERN_BITS)
        np.negative(fu, out=fu)
        err = fu + 1.0
        err *= _ETA
        err += 1.0 / kf
        yes = fu - err > gt + gerr
        no = fu + err <= gt - gerr
    done = yes | no
    if not done.all():
        for i in np.flatnonzero(~done).tolist():
            yes[i] = _slow_bernoulli(int(w[i]), _BERN_BITS, rng, exact(i))
    return yes


# --------------------------------------------------------------------------------------------
# Table samplers (issue #16): alias-table proposal, integer squeeze, no transcendental in the common case
# --------------------------------------------------------------------------------------------

_TABLE_MIN = 1 << 14  # calls drawing at least this many samples use the table samplers (same law, cached tables)
_TFILL = 1 << 17  # samples per round of the table samplers (one source request; the rare cases decided together)
_TSUB = 1 << 14  # candidates per vectorized pass (the working set stays in cache)
_T_C = 14  # bits of an alias threshold: each slot holds 2**14 units of weight
_T_DIV = 32  # bin width w = the largest power of two <= scale / 32 (at least 1)
_T_R_MIN = 20  # fewest bits of V in the acceptance test
_T_MAX_SLOT_BITS = 11  # at most 2**11 alias slots
_T_GUIDE_BITS = 15  # the guide table has 2**15 entries (slot and the top 15 - a bits of the threshold)
_T_TAIL_W = 0.5  # the table extends until each tail weighs at most this: 1 unit, a tail candidate per 2**(a + 14)


def _slow_below(num: int, nbits: int, rng: RandomSource, enclose: Callable[[_Arith], _Iv]) -> bool:
    """Exact ``U < c`` for the constant ``c`` enclosed by ``enclose(ar)``, U in [num, num+1) / 2**nbits."""
    while True:
        ar = _arith(_prec_for(nbits))
        c_lo, c_hi = enclose(ar)
        u_lo, u_hi = ar.uniform(num, nbits)
        if u_hi <= c_lo:
            return True
        if u_lo >= c_hi:
            return False
        num = (num << 64) | _next_word(rng)
        nbits += 64


def _alias(weights: list[int], cap: int) -> tuple[list[int], list[int]]:
    """Walker's alias table in exact integers: ``len(weights)`` slots of capacity ``cap``, sum(weights) = slots*cap.

    Slot j keeps its own bin with ``thr[j]`` units of ``cap`` and gives the rest to bin ``alt[j]``, so a uniform
    slot and a uniform threshold in [0, cap) choose bin b with probability exactly weights[b] / sum(weights).
    """
    m = len(weights)
    left = list(weights)
    thr = [cap] * m
    alt = list(range(m))
    small = [i for i in range(m) if left[i] < cap]
    large = [i for i in range(m) if left[i] >= cap]
    while small and large:
        lo, hi = small.pop(), large.pop()
        thr[lo], alt[lo] = left[lo], hi
        left[hi] -= cap - left[lo]
        (small if left[hi] < cap else large).append(hi)
    # integer arithmetic: whatever is left holds exactly cap (no rounding residue)
    assert all(left[i] == cap for i in small + large)
    return thr, alt


class _TableSampler:
    """Exact symmetric discrete law ``P[X = x]`` proportional to ``f(x) = exp(-phi(|x|))``, by rejection from a
    step envelope sampled with an alias table; no transcendental function in the common case.

    ``phi(m) = m / s`` (discrete Laplace of scale s) or ``m**2 / (2 s**2)`` (discrete Gaussian of sigma s), s the
    exact rational value of the float.

    The proposal. With ``w`` a power of two (the largest <= s/32, at least 1) and ``T = N w``, the integers of
    ``[-T, T)`` are cut into 2N bins of width w: bin b is ``{b w - T, ..., b w - T + w - 1}``. With an integer
    ``lam``, bin b gets the integer weight ``W_b >= lam max_bin f`` (f is unimodal, so the max is at the bin's end
    nearer 0), each tail (``x >= T`` and ``x <= -T - 1``) a weight ``W_tail >= lam f(t0) / (w (1 - q_e))``
    (below), and a *reject* bin the rest of ``Total = 2**(a + 14)``. A candidate is: bin b from the alias table
    (``a`` bits for the slot and 14 for the threshold, exact integer arithmetic, so ``P[b] = W_b / Total``
    exactly), a uniform offset ``j`` in [0, w) (k bits, ``x = b w + j - T``) and a uniform ``V`` in [0, 1) (r
    bits, refined with more words when needed); it is accepted iff ``V < lam f(x) / W_b``. So each main-bin x is
    proposed and accepted with probability ``lam f(x) / (w Total)``, proportional to f(x). A tail candidate is
    ``x = +-(t0 + G)`` (t0 = T, or T + 1 for the negative tail) with G geometric, ``P[G >= g] = exp(-g/s_e)``
    (``s_e = s`` for the Laplace, ``s_e = s**2 / t0`` exactly for the Gaussian, so that the envelope
    ``e = f(t0) exp(-G/s_e) >= f(t0 + G)``), accepted with probability ``kappa exp(-Delta)``,
    ``kappa = lam f(t0) / (w W_tail (1 - q_e)) <= 1``, ``q_e = exp(-1/s_e)``,
    ``Delta = phi(t0 + G) - phi(t0) - G/s_e >= 0`` (0 for the Laplace, ``G**2 / (2 s**2)`` for the Gaussian):
    again ``lam f(x) / (w Total)``. Rejected candidates are dropped (the accepted ones are iid with the exact
    law; the surplus of each round is dropped too, see :meth:`fill`). The reject bin keeps each table's weights
    integers.

    The squeeze. ``R_b`` is an integer with ``R_b / 2**r <= lam f_lo(x_far) / W_b``, ``x_far`` the bin's end
    farther from 0 and ``f_lo`` a rigorous lower bound of f: ``v < R_b`` proves
    ``V < (v + 1) / 2**r <= lam f(x) / W_b`` (one integer compare). About 97% of the candidates are decided so
    (all but a few per million when w = 1); the tail and reject bins have ``R = 0``.

    The band (undecided main-bin candidates, ~3%): ``psi = fl(lw_b fl(exp(-phi_f)))``, ``lw_b = fl(lam / W_b)``,
    with ``phi_f`` the float value of phi (``fl(|x|) fl(1/s)``, squared and halved for the Gaussian: at most 7
    roundings, so ``|phi_f - phi| <= 2**-50 phi``). With a libm error of u ulp,
    ``|psi - lam f(x) / W_b| <= psi (2**-49.9 phi + (u + 4) 2**-52)``, below ``psi delta``,
    ``delta = _ETA (2 + phi_f)``, for u <= ~500. Accept if ``(v + 1) 2**-r <= psi (1 - delta)``, reject if
    ``v 2**-r >= psi (1 + delta)`` (these products' own roundings, 2**-53, lie in the slack of delta), else the
    exact slow path (:func:`_slow_below`: interval arithmetic in decimal, refining V with 64-bit words). A NaN
    (never expected) is undecided.

    The tables use the same bounds: ``f_hi = fl(fl(exp(-phi_f)) (1 + delta)) >= f`` and
    ``f_lo = fl(fl(exp(-phi_f)) (1 - delta)) <= f``; ``W_b = floor(fl(lam f_hi)) + 2 > lam f_hi`` (the product's
    rounding is < 2**-27 at lam f <= 2**25); ``R_b = floor(fl(fl(lam f_lo) / W_b) 2**r (1 - 2**-50)) - 1`` (three
    roundings of 2**-53 each, covered by the 2**-50 and the -1); ``W_tail`` and ``kappa`` are computed in decimal
    interval arithmetic. Bits per candidate: one 64-bit word, high to low ``slot (a) | thr_top (eb) | V (r) |
    thr_rest (14 - eb) | j (k)`` (the threshold is ``thr_top 2**(14 - eb) + thr_rest``) while ``k + 20 <= 50 - a``,
    else a second word whose top k bits are j (and word A has no j field). All fields are disjoint bits of
    uniform words, so they are independent and uniform. Tables are built once per (law, scale, _ETA) (cached,
    ~1-20 ms).

    The guide. The bin of a candidate is read from a table indexed by ``i``, the top ``a + eb`` bits of word A
    (the slot and ``thr_top``; ``eb = 15 - a``): exact wherever that range of thresholds lies on one side of the
    slot's threshold; the other entries (< 5%) give the pseudo-bin ``amb`` whose squeeze bound is 0, and those
    candidates are redone with the full alias compare (same words, same decision as the alias table: the guide
    only skips compares whose result it knows). Because V sits directly below ``i`` and above every other bit, the
    squeeze is one compare of the whole word with ``cg[i] = i 2**sh + R_b 2**sh_v`` (``sh = 64 - a - eb``,
    ``sh_v = sh - r``): ``word < cg[i]`` iff ``V < R_b``; ``x = bg[i] + j`` with ``bg[i] = b w - T``.
    So the common case costs a shift, two gathers, a compare, a mask and an add per candidate.
    """

    def __init__(self, gauss: bool, s: float, eta: float) -> None:
        self.gauss, self.s, self.eta = gauss, s, eta
        self.s_q = Fraction(s)
        k = 0
        while float(2 ** (k + 1)) <= s / _T_DIV:
            k += 1
        self.k, self.w = k, 1 << k
        self.inv_s = 1.0 / s
        w = self.w
        nmax = 8
        while True:  # f at the bin starts, far enough for f < e**-60
            phi = self._phi(np.arange(nmax + 1, dtype=np.float64) * float(w))
            if phi[-1] > 60.0 or nmax >= 1 << 16:
                break
            nmax *= 2
        with np.errstate(under="ignore"):
            fb = np.exp(-phi)
        big_f = (2.0 * float(fb.sum()) - (1.0 if w == 1 else 0.0)) * 1.001 + 1e-300  # both signs, with room
        cnt = np.arange(fb.size, dtype=np.float64)
        for a in range(2, _T_MAX_SLOT_BITS + 1):
            total = 1 << (a + _T_C)
            lam = max(1, int(total * (1.0 - 2.0**-9) / big_f))
            # N: the first bin count whose (over-estimated) tail weight is at most 4 fixes a; then N grows, while
            # the 2**a slots have room, up to the first count whose tail weight is at most _T_TAIL_W (rarer tails)
            se = s * np.ones_like(cnt) if not gauss else s * s / np.maximum(cnt, 1.0) / float(w)
            with np.errstate(over="ignore", invalid="ignore"):
                tail_w = lam * fb * (se / float(w) + 1.0) * 1.001
            fits = np.flatnonzero((tail_w <= 4.0) & (cnt >= 1))
            n_bins = int(fits[0]) if fits.size else fb.size
            if 2 * n_bins + 3 <= 1 << a:
                light = np.flatnonzero((tail_w <= _T_TAIL_W) & (cnt >= 1))
                n_light = int(light[0]) if light.size else fb.size
                n_bins = max(n_bins, min(n_light, ((1 << a) - 3) // 2))
                break
        else:  # pragma: no cover - s <= 2**50 needs at most 2**11 slots
            raise InvalidParameter("scale", "is outside the range of the table sampler")
        self.n_bins, self.total, self.a = n_bins, total, a
        while True:  # a wide _ETA (tests) inflates the weights: lower lam until they fit
            self.lam = lam
            used = self._build(total, lam, n_bins)
            if used <= total:
                break
            lam = max(1, min(lam - 1, int(lam * total / used * (1.0 - 2.0**-7))))
        # the rejection rate: a candidate is accepted with probability lam Z / (w Total), Z = sum of f over the
        # integers (a float estimate: it only sizes the margin of extra candidates)
        if gauss:
            m = np.arange(1.0, math.ceil(40.0 * s) + 2.0) if s < 8.0 else None
            z = 1.0 + 2.0 * float(np.exp(-self._phi(m)).sum()) if m is not None else s * math.sqrt(2.0 * math.pi)
        else:
            one_m_q = -math.expm1(-1.0 / s)
            z = (2.0 - one_m_q) / one_m_q
        self.p_rej = min(0.5, max(2.0**-20, 1.0 - float(self.lam) * z / (float(w) * float(total))))
        self._tls = threading.local()

    def _phi(self, mf: np.ndarray) -> np.ndarray:
        """Float phi of magnitudes ``mf`` (see the class docstring for its error)."""
        with np.errstate(over="ignore", invalid="ignore"):
            y = mf * self.inv_s
            if self.gauss:
                y *= y
                y *= 0.5
        return y

    def _phi_exact(self, m: int) -> Fraction:
        if self.gauss:
            return Fraction(m * m) / (2 * self.s_q * self.s_q)
        return Fraction(m) / self.s_q

    def _f_bounds(self, mf: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        phi = self._phi(mf)
        with np.errstate(under="ignore", over="ignore", invalid="ignore"):
            e = np.exp(-phi)
            d = self.eta * (2.0 + phi)
            hi = e * (1.0 + d)
            lo = e * (1.0 - d)
        return np.where(hi >= 0.0, hi, np.inf), np.where(lo > 0.0, lo, 0.0)

    def _tail_weight(self, t0: int) -> tuple[int, Fraction]:
        sq = self.s_q
        s_e = sq * sq / t0 if self.gauss else sq
        ar = _arith(60)
        f_t = ar.exp(ar.neg(ar.const(self._phi_exact(t0))))
        one_m_q = ar.sub(ar.const(1), ar.exp(ar.neg(ar.div(ar.const(1), ar.const(s_e)))))
        iv = ar.div(ar.mul(ar.const(self.lam), f_t), ar.mul(ar.const(self.w), one_m_q))
        return int(iv[1].to_integral_value(rounding=ROUND_FLOOR)) + 1, s_e

    def _build(self, total: int, lam: int, n_bins: int) -> int:
        """The tables for this lam; returns the weight they use (> total: lam too large, nothing kept)."""
        w, a, t_int = self.w, self.a, n_bins * self.w
        self.t_int = t_int
        # magnitudes of the near and far ends of the bins b = 0 .. 2N-1 (x = b w - T .. b w - T + w - 1)
        lo_x = np.arange(2 * n_bins, dtype=np.float64) * float(w) - float(t_int)
        hi_x = lo_x + float(w - 1)
        near = np.where(lo_x >= 0.0, lo_x, -hi_x)
        far = np.where(lo_x >= 0.0, hi_x, -lo_x)
        f_hi, _ = self._f_bounds(near)
        _, f_lo = self._f_bounds(far)
        with np.errstate(over="ignore", invalid="ignore"):
            wts = np.floor(f_hi * float(lam)) + 2.0
        if not np.all(wts < 2.0**40):  # pragma: no cover - lam f <= 2**25
            raise AssertionError("table weight out of range")
        weights = wts.astype(np.int64)
        self.s_e: list[Fraction] = []
        self.t0s = [t_int, t_int + 1]  # the positive tail starts at T, the negative one at -(T + 1)
        w_tails = []
        for t0 in self.t0s:
            wt, s_e = self._tail_weight(t0)
            w_tails.append(wt)
            self.s_e.append(s_e)
        main = int(weights.sum())
        rest = total - main - sum(w_tails)
        if rest < 0:
            return main + sum(w_tails)
        slots = 1 << a
        allw = [*weights.tolist(), *w_tails, rest] + [0] * (slots - 2 * n_bins - 3)
        thr, alt = _alias(allw, 1 << _T_C)
        self.thr_s = np.array(thr, dtype=np.int64) + (np.arange(slots, dtype=np.int64) << _T_C)
        self.alt = np.array(alt, dtype=np.int64)
        self.base = np.arange(slots + 1, dtype=np.int64) * w - t_int  # x = base[b] + j
        # guide table over (slot, top eb bits of the threshold): the bin when the whole threshold range lies on one
        # side of the slot's threshold, else the pseudo-bin amb = slots (whose squeeze bound is 0)
        eb = max(0, min(_T_C, _T_GUIDE_BITS - a))
        step = 1 << (_T_C - eb)
        q_lo = np.arange(1 << eb, dtype=np.int64) * step
        thr_a = np.array(thr, dtype=np.int64)[:, None]
        alt_a = np.array(alt, dtype=np.int64)[:, None]
        own = np.arange(slots, dtype=np.int64)[:, None]
        guide = np.where(q_lo[None, :] + step <= thr_a, own, np.where(q_lo[None, :] >= thr_a, alt_a, slots))
        self.guide = guide.reshape(-1)
        self.sh_guide = 64 - a - eb
        self.amb = slots
        self.tail_bins = (2 * n_bins, 2 * n_bins + 1)
        self.w_tails = w_tails
        # bit layout of word A, high to low: slot (a) | the top eb threshold bits | V (r) | the other 14 - eb
        # threshold bits | j (k; in the top k bits of word B instead when k is large). The guide index is the top
        # a + eb bits, and every bit below it is independent of the bin: V sits above the rest of the word, so
        # ``wa < idx 2**sh + R 2**sh_v`` iff V < R (one compare of the whole word, no mask)
        r1 = 64 - a - _T_C
        self.r1 = r1
        self.one_word = self.k + _T_R_MIN <= r1
        self.r = r1 - self.k if self.one_word else r1
        self.eb = eb
        self.sh_v = (self.k if self.one_word else 0) + _T_C - eb  # V = (wa >> sh_v) mod 2**r
        with np.errstate(over="ignore", invalid="ignore"):
            ratio = f_lo * float(lam) / wts * (2.0**self.r * (1.0 - 2.0**-50))
        rint = np.maximum(np.floor(ratio) - 1.0, 0.0).astype(np.int64)
        self.rint = np.concatenate([rint, np.zeros(slots + 1 - 2 * n_bins, dtype=np.int64)])
        self._squeeze_table()
        self.lw = np.concatenate([float(lam) / wts, np.zeros(slots + 1 - 2 * n_bins)])
        self.weights = weights
        self._kappa_cache: dict[tuple[int, int], _Iv] = {}
        return total - rest

    def _kappa(self, side: int, ar: _Arith) -> _Iv:
        key = (side, ar.prec)
        iv = self._kappa_cache.get(key)
        if iv is None:
            t0, s_e = self.t0s[side], self.s_e[side]
            f_t = ar.exp(ar.neg(ar.const(self._phi_exact(t0))))
            one_m_q = ar.sub(ar.const(1), ar.exp(ar.neg(ar.div(ar.const(1), ar.const(s_e)))))
            iv = ar.div(ar.mul(ar.const(self.lam), f_t), ar.mul(ar.const(self.w * self.w_tails[side]), one_m_q))
            self._kappa_cache[key] = iv
        return iv

    def _tail(self, side: int, rng: RandomSource) -> int | None:
        """One tail candidate: +-(t0 + G), accepted with probability kappa exp(-Delta); None if rejected."""
        t0, s_e = self.t0s[side], self.s_e[side]

        def enclose_g(ar: _Arith, u: _Iv) -> _Iv:
            return ar.mul(ar.const(s_e), ar.neg(ar.ln(u)))

        g = _slow_ceil(0, 0, rng, enclose_g)
        m = t0 + g
        delta = self._phi_exact(m) - self._phi_exact(t0) - g / s_e

        def enclose_p(ar: _Arith) -> _Iv:
            return ar.mul(self._kappa(side, ar), ar.exp(ar.neg(ar.const(delta))))

        if not _slow_below(0, 0, rng, enclose_p):
            return None
        return m if side == 0 else -m

    def _band_exact(self, b: int, x: int) -> Callable[[_Arith], _Iv]:
        c = Fraction(self.lam, int(self.weights[b]))
        phi = self._phi_exact(abs(x))

        def enclose(ar: _Arith) -> _Iv:
            return ar.mul(ar.const(c), ar.exp(ar.neg(ar.const(phi))))

        return enclose

    def _squeeze_table(self) -> None:
        """The per-guide-entry tables ``cg[i] = i 2**sh + R_b 2**sh_v`` and ``bg[i] = base_b`` for ``b = guide[i]``
        (``R = 0`` for the pseudo-bin amb, the tails and the reject bin: always undecided)."""
        g = self.guide
        self.cg = (np.arange(g.size, dtype=np.uint64) << np.uint64(self.sh_guide)) + (
            self.rint.take(g).astype(np.uint64) << np.uint64(self.sh_v))
        self.bg = self.base.take(g)

    def _margin(self, n: int) -> int:
        """Extra candidates drawn with ``n`` so that their accepted ones fill the rejected places of the first n
        (short with probability about 3e-7; then a further round does it): efficiency only, not the law."""
        p = self.p_rej
        return int((n * p + 5.0 * math.sqrt(n * p) + 8.0) / (1.0 - p)) + 1

    def _scratch(self, cnt: int, e: int = 0) -> _TWork:
        """This thread's buffers for ``cnt`` candidates of which ``e`` extra (grown on demand)."""
        sc: _TWork | None = getattr(self._tls, "work", None)
        if sc is None or sc.wa.size < cnt or sc.extra.size < e or sc.idx.size < _TSUB:
            sc = self._tls.work = _TWork(cnt, e, not self.one_word)
        return sc

    def _candidates(self, wa: np.ndarray, wb: np.ndarray | None, out: np.ndarray, extra: np.ndarray, sc: _TWork,
                    rng: RandomSource) -> tuple[np.ndarray, int]:
        """One candidate per word of ``wa`` (and ``wb``): the first ``out.size`` written to ``out``, the others to
        ``extra``. Returns the indices (into out then extra) of the rejected ones, whose entries are meaningless,
        and an upper bound on ``|x|`` over the accepted ones."""
        cnt, n = wa.size, out.size
        und_l: list[np.ndarray] = []
        lo = 0
        while lo < cnt:  # cache-sized passes over out, then over extra
            hi = min(lo + _TSUB, n if lo < n else cnt)
            self._pass(wa[lo:hi], None if wb is None else wb[lo:hi], out[lo:hi] if lo < n else extra[lo - n:hi - n],
                       sc, lo, und_l)
            lo = hi
        und = np.concatenate(und_l) if und_l else np.empty(0, dtype=np.int64)
        bound = self.t_int
        if not und.size:
            return und, bound
        wu = wa[und]
        bu = self.guide.take((wu >> np.uint64(self.sh_guide)).view(np.int64))
        amb = np.flatnonzero(bu == self.amb)
        if amb.size:  # the full alias compare: slot and all 14 threshold bits
            wm = wu[amb]
            slot = (wm >> np.uint64(64 - self.a)).view(np.int64)
            rest = _T_C - self.eb
            top = ((wm >> np.uint64(self.sh_guide)) & np.uint64((1 << self.eb) - 1)).view(np.int64)
            low = ((wm >> np.uint64(self.sh_v - rest)) & np.uint64((1 << rest) - 1)).view(np.int64)
            full = (slot << _T_C) | (top << rest) | low
            bu[amb] = np.where(full < self.thr_s.take(slot), slot, self.alt.take(slot))
        xu = self.base.take(bu)
        if self.k:
            xu += ((wu & np.uint64(self.w - 1)) if wb is None else (wb[und] >> np.uint64(64 - self.k))).view(np.int64)
        vu = ((wu >> np.uint64(self.sh_v)) & np.uint64((1 << self.r) - 1)).view(np.int64)
        ok = vu < self.rint.take(bu)  # the squeeze with the true bin (only amb candidates can pass it here)
        rest_i = np.flatnonzero(~ok)
        if rest_i.size:
            xr = xu[rest_i]
            acc, tb = self._undecided(bu[rest_i], xr, vu[rest_i], rng)
            ok[rest_i] = acc
            xu[rest_i] = xr
            bound = max(bound, tb)
        split = int(np.searchsorted(und, n))
        out[und[:split]] = xu[:split]
        extra[und[split:] - n] = xu[split:]
        return und[~ok], bound

    def _pass(self, wa: np.ndarray, wb: np.ndarray | None, dest: np.ndarray, sc: _TWork, off: int,
              und_l: list[np.ndarray]) -> None:
        """The vectorized part for the words ``wa`` (and ``wb``): the guide's bin, the squeeze (one gather and one
        compare of the whole word) and the value ``x = base_b + j`` into ``dest``; appends the positions (plus
        ``off``) of the candidates the squeeze did not accept."""
        m = wa.size
        idx = sc.idx[:m]
        np.right_shift(wa, np.uint64(self.sh_guide), out=idx.view(np.uint64))
        tk = sc.tk[:m]
        np.take(self.cg, idx, out=tk, mode="clip")  # (idx is in range: clip only avoids numpy's buffered copy)
        ge = sc.ge[:m]
        np.greater_equal(wa, tk, out=ge)  # not proven by the squeeze (amb, tails, reject, band)
        u = np.flatnonzero(ge)
        if u.size:
            und_l.append(u + off)
        np.take(self.bg, idx, out=dest, mode="clip")
        if self.k:
            j = idx.view(np.uint64)
            if wb is None:
                np.bitwise_and(wa, np.uint64(self.w - 1), out=j)
            else:
                np.right_shift(wb, np.uint64(64 - self.k), out=j)
            dest += idx

    def _undecided(self, bu: np.ndarray, xu: np.ndarray, vu: np.ndarray, rng: RandomSource) -> tuple[np.ndarray, int]:
        """Decide the candidates the squeeze left open (main bins: the band; tails; reject): the accepted mask
        (tail values are written into ``xu``) and a bound on the accepted tail values' magnitudes."""
        ok = np.zeros(bu.size, dtype=bool)
        bound = 0
        tb0 = self.tail_bins[0]
        for i in np.flatnonzero((bu == tb0) | (bu == tb0 + 1)).tolist():
            t = self._tail(int(bu[i]) - tb0, rng)
            if t is not None:
                xu[i] = t
                ok[i] = True
                bound = max(bound, abs(t))
        main = np.flatnonzero(bu < tb0)
        if not main.size:
            return ok, bound
        bm, xm = bu[main], xu[main]
        vf = vu[main].astype(np.float64)
        phi = self._phi(np.abs(xm).astype(np.float64))
        with np.errstate(under="ignore", over="ignore", invalid="ignore"):
            psi = np.exp(-phi)
            psi *= self.lw.take(bm)
            d = self.eta * (2.0 + phi)
            yes = (vf + 1.0) * 2.0**-self.r <= psi * (1.0 - d)
            no = vf * 2.0**-self.r >= psi * (1.0 + d)
        ok[main[yes]] = True
        for i in np.flatnonzero(~(yes | no)).tolist():
            if _slow_below(int(vu[main[i]]), self.r, rng, self._band_exact(int(bm[i]), int(xm[i]))):
                ok[main[i]] = True
        return ok, bound

    def fill(self, out: np.ndarray, rng: RandomSource) -> int:
        """Fill ``out`` (int64, 1-D) with iid draws; returns an upper bound on ``|out|``.

        ``n + e`` candidates from one request of words (``e`` from :meth:`_margin`): the first n go to ``out``,
        and the places whose candidate was rejected (the *holes*) get the accepted ones among the other e, in
        order (a further round, recursively, if those are too few). Every entry is an accepted candidate and which
        candidate fills which place depends only on the acceptance pattern, which is independent of the accepted
        candidates' values, so the entries are iid with the exact law."""
        n = out.size
        if not n:
            return 0
        e = self._margin(n)
        cnt = n + e
        sc = self._scratch(cnt, e)
        wa = sc.wa[:cnt]
        _fill_words(rng, wa)
        wb = None
        if not self.one_word:
            wb = sc.wb[:cnt]
            _fill_words(rng, wb)
        extra = sc.extra[:e]
        rej, bound = self._candidates(wa, wb, out, extra, sc, rng)
        if not rej.size:
            return bound
        split = int(np.searchsorted(rej, n))
        holes = rej[:split]
        if holes.size:
            good = np.delete(extra, rej[split:] - n)
            take = min(good.size, holes.size)
            out[holes[:take]] = good[:take]
            if take < holes.size:  # rare: the scratch buffers are not used any more, a further round may reuse them
                more = np.empty(holes.size - take, dtype=np.int64)
                bound = max(bound, self.fill(more, rng))
                out[holes[take:]] = more
        return bound


class _TWork:
    """One thread's buffers for a table sampler (sized for the largest round so far)."""

    def __init__(self, cnt: int, e: int, two_words: bool) -> None:
        self.wa = np.empty(cnt, dtype=np.uint64)
        self.wb = np.empty(cnt if two_words else 0, dtype=np.uint64)
        self.extra = np.empty(e, dtype=np.int64)
        self.idx = np.empty(_TSUB, dtype=np.int64)
        self.tk = np.empty(_TSUB, dtype=np.uint64)
        self.ge = np.empty(_TSUB, dtype=bool)


def _fill_words(rng: RandomSource, buf: np.ndarray) -> None:
    """Fill the word array ``buf`` from ``rng`` (one request, the same bytes ``rng.uint64(buf.size)`` would give)
    without allocating a new array per request."""
    if buf.size:
        rng._fill_into(buf.data.cast("B"))


@functools.lru_cache(maxsize=64)
def _table_sampler(gauss: bool, s: float, eta: float) -> _TableSampler:
    return _TableSampler(gauss, s, eta)


#: Most samples one call may draw (about 1 GB of int64 with the samplers' temporaries).
MAX_SAMPLES = 2**27


def _size(size: Any) -> tuple[int, ...]:
    if isinstance(size, tuple):
        shape = tuple(check.integer("size", s, minimum=0) for s in size)
    elif isinstance(size, list):
        raise WrongType("size", "an integer or a tuple of integers")
    else:
        shape = (check.integer("size", size, minimum=0),)
    total = 1
    for s in shape:
        total *= s
    if total > MAX_SAMPLES:
        raise InvalidParameter("size", f"must have at most {MAX_SAMPLES} elements in all")
    return shape


def _scale(name: str, value: Any) -> float:
    v = check.positive(name, value)
    if v < _MIN_SCALE or v > _MAX_SCALE:
        raise InvalidParameter(name, "must be between 2**-400 and 2**50")
    return v


# --------------------------------------------------------------------------------------------
# Public samplers
# --------------------------------------------------------------------------------------------


def sample_bernoulli_exp(gamma: ArrayLike, rng: RandomSource | None = None) -> np.ndarray:
    """Exact Bernoulli(exp(-gamma)) draws, elementwise.

    ``gamma``: array-like of finite floats >= 0; each float is taken as its exact rational
    value. Returns a bool array of the same shape (0-d for a scalar): ``True`` with probability
    exactly ``exp(-gamma)``. Uses one 32-bit word per element (more only in the rare exact
    slow path).
    """
    if isinstance(gamma, (str, bytes)) or gamma is None:
        raise WrongType("gamma", "an array of real numbers")
    try:
        g = check.finite_array("gamma", gamma, allow_empty=True)
    except InvalidData:
        raise InvalidParameter("gamma", "must contain only finite numbers") from None
    if g.size and not np.all(g >= 0):
        raise InvalidParameter("gamma", "must be >= 0")
    rng = _source.resolve(rng)
    flat = g.reshape(-1)
    out = np.empty(flat.size, dtype=bool)
    for start in range(0, flat.size, _BLOCK):
        gt = flat[start : start + _BLOCK]
        def exact(i: int, gt: np.ndarray = gt) -> Fraction:
            return Fraction(float(gt[i]))

        out[start : start + gt.size] = _bernoulli_block(gt, 0.0, rng, exact)
    return out.reshape(g.shape)


def sample_discrete_laplace(scale: float, size: int | tuple[int, ...], rng: RandomSource | None = None) -> np.ndarray:
    """Exact discrete Laplace draws: ``P[X = k] = (1-q)/(1+q) q**|k|`` with ``q = exp(-1/scale)``.

    ``scale`` is a float in [2**-400, 2**50], taken as its exact rational value; ``size`` an int
    or a tuple. Returns an int64 array of shape ``size``. Variance ``2q/(1-q)**2`` (~ 2 scale**2).
    """
    t = _scale("scale", scale)
    shape = _size(size)
    rng = _source.resolve(rng)
    n = math.prod(shape)
    return _dlap(t, n, rng).reshape(shape)


def _dgauss(sigma: float, n: int, rng: RandomSource) -> np.ndarray:
    """``n`` exact discrete Gaussian draws (:func:`_noise_blocks` picks the sampler)."""
    out = np.empty(n, dtype=np.int64)
    for _ in _noise_blocks(True, sigma, n, rng, out):
        pass
    return out


def _dgauss_cks(sigma: float, n: int, rng: RandomSource) -> np.ndarray:
    """CKS 2020 Algorithm 3, block by block (accepted candidates are iid; surplus ones are dropped)."""
    t = math.floor(sigma) + 1  # exact (sigma <= 2**50)
    tf = float(t)
    s2 = sigma * sigma
    s2t = s2 / tf
    half_inv = 0.5 / s2
    sig_q = Fraction(sigma)
    s2_exact = sig_q * sig_q
    lap = _laplace_sampler(tf)
    out = np.empty(n, dtype=np.int64)
    y = np.empty(_BLOCK, dtype=np.int64)
    pos, tried, accepted = 0, 0, 0
    while pos < n:
        need = n - pos
        rate = (accepted + 1) / (tried + 2)
        cnt = min(_BLOCK, int(need / rate * 1.05) + 16)
        yb = y[:cnt]
        lap.fill(yb, rng)
        d = np.abs(yb).astype(np.float64)
        d -= s2t
        gt = d * d
        gt *= half_inv
        # rigorous bound on |gt - gamma|: the float error of d (< (s2t + |d|) 2**-51) and of the
        # square and products (< gt 2**-50), i.e. < 2**-50 (gt + 2 half_inv (s2t + |d|)**2)
        gerr = np.abs(d)
        gerr += s2t
        gerr *= gerr
        gerr *= 2.0 * half_inv
        gerr += gt
        gerr *= _ETA

        def exact(i: int, yb: np.ndarray = yb) -> Fraction:
            yy = abs(int(yb[i]))
            return (yy * t - s2_exact) ** 2 / (2 * s2_exact * t * t)

        acc = _bernoulli_block(gt, gerr, rng, exact)
        ya = yb[acc]
        take = min(ya.size, need)
        out[pos : pos + take] = ya[:take]
        pos += take
        tried += cnt
        accepted += ya.size
    return out


def sample_discrete_gaussian(sigma: float, size: int | tuple[int, ...], rng: RandomSource | None = None) -> np.ndarray:
    """Exact discrete Gaussian draws: ``P[X = k]`` proportional to ``exp(-k**2 / (2 sigma**2))``.

    Canonne, Kamath & Steinke (2020), Algorithm 3: ``Y ~ DLap(t)``, ``t = floor(sigma) + 1``,
    accepted with probability ``exp(-(|Y| - sigma**2/t)**2 / (2 sigma**2))`` (an exact
    :func:`sample_bernoulli_exp` on the exact rational gamma), else redrawn. ``sigma`` is a float in
    [2**-400, 2**50] taken as its exact rational value; returns int64 of shape ``size``.
    """
    sigma = _scale("sigma", sigma)
    shape = _size(size)
    rng = _source.resolve(rng)
    return _dgauss(sigma, math.prod(shape), rng).reshape(shape)


# -- internal API for exact samplers built on these enclosures elsewhere (mechanisms.top_k's race sampler) --
#: Raised when the current knowledge of the uniform does not decide an enclosure (extend it and retry).
Undecided = _Undecided
#: ``arith(prec)``: interval arithmetic in ``decimal`` at ``prec`` digits (outward-rounded enclosures).
arith = _arith
#: ``prec_for(nbits)``: the decimal precision that decides comparisons with ``nbits`` bits of a uniform.
prec_for = _prec_for
