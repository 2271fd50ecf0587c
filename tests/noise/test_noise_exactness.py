"""The machinery behind exactness: libm accuracy assumption, interval arithmetic, and agreement of
the fast float path with the exact slow path on the same random words."""

from __future__ import annotations

import math
from decimal import Context, Decimal
from fractions import Fraction

import numpy as np
import pytest

from dpkit.noise import deterministic_source
from dpkit.noise import samplers as S
from dpkit.noise.source import RandomSource


class Replay(RandomSource):
    """Serves preset bytes, then fails: proves how many bits a sampler consumed."""

    name = "replay"

    def __init__(self, data: bytes) -> None:
        self.data = memoryview(data)
        self.pos = 0

    def _fill_into(self, buf: memoryview) -> None:
        n = len(buf)
        if self.pos + n > len(self.data):
            raise AssertionError("sampler asked for more bits than expected")
        buf[:] = self.data[self.pos : self.pos + n]
        self.pos += n


class NoDraw(RandomSource):
    name = "no-draw"

    def _fill_into(self, buf: memoryview) -> None:
        raise AssertionError("unexpected draw")


def _ulp_errors(fn, dec_fn, xs):
    ctx = Context(prec=40)
    errs = []
    for x, y in zip(xs.tolist(), fn(xs).tolist(), strict=True):
        exact = dec_fn(ctx, Decimal(x))
        ulp = math.ulp(float(exact))
        errs.append(abs(Decimal(y) - exact) / Decimal(ulp))
    return float(max(errs))


def test_platform_libm_is_accurate_enough():
    # the fast path assumes numpy's log/log1p/expm1 err by at most ~500 ulp; check <= 8 here
    gen = np.random.Generator(np.random.PCG64(1))
    u = np.ldexp(gen.random(3000), -gen.integers(0, 64, 3000))  # (0, 1) over 64 binades
    u = u[u > 0]
    assert _ulp_errors(np.log, lambda c, d: c.ln(d), u) <= 8
    x = -gen.random(3000) * 0.07  # the low-chunk range of log1p
    assert _ulp_errors(np.log1p, lambda c, d: c.ln(1 + d), x) <= 8
    v = -gen.random(3000) * 0.07
    assert _ulp_errors(np.expm1, lambda c, d: c.exp(d) - 1, v) <= 8


def test_interval_arithmetic_encloses():
    for prec in (20, 50, 90):
        ar = S._Arith(prec)
        ln2 = ar.ln(ar.const(2))
        ref = Context(prec=300)
        assert ln2[0] < ref.ln(Decimal(2)) < ln2[1]
        e = ar.exp(ar.const(1))
        assert e[0] < ref.exp(Decimal(1)) < e[1]
        third = ar.const(Fraction(1, 3))
        assert third[0] < ar.div(ar.const(1), ar.const(3))[1]
        assert ar.mul(third, ar.const(3))[0] <= 1 <= ar.mul(third, ar.const(3))[1]
        lo, hi = ar.sub(ar.const(0.1), ar.const(Fraction(1, 10)))
        exact = Fraction(0.1) - Fraction(1, 10)
        assert Fraction(lo) <= exact <= Fraction(hi) and exact > 0
        with pytest.raises(S._Undecided):
            ar.ln((Decimal(0), Decimal(1)))


def _direct_reference(t: float, words: np.ndarray) -> list[int]:
    sampler = S._DirectLaplace(t)
    wb = sampler.wb
    res = []
    for w in words.tolist():
        neg = w >> (wb - 1)
        k = w & ((1 << (wb - 1)) - 1)
        mag = S._slow_ceil(k, wb - 1, deterministic_source(99), S._enclose_direct(t))
        res.append(-mag if neg else mag)
    return res


@pytest.mark.parametrize("t", [0.3, 3.7, 200.0, 1e4, 2.0**24])
def test_fast_path_agrees_with_exact_path(t):
    n = 1500
    sampler = S._DirectLaplace(t)
    dtype = np.uint32 if sampler.wb == 32 else np.uint64
    words = deterministic_source(11).uint64(n).view(dtype)[:n].copy()
    out = np.empty(n, dtype=np.int64)
    sampler.fill(out, Replay(words.tobytes()))
    assert out.tolist() == _direct_reference(t, words)


def test_chunked_path_agrees_with_exact_path():
    t = 2.0**45 * 1.7
    sampler = S._ChunkedLaplace(t)
    nw = len(sampler.lows) + 1
    assert nw == 3
    n = 800
    words = deterministic_source(12).uint64(n * nw)
    neg, g = sampler._draw(n, Replay(words.tobytes()))
    ws = words.reshape(nw, n)
    for i in range(n):
        expect = 0
        for j, s in enumerate(sampler.lows):
            k = int(ws[j, i]) & ((1 << 63) - 1)
            expect += S._slow_ceil(k, 63, NoDraw(), S._enclose_low(s, 1 << 20)) << (20 * j)
        expect += S._slow_ceil(int(ws[-1, i]), 64, NoDraw(), S._enclose_top(sampler.top_s)) << (20 * (nw - 1))
        assert g[i] == expect
        assert neg[i] == bool(int(ws[0, i]) >> 63)


def test_bernoulli_fast_path_agrees_with_exact_path():
    n = 3000
    gen = np.random.Generator(np.random.PCG64(13))
    gammas = gen.exponential(1.0, n)
    words = deterministic_source(14).uint32(n)
    fast = S._bernoulli_block(gammas, 0.0, Replay(words.tobytes()), lambda i: pytest.fail("slow path"))
    for i in range(n):
        exact = S._slow_bernoulli(int(words[i]), 32, NoDraw(), Fraction(float(gammas[i])))
        assert fast[i] == exact


def test_gaussian_gamma_bound_is_rigorous():
    # |gt - gamma| <= gerr with gamma the exact rational, over many (y, sigma)
    gen = np.random.Generator(np.random.PCG64(15))
    for sigma in [0.37, 1.0, 2.5, 10.1, 1234.5678, 2.0**30 + 0.5]:
        t = math.floor(sigma) + 1
        s2 = sigma * sigma
        s2t = s2 / float(t)
        half_inv = 0.5 / s2
        y = gen.integers(0, int(8 * t) + 2, 500)
        d = y.astype(np.float64) - s2t
        gt = d * d * half_inv
        gerr = S._ETA * (gt + 2.0 * half_inv * (s2t + np.abs(d)) ** 2)
        sq = Fraction(sigma) ** 2
        for yi, g, e in zip(y.tolist(), gt.tolist(), gerr.tolist(), strict=True):
            exact = (yi * t - sq) ** 2 / (2 * sq * t * t)
            # the bound must hold with a wide safety factor (2**8)
            assert abs(Fraction(g) - exact) <= Fraction(e) / 256


def test_slow_path_refines_u_when_needed():
    # U in [0, 2**-31): c(U) = t (L - ln U) is unbounded, so more words must be drawn
    src = deterministic_source(16)
    m = S._slow_ceil(0, 31, src, S._enclose_direct(1.0))
    assert m >= 21  # -ln(2**-31) > 21
    # exp(-0) = 1: U < 1 always, decided even when U's first word is all ones
    assert S._slow_bernoulli(2**32 - 1, 32, deterministic_source(17), Fraction(0))


def test_deterministic_source_reproducible():
    a = S.sample_discrete_laplace(3.0, 1000, rng=deterministic_source(5))
    b = S.sample_discrete_laplace(3.0, 1000, rng=deterministic_source(5))
    assert np.array_equal(a, b)
    a = S.sample_discrete_gaussian(3.0, 1000, rng=deterministic_source(5))
    b = S.sample_discrete_gaussian(3.0, 1000, rng=deterministic_source(5))
    assert np.array_equal(a, b)


def test_word_economy():
    # one 32-bit word per sample at small scale, one 64-bit word at scale 1e4 (slow path aside)
    n = 10_000
    src = deterministic_source(18)
    data = src.bytes(4 * n + 4096)
    r = Replay(data)
    S.sample_discrete_laplace(10.0, n, rng=r)
    assert r.pos <= 4 * n + 4096
    data = src.bytes(8 * n + 4096)
    r = Replay(data)
    S.sample_discrete_laplace(1e4, n, rng=r)
    assert r.pos <= 8 * n + 4096
