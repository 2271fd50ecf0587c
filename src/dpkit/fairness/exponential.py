"""The exponential fair map (Hardt's thesis §8.5, with the /2 correction) and its ε-net extension (Remark 8.5.6)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from dpkit.core import _validate as check
from dpkit.core.errors import InvalidData, InvalidParameter
from dpkit.fairness import _inputs
from dpkit.fairness.classifier import FairClassifier
from dpkit.noise.source import RandomSource, resolve

if TYPE_CHECKING:
    from numpy.typing import ArrayLike

__all__ = ["ExponentialFairMap", "NetExtension", "NetFairMap", "epsilon_net", "exponential_fair_map",
           "net_fair_map", "triangle_violation"]

#: Largest n for the O(n^3) triangle-inequality check.
MAX_TRIANGLE_CHECK = 2000


def triangle_violation(metric: ArrayLike) -> float:
    """``max_{x,y,z} d(x, y) - d(x, z) - d(z, y)``: <= 0 exactly when d satisfies the triangle inequality.

    O(n³) time (vectorized over blocks of z), at most 2000 individuals.

    Examples
    --------
    >>> import numpy as np
    >>> from dpkit.fairness import triangle_violation
    >>> triangle_violation(np.array([[0.0, 3.0, 1.0], [3.0, 0.0, 1.0], [1.0, 1.0, 0.0]]))
    1.0
    """
    d = _inputs.metric(metric)
    n = d.shape[0]
    if n > MAX_TRIANGLE_CHECK:
        raise InvalidParameter("metric", f"the O(n^3) triangle check is limited to {MAX_TRIANGLE_CHECK} individuals")
    worst = 0.0
    block = max(1, 8_000_000 // max(1, n * n))
    for s in range(0, n, block):
        e = min(n, s + block)
        v = d[None, :, :] - d[:, s:e].T[:, :, None] - d[s:e, :][:, None, :]
        worst = max(worst, float(np.max(v)))
    return worst


def _scale(value: Any) -> float:
    v = check.positive("scale", value)
    if v > 1e6:
        raise InvalidParameter("scale", "must be at most 1e6")
    return v


def _softmax_rows(gamma: np.ndarray) -> np.ndarray:
    lw = -gamma
    lw = lw - np.max(lw, axis=1, keepdims=True)
    p = np.exp(lw)
    return p / p.sum(axis=1, keepdims=True)


class ExponentialFairMap(FairClassifier):
    """``E(x) ∝ exp(-λ d(x, y))`` over ``y ∈ V``: a map V -> Δ(V), (D_∞, 2λ d)-Lipschitz for a metric d.

    Built by :func:`exponential_fair_map`. ``probabilities[x, y]`` is ``E(x)(y)`` (outcomes are the individuals'
    indices); ``scale`` is λ, ``lipschitz_factor`` is ``2λ`` (1 at the default λ = 1/2); ``expected_distance`` is
    the loss ``E_{x∈V} E_{y∼E(x)} d(x, y)`` of Theorem 8.5.5. ``sample`` is exact (see :meth:`sample`)."""

    def __init__(self, metric: ArrayLike, scale: float = 0.5, *, check_triangle: bool = True) -> None:
        lam = _scale(scale)
        d = _inputs.metric(metric)
        if check.flag("check_triangle", check_triangle):
            if d.shape[0] > MAX_TRIANGLE_CHECK:
                raise InvalidParameter("check_triangle", f"the O(n^3) check is limited to {MAX_TRIANGLE_CHECK} "
                                       "individuals; pass False for a metric known to be one (e.g. task_metric's)")
            if triangle_violation(d) > 1e-9 * max(1.0, float(np.max(d))):
                raise InvalidData("metric", "violates the triangle inequality (the guarantee needs a metric)")
        with np.errstate(over="ignore"):
            gamma = lam * d  # exact for lam a power of two (the default 1/2), barring subnormal results
        if not np.all(np.isfinite(gamma)):
            raise InvalidParameter("scale", "too large for the distances (exponents overflow)")
        super().__init__(_softmax_rows(gamma), None)
        self._gamma = gamma
        self._gamma.setflags(write=False)
        self.scale = lam
        self.lipschitz_factor = 2.0 * lam
        self.divergence = "inf"
        self.expected_distance = float(np.mean(np.sum(self.probabilities * d, axis=1)))
        self.objective = self.expected_distance

    def sample(self, individuals: Any = None, rng: RandomSource | None = None) -> np.ndarray:
        """One y ∼ E(x) per given individual x, exactly.

        Rejection sampling with dpkit's exact Bernoulli(exp(-γ)) sampler: propose y uniformly
        (``rng.below``), accept with probability ``exp(-γ_{xy})``, ``γ_{xy} = fl(λ d(x, y))``
        (:func:`dpkit.noise.sample_bernoulli_exp`, every float taken as its exact rational value). An accepted y
        has probability exactly ``exp(-γ_{xy}) / Σ_y' exp(-γ_{xy'})``; since ``d(x, x) = 0`` some proposal is
        always accepted with probability 1, so a round succeeds with probability >= 1/n. For λ a power of two
        (the default 1/2) ``γ = λ d`` exactly (unless it is below 2^-1022), so the draws follow E(x) exactly;
        otherwise they follow the map with exponents ``fl(λ d)``, within one rounding of λ d."""
        from dpkit.noise import sample_bernoulli_exp

        rows = self._rows(individuals)
        src = resolve(rng)
        n = self._gamma.shape[1]
        out = np.empty(rows.size, dtype=np.int64)
        todo = np.arange(rows.size)
        while todo.size:
            props = src.below(n, todo.size)
            ok = np.asarray(sample_bernoulli_exp(self._gamma[rows[todo], props], rng=src), dtype=bool)
            out[todo[ok]] = props[ok]
            todo = todo[~ok]
        return out


def exponential_fair_map(metric: ArrayLike, *, scale: float = 0.5, check_triangle: bool = True
                         ) -> ExponentialFairMap:
    """The exponential fair map ``E(x)(y) ∝ exp(-λ d(x, y))`` over V (Hardt's thesis Def 8.5.1, corrected).

    Parameters
    ----------
    metric : array (n, n)
        A metric on the individuals (symmetric, zero diagonal, triangle inequality; checked when
        ``check_triangle``).
    scale : float
        λ (> 0). The default 1/2 gives a (D_∞, d)-Lipschitz map.
    check_triangle : bool
        Check the triangle inequality (O(n³), n <= 2000; tolerance 1e-9 · max d).

    Returns
    -------
    ExponentialFairMap
        Rows ``E(x)``; ``lipschitz_factor = 2λ``; exact ``sample``.

    Guarantee
    ---------
    For a metric d, ``D_∞(E(x), E(x')) <= 2λ d(x, x')``: ``E(x)(y)/E(x')(y) = e^{-λ(d(x,y) - d(x',y))} Z_{x'}/Z_x``,
    and both factors are at most ``e^{λ d(x,x')}`` by the triangle inequality. At λ = 1/2 the map is
    (D_∞, d)-Lipschitz, hence also (D_tv, d)-Lipschitz (Lemma 8.2.5).

    Errata
    ------
    The thesis (Def 8.5.1, Lemma 8.5.2) uses ``e^{-d(x,y)}`` (λ = 1) and claims (D_∞, d)-Lipschitz; its normalizer
    ``Z_x`` depends on x, so the ratio is only bounded by ``e^{2 d(x,x')}``. The test suite crafts an instance where
    λ = 1 breaks the d-Lipschitz bound (and stays within 2d). Theorem 8.5.5's loss bound holds with λ = 1/2 with
    the metric doubled (``E_x E_{y∼E(x)} d(x,y) = 2^{O(k)}`` still, as a metric of doubling dimension k scaled by
    1/2 has the same dimension, at twice the separation).

    Examples
    --------
    >>> import numpy as np, dpkit
    >>> from dpkit.fairness import exponential_fair_map
    >>> d = np.array([[0.0, 1.0], [1.0, 0.0]])
    >>> E = exponential_fair_map(d)
    >>> E.probabilities.round(4).tolist()
    [[0.6225, 0.3775], [0.3775, 0.6225]]
    >>> E.sample([0, 1], rng=dpkit.deterministic_source(0)).shape
    (2,)
    """
    return ExponentialFairMap(metric, scale, check_triangle=check_triangle)


def epsilon_net(metric: ArrayLike, radius: float) -> np.ndarray:
    """A greedy ε-net of V: indices of net points, pairwise more than ``radius`` apart, with every individual
    within ``radius`` of one of them (so the net is well separated, Def 8.5.4, and covers V).

    Scans the individuals in order and keeps each one farther than ``radius`` from every net point kept so far;
    O(n |net|) time.

    Examples
    --------
    >>> import numpy as np
    >>> from dpkit.fairness import epsilon_net
    >>> pts = np.array([0.0, 0.1, 0.5, 0.55, 1.0])
    >>> epsilon_net(np.abs(pts[:, None] - pts[None, :]), 0.2).tolist()
    [0, 2, 4]
    """
    d = _inputs.metric(metric)
    r = check.positive("radius", radius)
    n = d.shape[0]
    mind = np.full(n, np.inf)
    net: list[int] = []
    while True:
        far = np.flatnonzero(mind > r)
        if far.size == 0:
            break
        x = int(far[0])
        net.append(x)
        mind = np.minimum(mind, d[x])
    return np.array(net, dtype=np.int64)


@dataclass
class NetExtension:
    """The net map extended to new points: ``classifier`` (rows ``E(x')`` of each point's nearest net point x'),
    ``nearest`` (the net position of x') and ``radii`` (``d(x, x')``). For two extended points,
    ``D_∞(M(x), M(y)) <= 2λ (d(x, y) + radii[x] + radii[y])``."""

    classifier: FairClassifier
    nearest: np.ndarray
    radii: np.ndarray


class NetFairMap:
    """The exponential fair map on an ε-net V' of V, extended to every point by its nearest net point (Remark 8.5.6).

    Built by :func:`net_fair_map`. Attributes: ``net`` (indices in V of the net points), ``net_map`` (the
    :class:`ExponentialFairMap` on V'), ``nearest`` / ``radii`` (each individual's nearest net position and
    distance, ``<= radius``), ``classifier`` (the extended map on V: rows ``E(x')``, outcomes the net points'
    indices in V), ``radius`` and ``slack`` (``2λ · 2 radius``: on V, ``D_∞(M(x), M(y)) <= 2λ d(x, y) + slack``)."""

    def __init__(self, metric: ArrayLike, radius: float, scale: float = 0.5, *, check_triangle: bool = True) -> None:
        d = _inputs.metric(metric)
        lam = _scale(scale)
        self.net = epsilon_net(d, radius)
        self.radius = float(radius)
        self.net_map = ExponentialFairMap(d[np.ix_(self.net, self.net)], lam, check_triangle=check_triangle)
        to_net = d[:, self.net]
        self.nearest = np.argmin(to_net, axis=1).astype(np.int64)
        self.radii = to_net[np.arange(d.shape[0]), self.nearest]
        self.scale = lam
        self.slack = 2.0 * lam * 2.0 * self.radius
        self.classifier = FairClassifier(self.net_map.probabilities[self.nearest], tuple(int(i) for i in self.net))
        self.classifier.divergence = "inf"

    def extend(self, distances: ArrayLike) -> NetExtension:
        """Map new points by their nearest net point.

        ``distances``: an m x |net| matrix of the new points' distances to the net points (in the order of
        ``net``), finite and >= 0. The guarantee assumes these distances extend d to a metric."""
        if check.safe_ndim(distances) != 2:
            raise InvalidData("distances", "must be a two-dimensional matrix (new points x net points)")
        dist = check.finite_array("distances", check.as_array("distances", distances, "a matrix of numbers"),
                                  ndim=2)
        if dist.shape[1] != self.net.size:
            raise InvalidData("distances", "must have one column per net point")
        if np.any(dist < 0):
            raise InvalidData("distances", "distances must be >= 0")
        nearest = np.argmin(dist, axis=1).astype(np.int64)
        radii = dist[np.arange(dist.shape[0]), nearest]
        clf = FairClassifier(self.net_map.probabilities[nearest], tuple(int(i) for i in self.net))
        clf.divergence = "inf"
        return NetExtension(classifier=clf, nearest=nearest, radii=radii)

    def sample(self, individuals: Any = None, rng: RandomSource | None = None) -> np.ndarray:
        """Exact draws (indices in V of net points) for individuals of V, via their nearest net point
        (:meth:`ExponentialFairMap.sample`)."""
        rows = self.classifier._rows(individuals)
        pos = self.net_map.sample(self.nearest[rows], rng=rng)
        return self.net[pos]


def net_fair_map(metric: ArrayLike, radius: float, *, scale: float = 0.5, check_triangle: bool = True
                 ) -> NetFairMap:
    """The exponential fair map on a greedy ε-net, extended to V (and to new points) by nearest net point.

    Parameters
    ----------
    metric : array (n, n)
        A metric on V.
    radius : float
        ε of the net (> 0): net points are pairwise > ε apart and every individual is within ε of one.
    scale : float
        λ of the exponential map on the net (default 1/2).
    check_triangle : bool
        Check that the net's metric satisfies the triangle inequality (O(|net|³)).

    Returns
    -------
    NetFairMap
        ``classifier`` on V, ``net``, ``radii``, ``slack``; ``extend(distances)`` for new points.

    Guarantee
    ---------
    With x', y' the nearest net points of x, y: ``D_∞(M(x), M(y)) = D_∞(E(x'), E(y')) <= 2λ d(x', y')
    <= 2λ (d(x, y) + d(x, x') + d(y, y')) <= 2λ d(x, y) + 4λε``; at λ = 1/2 this is Remark 8.5.6's
    ``d(x, y) + 2ε``. The expected loss grows by at most ``ε`` against the net map's (triangle inequality).

    Examples
    --------
    >>> import numpy as np
    >>> from dpkit.fairness import net_fair_map
    >>> pts = np.array([0.0, 0.1, 0.5, 0.55, 1.0])
    >>> m = net_fair_map(np.abs(pts[:, None] - pts[None, :]), 0.2)
    >>> m.net.tolist(), m.nearest.tolist(), m.slack
    ([0, 2, 4], [0, 0, 1, 1, 2], 0.4)
    """
    return NetFairMap(metric, radius, scale, check_triangle=check_triangle)

