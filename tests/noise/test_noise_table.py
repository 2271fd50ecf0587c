"""The table samplers (issue #16): exact laws on the fast path, the band, the tails and the slow path; rigorous
tables; agreement with the exact decision on the same words; the lattice combine.

Every statistical test rejects at p < 1e-7 (``noise_stats.P_REJECT``): a correct sampler fails with probability
< 1e-7 per test, whatever the seed.
"""

from __future__ import annotations

from decimal import Context, Decimal
from fractions import Fraction

import numpy as np
import pytest
from noise_stats import P_REJECT, chi2_pvalue, dgauss_cdf, dlap_cdf
from scipy import stats

from dpkit.noise import deterministic_source, lattice_gaussian, lattice_laplace
from dpkit.noise import samplers as S
from dpkit.noise.lattice import _combine
from dpkit.noise.source import RandomSource

N = S._TABLE_MIN * 8  # 131,072 samples: the table path


class Replay(RandomSource):
    """Serves preset bytes, then a deterministic stream (the slow paths may ask for more)."""

    name = "replay"

    def __init__(self, data: bytes) -> None:
        self.data = memoryview(data)
        self.pos = 0
        self.more = deterministic_source(77)

    def _fill_into(self, buf: memoryview) -> None:
        n = len(buf)
        if self.pos + n <= len(self.data):
            buf[:] = self.data[self.pos : self.pos + n]
            self.pos += n
        else:
            self.more._fill_into(buf)


def _span(t: float) -> int:
    return int(60 * t) + 60


def encode(t: S._TableSampler, slot: int, thr: int, v: int, j: int = 0) -> int:
    """Word A with these fields (the layout of ``_TableSampler._build``: slot | top eb threshold bits | V | the
    other threshold bits | j)."""
    rest = S._T_C - t.eb
    kk = t.k if t.one_word else 0
    return ((slot << (64 - t.a)) | ((thr >> rest) << t.sh_guide) | (v << t.sh_v) | ((thr & ((1 << rest) - 1)) << kk)
            | (j if t.one_word else 0))


def decode(t: S._TableSampler, word: int) -> tuple[int, int, int, int | None]:
    """(slot, threshold, V, j) of word A (j is None where it comes from word B)."""
    rest = S._T_C - t.eb
    kk = t.k if t.one_word else 0
    thr = (((word >> t.sh_guide) & ((1 << t.eb) - 1)) << rest) | ((word >> kk) & ((1 << rest) - 1))
    return word >> (64 - t.a), thr, (word >> t.sh_v) & ((1 << t.r) - 1), (word & (t.w - 1)) if t.one_word else None


def candidates(t: S._TableSampler, wa: np.ndarray, rng: RandomSource,
               wb: np.ndarray | None = None) -> tuple[np.ndarray, set[int]]:
    """One candidate per word (the sampler's own code path): the values and the set of rejected positions."""
    dest = np.empty(wa.size, dtype=np.int64)
    rej, _ = t._candidates(wa, wb, dest, np.empty(0, dtype=np.int64), t._scratch(wa.size, 0), rng)
    return dest, set(rej.tolist())


def table_draw(gauss: bool, s: float, n: int, seed: int, eta: float | None = None) -> np.ndarray:
    """``n`` draws of the table sampler itself (the public samplers use it for the Gaussian and for the Laplace
    of scale > 2**24 from 2**14 samples; the tests also check it at smaller Laplace scales)."""
    out = np.empty(n, dtype=np.int64)
    S._TableSampler(gauss, s, S._ETA if eta is None else eta).fill(out, deterministic_source(seed))
    return out


# ---- the exact law on the table path ---------------------------------------------------------------


@pytest.mark.parametrize("scale", [0.3, 3.7, 63.99, 64.0, 300.0, 1e4, 2.0**24 - 1, 2.0**24 + 1, 2.0**25 - 1,
                                   2.0**25, 2.0**30 * 1.37])
def test_table_laplace_law(scale):
    x = table_draw(False, scale, N, 1601)
    assert chi2_pvalue(x, dlap_cdf(scale), _span(scale)) > P_REJECT
    if scale > 2.0**24:  # the public sampler uses the table there
        y = S.sample_discrete_laplace(scale, N, rng=deterministic_source(1601))
        assert chi2_pvalue(y, dlap_cdf(scale), _span(scale)) > P_REJECT


def test_table_bin_width_and_word_layout_boundaries():
    # w = 1 below 64, 2 at 64; one word up to k = 19 (Laplace, a = 11), two words from k = 20
    assert S._table_sampler(False, 63.99, S._ETA).k == 0
    assert S._table_sampler(False, 64.0, S._ETA).k == 1
    lo, hi = S._table_sampler(False, 2.0**25 - 1, S._ETA), S._table_sampler(False, 2.0**25, S._ETA)
    assert (lo.k, hi.k) == (19, 20)
    for t in (lo, hi, S._table_sampler(True, 2.0**26, S._ETA), S._table_sampler(True, 2.0**27, S._ETA)):
        assert t.one_word == (t.k + S._T_R_MIN <= t.r1) and t.r >= S._T_R_MIN
    big = S._table_sampler(False, 10.0 * 2.0**44, S._ETA)  # dpkit.laplace on 10 M coordinates
    assert not big.one_word and big.r >= S._T_R_MIN
    assert S._table_sampler(False, 2.0**30 * 1.37, S._ETA).one_word is False  # tested above: two words


@pytest.mark.parametrize("sigma", [0.5, 1.0, 2.5, 40.0, 1234.5])
def test_table_gaussian_law(sigma):
    x = S.sample_discrete_gaussian(sigma, N, rng=deterministic_source(1602))
    assert chi2_pvalue(x, dgauss_cdf(sigma), int(20 * sigma) + 20) > P_REJECT


@pytest.mark.parametrize(("gauss", "scale"), [(False, 2.0**50), (False, 10.0 * 2.0**44), (True, 2.0**50),
                                              (True, 2.0**26 * 1.3), (True, 2.0**24 + 1)])
def test_table_huge_scales(gauss, scale):
    # X / scale is continuous Laplace / normal up to a lattice of step 1/scale: KS test
    if gauss:
        x = S.sample_discrete_gaussian(scale, N, rng=deterministic_source(1603))
        assert stats.kstest(x / scale, "norm").pvalue > P_REJECT
    else:
        x = S.sample_discrete_laplace(scale, N, rng=deterministic_source(1603))
        assert stats.kstest(x / scale, "laplace").pvalue > P_REJECT


def test_table_tiny_scales_give_zero():
    # P[X != 0] is about 2 exp(-2**400): every draw is 0, and the tail bin (hit with probability ~2**-18 per
    # candidate) is decided in decimal without trouble
    assert not S.sample_discrete_laplace(2.0**-400, N, rng=deterministic_source(1604)).any()
    assert not S.sample_discrete_gaussian(2.0**-400, N, rng=deterministic_source(1604)).any()


def test_table_tests_have_power():
    x = table_draw(False, 3.7 * 1.05, N, 1605)
    assert chi2_pvalue(x, dlap_cdf(3.7), _span(3.7)) < P_REJECT
    y = S.sample_discrete_gaussian(40.0 * 1.05, N, rng=deterministic_source(1605))
    assert chi2_pvalue(y, dgauss_cdf(40.0), 820) < P_REJECT


def test_old_and_new_paths_have_the_same_law():
    # just below and at the table threshold: both exact, so a two-sample test cannot tell them apart
    for gauss, s in ((False, 5.5), (True, 3.3)):
        draw = S.sample_discrete_gaussian if gauss else S.sample_discrete_laplace
        old = np.concatenate([draw(s, S._TABLE_MIN - 1, rng=deterministic_source(i)) for i in range(6)])
        new = table_draw(gauss, s, 6 * S._TABLE_MIN, 1606)
        edges = np.arange(-40, 41)
        co = np.bincount(np.searchsorted(edges, old), minlength=edges.size + 1)
        cn = np.bincount(np.searchsorted(edges, new), minlength=edges.size + 1)
        keep = (co + cn) >= 20
        table = np.vstack([co[keep], cn[keep]])
        assert stats.chi2_contingency(table)[1] > P_REJECT


# ---- the band, the slow path and the tails, forced --------------------------------------------------


def test_band_alone_law(monkeypatch):
    # no squeeze: every main-bin candidate is decided by the float band test (or the slow path)
    for gauss, s in ((False, 3.7), (True, 2.5), (False, 1e4)):
        t = S._TableSampler(gauss, s, S._ETA)
        t.rint[:] = 0
        t._squeeze_table()
        x = np.empty(N // 2, dtype=np.int64)
        t.fill(x, deterministic_source(1607))
        cdf = dgauss_cdf(s) if gauss else dlap_cdf(s)
        assert chi2_pvalue(x, cdf, int(60 * s) + 60) > P_REJECT


@pytest.mark.parametrize(("gauss", "s"), [(False, 3.7), (True, 2.5)])
def test_slow_path_alone_law(monkeypatch, gauss, s):
    # _ETA = 1: no squeeze (the table's lower bounds are 0) and no float decision: the exact slow path decides
    monkeypatch.setattr(S, "_ETA", 1.0)
    calls = {"n": 0}
    real = S._slow_below

    def counted(*a, **k):
        calls["n"] += 1
        return real(*a, **k)

    monkeypatch.setattr(S, "_slow_below", counted)
    x = table_draw(gauss, s, 4000, 1608, eta=1.0)  # 4000 samples: decimal is slow
    assert calls["n"] >= 4000  # every accepted sample went through the slow path
    cdf = dgauss_cdf(s) if gauss else dlap_cdf(s)
    assert chi2_pvalue(x, cdf, int(60 * s) + 60, nbins=20) > P_REJECT


@pytest.mark.parametrize(("gauss", "s"), [(False, 3.7), (True, 2.5), (True, 40.0)])
def test_tail_law(monkeypatch, gauss, s):
    # the accepted tail candidates of each side follow f on |x| >= t0, exactly (chi-square on the tail law). The
    # tables end where each tail weighs 4 units (as before issue #16's second pass; now they reach 1 unit where the
    # slots allow, which accepts fewer tail candidates, kappa being smaller): the same code, more accepted per try
    monkeypatch.setattr(S, "_T_TAIL_W", 4.0)
    t = S._TableSampler(gauss, s, S._ETA)
    src = deterministic_source(1609)
    for side in (0, 1):
        t0 = t.t0s[side]
        got = [t._tail(side, src) for _ in range(1500)]
        acc = np.array([abs(g) for g in got if g is not None])
        assert all((g is None) or (g > 0) == (side == 0) for g in got)
        assert acc.min() >= t0 and acc.size > 100
        # the tail law: P[m] proportional to f(m), m >= t0; compare through the conditional CDF
        ms = np.arange(t0, t0 + 2000)
        logf = -(ms.astype(np.float64) ** 2) / (2 * s * s) if gauss else -ms.astype(np.float64) / s
        p = np.exp(logf - logf.max())
        p /= p.sum()
        c = np.cumsum(p)

        def cdf(x, c=c, t0=t0):
            i = np.clip(np.asarray(x, dtype=np.int64) - t0, -1, c.size - 1)
            return np.where(i < 0, 0.0, c[np.maximum(i, 0)])

        assert chi2_pvalue(acc, cdf, t0 + 2000, nbins=6) > P_REJECT


def test_tail_bin_is_reached_by_crafted_words():
    # words whose slot/threshold select the tail bins: the block takes the tail path and returns tail values
    t = S._TableSampler(False, 3.7, S._ETA)
    words = []
    for j in t.tail_bins:  # a tail bin's own slot keeps it below its (small) threshold
        thr = int(t.thr_s[j]) - (j << S._T_C)
        assert 0 < thr < 1 << S._T_C and int(t.alt[j]) != j
        for rc in range(thr):
            for low in range(60):
                words.append(encode(t, j, rc, low << 5))
    wa = np.array(words, dtype=np.uint64)
    dest, rej = candidates(t, wa, deterministic_source(1610))
    kept = np.delete(dest, sorted(rej))
    assert kept.size > 0 and np.all(np.abs(kept) >= t.t0s[0])


# ---- the tables are rigorous ------------------------------------------------------------------------


def test_alias_table_is_exact():
    # every (slot, threshold) pair is equally likely: the bins' counts are exactly their weights
    gen = np.random.Generator(np.random.PCG64(1611))
    for m, cap in ((8, 16), (64, 1 << 14), (512, 1 << 14)):
        p = gen.random(m) * (gen.random(m) < 0.8)
        w = [int(v) for v in gen.multinomial(m * cap, p / p.sum())]
        thr, alt = S._alias(w, cap)
        got = [0] * m
        for j in range(m):
            got[j] += thr[j]
            got[alt[j]] += cap - thr[j]
        assert got == w


@pytest.mark.parametrize(("gauss", "s"), [(False, 0.3), (False, 3.7), (False, 300.0), (False, 10.0 * 2.0**20),
                                          (True, 0.5), (True, 10.0), (True, 1234.5), (True, 10.0 * 2.0**20)])
def test_tables_are_rigorous(gauss, s):
    t = S._TableSampler(gauss, s, S._ETA)
    ctx = Context(prec=60)
    sq = Fraction(s)

    def f(m: int) -> Decimal:
        phi = Fraction(m * m) / (2 * sq * sq) if gauss else Fraction(m) / sq
        return ctx.exp(-ctx.divide(Decimal(phi.numerator), Decimal(phi.denominator)))

    lam, w, big_t = t.lam, t.w, t.t_int
    two_r = 2**t.r
    for b in range(2 * t.n_bins):
        lo, hi = b * w - big_t, b * w - big_t + w - 1
        near, far = (lo, hi) if lo >= 0 else (-hi, -lo)
        wb = int(t.weights[b])
        assert Decimal(lam) * f(near) < wb  # the envelope dominates f on the bin
        assert Decimal(int(t.rint[b])) * wb <= Decimal(lam) * f(far) * two_r  # the squeeze is a lower bound
    total = int(t.weights.sum()) + sum(t.w_tails)
    assert total <= t.total
    # the tail weights dominate their envelopes: W_tail >= lam f(t0) / (w (1 - q_e))
    for side, t0 in enumerate(t.t0s):
        s_e = t.s_e[side]
        q_e = ctx.exp(-ctx.divide(Decimal(s_e.denominator), Decimal(s_e.numerator)))
        assert Decimal(t.w_tails[side]) * w * (1 - q_e) > Decimal(lam) * f(t0)
        assert s_e == (sq * sq / t0 if gauss else sq)


def test_word_layout_is_a_partition():
    # the fields of word A are disjoint and use all 64 bits: encode(decode(word)) is the word itself
    gen = np.random.Generator(np.random.PCG64(1620))
    for gauss, s in ((True, 0.5), (True, 10.0), (True, 10.0 * 2.0**20), (False, 3.7), (False, 10.0 * 2.0**44)):
        t = S._TableSampler(gauss, s, S._ETA)
        assert t.a + t.eb + t.r + (S._T_C - t.eb) + (t.k if t.one_word else 0) == 64
        assert t.sh_guide == 64 - t.a - t.eb and t.sh_v + t.r == t.sh_guide
        for word in gen.integers(0, 2**64, 200, dtype=np.uint64).tolist():
            slot, thr, v, j = decode(t, word)
            assert encode(t, slot, thr, v, j or 0) == word


def test_fast_decisions_agree_with_exact_ones():
    # on the same words, every decision the fast path takes (squeeze or band) is the exact one, and every value is
    # the bin of the full alias compare on the word's slot and threshold plus its offset (one and two words)
    ctx = Context(prec=60)
    for gauss, s in ((False, 3.7), (True, 2.5), (False, 1e4), (True, 1234.5), (True, 10.0 * 2.0**20),
                     (False, 10.0 * 2.0**44)):
        t = S._TableSampler(gauss, s, S._ETA)
        n = 3000
        wa = deterministic_source(1612).uint64(n)
        wb = None if t.one_word else deterministic_source(1614).uint64(n)
        dest, rej = candidates(t, wa, deterministic_source(1613), wb)
        sq = Fraction(s)
        for i, word in enumerate(wa.tolist()):
            slot, thr, v, j = decode(t, word)
            b = slot if (slot << S._T_C) + thr < int(t.thr_s[slot]) else int(t.alt[slot])
            if b >= t.tail_bins[0]:
                assert i in rej or abs(int(dest[i])) >= t.t0s[0]
                continue
            if j is None:
                j = int(wb[i]) >> (64 - t.k)
            x = b * t.w - t.t_int + j
            assert dest[i] == x or i in rej
            m = abs(x)
            phi = Fraction(m * m) / (2 * sq * sq) if gauss else Fraction(m) / sq
            psi = Decimal(t.lam) / int(t.weights[b]) * ctx.exp(-ctx.divide(Decimal(phi.numerator),
                                                                           Decimal(phi.denominator)))
            lo_v, hi_v = Decimal(v) / 2**t.r, Decimal(v + 1) / 2**t.r
            if hi_v <= psi:
                assert i not in rej
            elif lo_v >= psi:
                assert i in rej


# ---- the lattice wrappers -----------------------------------------------------------------------------


def test_combine_is_the_correctly_rounded_lattice_point():
    gen = np.random.Generator(np.random.PCG64(1614))
    for g in (2.0**-44, 2.0**-3, 1.0, 2.0**40, 2.0**-1022):
        x = np.concatenate([gen.normal(0, 1e3, 400) * g * 2.0**gen.integers(0, 60, 400), [0.0, -0.0, g / 2]])
        if g == 2.0**-1022:
            x = np.concatenate([x[:50], np.array([5e-324, 1e-310, -3e-320])])
        z = gen.integers(-(2**53) + 1, 2**53, x.size)
        z[:20] = gen.integers(-5, 6, 20)
        out = _combine(x, g, z)
        for xi, zi, oi in zip(x.tolist(), z.tolist(), out.tolist(), strict=True):
            r = round(Fraction(xi) / Fraction(g))  # Python's round is half-to-even
            assert oi == float((r + zi) * Fraction(g))


@pytest.mark.parametrize("g", [2.0**-20, 1.0])
def test_lattice_table_path_laws(g):
    values = np.linspace(-30, 30, N)
    t = 2.0**25 + 3.0  # the table Laplace (scale > 2**24)
    out = lattice_laplace(values, t * g, g, rng=deterministic_source(1615))
    z = (out - np.rint(values / g) * g) / g
    assert np.all(z == np.rint(z))
    assert stats.kstest(z / t, "laplace").pvalue > P_REJECT
    out = lattice_gaussian(values, 10.0 * g, g, rng=deterministic_source(1616))
    z = (out - np.rint(values / g) * g) / g
    assert chi2_pvalue(z.astype(np.int64), dgauss_cdf(10.0), 220) > P_REJECT


def test_table_word_economy():
    # one 64-bit word per candidate (about 1.01 candidates per sample): Laplace scale 1.5 * 2**24 (k = 19), sigma 10
    n = 4 * S._TABLE_MIN
    for draw in (lambda s, n, rng: S._dlap(1.5 * 2.0**24, n, rng), S.sample_discrete_gaussian):
        src = Replay(b"")
        seen = {"bytes": 0}
        inner = src._fill_into

        def counting(buf, inner=inner, seen=seen):
            seen["bytes"] += len(buf)
            inner(buf)

        src._fill_into = counting  # type: ignore[method-assign]
        draw(10.0, n, rng=src)
        assert seen["bytes"] <= 8 * n * 1.05 + 4096


@pytest.mark.parametrize(("gauss", "s"), [(True, 0.5), (True, 10.0), (False, 3.7), (True, 40.0), (False, 300.0)])
def test_guide_table_reproduces_the_alias_choice(gauss, s):
    # every (slot, threshold) pair: the guide gives the alias table's bin, or the ambiguous pseudo-bin whose
    # squeeze bound is 0 (then the full compare decides)
    t = S._TableSampler(gauss, s, S._ETA)
    hi = np.arange(1 << (t.a + S._T_C), dtype=np.int64)
    slot = hi >> S._T_C
    exact = np.where(hi < t.thr_s[slot], slot, t.alt[slot])
    eb = 64 - t.a - t.sh_guide
    g = t.guide[hi >> (S._T_C - eb)]
    assert np.all((g == exact) | (g == t.amb))
    assert t.rint[t.amb] == 0
    assert (g == t.amb).mean() < 0.05
    # the squeeze and base tables read through the guide: cg[i] = i 2**sh + R_b 2**sh_v, bg[i] = base_b
    i = np.arange(t.guide.size)
    assert np.array_equal(t.cg >> np.uint64(t.sh_guide), i.astype(np.uint64))
    low = t.cg & np.uint64((1 << t.sh_guide) - 1)
    assert np.array_equal(low, t.rint[t.guide].astype(np.uint64) << np.uint64(t.sh_v))
    assert np.all(t.rint < 2**t.r) and np.array_equal(t.bg, t.base[t.guide])


def test_direct_laplace_keeps_its_seeded_values():
    # scale <= 2**24: the one-log sampler, block by block, for every size (same values as before issue #16)
    t = 10.0
    n = 3 * S._BLOCK + 5
    got = S.sample_discrete_laplace(t, n, rng=deterministic_source(1617))
    ref = np.empty(n, dtype=np.int64)
    src = deterministic_source(1617)
    for start in range(0, n, S._BLOCK):
        S._DirectLaplace(t).fill(ref[start : start + S._BLOCK], src)
    assert np.array_equal(got, ref)


# ---- the rounds of the table samplers (issue #16, second pass) ----------------------------------------


def _expected_fill(t: S._TableSampler, n: int, seed: int) -> np.ndarray:
    """What ``fill`` must give for ``n`` samples from ``deterministic_source(seed)``: the candidates of the n + e
    words of one request, the rejected places among the first n filled with the accepted extras in order."""
    src = deterministic_source(seed)
    cnt = n + t._margin(n)
    wa = src.uint64(cnt)
    wb = None if t.one_word else src.uint64(cnt)
    dest, rej = candidates(t, wa, src, wb)
    holes = [i for i in range(n) if i in rej]
    good = [int(dest[i]) for i in range(n, cnt) if i not in rej]
    assert len(good) >= len(holes)  # (a shortfall, probability ~3e-7, would take a further round)
    out = dest[:n].copy()
    out[holes] = good[: len(holes)]
    return out


@pytest.mark.parametrize(("gauss", "s", "n"), [(True, 10.0, 100_000), (True, 10.0 * 2.0**20, S._TSUB + 1),
                                               (False, 10.0 * 2.0**44, 2 * S._TSUB - 3), (True, 2.5, S._TABLE_MIN)])
def test_fill_is_the_accepted_candidates_in_order(gauss, s, n):
    # sizes whose passes end inside a sub-block: every place holds its own accepted candidate or the next unused
    # accepted extra one (no stale entry of an earlier round), for one and two words per candidate
    t = S._TableSampler(gauss, s, S._ETA)
    out = np.empty(n, dtype=np.int64)
    t.fill(out, deterministic_source(1621))
    assert np.array_equal(out, _expected_fill(t, n, 1621))


def test_short_margin_takes_a_further_round(monkeypatch):
    # with a single extra candidate the rejected places are filled by further rounds: same exact law
    t = S._TableSampler(True, 10.0, S._ETA)
    monkeypatch.setattr(t, "_margin", lambda n: 1)
    rounds = {"n": 0}
    real = t.fill

    def counted(out, rng):
        rounds["n"] += 1
        return real(out, rng)

    monkeypatch.setattr(t, "fill", counted)
    x = np.empty(N, dtype=np.int64)
    t.fill(x, deterministic_source(1622))
    assert rounds["n"] >= 2
    assert chi2_pvalue(x, dgauss_cdf(10.0), 220) > P_REJECT


@pytest.mark.parametrize(("gauss", "s"), [(True, 10.0), (True, 10.0 * 2.0**20), (False, 10.0 * 2.0**44),
                                          (False, 10.0), (False, 2.0**24), (True, 2.0**50)])
def test_block_bounds_hold(gauss, s):
    # the bound each block reports (used by the lattice combine to skip its search for |z| >= 2**53) holds
    bounds: list[int | None] = [None]
    for blk in S._noise_blocks(gauss, s, 3 * S._TFILL + 5, deterministic_source(1623), bounds=bounds):
        assert bounds[0] is not None and int(np.abs(blk).max()) <= bounds[0]
    t = S._TableSampler(False, 3.7, S._ETA)  # tail values raise the bound
    words = [encode(t, j, 0, low << 5) for j in t.tail_bins for low in range(200)]
    out = np.empty(len(words), dtype=np.int64)
    src = Replay(np.array(words, dtype=np.uint64).tobytes())
    monkeypatch_margin = t._margin
    t._margin = lambda n: 0  # type: ignore[method-assign]
    try:
        bound = t.fill(out, src)
    finally:
        t._margin = monkeypatch_margin  # type: ignore[method-assign]
    assert bound >= int(np.abs(out).max()) > t.t_int


def _dgauss_cells(sigma: float, edges: np.ndarray) -> np.ndarray:
    """P[X in (e_{i-1}, e_i]] for the discrete Gaussian of a large sigma, with two open tails: the midpoint sum
    over the integers equals the integral of the normal density up to an error below 1e-12 of each cell for
    sigma >= 1e3 (Euler-Maclaurin: the correction is ~ f'/24 relative to sigma**2), so P[X <= e] is
    Phi((e + 1/2) / sigma) to that precision."""
    c = stats.norm.cdf((edges.astype(np.float64) + 0.5) / sigma)
    return np.diff(np.concatenate([[0.0], c, [1.0]]))


def _fine_chi2(z: np.ndarray, sigma: float, width: int) -> float:
    edges = np.arange(-5 * int(sigma) // width * width, 5 * int(sigma) + 1, width, dtype=np.int64) - 1
    p = _dgauss_cells(sigma, edges)
    obs = np.bincount(np.searchsorted(edges, z, side="left"), minlength=p.size)
    keep = p * z.size >= 20
    o = np.append(obs[keep], obs[~keep].sum())
    e = np.append(p[keep], p[~keep].sum()) * z.size
    return float(stats.chi2.sf(float(((o - e) ** 2 / e).sum()), o.size - 1))


def test_lattice_gaussian_large_scale_exact_law_and_power():
    # the benchmark's path: sigma 10 on the lattice 2**-20, i.e. a discrete Gaussian of sigma 10 * 2**20 in lattice
    # units (bins of w = 2**18, one word per candidate). 2**20 samples in cells of w/4 over +-5 sigma (about 1,600
    # cells): the law holds at the resolution of a quarter bin (offsets within bins, bin choice, scale) ...
    g = 2.0**-20
    sigma = 10.0 * 2.0**20
    t = S._table_sampler(True, sigma, S._ETA)
    assert (t.k, t.one_word) == (18, True)
    out = lattice_gaussian(np.zeros(1 << 20), 10.0, g, rng=deterministic_source(1624))
    z = out / g
    assert np.array_equal(z, np.rint(z))
    z = z.astype(np.int64)
    width = t.w // 4
    assert _fine_chi2(z, sigma, width) > P_REJECT
    # ... and the scale: the variance is sigma**2 (to 1e-300 relative), and the sample variance of 2**20 draws has a
    # standard deviation of sigma**2 sqrt(2 / n) (kurtosis 3): |score| > 5.4 has probability < 1e-7
    assert abs(_variance_score(z, sigma)) < 5.4
    # the same tests reject offsets within the bins halved, and a scale off by 1% (a 14-sd variance error)
    half = (z & ~(t.w - 1)) | ((z & (t.w - 1)) >> 1)
    assert _fine_chi2(half, sigma, width) < P_REJECT
    assert abs(_variance_score(z, sigma * 1.01)) > 5.4
    assert abs(_variance_score(np.rint(z * 1.01).astype(np.int64), sigma)) > 5.4


def _variance_score(z: np.ndarray, sigma: float) -> float:
    zf = z.astype(np.float64) / sigma
    return float((np.mean(zf * zf) - 1.0) / np.sqrt(2.0 / z.size))
