"""Differentially private statistics on 1-D arrays of values, each with its guarantee and error bound.

Every function takes the private values first, then its public parameters (bounds, candidates, q),
then ``epsilon``, and keyword options ``neighbours=None`` (default: the accountant's relation, else
add/remove one record), ``accountant=None``, ``rng=None`` (OS CSPRNG), ``nan_policy="raise"``
(or ``"omit"``) and ``description``. Each charges its whole cost once, before any randomness, and
returns a :class:`~dpkit.mechanisms.Release`. Values outside the declared bounds are clamped.

- counts and sums (:mod:`~dpkit.stats.counts`, :mod:`~dpkit.stats.sums`): :func:`count`, :func:`sum`,
  :func:`sum_sensitivity`;
- means (:mod:`~dpkit.stats.means`): :func:`mean` with Li et al.'s algorithms (normalised Alg 4 by
  default; clamped Alg 3 with corrected accounting; noisy ratio Alg 1; exponential-mechanism average;
  the EM median);
- spread (:mod:`~dpkit.stats.variances`): :func:`variance`, :func:`std`;
- order statistics (:mod:`~dpkit.stats.order_statistics`): :func:`quantile`, :func:`quantiles`
  (several at once, recursive splitting), :func:`median`, :func:`iqr`, :func:`kth`, :func:`min`,
  :func:`max`, :func:`rank_error_bound`;
- :func:`mode` (:mod:`~dpkit.stats.modes`) and :func:`histogram` (:mod:`~dpkit.stats.histograms`);
- bounds chosen privately (:mod:`~dpkit.stats.bounds`): :func:`clipping_bound`, :func:`bounds_for`,
  :func:`auto_mean`, :func:`auto_sum`.

``sum``, ``min`` and ``max`` shadow Python builtins: use them qualified (``dpkit.stats.sum``).

Example
-------
>>> import dpkit
>>> ages = dpkit.datasets.adult(as_frame=False, columns=["age"])["age"]
>>> acc = dpkit.Accountant(dpkit.PureDP(1.0))
>>> r = dpkit.stats.mean(ages, (0, 100), 0.5, accountant=acc, rng=dpkit.deterministic_source(1))
>>> bool(abs(r.value - ages.mean()) < 0.1), acc.remaining
(True, PureDP(epsilon=0.5))
"""

from dpkit.stats import aggregates  # noqa: F401  (DP steps over engine aggregates; dpkit.tables)
from dpkit.stats.bounds import auto_mean, auto_sum, bounds_for, clipping_bound, default_candidates
from dpkit.stats.counts import count
from dpkit.stats.histograms import histogram
from dpkit.stats.means import mean
from dpkit.stats.modes import mode, mode_count_error
from dpkit.stats.order_statistics import iqr, kth, max, median, min, quantile, quantiles, rank_error_bound
from dpkit.stats.sums import sum, sum_sensitivity
from dpkit.stats.variances import std, variance

__all__ = [
    "auto_mean",
    "auto_sum",
    "bounds_for",
    "clipping_bound",
    "count",
    "default_candidates",
    "histogram",
    "iqr",
    "kth",
    "max",
    "mean",
    "median",
    "min",
    "mode",
    "mode_count_error",
    "quantile",
    "quantiles",
    "rank_error_bound",
    "std",
    "sum",
    "sum_sensitivity",
    "variance",
]
