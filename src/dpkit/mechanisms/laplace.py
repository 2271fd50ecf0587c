"""The Laplace mechanism, produced exactly on a lattice (pure epsilon-DP)."""

from __future__ import annotations

from fractions import Fraction
from typing import TYPE_CHECKING, Any

from dpkit.core import _exact
from dpkit.core import _validate as check
from dpkit.core.errors import InvalidParameter
from dpkit.core.privacy import PureDP
from dpkit.mechanisms import _common
from dpkit.mechanisms._release import Release
from dpkit.mechanisms.contract import Plan, run
from dpkit.noise.source import RandomSource

if TYPE_CHECKING:
    from numpy.typing import ArrayLike

    from dpkit.core.accountant import Accountant

__all__ = ["laplace", "laplace_plan", "laplace_scale"]


def laplace_scale(sensitivity: float, epsilon: float, coords: int = 1) -> tuple[float, float]:
    """``(granularity, scale)`` used by :func:`laplace` for ``coords`` coordinates.

    ``g = lattice_granularity(sensitivity, coords)`` (a power of two <= sensitivity / (coords 2^20)),
    and ``b`` is the smallest float >= ``(sensitivity + coords * g) / epsilon`` (exact rational check),
    so ``b`` exceeds ``sensitivity / epsilon`` by a relative factor of at most ``2^-20`` (+1 ulp).
    """
    from dpkit.noise import lattice_granularity

    sensitivity = check.positive("sensitivity", sensitivity)
    epsilon = check.epsilon(epsilon)
    coords = check.integer("coords", coords, minimum=1)
    g = float(lattice_granularity(sensitivity, coords=coords))
    num = Fraction(sensitivity) + coords * Fraction(g)
    b = _exact.div_up(num, Fraction(epsilon))
    if b == float("inf"):
        raise InvalidParameter("sensitivity", "too large relative to epsilon for the noise samplers")
    _common.finite_scale("epsilon", b, g)
    return g, b


def laplace(value: ArrayLike, sensitivity: float, epsilon: float, *, accountant: Accountant | None = None,
            rng: RandomSource | None = None, description: str = "") -> Release:
    """Laplace mechanism: ``value`` plus Laplace-shaped noise, exactly ``epsilon``-DP (pure DP).

    Parameters
    ----------
    value:
        The true value: a real scalar or an array of reals (all finite).
    sensitivity:
        The **L1** sensitivity of ``value`` (for arrays: of the whole array) under the neighbour
        relation the caller (or the accountant) uses: ``max ||f(D) - f(D')||_1`` over neighbouring
        datasets ``D, D'``. dpkit cannot check it; it is the caller's declaration.
    epsilon:
        The privacy parameter, > 0.
    accountant:
        If given, charged ``PureDP(epsilon)`` before any noise is drawn.
    rng:
        A :class:`~dpkit.noise.source.RandomSource` (default: the OS CSPRNG).
    description:
        A free-text note written into the receipt.

    Guarantee
    ---------
    ``epsilon``-DP (pure) with respect to the neighbour relation under which ``sensitivity`` holds
    (the caller's, or the accountant's). Proof: rounding each coordinate to the lattice ``g Z`` moves it
    by at most ``g/2``, so the rounded query has L1 sensitivity at most ``sensitivity + d g`` (a
    multiple of ``g``); the discrete Laplace pmf ratio between two lattice shifts at L1 distance
    ``k g`` is at most ``exp(k g / b)`` and ``b >= (sensitivity + d g) / epsilon`` (exact rational
    check), so every output's probability ratio is at most ``e^epsilon``. Forming the float output is
    post-processing.

    Cost
    ----
    ``PureDP(epsilon)``, charged once to ``accountant`` (if given) before any random bit is drawn; a
    refused charge draws nothing.

    Output law
    ----------
    With ``d = value.size`` and ``g = lattice_granularity(sensitivity, coords=d)`` (a power of two,
    at most ``sensitivity / (d 2^20)``), every coordinate is released as
    ``g * round_half_even(x / g) + g * Z`` where ``Z`` is discrete Laplace, ``P[Z = k] ∝ exp(-|k| g / b)``,
    independent across coordinates, with ``b`` the smallest float ``>= (sensitivity + d g) / epsilon``
    (:func:`laplace_scale`). The scale is inflated by a relative ``d g / sensitivity <= 2^-20``. The sum
    ``r(x) + g Z`` is formed in float64: IEEE addition is correctly rounded, so the float is a
    function of the exact lattice value only (post-processing). ``Release.scale`` is ``b``,
    ``Release.noise`` is ``"lattice_laplace"`` and ``Release.granularity`` is ``g``. The value is a
    float for a scalar input, else a float64 array of the input's shape.

    Error
    -----
    The noise is symmetric; the only bias is the rounding of the true value to the lattice (at most
    ``g/2`` per coordinate). The noise variance per coordinate is ``g² 2q/(1-q)²``, ``q = exp(-g/b)``
    (about ``2 b²``). ``Release.interval(confidence)`` covers the true value with probability at least
    ``confidence`` (per coordinate, or for all at once with ``simultaneous=True``): its half-width is
    :func:`~dpkit.mechanisms.laplace_halfwidth` with the lattice law (about ``b ln(1/beta)``, plus
    ``g/2``), computed from the exact discrete tail.
    """
    return run(laplace_plan(value, sensitivity, epsilon), accountant=accountant, rng=rng, description=description)


def laplace_plan(value: ArrayLike, sensitivity: float, epsilon: float) -> Plan:
    """The validated plan of :func:`laplace` (nothing drawn or charged).

    Same parameters (validated here, with the same errors), guarantee, cost, output law and error as
    :func:`laplace`, which is ``run(laplace_plan(...))``: run it with :func:`~dpkit.mechanisms.contract.run`, or
    draw it inside a composite plan whose cost covers it with :meth:`~dpkit.mechanisms.contract.Plan.sample`.
    ``Plan.neighbours`` is ``None``: the guarantee holds under the relation for which the declared sensitivity
    holds.
    """
    arr, scalar = _common.values("value", value)
    d = int(arr.size)
    g, b = laplace_scale(sensitivity, epsilon, d)
    sensitivity = float(sensitivity)
    epsilon = float(epsilon)
    _common.check_lattice_range("value", arr, g)

    def draw(rng: RandomSource) -> Any:
        from dpkit.noise import lattice_laplace

        noisy = lattice_laplace(arr.reshape(-1), b, g, rng=rng).reshape(arr.shape)
        return _common.out(noisy, scalar)

    return Plan(mechanism="laplace", cost=PureDP(epsilon), draw=draw, sensitivity=sensitivity, scale=b,
                noise="lattice_laplace", granularity=g,
                params={"epsilon": epsilon, "coords": d, "granularity": g, "norm": "l1"}, neighbours=None)
