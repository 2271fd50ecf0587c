"""Private selection: the exponential mechanism, report-noisy-max and permute-and-flip.

All three return the *index* of a candidate (``Release.value``, an int) and cost ``PureDP(epsilon)``.

``scores[i]`` is the quality ``q(D, i)`` of candidate ``i`` (higher is better) for a candidate set that
must be public (fixed before seeing the data). ``sensitivity`` is
``Δ = max_i max_{D ~ D'} |q(D, i) - q(D', i)|`` under the caller's (or accountant's) neighbour relation.
``monotonic=True`` declares that for every pair of neighbours either all scores go up or all go down
(counting scores under add/remove are monotonic); it halves the noise (Li et al. 2016, Cor 2.19;
Dwork & Roth 2014, Claim 3.9). Declaring it for scores that are not monotonic breaks the guarantee
(the loss can reach ``2 epsilon``).

Exactness
---------
Scores are first rounded to the lattice ``g Z`` with ``g = lattice_granularity(sensitivity)`` (a power
of two ``<= sensitivity / 2^20``): ``u_i = round_half_even(q_i / g)``, computed exactly. The rounded
quality has integer sensitivity ``Δu = floor(sensitivity / g) + 1`` lattice steps and is monotonic when
``q`` is. All randomness-relevant arithmetic is then exact:

- exponential mechanism (and Gumbel report-noisy-max): ``P[i] ∝ exp(-κ n_i)``, ``n_i = max_j u_j - u_i``
  (an exact integer), ``κ`` = ``epsilon / (2 Δu)`` (``epsilon / Δu`` monotonic) rounded **down** to a float
  with 32 significant bits, so the mechanism is at most ``epsilon``-DP. ``κ n_i`` is split into a sum of
  exactly representable floats ``γ_ij``, and a candidate is sampled by rejection: propose ``i``
  uniformly (``rng.below``), accept iff every ``Bernoulli(exp(-γ_ij))`` (dpkit.noise.sample_bernoulli_exp,
  exact) succeeds; the accepted index has exactly the law above. A candidate whose exponent exceeds the
  float range (``> 1.8e308``, probability below ``exp(-1e308)``) is given the largest float instead.
- report-noisy-max (Laplace): ``argmax_i (u_i + Z_i)`` over exact integers, ``Z_i`` discrete Laplace with
  scale ``2 Δu / epsilon`` lattice steps (``Δu / epsilon`` monotonic); ties go to the lowest index.
- permute-and-flip: an exactly uniform permutation (sort of distinct random 64-bit keys, redrawn on a
  collision), then in that order accept candidate ``i`` with ``Bernoulli(exp(-κ n_i))`` (exact).

The private samplers take a ``count`` (independent draws in one vectorised pass); the public
functions draw one, through the same code.
"""

from __future__ import annotations

import math
import sys
from fractions import Fraction
from typing import TYPE_CHECKING, Any

import numpy as np

from dpkit.core import _exact
from dpkit.core import _validate as check
from dpkit.core.errors import InvalidParameter, WrongType
from dpkit.core.privacy import PureDP
from dpkit.mechanisms import _common
from dpkit.mechanisms._release import Release, check_bool
from dpkit.mechanisms.contract import Plan, run
from dpkit.noise.source import RandomSource

if TYPE_CHECKING:
    from numpy.typing import ArrayLike

    from dpkit.core.accountant import Accountant

__all__ = [
    "exponential",
    "exponential_plan",
    "permute_and_flip",
    "permute_and_flip_plan",
    "report_noisy_max",
    "report_noisy_max_plan",
]

_LIMB = 52
_MANTISSA_BITS = 32


# ---------------------------------------------------------------------------------------------
# exact law
# ---------------------------------------------------------------------------------------------
class SelectionLaw:
    """The exact selection law for given scores: integer gaps, κ, and the float limbs of κ n_i.

    Internal API shared by the selection mechanisms and the families that vectorise many exponential-mechanism
    draws (``stats.mean(method="exponential")``, ``histograms.kd_tree``'s noisy medians). Scores are rounded to
    the lattice ``g = lattice_granularity(sensitivity)``, the sensitivity in lattice units is ``Δu = floor(Δ/g)
    + 1``, and ``κ = epsilon / (factor Δu)`` is rounded **down** to 32 significant bits (so the law is at most
    ``epsilon``-DP for ``factor = 2``, or ``factor = 1`` with monotone scores). ``P[i] ∝ exp(-κ n_i)`` with
    ``n_i = max(u) - u_i`` exact integers; ``limbs`` splits ``κ n_i`` into exactly representable floats whose
    sum it is, for :func:`accept_exp_limbs`. Drawing from it charges nothing: only inside a plan whose cost
    covers it.
    """

    def __init__(self, scores: np.ndarray, sensitivity: float, epsilon: float, factor: int) -> None:
        from dpkit.noise import lattice_granularity

        g = float(lattice_granularity(sensitivity, coords=1))
        _common.check_lattice_range("scores", scores, g)
        self.g = g
        self.d_units = math.floor(sensitivity / g) + 1
        u = np.rint(scores / g)  # exact: g is a power of two and |scores|/g < 2^1000
        self.u = u
        umax = float(np.max(u))
        if float(np.max(np.abs(u))) < 2.0**52:
            gaps: list[int] | np.ndarray = (umax - u).astype(np.int64)  # exact integers < 2^53
            self.small = True
        else:
            big = int(umax)
            gaps = [big - int(x) for x in u]
            self.small = all(x < 2**62 for x in gaps)
            if self.small:
                gaps = np.array(gaps, dtype=np.int64)
        self.gaps = gaps
        # κ = epsilon / (factor Δu), rounded down to MANTISSA_BITS significant bits: κ = M 2^E.
        kappa = Fraction(epsilon) / (factor * self.d_units)
        e = kappa.numerator.bit_length() - kappa.denominator.bit_length()
        if Fraction(2) ** e > kappa:
            e -= 1  # now 2^e <= κ < 2^(e+1)
        E = max(e - (_MANTISSA_BITS - 1), -1074)
        self.M = math.floor(kappa / Fraction(2) ** E)
        self.E = E
        self.kappa = math.ldexp(self.M, E) if E < 900 else float(Fraction(self.M) * Fraction(2) ** E)
        self.limbs = self._limbs()

    def _limbs(self) -> np.ndarray:
        mask = (1 << _LIMB) - 1
        if self.small and isinstance(self.gaps, np.ndarray) and int(np.max(self.gaps)) < 2**31:
            prods = self.gaps * np.int64(self.M)  # < 2^63
            lo = (prods & np.int64(mask)).astype(np.float64)
            hi = (prods >> np.int64(_LIMB)).astype(np.float64)
            with np.errstate(over="ignore"):
                out = np.stack([np.ldexp(lo, self.E), np.ldexp(hi, self.E + _LIMB)], axis=1)
            out[~np.isfinite(out)] = sys.float_info.max
            if not np.any(out[:, 1]):
                out = out[:, :1]
            return out
        if self.small and isinstance(self.gaps, np.ndarray):
            # gap = a 2^31 + b with a, b < 2^31, so κ n = M a 2^(E+31) + M b 2^E with M a, M b < 2^63 exact in
            # int64; each product is split into two exactly representable 52-bit limbs (four limbs in all).
            a = self.gaps >> np.int64(31)
            b = self.gaps & np.int64((1 << 31) - 1)
            cols = []
            for prod, shift in ((b * np.int64(self.M), self.E), (a * np.int64(self.M), self.E + 31)):
                lo = (prod & np.int64(mask)).astype(np.float64)
                hi = (prod >> np.int64(_LIMB)).astype(np.float64)
                with np.errstate(over="ignore"):
                    cols += [np.ldexp(lo, shift), np.ldexp(hi, shift + _LIMB)]
            out = np.stack(cols, axis=1)
            out[~np.isfinite(out)] = sys.float_info.max
            return out[:, np.any(out, axis=0)] if np.any(out) else out[:, :1]
        Ns = [int(n) * self.M for n in self.gaps]
        nlimbs = max(1, max((N.bit_length() + _LIMB - 1) // _LIMB for N in Ns))
        out = np.zeros((len(Ns), nlimbs), dtype=np.float64)
        for i, N in enumerate(Ns):
            j = 0
            while N:
                part = N & mask
                if part:
                    try:
                        out[i, j] = math.ldexp(part, self.E + _LIMB * j)
                    except OverflowError:
                        out[i, j] = sys.float_info.max
                    if not math.isfinite(out[i, j]):
                        out[i, j] = sys.float_info.max
                N >>= _LIMB
                j += 1
        return out

    def log_probs(self) -> np.ndarray:
        """log P[i] of the exponential-mechanism law (float evaluation, for tests and diagnostics)."""
        gam = np.array([float(Fraction(int(n)) * Fraction(self.M) * Fraction(2) ** self.E) if not self.small
                        else float(n) * self.kappa for n in self.gaps])
        lw = -gam
        m = np.max(lw)
        return lw - (m + np.log(np.sum(np.exp(lw - m))))


def accept_exp_limbs(limbs: np.ndarray, rng: RandomSource) -> np.ndarray:
    """Exact Bernoulli(exp(-sum_j limbs[:, j])) for each row: AND of independent exact factors (internal API;
    charges nothing)."""
    from dpkit.noise import sample_bernoulli_exp

    ok = np.ones(limbs.shape[0], dtype=bool)
    for j in range(limbs.shape[1]):
        idx = np.flatnonzero(ok & (limbs[:, j] > 0))
        if idx.size:
            ok[idx] = np.asarray(sample_bernoulli_exp(limbs[idx, j], rng=rng), dtype=bool)
    return ok


def sample_exponential(law: SelectionLaw, rng: RandomSource, count: int = 1) -> np.ndarray:
    """``count`` independent exponential-mechanism draws from ``law`` (rejection sampling; every accepted
    proposal of the iid proposal stream is an exact, independent draw). Internal API: charges nothing, so only
    inside a plan whose cost covers ``count`` draws."""
    limbs = law.limbs
    n = limbs.shape[0]
    if n == 1:
        return np.zeros(count, dtype=np.int64)
    approx_rate = float(np.mean(np.exp(-np.minimum(limbs.sum(axis=1), 745.0))))
    per_draw = 1.0 / max(approx_rate, 1e-300)
    out: list[np.ndarray] = []
    have = 0
    while have < count:
        batch = int(min(max(32.0, 1.5 * (count - have) * per_draw), 2.0**18))
        props = rng.below(n, batch)
        ok = accept_exp_limbs(limbs[props], rng)
        hits = props[ok][: count - have]
        out.append(hits)
        have += hits.size
    return np.concatenate(out).astype(np.int64)


def _permutations(n: int, count: int, rng: RandomSource) -> np.ndarray:
    """``count`` independent, exactly uniform random permutations of range(n) (rows).

    Each row sorts n random 64-bit keys; a row with a repeated key is redrawn, so conditioned on
    distinct keys the ordering is exactly uniform."""
    keys = rng.uint64(n * count).reshape(count, n)
    while True:
        sk = np.sort(keys, axis=1)
        bad = np.flatnonzero(np.any(sk[:, 1:] == sk[:, :-1], axis=1)) if n > 1 else np.empty(0, dtype=np.int64)
        if not bad.size:
            return np.argsort(keys, axis=1, kind="stable")
        keys[bad] = rng.uint64(n * bad.size).reshape(bad.size, n)


_PF_BLOCK = 1 << 16  # permutation entries per vectorised block


def _sample_pf(law: SelectionLaw, rng: RandomSource, count: int = 1) -> np.ndarray:
    """``count`` independent permute-and-flip draws.

    For each draw: a uniform permutation, then independent coins ``Bernoulli(exp(-κ n_i))`` in that
    order; the first head is returned (the best candidate's coin is always heads). Coins are flipped
    for whole blocks of the permutation at once; coins after the first head are never looked at,
    so the law is exactly that of the sequential procedure."""
    limbs = law.limbs
    n = limbs.shape[0]
    if n == 1:
        return np.zeros(count, dtype=np.int64)
    if n * count <= _PF_BLOCK or n <= 64:
        rows = max(1, _PF_BLOCK // n)
        res = []
        for start in range(0, count, rows):
            m = min(rows, count - start)
            perms = _permutations(n, m, rng)
            heads = accept_exp_limbs(limbs[perms.reshape(-1)], rng).reshape(m, n)
            first = np.argmax(heads, axis=1)
            res.append(perms[np.arange(m), first])
        return np.concatenate(res).astype(np.int64)
    out = np.empty(count, dtype=np.int64)
    for r in range(count):
        perm = _permutations(n, 1, rng)[0]
        start, chunk = 0, 64
        while True:
            part = perm[start:start + chunk]
            hits = np.flatnonzero(accept_exp_limbs(limbs[part], rng))
            if hits.size:
                out[r] = part[hits[0]]
                break
            start += chunk
            chunk *= 2
    return out


def _sample_rnm(law: SelectionLaw, t_units: float, rng: RandomSource, count: int = 1) -> np.ndarray:
    """``count`` independent report-noisy-max draws: argmax of exact integers ``u_i + Z_i``,
    ``Z_i`` discrete Laplace (scale ``t_units``); ties go to the lowest index."""
    from dpkit.noise import sample_discrete_laplace

    n = law.u.size
    z = np.asarray(sample_discrete_laplace(t_units, (count, n), rng=rng), dtype=np.int64)
    u = law.u
    if float(np.max(np.abs(u))) < 2.0**61 and int(np.max(np.abs(z))) < 2**61:
        noisy = u.astype(np.int64)[None, :] + z
        return np.argmax(noisy, axis=1).astype(np.int64)  # first maximum: lowest index wins ties
    res = np.empty(count, dtype=np.int64)
    ui = [int(a) for a in u]
    for r in range(count):
        vals = [a + int(b) for a, b in zip(ui, z[r], strict=True)]
        res[r] = vals.index(max(vals))
    return res


# ---------------------------------------------------------------------------------------------
# public mechanisms
# ---------------------------------------------------------------------------------------------
def _validate(scores: Any, sensitivity: Any, epsilon: Any, monotonic: Any) -> tuple[np.ndarray, float, float, bool]:
    arr = check.finite_array("scores", scores, ndim=1)
    sens = check.positive("sensitivity", sensitivity)
    eps = check.epsilon(epsilon)
    mono = check_bool("monotonic", monotonic)
    return arr, sens, eps, mono


def _index(sampler: Any) -> Any:
    """``draw`` for a selection plan: the single index drawn by ``sampler(rng)`` (an array of one)."""

    def draw(rng: RandomSource) -> int:
        return int(sampler(rng)[0])

    return draw


def exponential(scores: ArrayLike, sensitivity: float, epsilon: float, *, monotonic: bool = False,
                accountant: Accountant | None = None, rng: RandomSource | None = None,
                description: str = "") -> Release:
    """Exponential mechanism (McSherry & Talwar 2007): returns index ``i`` with
    ``P[i] ∝ exp(epsilon q_i / (2 Δ))``, or ``exp(epsilon q_i / Δ)`` with ``monotonic=True``
    (Li et al. 2016, Cor 2.19).

    Parameters
    ----------
    scores:
        ``q_i(D)``, one finite real per candidate (1-D, non-empty); higher is better. The candidate set
        (and so the indices) must be public.
    sensitivity:
        ``Δ``: the largest change of any score between neighbouring datasets (the caller's declaration).
    epsilon:
        The privacy parameter, > 0.
    monotonic:
        Declare that between any two neighbours all scores move in the same direction (counts under
        add/remove). A false declaration voids the guarantee (the loss can reach ``2 epsilon``).
    accountant:
        If given, charged ``PureDP(epsilon)`` before anything is drawn.
    rng:
        A :class:`~dpkit.noise.source.RandomSource` (default: the OS CSPRNG).
    description:
        A free-text note written into the receipt.

    Guarantee
    ---------
    ``epsilon``-DP (pure) w.r.t. the neighbour relation under which ``sensitivity`` bounds every score's
    change. The rounded scores change by at most ``Δu`` lattice steps, so each candidate's weight
    ``exp(κ u_i)`` changes by a factor at most ``e^(κ Δu)`` and so does the normaliser: ``P[i]`` changes by
    at most ``e^(2 κ Δu) <= e^epsilon`` with ``κ <= epsilon / (2 Δu)``. When the scores are monotonic the
    weight and the normaliser move in the same direction, so ``e^(κ Δu)`` with ``κ <= epsilon / Δu``.

    Cost
    ----
    ``PureDP(epsilon)`` whatever the number of candidates, charged once to ``accountant`` (if given)
    before any random bit is drawn; a refused charge draws nothing.

    Output law
    ----------
    ``P[i] ∝ exp(-κ n_i)`` with ``n_i = max_j u_j - u_i`` the exact integer gaps of the scores rounded to
    a ``sensitivity/2^20`` lattice and ``κ`` rounded down to 32 significant bits (module docstring). The
    sampler is exact and never exponentiates a raw score (no overflow). ``Release.value`` is the index
    (an int); ``Release.scale`` and ``Release.noise`` are ``None``.

    Error
    -----
    With probability at least ``confidence``, the selected score is at least the best score minus
    :func:`~dpkit.mechanisms.exponential_utility_bound` (``(2Δ/ε) ln(n/β)``, ``(Δ/ε) ln(n/β)``
    monotonic, lattice rounding included). ``Release.interval()`` raises
    :class:`~dpkit.mechanisms.NoInterval`.
    """
    return run(exponential_plan(scores, sensitivity, epsilon, monotonic=monotonic), accountant=accountant,
               rng=rng, description=description)


def exponential_plan(scores: ArrayLike, sensitivity: float, epsilon: float, *, monotonic: bool = False) -> Plan:
    """The validated plan of :func:`exponential` (nothing drawn or charged).

    Same parameters (validated here, with the same errors), guarantee, cost, output law and error as
    :func:`exponential`, which is ``run(exponential_plan(...))``: run it with
    :func:`~dpkit.mechanisms.contract.run`, or draw it inside a composite plan whose cost covers it with
    :meth:`~dpkit.mechanisms.contract.Plan.sample`. ``Plan.neighbours`` is ``None``: the guarantee holds under the
    relation for which the declared sensitivity holds.
    """
    arr, sens, eps, mono = _validate(scores, sensitivity, epsilon, monotonic)
    law = SelectionLaw(arr, sens, eps, 1 if mono else 2)
    params = {"epsilon": eps, "candidates": int(arr.size), "monotonic": mono, "granularity": law.g}
    return Plan(mechanism="exponential", cost=PureDP(eps), draw=_index(lambda rng: sample_exponential(law, rng)),
                sensitivity=sens, scale=None, params=params, neighbours=None)


def report_noisy_max(scores: ArrayLike, sensitivity: float, epsilon: float, *, noise: str = "laplace",
                     monotonic: bool = False, accountant: Accountant | None = None, rng: RandomSource | None = None,
                     description: str = "") -> Release:
    """Report noisy max: add noise to every score and release **only** the index of the largest.

    Parameters
    ----------
    scores:
        ``q_i(D)``, one finite real per candidate (1-D, non-empty); higher is better. The candidate set
        must be public.
    sensitivity:
        ``Δ``: the largest change of any score between neighbouring datasets (the caller's declaration).
    epsilon:
        The privacy parameter, > 0.
    noise:
        ``"laplace"`` (default) or ``"gumbel"``.
    monotonic:
        Declare that between any two neighbours all scores move in the same direction. A false
        declaration voids the guarantee.
    accountant:
        If given, charged ``PureDP(epsilon)`` before anything is drawn.
    rng:
        A :class:`~dpkit.noise.source.RandomSource` (default: the OS CSPRNG).
    description:
        A free-text note written into the receipt.

    Guarantee
    ---------
    ``epsilon``-DP (pure) under the caller's neighbour relation.

    ``noise="laplace"``: for fixed noise on the other candidates, candidate ``i`` wins iff its noise
    ``Z_i`` is at least a threshold ``r*`` (raising ``Z_i`` never makes it lose, and the tie rule only
    decides whether the threshold is ``>`` or ``>=`` an integer); between neighbours ``r*`` moves by at
    most ``2 Δu`` lattice steps (``Δu`` in the monotonic case, per the Dwork–Roth case analysis, Dwork &
    Roth 2014, Claim 3.9), and the discrete Laplace tail satisfies ``P[Z >= r - k] <= e^(k/t) P[Z >= r]``
    because its pmf does, which is all the continuous proof uses.

    ``noise="gumbel"``: Gumbel noise of scale ``2Δ/epsilon`` (``Δ/epsilon`` monotonic) gives exactly the
    exponential mechanism's law (Gumbel-max trick), whose guarantee is that of :func:`exponential`.

    Cost
    ----
    ``PureDP(epsilon)``, charged once to ``accountant`` (if given) before any random bit is drawn; a
    refused charge draws nothing.

    Output law
    ----------
    ``noise="laplace"``: ``argmax_i (u_i + Z_i)`` over exact integers, ``u_i`` the scores rounded to the
    lattice ``g Z`` (``g = lattice_granularity(sensitivity)``) and ``Z_i`` independent discrete Laplace
    with scale ``t = 2 Δu / epsilon`` lattice steps (``Δu / epsilon`` with ``monotonic=True``), ``Δu =
    floor(Δ/g) + 1``, rounded up to a float; ties (possible on a lattice) go to the lowest index.
    ``Release.scale`` is ``t g = 2 Δ'/epsilon`` (``Δ' = Δu g <= Δ + g`` the rounded scores'
    sensitivity).

    ``noise="gumbel"``: exactly the law of :func:`exponential` (same sampler); ``Release.scale`` is the
    Gumbel scale ``2Δ/epsilon`` (``Δ/epsilon`` monotonic) rounded up.

    ``Release.value`` is the index (an int); ``Release.noise`` is ``None``.

    Error
    -----
    ``noise="gumbel"``: as for :func:`exponential` (:func:`~dpkit.mechanisms.exponential_utility_bound`).
    ``noise="laplace"``: with ``n`` candidates, every ``|Z_i|`` is at most ``t ln(n/β)`` rounded up with
    probability at least ``1 - β`` (``P[|Z| > k] <= e^(-k/t)``, union bound), so the selected score is at
    least the best score minus ``2 scale ln(n/β) + 3g`` (the ``3g`` covers the rounding to the lattice).
    ``Release.interval()`` raises :class:`~dpkit.mechanisms.NoInterval`.
    """
    return run(report_noisy_max_plan(scores, sensitivity, epsilon, noise=noise, monotonic=monotonic),
               accountant=accountant, rng=rng, description=description)


def report_noisy_max_plan(scores: ArrayLike, sensitivity: float, epsilon: float, *, noise: str = "laplace",
                          monotonic: bool = False) -> Plan:
    """The validated plan of :func:`report_noisy_max` (nothing drawn or charged).

    Same parameters (validated here, with the same errors), guarantee, cost, output law and error as
    :func:`report_noisy_max`, which is ``run(report_noisy_max_plan(...))``: run it with
    :func:`~dpkit.mechanisms.contract.run`, or draw it inside a composite plan whose cost covers it with
    :meth:`~dpkit.mechanisms.contract.Plan.sample`. ``Plan.neighbours`` is ``None``: the guarantee holds under the
    relation for which the declared sensitivity holds.
    """
    arr, sens, eps, mono = _validate(scores, sensitivity, epsilon, monotonic)
    if not isinstance(noise, str):
        raise WrongType("noise", "a str ('laplace' or 'gumbel')")
    if noise not in ("laplace", "gumbel"):
        raise InvalidParameter("noise", "must be 'laplace' or 'gumbel'")
    factor = 1 if mono else 2
    law = SelectionLaw(arr, sens, eps, factor)
    params: dict[str, Any] = {"epsilon": eps, "candidates": int(arr.size), "monotonic": mono, "noise": noise,
                              "granularity": law.g}
    if noise == "gumbel":
        scale = _exact.div_up(Fraction(factor) * Fraction(sens), Fraction(eps))
        draw = _index(lambda rng: sample_exponential(law, rng))
    else:
        t_units = _exact.div_up(Fraction(factor * law.d_units), Fraction(eps))  # lattice steps
        scale = t_units * law.g
        _common.finite_scale("epsilon", t_units)
        draw = _index(lambda rng: _sample_rnm(law, t_units, rng))
    return Plan(mechanism="report_noisy_max", cost=PureDP(eps), draw=draw, sensitivity=sens, scale=scale,
                params=params, neighbours=None)


def permute_and_flip(scores: ArrayLike, sensitivity: float, epsilon: float, *, monotonic: bool = False,
                     accountant: Accountant | None = None, rng: RandomSource | None = None,
                     description: str = "") -> Release:
    """Permute-and-flip (McKenna & Sheldon 2020): visit the candidates in a uniformly random order and
    return the first ``i`` whose coin ``Bernoulli(exp(epsilon (q_i - q*) / (2Δ)))`` lands heads
    (``exp(epsilon (q_i - q*) / Δ)`` with ``monotonic=True``); ``q*`` is the best score, whose coin
    always lands heads. Never worse in expected quality than the exponential mechanism.

    Parameters
    ----------
    scores:
        ``q_i(D)``, one finite real per candidate (1-D, non-empty); higher is better. The candidate set
        must be public.
    sensitivity:
        ``Δ``: the largest change of any score between neighbouring datasets (the caller's declaration).
    epsilon:
        The privacy parameter, > 0.
    monotonic:
        Declare that between any two neighbours all scores move in the same direction. A false
        declaration voids the guarantee.
    accountant:
        If given, charged ``PureDP(epsilon)`` before anything is drawn.
    rng:
        A :class:`~dpkit.noise.source.RandomSource` (default: the OS CSPRNG).
    description:
        A free-text note written into the receipt.

    Guarantee
    ---------
    ``epsilon``-DP (pure) under the caller's neighbour relation (McKenna & Sheldon 2020). The
    monotonic variant uses that permute-and-flip equals report-noisy-max with exponential noise (Ding et
    al. 2021), for which the one-sided Dwork–Roth argument gives ``epsilon`` with scale ``Δ/epsilon``;
    the exact output laws are checked against ``epsilon`` in the tests.

    Cost
    ----
    ``PureDP(epsilon)``, charged once to ``accountant`` (if given) before any random bit is drawn; a
    refused charge draws nothing.

    Output law
    ----------
    An exactly uniform permutation (a sort of distinct random 64-bit keys, redrawn on a collision), then
    in that order candidate ``i`` is accepted with ``Bernoulli(exp(-κ n_i))`` (exact), with ``n_i`` and
    ``κ`` as in :func:`exponential` (scores rounded to the lattice, ``κ`` rounded down); the first
    accepted candidate is returned. ``Release.value`` is the index (an int); ``Release.scale`` and
    ``Release.noise`` are ``None``.

    Error
    -----
    ``P[i] <= exp(-κ n_i)`` (candidate ``i`` must win its own coin), so the tail bound of the exponential
    mechanism holds: with probability at least ``confidence`` the selected score is at least the best
    score minus :func:`~dpkit.mechanisms.exponential_utility_bound`; the expected gap is never larger than
    the exponential mechanism's (McKenna & Sheldon 2020). ``Release.interval()`` raises
    :class:`~dpkit.mechanisms.NoInterval`.
    """
    return run(permute_and_flip_plan(scores, sensitivity, epsilon, monotonic=monotonic), accountant=accountant,
               rng=rng, description=description)


def permute_and_flip_plan(scores: ArrayLike, sensitivity: float, epsilon: float, *, monotonic: bool = False) -> Plan:
    """The validated plan of :func:`permute_and_flip` (nothing drawn or charged).

    Same parameters (validated here, with the same errors), guarantee, cost, output law and error as
    :func:`permute_and_flip`, which is ``run(permute_and_flip_plan(...))``: run it with
    :func:`~dpkit.mechanisms.contract.run`, or draw it inside a composite plan whose cost covers it with
    :meth:`~dpkit.mechanisms.contract.Plan.sample`. ``Plan.neighbours`` is ``None``: the guarantee holds under the
    relation for which the declared sensitivity holds.
    """
    arr, sens, eps, mono = _validate(scores, sensitivity, epsilon, monotonic)
    law = SelectionLaw(arr, sens, eps, 1 if mono else 2)
    params = {"epsilon": eps, "candidates": int(arr.size), "monotonic": mono, "granularity": law.g}
    return Plan(mechanism="permute_and_flip", cost=PureDP(eps), draw=_index(lambda rng: _sample_pf(law, rng)),
                sensitivity=sens, scale=None, params=params, neighbours=None)
