"""Local sensitivity and local sensitivity at distance k: analysis tools, **not** mechanisms.

.. warning::

   **Every function in this module computes a number from the private data and returns it
   exactly. The result is NOT differentially private and must never be released, logged, or used
   to scale noise directly.** Noise calibrated to local sensitivity leaks (Li et al. Ex 8.1; Near &
   Abuah §8.2): the noise scale itself reveals the data (for the mean, ``n = u / LS - 1``; for the
   median, a data set whose local sensitivity is 0 gets no noise at all while its neighbour does).
   These functions exist to build and test the safe frameworks (:mod:`dpkit.stability.smooth`,
   :mod:`dpkit.stability.ptr`) and for teaching.

Definitions (Nissim, Raskhodnikova & Smith 2007)
------------------------------------------------
- ``LS_f(x) = max over neighbours x' of |f(x) - f(x')|``;
- ``A_f(x, k) = max over y at distance <= k of LS_f(y)`` (local sensitivity at distance ``k``);
  the functions below return a *certified upper bound* ``Â(x, k)`` with ``Â(x, 0) >= LS_f(x)`` and
  ``Â(x, k) <= Â(x', k + 1)`` for neighbours -- the two properties the smooth-sensitivity and PTR
  proofs use (for the median the bound is exactly ``A``; for the mean it is a function of ``n`` only).

Statistics and conventions (values are clamped into the public ``[lo, hi]``; ``w = hi - lo``)
-----------------------------------------------------------------------------------------------
- **median** = the *lower* median ``x_(ceil(n/2))`` with the padded order statistics
  ``x_(i) = lo`` for ``i < 1`` and ``hi`` for ``i > n`` (so the median of an empty sample is ``lo``).
- **mean** = the mean of the clamped values; the midpoint ``(lo + hi)/2`` for an empty sample.

Median, add/remove one record (derived here; Li's formula is for replace-one and odd ``n``)
-------------------------------------------------------------------------------------------
With ``c = floor(n/2)``: adding or removing one record moves the lower median inside
``[x_(c), x_(c+1)]`` and both ends are reachable, so ``LS(x) = x_(c+1) - x_(c)`` (one gap only: for
odd ``n = 2j - 1`` it is ``x_(j) - x_(j-1)``, for even ``n = 2j`` it is ``x_(j+1) - x_(j)``).
After ``a`` removals and ``b`` additions, ``y_(r) ∈ [x_(r-b), x_(r+a)]``, so the gap at ``y``'s
median is at most ``x_(j) - x_(i)`` with ``j - i - 1 = a + b`` and ``i + j ∈ {n, n + 1}``; widening
the window costs the same as sliding it, so the symmetric windows dominate and

    A(x, k) = x_(i_k + k + 1) - x_(i_k),   i_k = floor((n - k) / 2)      (exact; attained by
    removing the k records between, or adding records at lo / hi).

Median, replace one record (``n`` public): NRS Prop. 3.4,
``A(x, k) = max_{t = 0..k+1} (x_(m+t) - x_(m+t-k-1))`` with ``m = ceil(n/2)``, so
``LS(x) = max(x_(m) - x_(m-1), x_(m+1) - x_(m))`` (Li's formula for odd ``n``).

Mean, add/remove: a data set of size ``m`` has ``LS <= U(m) = w / max(m, 2)`` (adding a record to
size ``m`` moves the mean by ``|v - mean| / (m + 1) <= w / (m + 1)``; removing one is the reverse of
adding to size ``m - 1``: ``<= w / m``; sizes 0 and 1 move by at most ``w / 2`` with the midpoint
convention). ``U`` is non-increasing and ``y`` at distance ``k`` has ``>= n - k`` records, so
``Â(x, k) = w / max(n - k, 2)``. **Erratum (Near & Abuah §8.1/8.3):** the book uses
``u / (n - k + 1)``, which only covers *adding* a record; removing one can move the mean by
``u / n > u / (n + 1)`` (e.g. ``n - 1`` values at ``u`` and one at 0, remove the 0).
Mean, replace one (``n`` public): ``LS = w / n``, constant.

Privacy units are refused (the analysis is per record).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from dpkit.core import _validate as check
from dpkit.mechanisms.contract import is_replace
from dpkit.stability import _util

if TYPE_CHECKING:
    from numpy.typing import ArrayLike

    from dpkit.core.neighbours import Neighbours

__all__ = ["local_sensitivity_mean", "local_sensitivity_median", "ls_at_distance_mean", "ls_at_distance_median"]


def _ks(k: Any) -> tuple[np.ndarray, bool]:
    if isinstance(k, (list, tuple, np.ndarray)):
        arr = check.as_array("k", k, "a non-negative integer or an array of them")
        if arr.dtype == bool or not np.issubdtype(arr.dtype, np.integer):
            from dpkit.core.errors import WrongType

            raise WrongType("k", "a non-negative integer or an array of them")
        if arr.size and int(arr.min()) < 0:
            from dpkit.core.errors import InvalidParameter

            raise InvalidParameter("k", "must be >= 0")
        return arr.astype(np.int64).reshape(-1), False
    return np.array([check.integer("k", k, minimum=0)], dtype=np.int64), True


def _out(arr: np.ndarray, scalar: bool) -> float | np.ndarray:
    return float(arr[0]) if scalar else arr


def local_sensitivity_mean(values: ArrayLike, bounds: tuple[float, float], *, neighbours: Neighbours | None = None,
                           nan_policy: str = "raise") -> float:
    """**NOT PRIVATE -- never release this number.** The exact local sensitivity of the clamped mean.

    Add/remove (default): ``max(max(hi - mean, mean - lo) / (n + 1), max_i |mean - x_i| / (n - 1))``
    for ``n >= 2``; for ``n = 1`` the removal goes to the empty set (midpoint convention); for
    ``n = 0`` it is ``w / 2``. Replace one (``n`` public): ``max(hi - min x, max x - lo) / n``.

    >>> round(local_sensitivity_mean([0.0, 10.0, 10.0], (0.0, 10.0)), 6)  # remove the 0: mean 20/3 -> 10
    3.333333
    """
    nb = _util.relation(neighbours, None, "local_sensitivity_mean")
    xs, lo, hi = _util.sorted_clipped(values, bounds, nan_policy)
    n = xs.size
    mid = lo / 2.0 + hi / 2.0
    if is_replace(nb):
        if n == 0:
            return 0.0
        return float(max(hi - xs[0], xs[-1] - lo) / n)
    if n == 0:
        return float(max(hi - mid, mid - lo))
    mu = _util.mean_value(xs, lo, hi)
    add = max(hi - mu, mu - lo) / (n + 1)
    if n == 1:
        return float(max(add, abs(xs[0] - mid)))
    remove = max(mu - xs[0], xs[-1] - mu) / (n - 1)
    return float(max(add, remove))


def local_sensitivity_median(values: ArrayLike, bounds: tuple[float, float], *, neighbours: Neighbours | None = None,
                             nan_policy: str = "raise") -> float:
    """**NOT PRIVATE -- never release this number.** The exact local sensitivity of the lower median.

    Add/remove (default): ``x_(c+1) - x_(c)``, ``c = floor(n/2)`` (padded order statistics).
    Replace one: ``max(x_(m) - x_(m-1), x_(m+1) - x_(m))``, ``m = ceil(n/2)``.

    >>> local_sensitivity_median([0.0, 0.0, 0.0, 5.0, 5.0], (0.0, 10.0))  # Li's example: LS = 0
    0.0
    >>> local_sensitivity_median([0.0, 0.0, 5.0, 5.0], (0.0, 10.0))       # one zero fewer: LS = 5
    5.0
    """
    return float(ls_at_distance_median(values, bounds, 0, neighbours=neighbours, nan_policy=nan_policy))


def ls_at_distance_mean(values: ArrayLike, bounds: tuple[float, float], k: ArrayLike, *,
                        neighbours: Neighbours | None = None, nan_policy: str = "raise") -> float | np.ndarray:
    """**NOT PRIVATE -- never release this number.** ``Â(x, k)`` for the clamped mean (a float, or an
    array for an array of ``k``): ``w / max(n - k, 2)`` under add/remove, ``w / n`` under replace.

    It is an upper bound on ``A(x, k)`` with ``Â(x, 0) >= LS(x)`` and ``Â(x, k) <= Â(x', k+1)`` (it
    depends on ``n`` only, which is private under add/remove).
    """
    nb = _util.relation(neighbours, None, "ls_at_distance_mean")
    xs, lo, hi = _util.sorted_clipped(values, bounds, nan_policy)
    ks, scalar = _ks(k)
    return _out(mean_bound(xs.size, hi - lo, ks, is_replace(nb)), scalar)


def mean_bound(n: int, w: float, ks: np.ndarray, replace: bool) -> np.ndarray:
    """``Â(x, k)`` of the mean for a data set of size ``n`` (see the module docstring)."""
    ks = np.asarray(ks, dtype=np.float64)
    if replace:
        return np.full(ks.shape, (w / n) if n > 0 else 0.0)
    return w / np.maximum(n - ks, 2.0)


def ls_at_distance_median(values: ArrayLike, bounds: tuple[float, float], k: ArrayLike, *,
                          neighbours: Neighbours | None = None, nan_policy: str = "raise") -> float | np.ndarray:
    """**NOT PRIVATE -- never release this number.** ``A(x, k)`` for the lower median (exact).

    Add/remove: ``x_(i + k + 1) - x_(i)`` with ``i = floor((n - k)/2)``; replace one:
    ``max_{t=0..k+1} (x_(m+t) - x_(m+t-k-1))``, ``m = ceil(n/2)`` (NRS 2007). Padded order statistics.

    >>> ls_at_distance_median([1.0, 2.0, 3.0, 4.0, 5.0], (0.0, 10.0), [0, 1, 2, 5])
    array([ 1.,  2.,  3., 10.])
    """
    nb = _util.relation(neighbours, None, "ls_at_distance_median")
    xs, lo, hi = _util.sorted_clipped(values, bounds, nan_policy)
    ks, scalar = _ks(k)
    return _out(median_window(xs, lo, hi, ks, is_replace(nb)), scalar)


def median_window(xs: np.ndarray, lo: float, hi: float, ks: np.ndarray, replace: bool) -> np.ndarray:
    """``A(x, k)`` of the lower median for sorted clamped ``xs`` and an array of ``k``."""
    n = xs.size
    ks = np.asarray(ks, dtype=np.int64)
    if not replace:
        i = np.floor_divide(n - ks, 2)
        return _util.order_stat(xs, i + ks + 1, lo, hi) - _util.order_stat(xs, i, lo, hi)
    m = (n + 1) // 2
    out = np.empty(ks.shape, dtype=np.float64)
    for pos, kk in enumerate(ks.tolist()):
        t = np.arange(0, kk + 2)
        out[pos] = float(np.max(_util.order_stat(xs, m + t, lo, hi) - _util.order_stat(xs, m + t - kk - 1, lo, hi)))
    return out
